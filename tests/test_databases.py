"""When an unreachable PostgreSQL fails the tests instead of skipping them."""

import psycopg
import pytest

from tests.databases import postgres_required, postgres_unreachable

UNREACHABLE = psycopg.OperationalError("connection refused")


@pytest.mark.parametrize("value", ["1", "true", "True", "TRUE", "yes", "YES", " true\n", "woodpecker"])
def test_a_truthy_ci_requires_postgres(value):
    assert postgres_required({"CI": value})


@pytest.mark.parametrize("value", ["", "0", "false", "False", "FALSE", "no", "off", " 0 "])
def test_a_false_or_empty_ci_does_not_require_postgres(value):
    assert not postgres_required({"CI": value})


def test_without_ci_postgres_is_not_required():
    assert not postgres_required({})


@pytest.mark.parametrize("value", ["1", "true", "yes"])
def test_session_memory_require_postgres_requires_it_outside_ci(value):
    assert postgres_required({"SESSION_MEMORY_REQUIRE_POSTGRES": value})
    assert postgres_required({"CI": "false", "SESSION_MEMORY_REQUIRE_POSTGRES": value})


def test_session_memory_require_postgres_0_leaves_it_optional():
    assert not postgres_required({"SESSION_MEMORY_REQUIRE_POSTGRES": "0"})


def test_an_unreachable_server_fails_the_test_in_ci(monkeypatch):
    monkeypatch.setenv("CI", "1")
    monkeypatch.delenv("SESSION_MEMORY_REQUIRE_POSTGRES", raising=False)
    with pytest.raises(pytest.fail.Exception, match="unreachable: connection refused"):
        postgres_unreachable(UNREACHABLE)


def test_an_unreachable_server_skips_the_test_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("SESSION_MEMORY_REQUIRE_POSTGRES", raising=False)
    with pytest.raises(pytest.skip.Exception, match="unreachable: connection refused"):
        postgres_unreachable(UNREACHABLE)
