"""Reads and writes of ``session_memory_state``: one bounded, indexed statement each.

Every function takes the caller's ``AsyncSession`` (from Langflow's session maker in the
app, see ``runtime``; a test engine's session in tests) so the caller decides the transaction. Deleting
rows when Langflow deletes messages, sessions or flows is ``cleanup``'s job: it runs inside
Langflow's own transaction.
"""

from datetime import datetime, timedelta
from uuid import UUID

from sqlalchemy import and_, delete, exists, func, or_, select, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from langflow_session_memory.services.session_memory.rules.policy import BOUNDS
from langflow_session_memory.services.session_memory.rules.state import Cursor, SessionKey, SessionState
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage
from langflow_session_memory.services.session_memory.storage.model import SessionMemoryState, utc_now

KEY_COLUMNS = ("flow_id", "owner_id", "session_id", "context_id")
# What a turn reads of the row (``to_state``): every column but its id, its key and its timestamps, so a column
# added to the table reaches every reader, the turn's one statement (``messages.newest_unfolded``) included.
STATE_COLUMNS = tuple(
    column
    for column in SessionMemoryState.__table__.c
    if column.name not in {"id", *KEY_COLUMNS, "created_at", "updated_at"}
)


def key_filter(key: SessionKey):
    table = SessionMemoryState.__table__.c
    return and_(
        table.flow_id == key.flow_id,
        table.owner_id == key.owner_id,
        table.session_id == key.session_id,
        table.context_id == key.context_id,
    )


def to_state(key: SessionKey, row) -> SessionState:
    """The row (any result row with the state's columns) as the value a turn works with."""
    cursor = None
    if row.cursor_timestamp is not None and row.cursor_message_id is not None:
        cursor = Cursor(timestamp=row.cursor_timestamp, message_id=row.cursor_message_id)
    return SessionState(
        key=key,
        summary=row.summary,
        cursor=cursor,
        folded_count=row.folded_count,
        version=row.version,
        paused_until=row.paused_until,
        last_error=row.last_error,
        fold_claimed_until=row.fold_claimed_until,
        last_call_tokens=row.last_call_tokens,
        unreported_usage=TokenUsage(
            input_tokens=row.unreported_input_tokens or 0,
            output_tokens=row.unreported_output_tokens or 0,
            cached_input_tokens=row.unreported_cached_input_tokens or 0,
        ),
        fold_batch_limit=row.fold_batch_limit,
    )


async def load(session: AsyncSession, key: SessionKey) -> SessionState | None:
    table = SessionMemoryState.__table__
    row = (await session.execute(select(table).where(key_filter(key)))).first()
    return to_state(key, row) if row else None


async def create_if_absent(session: AsyncSession, key: SessionKey) -> SessionState:
    """Insert an empty row unless one exists; under an insert race the unique key decides."""
    now = utc_now()
    values = {
        "flow_id": key.flow_id,
        "owner_id": key.owner_id,
        "session_id": key.session_id,
        "context_id": key.context_id,
        "created_at": now,
        "updated_at": now,
    }
    insert = postgresql_insert if session.bind.dialect.name == "postgresql" else sqlite_insert
    statement = insert(SessionMemoryState.__table__).values(**values).on_conflict_do_nothing(index_elements=KEY_COLUMNS)
    await session.execute(statement)
    return await load(session, key)


async def compare_and_swap(session: AsyncSession, seen: SessionState, new: SessionState) -> bool:
    """Write ``new``'s summary and cursor only if the row still has ``seen.version``; True if we won.

    The stored version becomes ``seen.version + 1`` whatever ``new.version`` says.
    """
    table = SessionMemoryState.__table__
    statement = (
        update(table)
        .where(key_filter(seen.key), table.c.version == seen.version)
        .values(
            summary=new.summary,
            cursor_timestamp=new.cursor.timestamp if new.cursor else None,
            cursor_message_id=new.cursor.message_id if new.cursor else None,
            folded_count=new.folded_count,
            version=seen.version + 1,
            paused_until=new.paused_until,
            last_error=new.last_error,
            fold_batch_limit=new.fold_batch_limit,
            updated_at=utc_now(),
        )
    )
    result = await session.execute(statement)
    return result.rowcount == 1


async def claim_fold(
    session: AsyncSession, seen: SessionState, until: datetime, now: datetime, longest_claim: timedelta
) -> bool:
    """Take the session's fold until ``until`` if the row is still ``seen`` and no claim holds; True if taken.

    A claim holds while it has not run out and reaches no further than ``longest_claim``
    from now (see :meth:`SessionState.is_claimed`). The version is not bumped: the claim
    only keeps other workers from calling the model for the same batch; the fold itself
    still commits with :func:`compare_and_swap`.
    """
    table = SessionMemoryState.__table__
    claim = table.c.fold_claimed_until
    statement = (
        update(table)
        .where(
            key_filter(seen.key),
            table.c.version == seen.version,
            or_(claim.is_(None), claim <= now, claim > now + longest_claim),
        )
        .values(fold_claimed_until=until)
    )
    return (await session.execute(statement)).rowcount == 1


async def release_fold(session: AsyncSession, key: SessionKey, until: datetime) -> None:
    """Give the claim back, unless it ran out and another worker holds its own claim now."""
    table = SessionMemoryState.__table__
    await session.execute(
        update(table).where(key_filter(key), table.c.fold_claimed_until == until).values(fold_claimed_until=None)
    )


async def add_unreported_usage(session: AsyncSession, key: SessionKey, usage: TokenUsage) -> None:
    """Keep the tokens of a fold that ran after an answer until a turn reports them (no row: nothing to keep)."""
    table = SessionMemoryState.__table__.c
    await session.execute(
        update(SessionMemoryState.__table__)
        .where(key_filter(key))
        .values(
            unreported_input_tokens=func.coalesce(table.unreported_input_tokens, 0) + usage.input_tokens,
            unreported_output_tokens=func.coalesce(table.unreported_output_tokens, 0) + usage.output_tokens,
            unreported_cached_input_tokens=func.coalesce(table.unreported_cached_input_tokens, 0)
            + usage.cached_input_tokens,
        )
    )


async def take_unreported_usage(session: AsyncSession, seen: SessionState) -> bool:
    """Clear the unreported tokens ``seen`` holds, if no fold added any since; True if this caller reports them.

    Two turns that read the same figures cannot both take them; a fold that adds tokens
    in between makes the take fail, and the next turn reports the larger figure.
    """
    table = SessionMemoryState.__table__
    statement = (
        update(table)
        .where(
            key_filter(seen.key),
            func.coalesce(table.c.unreported_input_tokens, 0) == seen.unreported_usage.input_tokens,
            func.coalesce(table.c.unreported_output_tokens, 0) == seen.unreported_usage.output_tokens,
        )
        .values(unreported_input_tokens=0, unreported_output_tokens=0, unreported_cached_input_tokens=0)
    )
    return (await session.execute(statement)).rowcount == 1


async def record_call_size(session: AsyncSession, key: SessionKey, tokens: int | None) -> None:
    """Keep the size of the last model call of a large turn (None clears it) for the next early-fold check."""
    table = SessionMemoryState.__table__
    await session.execute(update(table).where(key_filter(key)).values(last_call_tokens=tokens))


async def pause(
    session: AsyncSession, key: SessionKey, until: datetime, reason: str, fold_batch_limit: int | None = None
) -> None:
    """Stop folding for this key until ``until``, visible to every worker; summary and cursor stay.

    ``fold_batch_limit``: how many messages the attempt after the pause may fold in one request
    (None: the policy's batch size). Only an existing row is paused: the fold's claim created it,
    so a missing row means the session was deleted while the model ran, and nothing of it may come back.
    """
    table = SessionMemoryState.__table__
    await session.execute(
        update(table)
        .where(key_filter(key))
        .values(paused_until=until, last_error=reason, fold_batch_limit=fold_batch_limit, updated_at=utc_now())
    )


def has_messages(state_table):
    """Correlated EXISTS over Langflow's ``message`` table, with Langflow's own history scoping: the one
    "this row's session still has messages" test (the sweep here, the cleanup listeners in ``cleanup``)."""
    from langflow.services.database.models.message.model import MessageTable

    message = MessageTable.__table__.c
    return exists().where(
        message.flow_id == state_table.c.flow_id,
        message.user_id == state_table.c.owner_id,
        message.session_id == state_table.c.session_id,
    )


async def sweep_orphans(session: AsyncSession, limit: int = BOUNDS.sweep_batch) -> int:
    """Delete up to ``limit`` rows whose session has no message left (the cleanup backstop).

    The context is left out of the match on purpose: a session that still has messages
    keeps its rows, and a row survives at worst until its session is deleted.
    """
    table = SessionMemoryState.__table__
    orphan_ids = select(table.c.id).where(~has_messages(table)).limit(limit)
    ids = list((await session.execute(orphan_ids)).scalars())
    if not ids:
        return 0
    result = await session.execute(delete(table).where(table.c.id.in_(ids)))
    return result.rowcount


def _scope(flow_id: UUID, owner_id: UUID | None = None, session_id: str | None = None, context_id: str | None = None):
    """Rows of a flow, narrowed by whichever of owner, session and context are given."""
    table = SessionMemoryState.__table__.c
    conditions = [table.flow_id == flow_id]
    for column, value in ((table.owner_id, owner_id), (table.session_id, session_id), (table.context_id, context_id)):
        if value is not None:
            conditions.append(column == value)
    return and_(*conditions)


async def find(
    session: AsyncSession,
    flow_id: UUID,
    *,
    owner_id: UUID | None = None,
    session_id: str | None = None,
    context_id: str | None = None,
    limit: int = BOUNDS.list_limit,
) -> list[SessionMemoryState]:
    """The flow's rows (newest update first), at most ``limit``; for the REST API and the operator CLI."""
    table = SessionMemoryState.__table__
    statement = (
        select(table)
        .where(_scope(flow_id, owner_id, session_id, context_id))
        .order_by(table.c.updated_at.desc(), table.c.id.desc())
        .limit(limit)
    )
    return [SessionMemoryState.model_validate(dict(row._mapping)) for row in await session.execute(statement)]


async def replace_summary(session: AsyncSession, key: SessionKey, summary: str, *, version: int) -> bool:
    """A person's correction of the summary, made on the row as they read it at ``version``: False, and nothing
    changed, when a fold or another edit moved it since (their save would erase what that one wrote). New version (a
    fold in flight then cannot overwrite it), no pause."""
    table = SessionMemoryState.__table__
    statement = (
        update(table)
        .where(key_filter(key), table.c.version == version)
        .values(summary=summary, version=table.c.version + 1, paused_until=None, last_error=None, updated_at=utc_now())
    )
    return (await session.execute(statement)).rowcount == 1


async def delete_rows(
    session: AsyncSession, flow_id: UUID, *, owner_id: UUID | None, session_id: str, context_id: str | None
) -> int:
    """Delete the rows of one session (one context, or all of them); how many (``cleanup.reset`` is a reset)."""
    table = SessionMemoryState.__table__
    return (await session.execute(delete(table).where(_scope(flow_id, owner_id, session_id, context_id)))).rowcount
