"""A short session with a real model through the real Langflow app: what the product does with what it writes.

What a 270M base model writes is not judged; the product's handling of it is: folds are attempted, no turn
answers 500, no stored message changes, an overflow is prevented or recognised and compacted, and a pause names
its reason. The stock Agent runs the same script at the same N beside it. Each turn's status and time, the folds,
pauses and overflows go to ``test-artifacts/real-model/report.json`` (docs/real-model.md).
"""

import json
import re
import time
import uuid
from pathlib import Path

REPORT = Path("test-artifacts/real-model/report.json")
N_MESSAGES = 4
LOG_LINE = "2026-11-30 08:{:02d}:00 ERROR worker-7 connection reset by peer (retrying)"


def pasted_log(lines: int, start: int) -> str:
    return "Here is the log:\n" + "\n".join(LOG_LINE.format((start + i) % 60) for i in range(lines))


SCRIPT = [
    "Our project is PRJ-123 on the EU cluster.",
    "The customer is ACME Corp and the deadline is March 3.",
    *(f"Turn {i}: the nightly build passed again." for i in range(3, 13)),
    pasted_log(28, 0),
    pasted_log(28, 30),
    "Which project and cluster are we on?",
]
EVENTS = (
    "session_summary_fold ",
    "session_summary_fold_failed",
    "session_summary_paused",
    "session_context_early_fold",
    "session_context_overflow",
    "session_memory_history_trimmed",
    "session_summary_fold_cancelled",
    "session_memory_turn",
)


def test_a_session_on_a_real_model_keeps_answering_and_loses_nothing(langflow, real_model):
    memory_flow, memory_agent = langflow.create_agent_flow(session_memory=True, n_messages=N_MESSAGES)
    stock_flow, stock_agent = langflow.create_agent_flow(session_memory=False, n_messages=N_MESSAGES)
    on = {
        memory_agent: {
            "summarize_older_messages": True,
            "context_window_tokens": real_model["context_window"],
            "max_tokens": real_model["agent_max_tokens"],
        }
    }
    stock = {stock_agent: {"max_tokens": real_model["agent_max_tokens"]}}
    session = f"real-{uuid.uuid4()}"
    log_start = len(langflow.log_lines())

    turns = []
    for number, text in enumerate(SCRIPT, start=1):
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
        "SELECT summary, folded_count, version, paused_until, last_error FROM session_memory_state "
        "WHERE session_id = :s",
        s=session,
    )
    stored = langflow.sql(
        "SELECT text FROM message WHERE session_id = :s AND flow_id = :f AND sender = 'User' ORDER BY timestamp",
        s=session,
        f=uuid.UUID(memory_flow).hex,
    )
    report = {
        "turns": turns,
        "counts": {event.strip(): sum(event in line for line in events) for event in EVENTS},
        "state": [
            {"folded_count": row[1], "version": row[2], "summary_words": len(row[0].split()), "last_error": row[4]}
            for row in state
        ],
        "events": [_event(line) for line in events],
    }
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    REPORT.write_text(json.dumps(report, indent=2))

    assert [turn["status"] for turn in turns] == [200] * len(SCRIPT), "a turn with memory failed"
    assert [text for (text,) in stored] == SCRIPT, "a stored message changed or went missing"
    attempted = report["counts"]["session_summary_fold"] + report["counts"]["session_summary_fold_failed"]
    assert attempted >= 1, "no fold was attempted"
    assert report["counts"]["session_context_early_fold"] + report["counts"]["session_context_overflow"] >= 1, (
        "the pasted logs neither folded early nor were compacted"
    )
    paused = [row for row in report["state"] if row["last_error"]]
    assert all(re.match(r"\w+", row["last_error"]) for row in paused), "a pause without its reason"


def _event(line: str) -> str:
    """The event's own text from Langflow's JSON log line (ids and counts only, never message text)."""
    try:
        return json.loads(line).get("event", line)
    except json.JSONDecodeError:
        return line
