"""Summaries follow Langflow's hardest deletion paths: erasure of people, and shared-playground sessions.

Each test makes its chats through Langflow's real HTTP API, checks the setup with SQL,
drives one real endpoint, then checks ``message`` and ``session_memory_state`` with SQL.
A summary is a copy of what was said, so when Langflow erases or moves the messages, the
summary must go (or move) with them, and nobody else's summary may be touched.
"""

import uuid

from langflow.api.utils.flow_utils import compute_virtual_flow_id
from lfx.memory.flow_context import derive_message_owner_uuid
from lfx.services.authorization.base import PUBLIC_ANONYMOUS_ACTOR_ID

from tests.app.langflow_client import BATCH, turns_to_fold
from tests.app.langflow_subjects import (
    Builder,
    copy_chat_to_flow,
    current_user_id,
    data_subject_requests_enabled,
    flow_exists,
    make_public,
    message_count,
    message_keys,
    multi_user_mode,
    run_as_end_user,
    seed_state_row,
    serving_end_users,
    shared_playground_turn,
    state_rows,
    wait_for_request,
)

PUBLIC_OWNER = PUBLIC_ANONYMOUS_ACTOR_ID  # owns every shared-playground message; the virtual flow id tells users apart
FOLDING_TURNS = turns_to_fold(2) + 1  # with n_messages=2, one turn past the first fold: one batch (12 at the default)


def test_end_user_erase_removes_their_summaries(langflow):
    flow_id, agent_id = langflow.create_agent_flow(session_memory=True, n_messages=2)
    builder_id = current_user_id(langflow)
    end_user = f"customer-{uuid.uuid4().hex[:8]}"
    end_user_owner = derive_message_owner_uuid(end_user)
    session = f"{end_user}::support-chat"  # what the serving plane stores for the end user's "support-chat"

    # The builder, in the editor plane, chats in the same flow under the very same session name.
    langflow.run(flow_id, "Builder here, testing the bot.", session_id=session)
    seed_state_row(langflow, flow_id=flow_id, owner_id=builder_id, session_id=session, summary="builder's notes")
    # The end user, through a gateway that sends the trusted end-user header, talks long enough to fold.
    with serving_end_users():
        for turn in range(FOLDING_TURNS):
            run_as_end_user(
                langflow,
                flow_id,
                f"My order number is 4711, turn {turn}.",
                end_user_id=end_user,
                session_id="support-chat",
                tweaks={agent_id: {"summarize_older_messages": True}},
            )

    assert message_keys(langflow, flow_id=flow_id) == {(builder_id, session), (end_user_owner, session)}
    assert message_count(langflow, flow_id=flow_id, owner_id=end_user_owner) == 2 * FOLDING_TURNS
    [(_, _, summary, folded)] = state_rows(langflow, flow_id=flow_id, owner_id=end_user_owner)
    assert (folded, bool(summary)) == (BATCH, True), "the end user's turns should have folded once"
    assert state_rows(langflow, flow_id=flow_id, owner_id=builder_id) == [(builder_id, session, "builder's notes", 20)]

    with data_subject_requests_enabled():
        response = langflow.http.post(
            "/api/v1/data-subjects/erase", json={"subject_type": "end_user", "end_user_id": end_user}
        )
        assert response.status_code == 202, response.text
        finished = wait_for_request(langflow, response.json()["id"])
    assert finished["counts"]["messages"] == 2 * FOLDING_TURNS

    assert message_count(langflow, flow_id=flow_id, owner_id=end_user_owner) == 0
    assert message_count(langflow, flow_id=flow_id, owner_id=builder_id, session_id=session) == 2
    assert state_rows(langflow, flow_id=flow_id, owner_id=builder_id) == [(builder_id, session, "builder's notes", 20)]
    assert state_rows(langflow, flow_id=flow_id, owner_id=end_user_owner) == [], "the erased end user's summary"


def test_builder_account_erase_removes_their_summaries_in_every_flow(langflow):
    main_id = current_user_id(langflow)
    builder = Builder(langflow, f"builder-{uuid.uuid4().hex[:8]}")
    session = f"planning-{uuid.uuid4().hex[:8]}"
    main_flow, _ = langflow.create_agent_flow(session_memory=True, n_messages=2)
    builder_flow, _ = builder.create_agent_flow(session_memory=True, n_messages=2)

    # The builder chats in their own flow, and (as if it were shared with them) in the main user's flow.
    builder.run(builder_flow, "Our budget is 40k.", session_id=session)
    assert copy_chat_to_flow(langflow, builder.id, session, from_flow=builder_flow, to_flow=main_flow) == 2
    langflow.run(main_flow, "Main user, same session name.", session_id=session)
    seed_state_row(langflow, flow_id=builder_flow, owner_id=builder.id, session_id=session, summary="budget 40k")
    seed_state_row(langflow, flow_id=main_flow, owner_id=builder.id, session_id=session, summary="helping")
    seed_state_row(langflow, flow_id=main_flow, owner_id=main_id, session_id=session, summary="main notes")

    assert message_keys(langflow, flow_id=builder_flow) == {(builder.id, session)}
    assert message_keys(langflow, flow_id=main_flow) == {(builder.id, session), (main_id, session)}
    assert len(state_rows(langflow, flow_id=builder_flow)) == 1
    assert len(state_rows(langflow, flow_id=main_flow)) == 2

    response = langflow.http.delete(f"/api/v1/users/{builder.id}")  # deleting an account is a builder erase
    assert response.status_code == 202, response.text
    with data_subject_requests_enabled():
        finished = wait_for_request(langflow, response.json()["request_id"])
    assert finished["subject_type"] == "builder"
    assert finished["counts"]["messages_elsewhere"] == 2

    assert not flow_exists(langflow, builder_flow)
    assert flow_exists(langflow, main_flow)
    assert message_count(langflow, flow_id=builder_flow) == 0
    assert message_count(langflow, flow_id=main_flow, owner_id=builder.id) == 0
    assert message_count(langflow, flow_id=main_flow, owner_id=main_id) == 2
    assert state_rows(langflow, flow_id=main_flow, owner_id=main_id) == [(main_id, session, "main notes", 20)]
    assert state_rows(langflow, flow_id=main_flow, owner_id=builder.id) == [], "their summary in another's flow"
    assert state_rows(langflow, flow_id=builder_flow) == [], "the summary in their own (deleted) flow"


def _shared_playground_chats(langflow, sessions: list[str]) -> tuple[str, uuid.UUID, dict[str, str]]:
    """A public flow chatted with in the shareable playground by the logged-in user, one turn per session.

    Returns the source flow id, the virtual flow id Langflow stored the messages under, and the
    stored session id of each requested session. Langflow stores them under the user's virtual
    flow id, owned by the public anonymous principal, in sessions namespaced by the virtual id.
    """
    flow_id, _ = langflow.create_agent_flow(session_memory=True, n_messages=2)
    make_public(langflow, flow_id)
    virtual_flow_id = compute_virtual_flow_id(current_user_id(langflow), uuid.UUID(flow_id), principal_type="user")
    with multi_user_mode():
        for session in sessions:
            shared_playground_turn(langflow, flow_id, f"Hello from {session}.", session=session)
        listed = langflow.http.get("/api/v1/monitor/messages/shared/sessions", params={"source_flow_id": flow_id})
    assert listed.status_code == 200, listed.text

    stored = {session: f"{virtual_flow_id}:{session}" for session in sessions}
    assert message_keys(langflow, flow_id=virtual_flow_id) == {(PUBLIC_OWNER, s) for s in stored.values()}
    assert message_count(langflow, flow_id=flow_id) == 0, "nothing is stored under the source flow id"
    assert sorted(listed.json()) == sorted(stored.values())
    return flow_id, virtual_flow_id, stored


def test_shared_session_delete_removes_its_summary(langflow):
    flow_id, virtual_flow_id, stored = _shared_playground_chats(langflow, ["trip", "other"])
    doomed, kept = stored["trip"], stored["other"]
    seed_state_row(langflow, flow_id=virtual_flow_id, owner_id=PUBLIC_OWNER, session_id=doomed, summary="trip notes")
    seed_state_row(langflow, flow_id=virtual_flow_id, owner_id=PUBLIC_OWNER, session_id=kept, summary="other notes")
    assert message_count(langflow, flow_id=virtual_flow_id, session_id=doomed) == 2
    assert len(state_rows(langflow, flow_id=virtual_flow_id)) == 2

    with multi_user_mode():
        response = langflow.http.delete(
            f"/api/v1/monitor/messages/shared/session/{doomed}", params={"source_flow_id": flow_id}
        )
    assert response.status_code == 204, response.text

    assert message_count(langflow, flow_id=virtual_flow_id, session_id=doomed) == 0
    assert message_count(langflow, flow_id=virtual_flow_id, session_id=kept) == 2
    assert state_rows(langflow, flow_id=virtual_flow_id, session_id=kept) == [(PUBLIC_OWNER, kept, "other notes", 20)]
    assert state_rows(langflow, flow_id=virtual_flow_id, session_id=doomed) == [], "the deleted session's summary"


def test_shared_session_rename_moves_its_summary(langflow):
    flow_id, virtual_flow_id, stored = _shared_playground_chats(langflow, ["draft"])
    old, new = stored["draft"], f"{virtual_flow_id}:final"
    seed_state_row(langflow, flow_id=virtual_flow_id, owner_id=PUBLIC_OWNER, session_id=old, summary="draft notes")
    assert message_count(langflow, flow_id=virtual_flow_id, session_id=old) == 2

    with multi_user_mode():
        response = langflow.http.patch(
            f"/api/v1/monitor/messages/shared/session/{old}",
            params={"new_session_id": new, "source_flow_id": flow_id},
        )
    assert response.status_code == 200, response.text
    assert {message["session_id"] for message in response.json()} == {new}

    assert message_count(langflow, flow_id=virtual_flow_id, session_id=old) == 0
    assert message_count(langflow, flow_id=virtual_flow_id, session_id=new) == 2
    assert state_rows(langflow, flow_id=virtual_flow_id) == [(PUBLIC_OWNER, new, "draft notes", 20)], (
        "the summary moves"
    )
