"""Fixtures of the service tests: one chat key, a clock the test moves, and a service on the test database."""

import uuid
from datetime import timedelta

import pytest

from langflow_session_memory.services.session_memory.rules.state import SessionKey
from langflow_session_memory.services.session_memory.service import SessionMemoryService
from tests.chat import START


class Clock:
    def __init__(self):
        self.now = START + timedelta(days=1)

    def __call__(self):
        return self.now


@pytest.fixture
def key() -> SessionKey:
    return SessionKey(flow_id=uuid.uuid4(), owner_id=uuid.uuid4(), session_id="New Session 0")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def service(sessions, clock) -> SessionMemoryService:
    return SessionMemoryService(sessions=sessions, clock=clock)
