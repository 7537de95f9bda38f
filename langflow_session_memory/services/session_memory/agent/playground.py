"""The "Session memory" step among an Agent answer's steps in the Playground.

The step is a content block of the Agent's message shaped like a tool step (Langflow shows
those as collapsible steps, and its v1 rendering keeps them under "Agent Steps"): what the
summary covers, what was quoted for the question, a pause and its reason, and, while the
answer is being written, the summary itself as the step's output. A summary is
a copy of what users said, and a copy in a stored message would outlive the deletion of the
messages it came from: every write of the message stores the step without the summary, and
the answer handed on to the rest of the flow (Chat Output stores it again) carries it
without it. The stored step links to the summary instead: a page of the REST API (``api.py``)
that the browser opens with the user's Langflow login, under the same owner checks.

The step's output is an object (:func:`step_output`): its text, which the Playground shows under
"Result", and the counts beside it, under "Metadata". Langflow shows a tool step's input as its
"Arguments", keys and JSON values first: counts put there read as an API dump above the text.
"""

import re
from collections.abc import Iterator
from urllib.parse import urlencode

from lfx.schema.content_types import ToolContent
from lfx.schema.message import Message

STEP_NAME = "Session memory"
STEP_ICON = "Brain"
STEP_HEADER = {"title": STEP_NAME, "icon": STEP_ICON}
SUMMARY_KEPT_OUT = "The summary is not stored with the answer"
WAITING_FOR_FOLDS = "Summarizing older messages before answering…"
# Every count a step may carry beside its text (its "Metadata"), with what it says: a contract, since scripts read
# stored steps (docs/design.md's Contracts table; tests/test_contracts.py finds every key the code writes).
STEP_FIELDS = {
    "earlier_messages_summarized": "messages the summary covers",
    "folded_this_turn": "messages folded inside this turn",
    "summary_words": "the summary's length in words",
    "summary_page": "the address of the page that shows the summary",
    "messages_waiting": "unfolded messages older than the window sent raw",
    "waiting_tokens": "their estimated tokens",
    "folded_early_because": "why the turn folded before answering",
    "left_out_because": "why waiting messages were left out of the request",
    "older_messages_quoted": "older messages quoted for the question",
    "quoted_tokens": "their estimated tokens",
    "folds_after_this_answer": "a fold starts after the answer",
    "summaries_paused_until": "folding is paused for the session until then (UTC)",
    "pause_reason": "why folding paused",
    "usage": "how the turn's token counts were found (set when estimated)",
    "cached_input_tokens": "input tokens the provider served from its prompt cache",
    "cache_write_input_tokens": "input tokens written to the provider's prompt cache",
    "fold_input_tokens": "input tokens of this turn's fold calls",
    "fold_cached_input_tokens": "of those, served from the prompt cache",
    "calls_fitted_to_window": "model calls made smaller to fit the window",
    "retried_after_too_long": "a call was retried smaller after a 'prompt too long'",
    "history_left_out": "history messages the last fitted call left out",
    "tool_results_clipped": "tool results the last fitted call clipped",
    "tool_result_tokens": "tool results' estimated tokens before and after clipping",
}


def step_output(text: str, facts: dict) -> dict:
    """A step's output: ``text`` (Markdown) and the counts, which Langflow's Playground shows on two tabs."""
    return {"content": text, **facts}


def step_facts(block) -> dict:
    """A step's counts, wherever the step keeps them (a step stored before 2026-12-05 kept them as its input)."""
    output = _field(block, "output")
    if isinstance(output, dict):
        return {name: value for name, value in output.items() if name != "content"}
    return dict(_field(block, "tool_input") or {})


def step_text(block) -> str | None:
    """A step's text: the summary while the answer is written, what the turn did and a link once stored."""
    output = _field(block, "output")
    return output.get("content") if isinstance(output, dict) else output


def summary_paths(flow_id, session_id: str, context_id: str) -> tuple[str, str]:
    """The API path of the session's row, and of the page that shows its summary (``api.read_summary``).

    The session is named in the query: any id Langflow accepts reaches them, ``/``, ``.`` and ``..`` included (as a
    path segment, a browser resolves ``.`` and ``..`` away and the router splits at ``/``).
    """
    query = urlencode({"session_id": session_id, **({"context_id": context_id} if context_id else {})})
    base = f"/api/v1/session_memory/{flow_id}"
    return f"{base}/session?{query}", f"{base}/summary?{query}"


def kept_out(facts: dict | None) -> str:
    """What the stored step shows in place of the summary: what the turn did (:func:`described`), then a link to
    the summary's page.

    A reference link, its address on a line of its own: the Playground renders a step's text
    output as Markdown only while no line passes 120 characters (else as a code block, where
    nothing is a link), and the Default Session's page is 113 characters long: the label is one character.
    """
    page = (facts or {}).get("summary_page")
    link = f"{SUMMARY_KEPT_OUT}: [read it][1] (with your Langflow login).\n\n[1]: {page}"
    return "\n\n".join([*described(facts or {}), link if page else f"{SUMMARY_KEPT_OUT}."])


def stored_text(facts: dict) -> str:
    """What a stored step says: what the turn did, then the link to the summary where the session has a row (a step
    made only to count a turn's fitted calls has none, nor any summary to keep out)."""
    return kept_out(facts) if facts.get("summary_page") else "\n\n".join(described(facts))


def described(facts: dict) -> list[str]:
    """What a person reads on the step: what the summary covers, what was left out of the request and why, what was
    quoted, a pause and its reason, what was fitted to the model's window; a short line each, only for the counts there
    are (a step stored by an older version may lack some). The rest (words, what this turn folded, what waits and is
    sent as it is, tokens) is in the step's Metadata only."""
    lines = []
    summarized = facts.get("earlier_messages_summarized")
    if summarized == 0:
        lines.append("Nothing is summarized yet.")
    elif summarized is not None:
        lines.append(f"The summary covers the first **{summarized}** {_messages(summarized)} of this session.")
    if (waiting := facts.get("messages_waiting")) and (why := facts.get("left_out_because")):
        lines.append(f"Left out of this request: **{waiting}** older {_messages(waiting)} not summarized yet ({why}).")
    if quoted := facts.get("older_messages_quoted"):
        lines.append(f"Quoted for the question: **{quoted}** older {_messages(quoted)} that match it.")
    if paused := facts.get("summaries_paused_until"):
        lines.append(
            f"Summarizing is paused until {str(paused)[:16].replace('T', ' ')} UTC: {facts.get('pause_reason')}."
        )
    if facts.get("calls_fitted_to_window"):
        lines.append(
            f"Fitted to the model's window: {facts.get('history_left_out', 0)} history messages left out, "
            f"{facts.get('tool_results_clipped', 0)} tool results clipped."
        )
    return lines


def _messages(count) -> str:
    return "message" if count == 1 else "messages"


def memory_step(history) -> ToolContent | None:
    """The step for a turn built with memory; None when there is nothing to show (no summary, no pause, no
    older message quoted). Its link names the session by the key the turn read it with."""
    state = history.state
    if state is None or not (history.summary or state.paused_until or history.excerpts):
        return None
    _, page = summary_paths(state.key.flow_id, state.key.session_id, state.key.context_id)
    facts = {
        "earlier_messages_summarized": state.folded_count,
        "folded_this_turn": history.folded,
        "summary_words": len(history.summary.split()),
        "summary_page": page,
    }
    if history.waiting is not None and history.waiting.messages:
        waiting = history.waiting
        facts |= {"messages_waiting": waiting.messages, "waiting_tokens": waiting.tokens}
        if waiting.over:
            why = f"messages waiting over {waiting.budget} tokens"
            facts |= {"folded_early_because": why} if history.folded else {"left_out_because": why}
    if history.excerpts:
        facts |= {"older_messages_quoted": len(history.excerpts), "quoted_tokens": history.excerpt_tokens}
    if history.fold_due:
        facts["folds_after_this_answer"] = True
    if state.paused_until:
        facts["summaries_paused_until"] = state.paused_until.isoformat()
        facts["pause_reason"] = state.last_error
    shown = [*described(facts), *([as_text(history.summary)] if history.summary else [])]
    return ToolContent(name=STEP_NAME, output=step_output("\n\n".join(shown), facts), header=STEP_HEADER)


def waiting_step() -> ToolContent:
    """The step of a turn that waits for the folds on its model server (a one-slot local server): without it the
    Playground shows only "..." for as long as a fold takes. Its title says so, as the collapsed step shows it. It
    stands on a message that is shown, never stored."""
    header = {**STEP_HEADER, "title": WAITING_FOR_FOLDS}
    return ToolContent(name=STEP_NAME, output=step_output(WAITING_FOR_FOLDS, {}), header=header)


USAGE_ESTIMATED = "estimated: the model server reported no token counts"


def with_step_facts(message: Message, facts: dict) -> Message:
    """The message with ``facts`` added to its step's counts (a copy when it has a step and facts to add).

    For what is known only once the answer is written: the usage was estimated, how much
    of the input the provider served from its prompt cache.
    """
    if not facts or not any(_steps(message.content_blocks)):
        return message
    blocks = [
        _with(block, output=step_output(step_text(block) or "", {**step_facts(block), **facts}))
        if _is_step(block)
        else block
        for block in message.content_blocks
    ]
    return message.model_copy(update={"content_blocks": blocks})


def with_turn_facts(message: Message, facts: dict) -> Message:
    """The message with ``facts`` on its step, a step made for them when it has none (a turn whose calls were
    fitted to the window before the session had a summary)."""
    if not facts or any(_steps(message.content_blocks)):
        return with_step_facts(message, facts)
    step = ToolContent(name=STEP_NAME, output=step_output("\n\n".join(described(facts)), facts), header=STEP_HEADER)
    return message.model_copy(update={"content_blocks": [step, *message.content_blocks]})


def as_text(summary: str) -> str:
    """The summary in a fenced code block, which the Playground shows as the text it is, line by line.

    The notes come from a model's output (and a person's edit): rendered as Markdown, an image
    in them would be fetched by the browser (a tracking pixel) and a link would be live. The
    fence is longer than any run of backticks in the summary, so nothing in it closes the block.
    """
    longest = max((len(run) for run in re.findall(r"`+", summary)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{summary}\n{fence}"


def _field(block, name: str):
    """A content block's field, whether the block is a model (live message) or a dict (read back)."""
    return block.get(name) if isinstance(block, dict) else getattr(block, name, None)


def _with(block, **changes):
    return {**block, **changes} if isinstance(block, dict) else block.model_copy(update=changes)


def _is_step(block) -> bool:
    return _field(block, "type") == "tool_use" and _field(block, "name") == STEP_NAME


def _steps(blocks) -> Iterator:
    """Our step wherever it sits: at the top, or inside a group (Langflow's v1 "Agent Steps")."""
    for block in blocks or []:
        if _is_step(block):
            yield block
        yield from _steps(_field(block, "contents"))


def _kept_out(blocks: list) -> tuple[list, str | None]:
    """New blocks with our step's summary replaced (copies: queued events still hold the originals), and the summary."""
    summary, copied = None, []
    for block in blocks or []:
        text = step_text(block) if _is_step(block) else None
        facts = step_facts(block) if _is_step(block) else {}
        if text and text != (stored := stored_text(facts)):
            summary, block = text, _with(block, output=step_output(stored, facts))
        elif _field(block, "contents"):
            inner, inner_summary = _kept_out(_field(block, "contents"))
            if inner_summary is not None:
                summary, block = inner_summary, _with(block, contents=inner)
        copied.append(block)
    return copied, summary


def without_summary(message: Message) -> Message:
    """The message as it may be stored or handed on: the step keeps counts and state, not the summary.

    A copy whenever there is a summary to keep out; the message itself is not changed.
    """
    blocks, summary = _kept_out(message.content_blocks)
    return message if summary is None else message.model_copy(update={"content_blocks": blocks})


def stored_form(message: Message) -> Message:
    """What is written when the Agent's message is stored: the message itself, or a copy without the summary."""
    if not any(_steps(message.content_blocks)):
        return message
    return without_summary(message)


def with_live_blocks(stored: Message, message: Message) -> Message:
    """The stored message handed back with the live blocks, summary included.

    Langflow hands a stored message back in its v1 shape: our step wrapped in an "Agent Steps"
    group. The Agent appends its later steps (tool calls) beside that group, where the v1 shape
    drops them; with the live, flat blocks handed back, every tool call stays among the steps,
    as on the stock Agent (whose first message has no blocks at all).
    """
    if not any(_steps(message.content_blocks)):
        return stored
    return stored.model_copy(update={"content_blocks": list(message.content_blocks)})
