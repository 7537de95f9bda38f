"""Sessions with a real base model (Gemma 3 270M) through the real Langflow app: survival, not memory.

What a small model writes is not judged; the product's handling of it is: folds are attempted, no turn answers
500, no stored message changes, an overflow is prevented (Context Window declared) or recognised and compacted
(not declared: the server's own signal), and a pause names its reason. The stock Agent runs the same script at
the same N beside it. Each turn's status and time, the folds, pauses and overflows go to
``test-artifacts/real-model/base.json`` (docs/real-model.md).
"""

import json
import re
import time
import uuid
from pathlib import Path

import pytest

from tests.real_model.sessions import EVENTS, event_text

REPORT = Path("test-artifacts/real-model/base.json")
N_MESSAGES = 4
LOG_LINE = "2026-11-30 08:{:02d}:00 ERROR worker-7 connection reset by peer (retrying)"
FACT = "Our project is PRJ-123 on the EU cluster."


def pasted_log(lines: int, start: int) -> str:
    return "Here is the log:\n" + "\n".join(LOG_LINE.format((start + i) % 60) for i in range(lines))


LONG_SESSION = [
    FACT,
    "The customer is ACME Corp and the deadline is March 3.",
    *(f"Turn {i}: the nightly build passed again." for i in range(3, 13)),
    pasted_log(28, 0),
    pasted_log(28, 30),
    "Which project and cluster are we on?",
]
OVERFLOWING_SESSION = [FACT, pasted_log(28, 0), pasted_log(28, 30), "Which project and cluster are we on?"]
REPORTS: dict[str, dict] = {}


@pytest.fixture(scope="module", autouse=True)
def report():
    """Both sessions' figures in one file, written whatever the verdicts."""
    yield
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(REPORTS, indent=2))


def run_session(langflow, real_model, name: str, script: list[str], *, declared_window: int) -> dict:
    """``script`` through a memory flow and a stock flow at the same N; what happened, turn by turn."""
    memory_flow, memory_agent = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    stock_flow, stock_agent = langflow.create_agent_flow(session_memory=False, n_messages=N_MESSAGES)
    limit = real_model["agent_max_tokens"]
    on = {
        memory_agent: {"summarize_older_messages": True, "context_window_tokens": declared_window, "max_tokens": limit}
    }
    stock = {stock_agent: {"max_tokens": limit}}
    session = f"real-{uuid.uuid4()}"
    log_start = len(langflow.log_lines())
    turns = []
    for number, text in enumerate(script, start=1):
        started = time.monotonic()
        response = langflow.run(memory_flow, text, session_id=session, tweaks=on, check=False)
        memory_seconds = time.monotonic() - started
        started = time.monotonic()
        stock_response = langflow.run(stock_flow, text, session_id=session, tweaks=stock, check=False)
        turns.append(
            {
                "turn": number,
                "input_characters": len(text),
                "status": response.status_code,
                "seconds": round(memory_seconds, 1),
                "stock_status": stock_response.status_code,
                "stock_seconds": round(time.monotonic() - started, 1),
            }
        )
    events = [line for line in langflow.log_lines()[log_start:] if any(event in line for event in EVENTS)]
    state = langflow.sql(
        "SELECT summary, folded_count, version, last_error FROM session_memory_state WHERE session_id = :s",
        s=session,
    )
    stored = langflow.sql(
        "SELECT text FROM message WHERE session_id = :s AND flow_id = :f AND sender = 'User' ORDER BY timestamp",
        s=session,
        f=uuid.UUID(memory_flow).hex,
    )
    REPORTS[name] = {
        "turns": turns,
        "counts": {event.strip(): sum(event in line for line in events) for event in EVENTS},
        "state": [
            {"folded_count": row[1], "version": row[2], "summary_words": len(row[0].split()), "last_error": row[3]}
            for row in state
        ],
        "events": [event_text(line) for line in events],
        "stored_inputs": [text for (text,) in stored],
    }
    return REPORTS[name]


def test_a_long_session_with_the_window_declared_keeps_answering_and_loses_nothing(langflow, real_model):
    result = run_session(langflow, real_model, "declared", LONG_SESSION, declared_window=real_model["context_window"])

    assert [turn["status"] for turn in result["turns"]] == [200] * len(LONG_SESSION), "a turn with memory failed"
    assert result["stored_inputs"] == LONG_SESSION, "a stored message changed or went missing"
    counts = result["counts"]
    assert counts["session_summary_fold"] + counts["session_summary_fold_failed"] >= 1, "no fold was attempted"
    assert counts["session_context_early_fold"] >= 1, "the pasted logs did not fold early"
    assert all(re.match(r"\w+", row["last_error"]) for row in result["state"] if row["last_error"]), "a pause lacks why"


def test_an_overflow_the_server_answers_with_an_empty_stream_is_compacted(langflow, real_model):
    result = run_session(langflow, real_model, "undeclared", OVERFLOWING_SESSION, declared_window=0)

    assert [turn["status"] for turn in result["turns"]] == [200] * len(OVERFLOWING_SESSION), "a turn with memory failed"
    assert result["stored_inputs"] == OVERFLOWING_SESSION, "a stored message changed or went missing"
    overflows = [event for event in result["events"] if event.startswith("session_context_overflow")]
    assert any("attempt=1 result=refused" in event for event in overflows), "the overflow was not recognised"
    assert any("attempt=2 result=answered" in event for event in overflows), "the compacted retry did not answer"
