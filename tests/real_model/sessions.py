"""What the real-model sessions read back: the answer's text, and our events in Langflow's log (ids and counts only)."""

import json
from pathlib import Path

import httpx

EVENTS = (
    "session_summary_fold ",
    "session_summary_fold_failed",
    "session_summary_paused",
    "session_summary_fold_waited",
    "session_context_early_fold",
    "session_context_overflow",
    "session_memory_history_trimmed",
    "session_memory_search ",
    "session_memory_excerpts ",
    "session_memory_turn",
)


def answer_text(response) -> str:
    """The Agent's answer in a ``/api/v1/run`` response."""
    return response.json()["outputs"][0]["outputs"][0]["results"]["message"]["text"]


def event_text(line: str) -> str:
    """The event's own text from Langflow's JSON log line (ids and counts only, never message text)."""
    try:
        return json.loads(line).get("event", line)
    except json.JSONDecodeError:
        return line


def event_name(event: str) -> str:
    return event.split(" ", 1)[0]


def memory_events(lines: list[str]) -> list[str]:
    """Our events among Langflow's log lines, in order."""
    return [event_text(line) for line in lines if any(event in line for event in EVENTS)]


def requests_in(request_log: str | None, started: float, ended: float) -> list[dict]:
    """The entries of the tier's server's request log (``serve_llama_cpp.py``) started in [started, ended)."""
    if not request_log or not Path(request_log).exists():
        return []
    entries = [json.loads(line) for line in Path(request_log).read_text().splitlines() if line.strip()]
    return [entry for entry in entries if started <= entry["started"] < ended]


def evict_cached_prompt(url: str) -> None:
    """One short request, so a one-slot server's cached prompt holds nothing of a session run before."""
    message = {"role": "user", "content": "Hello."}
    httpx.post(f"{url}/chat/completions", json={"messages": [message], "max_tokens": 1}, timeout=120).raise_for_status()
