"""Property tests of the pure fold planner: order, no duplicates, nothing lost but a bounded backlog."""

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from langflow_session_memory.services.session_memory.planner import (
    FOLD_BATCH_SIZE,
    gap_fetch_limit,
    plan_fold,
    position,
)


@dataclass(frozen=True)
class Msg:
    timestamp: int
    id: int


def session(unfolded: int, window: int) -> tuple[list[Msg], list[Msg]]:
    """An unfolded stretch followed by the window, with tied timestamps in pairs."""
    messages = [Msg(timestamp=i // 2, id=i) for i in range(unfolded + window)]
    return messages[:unfolded], messages[unfolded:]


def read_gap(unfolded: list[Msg]) -> list[Msg]:
    """What the gap query returns: ascending, LIMIT gap_fetch_limit()."""
    return sorted(unfolded, key=position)[: gap_fetch_limit()]


@given(unfolded=st.integers(0, 400), window=st.integers(0, 30), paused=st.booleans())
def test_history_is_chronological_and_unique(unfolded, window, paused):
    gap_rows, window_rows = session(unfolded, window)
    plan = plan_fold(read_gap(gap_rows), paused=paused)
    folded = [m for batch in plan.batches for m in batch]
    sent = [*plan.raw_gap, *window_rows]

    assert [position(m) for m in sent] == sorted(position(m) for m in sent)
    assert len({*folded, *sent}) == len(folded) + len(sent)
    assert all(position(f) < position(s) for f in folded for s in sent[:1])


@given(unfolded=st.integers(0, 400), window=st.integers(0, 30), paused=st.booleans())
def test_only_a_backlog_of_at_least_one_batch_is_left_out(unfolded, window, paused):
    gap_rows, window_rows = session(unfolded, window)
    plan = plan_fold(read_gap(gap_rows), paused=paused)
    covered = {m for batch in plan.batches for m in batch} | set(plan.raw_gap) | set(window_rows)
    left_out = [m for m in gap_rows + window_rows if m not in covered]

    assert left_out == [] or len(left_out) >= FOLD_BATCH_SIZE
    assert left_out == gap_rows[len(gap_rows) - len(left_out) :]


@given(unfolded=st.integers(0, 400), paused=st.booleans())
def test_at_most_three_full_batches_and_none_while_paused(unfolded, paused):
    gap = session(unfolded, 0)[0]
    plan = plan_fold(read_gap(gap), paused=paused)
    # The rule itself, not the module's constants: 3 batches of 20 at most, the oldest first.
    expected_batches = 0 if paused else min(unfolded // 20, 3)
    assert [list(batch) for batch in plan.batches] == [gap[i * 20 : (i + 1) * 20] for i in range(expected_batches)]


def test_gap_of_19_is_sent_raw():
    gap = session(19, 0)[0]
    assert plan_fold(gap, paused=False) == plan_fold(gap, paused=True)
    assert plan_fold(gap, paused=False).raw_gap == tuple(gap)


def test_gap_of_20_is_one_batch_and_nothing_raw():
    plan = plan_fold(session(20, 0)[0], paused=False)
    assert (len(plan.batches), plan.raw_gap) == (1, ())


def test_gap_of_61_folds_three_batches_and_sends_one_raw():
    gap = session(61, 0)[0]
    plan = plan_fold(gap, paused=False)
    assert (len(plan.batches), plan.raw_gap) == (3, (gap[60],))


def test_backlog_of_80_or_more_folds_three_and_leaves_the_rest():
    plan = plan_fold(read_gap(session(200, 0)[0]), paused=False)
    assert (len(plan.batches), plan.raw_gap) == (3, ())


def test_paused_gap_of_20_sends_nothing_raw():
    plan = plan_fold(session(20, 0)[0], paused=True)
    assert plan == plan_fold([], paused=True)
