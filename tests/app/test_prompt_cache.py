"""The prompt-cache contract through the real app: the requests the model server received, as JSON.

Between two folds, each turn's first chat request starts with the previous turn's, byte for
byte: tools, system prompt, summary, acknowledgement, the unfolded messages and the previous
input; a search inside a turn only appends to that turn's request. A fold changes the
request only from the summary on. The bundled server reports what its prompt cache served
(``bundled_server/prompt_cache``), as OpenAI does, and the turn reports it.
"""

import json
import re
import uuid
from itertools import pairwise

from tests.app.langflow_client import BATCH
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
        before, log_start = len(fake_model.requests()), len(langflow.log_lines())
        langflow.run(flow_id, text_, session_id=session_id, tweaks=on)
        firsts.append(before + next(i for i, r in enumerate(fake_model.requests()[before:]) if r["kind"] == "chat"))
    requests = fake_model.requests()

    # What the provider served from its cache is reported, though Langflow's usage has no field for it.
    [turn_line] = [line for line in langflow.log_lines()[log_start:] if "session_memory_turn " in line]
    cached = int(re.search(r" cached_input_tokens=(\d+)", turn_line).group(1))
    assert cached == sum(r["cached_tokens"] or 0 for r in requests[firsts[-1] :] if r["kind"] == "chat") > 0
    [(blocks,)] = langflow.sql(
        "SELECT content_blocks FROM message WHERE session_id = :s AND sender = 'Machine' ORDER BY timestamp DESC "
        "LIMIT 1",
        s=session_id,
    )
    assert f'"cached_input_tokens": {cached}' in (blocks if isinstance(blocks, str) else json.dumps(blocks))

    checked, searched_across = 0, False
    for earlier, later in pairwise(firsts):
        previous, current = requests[earlier]["body"], requests[later]["body"]
        assert json.dumps(current["tools"]) == json.dumps(previous["tools"])
        assert json.dumps(current["messages"][0]) == json.dumps(previous["messages"][0])  # the system prompt
        between = requests[earlier + 1 : later]
        if any(r["kind"] == "summary" for r in between):  # a fold rewrote the summary
            continue
        prefix = previous["messages"]
        assert json.dumps(current["messages"][: len(prefix)]) == json.dumps(prefix)
        checked += 1
        searched_across = searched_across or any(r.get("tool_query") for r in [requests[earlier], *between])
    # Folds run after about one answer in half a batch (one in ten at the default): one between two of these turns.
    folds_between = (2 * (len(firsts) - 1) - N_MESSAGES) // BATCH
    assert checked >= len(firsts) - 3 - folds_between
    assert searched_across, "no pair of turns around the search was compared"
