"""Operator settings from the environment: the fold timeout, and where a new turn waits for folds."""

import pytest

from langflow_session_memory.services.session_memory.settings import (
    FOLD_TIMEOUT_VARIABLE,
    RETIRED_CANCEL_VARIABLE,
    TOOL_RESULT_SHARE_VARIABLE,
    WAIT_FOR_FOLDS_VARIABLE,
    WAITING_TOKENS_VARIABLE,
    fold_timeout_seconds,
    new_turn_waits_for_folds,
    tool_result_share,
    waiting_tokens,
)


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


@pytest.mark.parametrize(
    ("raw", "share"), [(None, 0.1), ("0.25", 0.25), ("1", 1.0), ("0", 0.1), ("2", 0.1), ("x", 0.1)]
)
def test_a_read_tool_result_keeps_a_tenth_of_the_window_unless_an_operator_gives_another_share(raw, share):
    assert tool_result_share({} if raw is None else {TOOL_RESULT_SHARE_VARIABLE: raw}) == share


@pytest.mark.parametrize(("raw", "tokens"), [(None, None), ("8000", 8000), ("0", None), ("-3", None), ("lots", None)])
def test_the_waiting_budget_is_the_model_s_share_unless_an_operator_names_one(raw, tokens):
    assert waiting_tokens({} if raw is None else {WAITING_TOKENS_VARIABLE: raw}) == tokens


@pytest.mark.parametrize(
    ("url", "self_hosted"),
    [
        ("http://127.0.0.2:8765/v1", True),  # llama.cpp, LM Studio on this machine
        ("http://localhost:11434", True),  # Ollama
        ("http://[::1]:8080/v1", True),
        ("http://ollama:11434", True),  # a Docker Compose service
        ("http://10.0.0.5:8000/v1", True),  # vLLM on a private network
        ("http://192.168.1.20:1234/v1", True),
        ("http://vllm.internal:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("https://my-vllm.example.com/v1", False),  # a public address: assume it is billed
        (None, False),  # the provider's own default endpoint
    ],
)
def test_a_new_turn_waits_for_folds_only_on_a_self_hosted_server_by_default(url, self_hosted):
    assert new_turn_waits_for_folds(url, {}) is self_hosted


@pytest.mark.parametrize(("value", "waits"), [("always", True), ("never", False), ("Never ", False)])
def test_an_operator_decides_for_every_server(value, waits):
    assert new_turn_waits_for_folds("https://api.openai.com/v1", {WAIT_FOR_FOLDS_VARIABLE: value}) is waits
    assert new_turn_waits_for_folds("http://127.0.0.1:11434", {WAIT_FOR_FOLDS_VARIABLE: value}) is waits


def ignored(captured_logs, variable: str) -> list[dict]:
    return [
        log for log in captured_logs if log["event"].startswith(f"session_memory_setting_ignored variable={variable}")
    ]


def test_an_unknown_choice_is_logged_once_and_the_default_holds(captured_logs):
    for _turn in range(3):
        assert new_turn_waits_for_folds("http://127.0.0.1:11434", {WAIT_FOR_FOLDS_VARIABLE: "sometimes"}) is True
    assert len(ignored(captured_logs, WAIT_FOR_FOLDS_VARIABLE)) == 1


def test_the_retired_cancel_setting_is_logged_once_and_changes_nothing(captured_logs):
    for _turn in range(3):
        assert new_turn_waits_for_folds("http://127.0.0.1:11434", {RETIRED_CANCEL_VARIABLE: "never"}) is True
    [notice] = ignored(captured_logs, RETIRED_CANCEL_VARIABLE)
    assert f"replacement={WAIT_FOR_FOLDS_VARIABLE}" in notice["event"]
