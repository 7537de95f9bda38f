"""The summary page: one session's summary in the browser, to read, correct or reset (``api.read_summary``).

Pure HTML rendering. Every value is escaped, the page runs no script, and its headers forbid
framing (a page with buttons inside another site's frame could be clicked through) and any
form target but this page. Which requests may change a summary is :func:`same_origin`'s rule.

Langflow's Playground renders the step's link without a target, so the page replaces the
Playground in its tab: each page links back to the flow, by a relative address (it holds behind a
proxy or a path prefix).
"""

from dataclasses import dataclass
from datetime import datetime
from html import escape
from urllib.parse import quote, urlsplit

from langflow_session_memory.services.session_memory.rules.policy import SUMMARY

HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'",
    "Referrer-Policy": "no-referrer",
}
SAVED = "saved"
RESET = "reset"
NOTICES = {SAVED: "Saved. The Agent's next turn in this session sends this summary."}
NOT_TEXT = "the form's summary and version must be text fields: reload the page and save from it"
CHANGED_MEANWHILE = (
    "the summary changed since this page was opened (a fold or another edit saved it). Your text is kept below and the"
    " summary as it is now above it: save again to put yours in its place, or reload the page to keep it"
)
RESET_DONE = (
    "Reset. The summary is gone; the Agent's next turn in this session summarizes it again from its first message."
)
_STYLE = """body{font:16px/1.5 system-ui,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#18181b}
h1{font-size:1.4rem;margin:0 0 1rem}dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}
dt{color:#52525b}dd{margin:0}textarea{width:100%;box-sizing:border-box;font:14px/1.5 ui-monospace,monospace;
padding:.5rem}.notice{background:#ecfdf5;border:1px solid #10b981;padding:.5rem 1rem}
.error{background:#fef2f2;border:1px solid #ef4444;padding:.5rem 1rem}button{font:inherit;margin:.5rem .5rem 0 0;
padding:.4rem 1rem}p.hint{color:#52525b;font-size:.9rem}h2{font-size:1.1rem}pre.now{white-space:pre-wrap;
background:#f4f4f5;padding:.5rem;font:14px/1.5 ui-monospace,monospace}"""
BACK_TO_THE_FLOW = "Back to the flow"


@dataclass(frozen=True)
class PageState:
    """What the page shows of a session's row."""

    flow_id: str
    session_id: str
    context_id: str
    summary: str
    folded_count: int
    words: int
    created_at: datetime
    updated_at: datetime
    paused_until: datetime | None
    last_error: str | None
    version: int


def summary_page(
    state: PageState,
    *,
    notice: str | None = None,
    error: str | None = None,
    draft: str | None = None,
    conflict: bool = False,
    to_root: str,
):
    """The page as HTML: the session's facts, the summary in a form to save or reset (on the version shown), a notice
    or an error.

    ``draft`` is what the person sent when it was refused, kept so nothing they typed is lost; on a ``conflict`` (the
    summary changed since their page was opened) the summary as it is now is shown above it, read-only.
    """
    facts = [
        ("Session", state.session_id),
        *([("Context", state.context_id)] if state.context_id else []),
        ("Earlier messages summarized", f"{state.folded_count:,}"),
        ("Words", f"{state.words} of at most {SUMMARY.word_limit}"),
        ("Updated", _when(state.updated_at)),
        ("First summarized", _when(state.created_at)),
    ]
    if state.paused_until:
        facts.append(
            ("Summaries paused until", f"{_when(state.paused_until)} ({state.last_error or 'no reason kept'})")
        )
    rows = "".join(f"<dt>{escape(name)}</dt><dd>{escape(value)}</dd>" for name, value in facts)
    banner = ""
    if notice in NOTICES:
        banner = f'<p class="notice" role="status">{escape(NOTICES[notice])}</p>'
    if error:
        banner = f'<p class="error" role="alert">Not saved: {escape(error)}</p>'
    text = state.summary if draft is None else draft
    now = ""
    if conflict:
        now = f'<h2>The summary now (version {state.version})</h2><pre class="now">{escape(state.summary)}</pre>\n'

    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>Session memory: {escape(state.session_id)}</title><style>{_STYLE}</style></head>
<body><main>
{_back(state.flow_id, to_root)}
<h1>Session memory</h1>
{banner}
<dl>{rows}</dl>
{now}<form method="post">
<input type="hidden" name="version" value="{state.version}">
<label for="summary"><strong>Summary</strong></label>
<p class="hint">Sent first in the Agent's history in place of the earlier messages. Correct it and save, or reset it:
the earlier messages are summarized again from the start. The chat's own messages are never changed.</p>
<textarea id="summary" name="summary" rows="18">{escape(text)}</textarea>
<button type="submit" name="action" value="save">Save summary</button>
<button type="submit" name="action" value="reset">Reset summary</button>
</form>
</main></body></html>
"""


def reset_page(flow_id: str, session_id: str, *, to_root: str) -> str:
    """What the page says once its summary is reset: the row is gone until a turn folds the session again."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Session memory: {escape(session_id)}</title>
<style>{_STYLE}</style></head>
<body><main>{_back(flow_id, to_root)}<h1>Session memory</h1><dl><dt>Session</dt><dd>{escape(session_id)}</dd></dl>
<p class="notice" role="status">{escape(RESET_DONE)}</p></main></body></html>
"""


def same_origin(headers, url) -> bool:
    """Whether a request that would change a summary may: not one a browser sent from another site.

    A browser names where a request comes from (``Sec-Fetch-Site``, which no page can set, and
    ``Origin``); Langflow accepts its login cookie, so a form on another site could otherwise
    post with it. Clients that send neither (an API key, a script) are judged by their
    credentials alone, as by Langflow.
    """
    site = headers.get("sec-fetch-site")
    if site is not None:
        return site in ("same-origin", "none")
    origin = headers.get("origin")
    if origin is None:
        return True
    return urlsplit(origin).netloc == headers.get("host", url.netloc)  # the scheme a proxy ended is not compared


def to_root(route: str) -> str:
    """The relative way from a page served at ``route`` (``/api/v1/session_memory/{flow_id}/summary``) to Langflow's
    root, one ``../`` per directory: it holds behind a proxy's path prefix, which the browser's address has and the
    route has not."""
    return "../" * (route.count("/") - 1)


def _back(flow_id: str, to_root: str) -> str:
    return f'<p><a href="{to_root}flow/{quote(flow_id, safe="")}">{BACK_TO_THE_FLOW}</a></p>'


def _when(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M} UTC"
