"""A throwaway PostgreSQL database for a benchmark run (same server the tests use)."""

import os
import uuid
from contextlib import contextmanager

import psycopg

POSTGRES_ADMIN_URL = os.environ.get("SESSION_MEMORY_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test")


@contextmanager
def postgres_database():
    name = f"lsm_bench_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"{POSTGRES_ADMIN_URL.rpartition('/')[0]}/{name}"
    finally:
        with psycopg.connect(POSTGRES_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
