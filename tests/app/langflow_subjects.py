"""Data subjects, builders and shared playgrounds of an in-process Langflow, for the cleanup tests.

Everything here goes through Langflow's public HTTP API; the only direct SQL is the
``session_memory_state`` row a test seeds (what our Agent would have written after a fold).
Settings that Langflow reads per request (feature flag, serving end-user header, auto-login)
are switched for the duration of one ``with`` block and restored after it.
"""

import json
import time
import uuid
from contextlib import contextmanager

from langflow.services.database.models.flow.model import Flow
from sqlalchemy import Table, func, insert, select

from tests.app.langflow_client import MESSAGE, STATE, LangflowClient, insert_state_row

END_USER_HEADER = "X-End-User-Id"
ERASE_TIMEOUT_SECONDS = 45.0
FLOW = Flow.__table__


@contextmanager
def data_subject_requests_enabled():
    """``LANGFLOW_FEATURE_DATA_SUBJECT_REQUESTS``: read on every request of the data-subjects API."""
    from lfx.services.settings.feature_flags import FEATURE_FLAGS

    saved = FEATURE_FLAGS.data_subject_requests
    FEATURE_FLAGS.data_subject_requests = True
    try:
        yield
    finally:
        FEATURE_FLAGS.data_subject_requests = saved


@contextmanager
def serving_end_users(header: str = END_USER_HEADER):
    """The serving plane trusts ``header`` as the end-user id (a gateway in front injects it)."""
    from lfx.services.deps import get_settings_service

    settings = get_settings_service().settings
    saved = (settings.serving_end_user_header, settings.serving_trust_proxy_headers)
    settings.serving_end_user_header, settings.serving_trust_proxy_headers = header, True
    try:
        yield header
    finally:
        settings.serving_end_user_header, settings.serving_trust_proxy_headers = saved


@contextmanager
def multi_user_mode():
    """AUTO_LOGIN off: a logged-in user's shared-playground messages go under the "user" virtual flow id.

    With auto-login on, the public build keys them by the ``client_id`` cookie instead, and the
    ``/monitor/messages/shared/...`` endpoints (which always derive from the user) never see them.
    """
    from lfx.services.deps import get_settings_service

    auth = get_settings_service().auth_settings
    saved = auth.AUTO_LOGIN
    auth.AUTO_LOGIN = False
    try:
        yield
    finally:
        auth.AUTO_LOGIN = saved


def current_user_id(langflow: LangflowClient) -> uuid.UUID:
    return langflow.user_id


def run_as_end_user(
    langflow: LangflowClient, flow_id: str, text_: str, *, end_user_id: str, session_id: str, tweaks=None
):
    """``POST /api/v1/run`` as the gateway would send it: the API key plus the trusted end-user header."""
    return langflow.run(
        flow_id, text_, session_id=session_id, tweaks=tweaks, headers={END_USER_HEADER: end_user_id}
    ).json()


class Builder:
    """A second (non-superuser) account: created and activated by the superuser, then logged in."""

    def __init__(self, langflow: LangflowClient, username: str):
        self.langflow = langflow
        self.username = username
        password = f"pw-{uuid.uuid4().hex}"
        created = langflow.http.post("/api/v1/users/", json={"username": username, "password": password})
        assert created.status_code == 201, created.text
        self.id = uuid.UUID(created.json()["id"])
        activated = langflow.http.patch(f"/api/v1/users/{self.id}", json={"is_active": True})
        assert activated.status_code == 200, activated.text
        # /login sets the builder's auth cookies on the shared client, and some routes (the public
        # build) prefer a cookie to the Authorization header: keep the superuser's cookies as they were.
        cookies = type(langflow.http.cookies)(langflow.http.cookies)  # a copy
        login = langflow.http.post("/api/v1/login", data={"username": username, "password": password})
        langflow.http.cookies = cookies
        assert login.status_code == 200, login.text
        self.headers = {"Authorization": f"Bearer {login.json()['access_token']}"}
        self.api_key = self.post("/api/v1/api_key/", json={"name": "builder"}).json()["api_key"]

    def post(self, path: str, **kwargs):
        response = self.langflow.http.post(path, headers=self.headers, **kwargs)
        assert response.status_code < 300, response.text
        return response

    def create_agent_flow(self, *, session_memory: bool, n_messages: int) -> tuple[str, str]:
        """The same flow as ``LangflowClient.create_agent_flow``, owned by this builder."""
        saved = self.langflow.http.headers["Authorization"]
        self.langflow.http.headers["Authorization"] = self.headers["Authorization"]
        try:
            return self.langflow.create_agent_flow(session_memory=session_memory, n_messages=n_messages)
        finally:
            self.langflow.http.headers["Authorization"] = saved

    def run(self, flow_id: str, text_: str, *, session_id: str, tweaks=None):
        return self.langflow.run(
            flow_id, text_, session_id=session_id, tweaks=tweaks, headers={"x-api-key": self.api_key}
        ).json()


def make_public(langflow: LangflowClient, flow_id: str) -> None:
    response = langflow.http.patch(f"/api/v1/flows/{flow_id}", json={"access_type": "PUBLIC"})
    assert response.status_code == 200, response.text


def shared_playground_turn(langflow: LangflowClient, flow_id: str, text_: str, *, session: str) -> list[dict]:
    """One chat turn in the shareable playground: ``build_public_tmp`` then its event stream, as the UI does."""
    started = langflow.http.post(
        f"/api/v1/build_public_tmp/{flow_id}/flow",
        json={"inputs": {"input_value": text_, "session": session, "type": "chat"}},
    )
    assert started.status_code == 200, started.text
    job_id = started.json()["job_id"]
    events = langflow.http.get(f"/api/v1/build_public_tmp/{job_id}/events")
    assert events.status_code == 200, events.text
    parsed = [json.loads(line) for line in events.text.splitlines() if line.strip()]
    kinds = [event.get("event") for event in parsed]
    assert "end" in kinds, kinds
    assert "error" not in kinds, parsed
    return parsed


def wait_for_request(langflow: LangflowClient, request_id: str, timeout: float = ERASE_TIMEOUT_SECONDS) -> dict:
    """Poll ``GET /api/v1/data-subjects/requests/{id}`` until the erase worker closes the request."""
    deadline = time.monotonic() + timeout
    while True:
        response = langflow.http.get(f"/api/v1/data-subjects/requests/{request_id}")
        assert response.status_code == 200, response.text
        request = response.json()
        if request["status"] == "done":
            return request
        assert request["error"] is None, f"the erase failed: {request}"
        assert time.monotonic() < deadline, f"the erase did not finish in {timeout} s: {request}"
        time.sleep(0.25)


def seed_state_row(
    langflow: LangflowClient,
    *,
    flow_id,
    owner_id,
    session_id: str,
    summary: str,
    folded_count: int = 20,
) -> None:
    """A ``session_memory_state`` row as a fold leaves it, with the cursor on the key's newest message."""
    key = _key(MESSAGE, flow_id, owner_id, session_id)
    newest = select(MESSAGE.c.timestamp, MESSAGE.c.id).where(*key)
    newest = newest.order_by(MESSAGE.c.timestamp.desc(), MESSAGE.c.id.desc()).limit(1)
    with langflow.engine.begin() as connection:
        [cursor] = connection.execute(newest).all()
        insert_state_row(
            connection,
            flow_id=flow_id,
            owner_id=owner_id,
            session_id=session_id,
            summary=summary,
            cursor=tuple(cursor),
            folded_count=folded_count,
        )


def state_rows(langflow: LangflowClient, *, flow_id, owner_id=None, session_id: str | None = None) -> list[tuple]:
    """(owner_id, session_id, summary, folded_count) of the state rows of a flow (real or virtual id)."""
    query = select(STATE.c.owner_id, STATE.c.session_id, STATE.c.summary, STATE.c.folded_count).where(
        *_key(STATE, flow_id, owner_id, session_id, owner_column="owner_id")
    )
    with langflow.engine.connect() as connection:
        return [tuple(row) for row in connection.execute(query.order_by(STATE.c.session_id, STATE.c.owner_id))]


def message_count(langflow: LangflowClient, *, flow_id, owner_id=None, session_id: str | None = None) -> int:
    query = select(func.count()).select_from(MESSAGE).where(*_key(MESSAGE, flow_id, owner_id, session_id))
    with langflow.engine.connect() as connection:
        return connection.execute(query).scalar_one()


def message_keys(langflow: LangflowClient, *, flow_id) -> set[tuple[uuid.UUID, str]]:
    """The distinct (owner, session) of a flow's messages: how Langflow keyed them."""
    query = select(MESSAGE.c.user_id, MESSAGE.c.session_id).where(*_key(MESSAGE, flow_id)).distinct()
    with langflow.engine.connect() as connection:
        return {(owner, session) for owner, session in connection.execute(query)}


def copy_chat_to_flow(langflow: LangflowClient, owner_id, session_id: str, *, from_flow, to_flow) -> int:
    """Store a person's chat rows again under another flow, column for column as Langflow stored them.

    For messages a person left in a flow they do not own (a flow shared with them): over HTTP a
    builder cannot run another builder's flow without an authorization plugin.
    """
    query = select(MESSAGE).where(*_key(MESSAGE, from_flow, owner_id, session_id))
    with langflow.engine.begin() as connection:
        rows = [dict(row._mapping) for row in connection.execute(query)]
        for row in rows:
            row.update(id=uuid.uuid4(), flow_id=uuid.UUID(str(to_flow)))
        connection.execute(insert(MESSAGE), rows)
    return len(rows)


def flow_exists(langflow: LangflowClient, flow_id) -> bool:
    query = select(func.count()).select_from(FLOW).where(FLOW.c.id == uuid.UUID(str(flow_id)))
    with langflow.engine.connect() as connection:
        return connection.execute(query).scalar_one() == 1


def _key(table: Table, flow_id, owner_id=None, session_id=None, *, owner_column: str = "user_id") -> list:
    """Typed predicates, so each backend binds UUIDs and times the way it stores them."""
    clauses = [table.c.flow_id == uuid.UUID(str(flow_id))]
    if owner_id is not None:
        clauses.append(table.c[owner_column] == uuid.UUID(str(owner_id)))
    if session_id is not None:
        clauses.append(table.c.session_id == session_id)
    return clauses
