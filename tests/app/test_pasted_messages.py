"""Huge pasted messages with no Context Window declared (issue 31): ours never sends more than the stock Agent.

The starter flow's shape at N=4 on the bundled server, through the real app, both databases: a fact, then a
200 KB log pasted three times with a question each time, then short turns. The stock Agent sends its last 4
messages; the switch must not add the pastes waiting beyond its window on top of them.
"""

import uuid

from tests.app.test_tool_results import answer_of, step_facts

N_MESSAGES = 4
PASTE = "Here is the log:\n" + "2026-11-30 08:00:00 ERROR worker-7 connection reset by peer (retrying)\n" * 2850
NOTES_ALLOWANCE = 600  # the notes and their acknowledgement, at most 300 words


def script() -> list[str]:
    pastes = [f"{PASTE}\nWhat failed in paste {i}?" for i in range(1, 4)]
    return ["Our project is PRJ-123 on the EU cluster.", *pastes, *[f"Short turn {i}." for i in range(1, 6)]]


def first_request_tokens(langflow, fake_model, flow_id: str, tweaks: dict) -> tuple[list[int], list]:
    """Each turn's first chat request, in prompt tokens as the server counted them, and the turns' responses."""
    session_id, sizes, responses = f"paste-{uuid.uuid4()}", [], []
    for text in script():
        before = len(fake_model.requests())
        responses.append(langflow.run(flow_id, text, session_id=session_id, tweaks=tweaks))
        sizes.append(next(r["prompt_tokens"] for r in fake_model.requests()[before:] if r["kind"] == "chat"))
    return sizes, responses


def test_three_pasted_logs_never_make_a_request_larger_than_the_stock_agent_s(langflow, fake_model):
    assert len(PASTE) >= 200_000
    stock_flow, _ = langflow.create_agent_flow(session_memory=False, n_messages=N_MESSAGES)
    memory_flow, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    stock, _ = first_request_tokens(langflow, fake_model, stock_flow, {})
    ours, responses = first_request_tokens(
        langflow, fake_model, memory_flow, {agent_id: {"summarize_older_messages": True}}
    )

    assert all(o <= s + NOTES_ALLOWANCE for o, s in zip(ours, stock, strict=True)), list(zip(ours, stock, strict=True))
    assert max(ours) < 2 * max(stock)
    folded_early = [step_facts(r).get("folded_early_because") for r in responses if has_step(r)]
    assert any(why and "messages waiting over 32000 tokens" in why for why in folded_early)
    assert answer_of(responses[-1]).startswith("OK:")


def has_step(response) -> bool:
    try:
        step_facts(response)
    except StopIteration:
        return False
    return True
