"""Property tests of the pure fold planner: order, no duplicates, nothing lost but a bounded backlog."""

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from langflow_session_memory.services.session_memory.rules.planner import plan_fold
from langflow_session_memory.services.session_memory.rules.policy import DEFAULT_POLICY

BATCH = DEFAULT_POLICY.batch_size


@dataclass(frozen=True)
class Msg:
    timestamp: int
    id: int


def position(message: Msg) -> tuple:
    """The order every query and plan keeps: ``(timestamp, id)``."""
    return (message.timestamp, message.id)


def session(unfolded: int, window: int) -> tuple[list[Msg], list[Msg]]:
    """An unfolded stretch followed by the window, with tied timestamps in pairs."""
    messages = [Msg(timestamp=i // 2, id=i) for i in range(unfolded + window)]
    return messages[:unfolded], messages[unfolded:]


def read_gap(unfolded: list[Msg]) -> list[Msg]:
    """What the gap query returns: ascending, LIMIT DEFAULT_POLICY.gap_limit."""
    return sorted(unfolded, key=position)[: DEFAULT_POLICY.gap_limit]


def plan_read(unfolded: list[Msg], *, paused: bool, after_answer: bool = False):
    """The plan of a turn (or of the fold after its answer) for the gap as read, told whether the read stopped."""
    return plan_fold(
        read_gap(unfolded),
        paused=paused,
        after_answer=after_answer,
        whole_gap=len(unfolded) < DEFAULT_POLICY.gap_limit,
    )


@given(unfolded=st.integers(0, 400), window=st.integers(0, 30), paused=st.booleans(), after_answer=st.booleans())
def test_history_is_chronological_and_unique(unfolded, window, paused, after_answer):
    gap_rows, window_rows = session(unfolded, window)
    plan = plan_read(gap_rows, paused=paused, after_answer=after_answer)
    folded = [m for batch in plan.batches for m in batch]
    sent = [*plan.raw_gap, *window_rows]

    assert [position(m) for m in sent] == sorted(position(m) for m in sent)
    assert len({*folded, *sent}) == len(folded) + len(sent)
    assert all(position(f) < position(s) for f in folded for s in sent[:1])


@given(unfolded=st.integers(0, 400), window=st.integers(0, 30), paused=st.booleans())
def test_only_a_backlog_beyond_what_may_be_sent_is_left_out(unfolded, window, paused):
    gap_rows, window_rows = session(unfolded, window)
    plan = plan_read(gap_rows, paused=paused)
    covered = {m for batch in plan.batches for m in batch} | set(plan.raw_gap) | set(window_rows)
    left_out = [m for m in gap_rows + window_rows if m not in covered]

    assert left_out == [] or len(left_out) >= 2 * BATCH
    assert left_out == gap_rows[len(gap_rows) - len(left_out) :]


@given(unfolded=st.integers(0, 400), paused=st.booleans())
def test_the_prompt_never_holds_more_unfolded_messages_than_two_batches(unfolded, paused):
    plan = plan_read(session(unfolded, 0)[0], paused=paused)
    assert len(plan.raw_gap) <= DEFAULT_POLICY.raw_gap_limit == 2 * BATCH


@given(unfolded=st.integers(0, 400))
def test_a_turn_folds_inside_itself_only_the_excess_over_two_batches(unfolded):
    plan = plan_read(session(unfolded, 0)[0], paused=False)
    folded = sum(len(batch) for batch in plan.batches)
    if unfolded <= 2 * BATCH:
        assert (folded, len(plan.raw_gap)) == (0, unfolded)
    elif unfolded < DEFAULT_POLICY.gap_limit:
        assert folded == BATCH * -(-(unfolded - 2 * BATCH) // BATCH)
        assert folded + len(plan.raw_gap) == unfolded
    else:
        assert (folded, plan.raw_gap) == (2 * BATCH, ())


@given(unfolded=st.integers(0, 400), paused=st.booleans())
def test_after_the_answer_every_full_batch_folds_at_most_three_and_none_while_paused(unfolded, paused):
    gap = session(unfolded, 0)[0]
    plan = plan_read(gap, paused=paused, after_answer=True)
    # The rule itself, not the policy's derived limits: 3 batches at most, the oldest first.
    expected_batches = 0 if paused else min(unfolded // BATCH, 3)
    expected = [gap[i * BATCH : (i + 1) * BATCH] for i in range(expected_batches)]
    assert [list(batch) for batch in plan.batches] == expected


def test_a_gap_of_two_batches_is_sent_raw_and_folded_after_the_answer():
    gap = session(2 * BATCH, 0)[0]
    assert plan_fold(gap, paused=False) == plan_fold(gap, paused=True)
    assert plan_fold(gap, paused=False).raw_gap == tuple(gap)
    assert len(plan_fold(gap, paused=False, after_answer=True).batches) == 2


def test_a_gap_of_two_batches_and_one_folds_one_batch_in_the_turn_and_sends_a_batch_and_one_raw():
    gap = session(2 * BATCH + 1, 0)[0]
    plan = plan_fold(gap, paused=False)
    assert (len(plan.batches), plan.raw_gap) == (1, tuple(gap[BATCH:]))


def test_a_backlog_of_four_batches_or_more_folds_two_in_the_turn_and_leaves_the_rest():
    plan = plan_read(session(10 * BATCH, 0)[0], paused=False)
    assert (len(plan.batches), plan.raw_gap) == (2, ())


def test_a_paused_backlog_over_two_batches_sends_nothing_of_it():
    plan = plan_fold(session(2 * BATCH + 1, 0)[0], paused=True)
    assert plan == plan_fold([], paused=True)
