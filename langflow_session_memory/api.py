"""REST API to see, correct and reset a session's summary, with Langflow's own authentication.

Mounted by the plugin under ``/api/v1/session_memory``. A caller reaches only flows it owns
and, in them, only the rows it owns (its own Playground and API sessions); anything else
answers 404, so nobody learns that another user's flow or session exists. A database error
answers 503 with a short reason, never a statement or its parameters. Langflow's own
authentication accepts the browser's login cookie too, so the summary page (``read_summary``),
which the Playground's Session memory step links to, opens in the browser as that user, who can
correct or reset the summary there; a change a browser sends from another site is refused (403).
"""

from datetime import datetime
from typing import Annotated
from urllib.parse import urlencode
from uuid import UUID

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response
from fastapi.responses import HTMLResponse, RedirectResponse
from fastapi.routing import APIRoute
from langflow.api.utils.core import CurrentActiveUser
from langflow.services.database.models.flow.model import Flow
from lfx.log.logger import logger
from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError, StatementError
from sqlalchemy.ext.asyncio import AsyncSession

from langflow_session_memory import summary_page
from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.reasons import MIGRATE_COMMAND, describe, table_missing
from langflow_session_memory.services.session_memory.rules.policy import BOUNDS
from langflow_session_memory.services.session_memory.rules.state import SessionKey
from langflow_session_memory.services.session_memory.runtime import langflow_database_session
from langflow_session_memory.services.session_memory.storage import cleanup, store
from langflow_session_memory.services.session_memory.storage.model import SessionMemoryState
from langflow_session_memory.services.session_memory.summary import validation

NOT_FOUND = "No session memory here"
TABLE_MISSING = f"session memory table missing: run `{MIGRATE_COMMAND}`"


class _DatabaseErrorsAnswer503(APIRoute):
    """A route whose database errors answer 503 with a short reason (see :func:`_unavailable`), logged without text.

    Caught around the endpoint, before any dependency closes: Langflow's session dependency
    would log the error with its traceback, and its catch-all handler answer 500 with it;
    the error's text quotes the statement's parameters (a summary being written), and a
    500 re-raised past the response makes the server drop the client's connection. Our
    session is closed as the request ends, which rolls its transaction back.
    """

    def get_route_handler(self):
        handler = super().get_route_handler()

        async def answer_503_on_database_errors(request):
            try:
                return await handler(request)
            except SQLAlchemyError as error:
                await logger.aerror(f"{log_events.API_FAILED} reason={describe(error)}")
                raise _unavailable(error) from None

        return answer_503_on_database_errors


def _unavailable(error: SQLAlchemyError) -> HTTPException:
    """503 with a short reason: how to restore a missing table, else the error's kind (no text)."""
    if isinstance(error, StatementError) and table_missing(error):
        return HTTPException(status_code=503, detail=TABLE_MISSING)
    return HTTPException(status_code=503, detail=f"session memory database error: {describe(error)}")


router = APIRouter(prefix="/api/v1/session_memory", tags=["Session Memory"], route_class=_DatabaseErrorsAnswer503)


async def _database():
    async with langflow_database_session() as session:
        yield session


Database = Annotated[AsyncSession, Depends(_database)]
ContextQuery = Annotated[str, Query(description="The Agent's Context ID; empty for an Agent without one")]


class SessionListItem(BaseModel):
    session_id: str
    context_id: str
    folded_count: int
    words: int
    updated_at: datetime
    paused_until: datetime | None


class SessionMemory(BaseModel):
    session_id: str
    context_id: str
    summary: str
    folded_count: int
    version: int
    paused_until: datetime | None
    last_error: str | None
    updated_at: datetime


class SummaryEdit(BaseModel):
    summary: str
    # The version the caller read (GET's ``version``, or its ETag in If-Match): the edit is made on that row only.
    version: int | None = None


VERSION_NEEDED = (
    "Send the version you read: a `version` field in the body or an If-Match header (GET answers both), so that an edit"
    " never erases what a fold or another edit saved after you read it"
)
STALE = (
    "The summary changed since you read version {read} (a fold or another edit saved version {now}): read it again"
    " and make your change on it"
)


async def _require_flow(session: AsyncSession, flow_id: UUID, user) -> None:
    owned = await session.scalar(select(Flow.id).where(Flow.id == flow_id, Flow.user_id == user.id))
    if owned is None:
        raise HTTPException(status_code=404, detail=NOT_FOUND)


async def _row(session: AsyncSession, flow_id: UUID, user, session_id: str, context_id: str) -> SessionMemoryState:
    if "\x00" in session_id or "\x00" in context_id:  # PostgreSQL cannot hold a NUL: answered alike on both databases
        raise HTTPException(status_code=404, detail=NOT_FOUND)
    await _require_flow(session, flow_id, user)
    rows = await store.find(session, flow_id, owner_id=user.id, session_id=session_id, context_id=context_id, limit=1)
    if not rows:
        raise HTTPException(status_code=404, detail=NOT_FOUND)
    return rows[0]


def _memory(row: SessionMemoryState) -> SessionMemory:
    return SessionMemory.model_validate(row, from_attributes=True)


@router.get("/{flow_id}/sessions", response_model=list[SessionListItem])
async def list_sessions(
    flow_id: UUID,
    user: CurrentActiveUser,
    session: Database,
    limit: Annotated[int, Query(ge=1, le=1000)] = BOUNDS.list_limit,
) -> list[SessionListItem]:
    """The flow's sessions that have session memory, most recently updated first."""
    await _require_flow(session, flow_id, user)
    rows = await store.find(session, flow_id, owner_id=user.id, limit=limit)
    return [
        SessionListItem(
            session_id=row.session_id,
            context_id=row.context_id,
            folded_count=row.folded_count,
            words=validation.word_count(row.summary),
            updated_at=row.updated_at,
            paused_until=row.paused_until,
        )
        for row in rows
    ]


@router.get("/{flow_id}/session", response_model=SessionMemory)
@router.get("/{flow_id}/sessions/{session_id}", response_model=SessionMemory)
async def get_session(
    response: Response,
    flow_id: UUID,
    session_id: str,
    user: CurrentActiveUser,
    session: Database,
    context_id: ContextQuery = "",
) -> SessionMemory:
    """One session's summary and its state, its version also as the ETag a PUT's If-Match sends back; 404 when it has
    none."""
    row = await _row(session, flow_id, user, session_id, context_id)
    response.headers["ETag"] = _etag(row.version)
    return _memory(row)


def _etag(version: int) -> str:
    return f'"{version}"'


def _version_read(edit: SummaryEdit, if_match: str | None) -> int:
    """The version an edit was made on: its body's, else its If-Match ETag's; 428 when it names none."""
    if edit.version is not None:
        return edit.version
    tag = (if_match or "").strip().removeprefix("W/").strip('"')
    if not tag.isdigit():
        raise HTTPException(status_code=428, detail=VERSION_NEEDED)
    return int(tag)


@router.get("/{flow_id}/summary", response_class=HTMLResponse)
@router.get("/{flow_id}/sessions/{session_id}/summary", response_class=HTMLResponse)
async def read_summary(
    request: Request,
    flow_id: UUID,
    session_id: str,
    user: CurrentActiveUser,
    session: Database,
    context_id: ContextQuery = "",
    done: Annotated[str | None, Query(include_in_schema=False)] = None,
) -> HTMLResponse:
    """The summary as a page, linked from the Session memory step: the session's counts and dates, and the summary
    in a form its owner can save or reset (``summary_page``); after a reset (its row gone), what the reset did."""
    try:
        row = await _row(session, flow_id, user, session_id, context_id)
    except HTTPException:
        if done != summary_page.RESET:
            raise
        await _require_flow(session, flow_id, user)  # says "reset" only in a flow of the caller's
        page = summary_page.reset_page(str(flow_id), session_id, to_root=_to_root(request))
        return HTMLResponse(page, headers=summary_page.HEADERS)
    return _page(request, row, notice=done)


@router.post("/{flow_id}/summary", include_in_schema=False)
@router.post("/{flow_id}/sessions/{session_id}/summary", include_in_schema=False)
async def change_summary_from_the_page(
    request: Request,
    flow_id: UUID,
    session_id: str,
    user: CurrentActiveUser,
    session: Database,
    context_id: ContextQuery = "",
) -> Response:
    """The page's form: save the summary (checked as a PUT's) on the version the page showed, or reset it, then back
    to the page (303). A save on a version a fold or another edit has moved since is refused (409): the page shows
    the summary as it is now beside the text typed, which a second save puts in its place.

    Refused (403) when a browser sent it from another site (``summary_page.same_origin``): Langflow's
    login cookie goes with a form posted from anywhere unless its SameSite setting holds it back.
    """
    _require_same_origin(request)
    row = await _row(session, flow_id, user, session_id, context_id)
    form = await request.form()
    if form.get("action") == "reset":
        await _reset(session, row)
        return _back_to_the_page(request, summary_page.RESET)
    typed, version = form.get("summary", ""), form.get("version", "")
    if not isinstance(typed, str) or not isinstance(version, str) or not version.isdigit():
        return _page(request, row, error=summary_page.NOT_TEXT, status_code=422)
    draft = typed.replace("\r\n", "\n")  # a form sends a text box's lines as CRLF
    try:
        summary = validation.validate_edited_summary(draft)
    except validation.SummaryRejectedError as error:
        return _page(request, row, error=str(error), draft=draft, status_code=422)
    if not await _save(session, row, summary, int(version)):
        return _page(request, row, error=summary_page.CHANGED_MEANWHILE, draft=draft, conflict=True, status_code=409)
    return _back_to_the_page(request, summary_page.SAVED)


async def _save(session: AsyncSession, row: SessionMemoryState, summary: str, version: int) -> bool:
    """Replace ``row``'s summary with a checked one if it is still at ``version``, as a PUT or the page's form does;
    whether it was."""
    key = SessionKey(flow_id=row.flow_id, owner_id=row.owner_id, session_id=row.session_id, context_id=row.context_id)
    if row.version != version:
        return False
    saved = await store.replace_summary(session, key, summary, version=version)
    await session.commit()
    return saved


async def _reset(session: AsyncSession, row: SessionMemoryState) -> None:
    """Delete ``row``: the next turn folds its session again from its start."""
    await cleanup.reset(
        session, row.flow_id, owner_id=row.owner_id, session_id=row.session_id, context_id=row.context_id
    )
    await session.commit()


def _require_same_origin(request: Request) -> None:
    if not summary_page.same_origin(request.headers, request.url):
        raise HTTPException(
            status_code=403, detail="A summary is changed from its own page or the API, not another site"
        )


def _to_root(request: Request) -> str:
    """From the page's address to Langflow's root, by the route that served it (either address of the page)."""
    return summary_page.to_root(request.scope["route"].path)


def _page(request: Request, row: SessionMemoryState, *, status_code: int = 200, **shown) -> HTMLResponse:
    state = summary_page.PageState(
        flow_id=str(row.flow_id),
        session_id=row.session_id,
        context_id=row.context_id,
        summary=row.summary,
        folded_count=row.folded_count,
        words=validation.word_count(row.summary),
        created_at=row.created_at,
        updated_at=row.updated_at,
        paused_until=row.paused_until,
        last_error=row.last_error,
        version=row.version,
    )
    return HTMLResponse(
        summary_page.summary_page(state, to_root=_to_root(request), **shown),
        status_code=status_code,
        headers=summary_page.HEADERS,
    )


def _back_to_the_page(request: Request, done: str) -> RedirectResponse:
    """The page again, by a relative address (it holds behind any proxy or path prefix), saying what was done."""
    query = urlencode([*((k, v) for k, v in request.query_params.multi_items() if k != "done"), ("done", done)])
    return RedirectResponse(f"summary?{query}", status_code=303)


@router.get("/{flow_id}/sessions/{session_id}/notes", include_in_schema=False)
async def read_summary_at_its_old_address(request: Request) -> RedirectResponse:
    """Where the summary page was before it took the summary's name: steps stored then still link here.

    A relative address (the sibling ``summary``), so that it holds behind any proxy or path prefix.
    """
    query = request.url.query
    return RedirectResponse(f"summary?{query}" if query else "summary", status_code=308)


@router.put("/{flow_id}/session", response_model=SessionMemory)
@router.put("/{flow_id}/sessions/{session_id}", response_model=SessionMemory)
async def edit_session(
    request: Request,
    response: Response,
    flow_id: UUID,
    session_id: str,
    edit: SummaryEdit,
    user: CurrentActiveUser,
    session: Database,
    context_id: ContextQuery = "",
) -> SessionMemory:
    """Replace the summary (checked as a fold's is: see ``validation.validate_edited_summary``) on the version the
    caller read (body ``version`` or If-Match; 428 without, 409 when a fold or another edit moved it since); clears a
    pause.

    The next turn sends it. Refused (403) when a browser sent it from another site, as the page's form.
    """
    _require_same_origin(request)
    row = await _row(session, flow_id, user, session_id, context_id)
    version = _version_read(edit, request.headers.get("if-match"))
    try:
        summary = validation.validate_edited_summary(edit.summary)
    except validation.SummaryRejectedError as error:
        raise HTTPException(status_code=422, detail=str(error)) from None
    if not await _save(session, row, summary, version):
        raise HTTPException(status_code=409, detail=STALE.format(read=version, now=row.version))
    saved = await _row(session, flow_id, user, session_id, context_id)
    response.headers["ETag"] = _etag(saved.version)
    return _memory(saved)


@router.delete("/{flow_id}/session", status_code=204)
@router.delete("/{flow_id}/sessions/{session_id}", status_code=204)
async def reset_session(
    request: Request,
    flow_id: UUID,
    session_id: str,
    user: CurrentActiveUser,
    session: Database,
    context_id: ContextQuery = "",
) -> Response:
    """Forget the summary: the next turn folds the session again from its start. Refused (403) when a browser sent
    it from another site."""
    _require_same_origin(request)
    await _reset(session, await _row(session, flow_id, user, session_id, context_id))
    return Response(status_code=204)
