"""The "Session memory" step: what may be stored and handed on (counts, state) and what only the live view shows."""

from datetime import timedelta
from html import unescape

import pytest
from lfx.schema.content_types import ContentBlock, TextContent, ToolContent
from lfx.schema.legacy_render import render_v1_content_blocks
from lfx.schema.message import Message
from markdown_it import MarkdownIt

from langflow_session_memory.services.session_memory.agent.component_hooks import stored_message
from langflow_session_memory.services.session_memory.agent.playground import (
    STEP_NAME,
    WAITING_FOR_FOLDS,
    as_text,
    kept_out,
    memory_step,
    step_facts,
    step_output,
    step_text,
    summary_paths,
    waiting_step,
    with_turn_facts,
    without_summary,
)
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY
from langflow_session_memory.services.session_memory.rules.turn import Turn
from tests.chat import ScriptedChatModel, chat_rows, store_rows

SUMMARY = "Key facts:\n- PRJ-123 on the EU cluster\nConversation so far:\n- the project was named"


SUMMARY_PAGE = "/api/v1/session_memory/f/summary?session_id=s"
FACTS = {"earlier_messages_summarized": 20, "summary_page": SUMMARY_PAGE}
SUMMARY_KEPT_OUT = kept_out(FACTS)


def step(text=SUMMARY) -> ToolContent:
    return ToolContent(name=STEP_NAME, output=step_output(text, FACTS))


def test_the_stored_step_links_to_the_summary_page_in_lines_the_playground_renders_as_markdown():
    flow = session = "765f1ac9-3a29-4c9d-823a-1fcc85fab86e"  # the Default Session's id is the flow's
    _, page = summary_paths(flow, session, "")
    text = kept_out({"summary_page": page})
    assert text == (
        f"The summary is not stored with the answer: [read it][1] (with your Langflow login).\n\n[1]: {page}"
    )
    assert max(len(line) for line in text.splitlines()) <= 120


def test_the_summary_paths_name_the_session_and_the_agents_context_in_the_query():
    row, page = summary_paths("f", "my session/1", "ctx 2")
    assert row == "/api/v1/session_memory/f/session?session_id=my+session%2F1&context_id=ctx+2"
    assert page == "/api/v1/session_memory/f/summary?session_id=my+session%2F1&context_id=ctx+2"
    assert summary_paths("f", "s", "") == ("/api/v1/session_memory/f/session?session_id=s", SUMMARY_PAGE)
    assert summary_paths("f", "..", "")[1] == "/api/v1/session_memory/f/summary?session_id=.."


def answer(*blocks) -> Message:
    return Message(text="", sender="Machine", sender_name="AI", session_id="s", content_blocks=list(blocks))


def outputs(message: Message) -> list:
    found = []
    for block in message.content_blocks:
        inner = block.get("contents") if isinstance(block, dict) else block.contents
        for item in [block, *(inner or [])]:
            name = item.get("name") if isinstance(item, dict) else getattr(item, "name", None)
            if name == STEP_NAME:
                found.append(step_text(item))
    return found


def test_the_summary_is_kept_out_of_a_copy_and_the_live_message_keeps_it():
    live = answer(step(), TextContent(text="From our conversation: PRJ-123"))
    handed_on = without_summary(live)
    assert outputs(handed_on) == [SUMMARY_KEPT_OUT]
    assert outputs(live) == [SUMMARY]
    assert handed_on.text == live.text == "From our conversation: PRJ-123"


def test_a_step_inside_a_group_or_as_a_dict_loses_its_summary_too():
    grouped = answer(ContentBlock(title="Agent Steps", contents=[step()]))
    as_dicts = answer(ContentBlock(title="Agent Steps", contents=[step()])).model_dump()["content_blocks"]
    assert outputs(without_summary(grouped)) == [SUMMARY_KEPT_OUT]
    message = answer()
    message.content_blocks = as_dicts
    assert outputs(without_summary(message)) == [SUMMARY_KEPT_OUT]


async def test_a_write_receives_no_summary_and_the_stored_copy_gets_it_back_for_the_live_view():
    written = []

    async def write(message):
        written.append(outputs(message))
        return answer(step(text=SUMMARY_KEPT_OUT))

    stored = await stored_message(answer(step()), write)
    assert written == [[SUMMARY_KEPT_OUT]]
    assert outputs(stored) == [SUMMARY]


async def test_a_tool_step_added_after_the_first_write_stays_among_the_steps():
    async def write_like_langflow(message):  # astore_message hands back the v1 shape: steps inside a group
        return answer(ContentBlock(title="Agent Steps", contents=[step(text=SUMMARY_KEPT_OUT)]))

    live = await stored_message(answer(step()), write_like_langflow)
    live.content_blocks.append(ToolContent(name="search_earlier_messages", tool_input={"query": "code"}))

    [group] = render_v1_content_blocks(live.content_blocks)
    assert [leaf["name"] for leaf in group["contents"]] == [STEP_NAME, "search_earlier_messages"]


def test_the_counts_sit_beside_the_text_and_not_as_the_steps_arguments():
    """Langflow shows a step's input as "Arguments" above its output, and an output object with ``content`` on two
    tabs: the text under "Result", the rest under "Metadata"."""
    shown = step()
    assert shown.tool_input == {}
    assert shown.output == {"content": SUMMARY, **FACTS}
    assert (step_text(shown), step_facts(shown)) == (SUMMARY, FACTS)


def test_a_step_stored_before_with_its_counts_as_its_input_is_still_read():
    older = {"type": "tool_use", "name": STEP_NAME, "tool_input": FACTS, "output": SUMMARY_KEPT_OUT}  # as stored
    assert (step_text(older), step_facts(older)) == (SUMMARY_KEPT_OUT, FACTS)


def test_a_message_without_the_step_is_handed_on_unchanged():
    plain = answer(TextContent(text="hello"))
    assert without_summary(plain) is plain


def test_a_turn_s_fitted_calls_get_a_step_of_their_own_when_the_session_has_no_summary_yet():
    facts = {"calls_fitted_to_window": 1, "tool_results_clipped": 1}
    [step, text] = with_turn_facts(answer(TextContent(text="hello")), facts).content_blocks
    assert (step.name, step.tool_input, step_facts(step)) == (STEP_NAME, {}, facts)
    assert step_text(step) == "Fitted to the model's window: 0 history messages left out, 1 tool results clipped."
    assert without_summary(answer(step)).content_blocks == [step]  # nothing to keep out: no summary, no link
    assert text.text == "hello"
    plain = answer(TextContent(text="hello"))
    assert with_turn_facts(plain, {}) is plain


def rendered(markdown: str) -> str:
    """``markdown`` as HTML, by a CommonMark renderer (the Playground's is react-markdown)."""
    return MarkdownIt("commonmark").render(markdown)


@pytest.mark.parametrize(
    "summary",
    [
        SUMMARY,
        "Key facts:\n- ![pixel](https://tracker.example/p.png?u=1)\n- [click](https://evil.example) <img src=x>",
        "Key facts:\n- ```\n- ![closed the fence](https://tracker.example/p.png)\n```` \nConversation so far:\n- x",
    ],
    ids=["plain", "image-and-link", "fences-inside"],
)
def test_the_step_shows_the_summary_as_its_text_with_no_image_fetched_or_link_live(summary):
    html = rendered(as_text(summary))
    assert "<img" not in html
    assert "<a " not in html
    assert html.startswith('<pre><code class="language-text">')
    assert html.count("<pre>") == 1
    assert unescape(html.removeprefix('<pre><code class="language-text">').removesuffix("</code></pre>\n")) == (
        f"{summary}\n"
    )


async def test_while_folding_is_paused_the_step_says_until_when_and_why_even_before_any_summary(
    service, sessions, key, clock
):
    rows = await store_rows(sessions, chat_rows(key, DEFAULT_POLICY.batch_size + 10))  # a batch older than N=10
    refusing = ScriptedChatModel(script=["Error: the model is overloaded"])  # the first fold is rejected: a pause

    turn = Turn(key, 10, rows[-1].id)
    await service.build_history(turn, refusing)
    await service.fold_after_turn(turn, refusing)  # the fold after the answer
    history = await service.build_history(Turn(key, 10, None), refusing)  # the next turn

    step = memory_step(history)
    assert step is not None
    facts = step_facts(step)
    assert facts["summaries_paused_until"] == (clock.now + timedelta(minutes=10)).isoformat()
    assert facts["pause_reason"] == "SummaryRejectedError: summary looks like an error text"
    assert (facts["earlier_messages_summarized"], facts["summary_words"]) == (0, 0)
    assert step_text(step).splitlines()[0] == "Nothing is summarized yet."
    assert step_text(step).splitlines()[-1] == (
        "Summarizing is paused until 2026-01-02 00:10 UTC: SummaryRejectedError: summary looks like an error text."
    )


def test_the_step_says_what_the_summary_covers_and_what_was_quoted_and_keeps_the_counts_in_its_metadata():
    facts = {
        "earlier_messages_summarized": 1240,
        "folded_this_turn": 20,
        "summary_words": 287,
        "summary_page": "/api/v1/session_memory/765f1ac9-3a29-4c9d-823a-1fcc85fab86e/summary?session_id="
        "765f1ac9-3a29-4c9d-823a-1fcc85fab86e",
        "messages_waiting": 45,
        "waiting_tokens": 17000,
        "left_out_because": "messages waiting over 16000 tokens",
        "older_messages_quoted": 2,
        "quoted_tokens": 180,
        "folds_after_this_answer": True,
        "calls_fitted_to_window": 1,
        "history_left_out": 3,
        "tool_results_clipped": 1,
    }
    text = kept_out(facts)
    assert text.split("\n\n")[:5] == [
        "The summary covers the first **1240** messages of this session.",
        "Left out of this request: **45** older messages not summarized yet (messages waiting over 16000 tokens).",
        "Quoted for the question: **2** older messages that match it.",
        "Fitted to the model's window: 3 history messages left out, 1 tool results clipped.",
        "The summary is not stored with the answer: [read it][1] (with your Langflow login).",
    ]
    assert max(len(line) for line in text.splitlines()) <= 120
    step = ToolContent(name=STEP_NAME, output=step_output(text, facts))
    assert step_facts(step) == facts  # the words, what this turn folded, the tokens: its Metadata


def test_messages_waiting_that_are_sent_are_in_the_metadata_only():
    waiting = {"summary_page": SUMMARY_PAGE, "earlier_messages_summarized": 1, "messages_waiting": 3}
    assert kept_out(waiting).startswith("The summary covers the first **1** message of this session.\n\nThe summary is")


def test_the_waiting_step_says_older_messages_are_being_summarized_where_the_collapsed_step_shows_it():
    step = waiting_step()
    assert (step.name, step.header["title"], step_text(step)) == (STEP_NAME, WAITING_FOR_FOLDS, WAITING_FOR_FOLDS)
    assert step_facts(step) == {}  # no counts: nothing is known yet
