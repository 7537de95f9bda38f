"""The summary page's pure parts: what it shows, escaped, and which requests may change a summary."""

from datetime import UTC, datetime

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from starlette.datastructures import URL, Headers

from langflow_session_memory.summary_page import PageState, reset_page, same_origin, summary_page, to_root

WHEN = datetime(2026, 12, 5, 14, 0, tzinfo=UTC)
URL_HERE = URL("http://langflow.example:7860/api/v1/session_memory/f/sessions/s/summary")


def state(summary: str = "Key facts:\n- x", **changes) -> PageState:
    values = {
        "flow_id": "f",
        "session_id": "s",
        "context_id": "",
        "summary": summary,
        "folded_count": 1200,
        "words": 3,
        "created_at": WHEN,
        "updated_at": WHEN,
        "paused_until": None,
        "last_error": None,
        "version": 1,
    }
    return PageState(**(values | changes))


@given(st.text())
def test_nothing_in_a_summary_or_a_session_id_becomes_markup(text):
    shown = summary_page(
        state(summary=text, session_id=text, last_error=text, paused_until=WHEN), error=text, to_root=""
    )
    plain = summary_page(
        state(summary="", session_id="", last_error="", paused_until=WHEN), error=text and "x", to_root=""
    )
    assert shown.count("<") == plain.count("<")


def test_the_page_shows_the_counts_dates_a_pause_and_keeps_a_refused_draft():
    page = summary_page(
        state(paused_until=WHEN, last_error="timeout"), error="over 300 words", draft="my draft", to_root=""
    )
    assert "<dd>1,200</dd>" in page
    assert "<dd>2026-12-05 14:00 UTC (timeout)</dd>" in page
    assert ">my draft</textarea>" in page
    assert "Not saved: over 300 words" in page


@pytest.mark.parametrize(
    ("route", "address"),
    [
        ("/api/v1/session_memory/{flow_id}/summary", "/api/v1/session_memory/0b4c6f8e/summary?session_id=a%2Fb"),
        (
            "/api/v1/session_memory/{flow_id}/sessions/{session_id}/summary",
            "/api/v1/session_memory/0b4c6f8e/sessions/s/summary",
        ),
    ],
    ids=["session-in-the-query", "session-in-the-path"],
)
def test_each_page_links_back_to_its_flow_from_where_it_is_served(route, address):
    back = f'<a href="{to_root(route)}flow/0b4c6f8e">Back to the flow</a>'
    assert back in summary_page(state(flow_id="0b4c6f8e"), to_root=to_root(route))
    assert back in reset_page("0b4c6f8e", "s", to_root=to_root(route))
    # resolved against the page's own address, the link reaches Langflow's editor, under any path prefix
    page = httpx.URL(f"http://h/langflow{address}")
    assert str(page.join(f"{to_root(route)}flow/0b4c6f8e")) == "http://h/langflow/flow/0b4c6f8e"


@pytest.mark.parametrize(
    ("headers", "allowed"),
    [
        ({"sec-fetch-site": "same-origin"}, True),
        ({"sec-fetch-site": "none"}, True),  # typed or bookmarked by the user
        ({"sec-fetch-site": "same-site"}, False),  # a sibling subdomain is another site's page
        ({"sec-fetch-site": "cross-site", "origin": "http://langflow.example:7860"}, False),
        ({"origin": "https://langflow.example:7860", "host": "langflow.example:7860"}, True),  # a proxy ended TLS
        ({"origin": "https://elsewhere.example", "host": "langflow.example:7860"}, False),
        ({"origin": "null", "host": "langflow.example:7860"}, False),  # a sandboxed frame or a data: page
        ({}, True),  # no browser: an API key or a script, judged by its credentials
    ],
)
def test_only_a_browser_request_from_this_server_s_own_pages_may_change_a_summary(headers, allowed):
    assert same_origin(Headers(headers), URL_HERE) is allowed
