"""The prompt-cache contract through the real app: the requests the model server received, as JSON.

Between two folds, each turn's first chat request starts with the previous turn's, byte for
byte: tools, system prompt, notes, acknowledgement, the unfolded messages and the previous
input; a search inside a turn only appends to that turn's request. A fold changes the
request only from the notes on.
"""

import json
import uuid
from itertools import pairwise

from tests.app.test_search_earlier_messages import LOCKER_FACT, QUESTION, switched_on

N_MESSAGES = 4


def test_between_folds_each_turn_s_request_starts_with_the_previous_one_byte_for_byte(langflow, fake_model):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    session_id = f"cache-{uuid.uuid4()}"
    on = switched_on(agent_id)
    texts = [LOCKER_FACT.format(team=team) for team in range(1, 11)]
    texts += [f"Filler turn {i}, tell me something small." for i in range(4)]
    texts += [QUESTION] + [f"After the search, filler {i}." for i in range(3)]
    firsts = []  # the index of each turn's first chat request among every request the model server received
    for text_ in texts:
        before = len(fake_model.requests())
        langflow.run(flow_id, text_, session_id=session_id, tweaks=on)
        firsts.append(before + next(i for i, r in enumerate(fake_model.requests()[before:]) if r["kind"] == "chat"))
    requests = fake_model.requests()

    checked, searched_across = 0, False
    for earlier, later in pairwise(firsts):
        previous, current = requests[earlier]["body"], requests[later]["body"]
        assert json.dumps(current["tools"]) == json.dumps(previous["tools"])
        assert json.dumps(current["messages"][0]) == json.dumps(previous["messages"][0])  # the system prompt
        between = requests[earlier + 1 : later]
        if any(r["kind"] == "summary" for r in between):  # a fold rewrote the notes
            continue
        prefix = previous["messages"]
        assert json.dumps(current["messages"][: len(prefix)]) == json.dumps(prefix)
        checked += 1
        searched_across = searched_across or any(r.get("tool_query") for r in [requests[earlier], *between])
    assert checked >= len(firsts) - 4  # folds run after about one answer in ten
    assert searched_across, "no pair of turns around the search was compared"
