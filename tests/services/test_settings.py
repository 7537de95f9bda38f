"""Operator settings from the environment: the fold timeout."""

import pytest

from langflow_session_memory.services.session_memory.settings import FOLD_TIMEOUT_VARIABLE, fold_timeout_seconds


def test_the_fold_timeout_is_60_seconds_unless_set():
    assert fold_timeout_seconds({}) == 60.0


def test_an_operator_gives_a_slow_local_model_longer():
    assert fold_timeout_seconds({FOLD_TIMEOUT_VARIABLE: "180"}) == 180.0


@pytest.mark.parametrize("value", ["abc", "0", "-5", "nan", "inf", "100000"])
def test_a_value_that_cannot_be_a_timeout_is_logged_and_the_default_holds(value, captured_logs):
    assert fold_timeout_seconds({FOLD_TIMEOUT_VARIABLE: value}) == 60.0
    assert any(
        log["event"].startswith(f"session_memory_setting_ignored variable={FOLD_TIMEOUT_VARIABLE}")
        for log in captured_logs
    )
