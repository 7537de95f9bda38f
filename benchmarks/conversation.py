"""The scripted conversation the demo and the benchmarks replay: one fact, filler, a pasted log, one question.

Deterministic so two configurations see exactly the same user messages. Filler is
lower-case chat on purpose: the bundled model server treats upper-case words and IDs as
facts, so only the first message and the pasted log carry any. It talks about everyday
engineering chores, rate limits included: a summary validator that took such words for
an error text once paused folding for these sessions, and would show up as problem
events in the report.
"""

FACT = "Our project is PRJ-123 on the EU cluster."
QUESTION = "Which cluster and project were we on?"
FACTS = ("PRJ-123", "EU")

_SUBJECTS = (
    "the retry backoff of the ingestion worker",
    "the nightly export job",
    "the cache eviction policy",
    "the flaky integration test in the billing module",
    "the dashboard that shows queue depth",
    "the migration that adds the audit column",
    "the rate limiter in front of the public endpoint",
    "the runbook for the on-call rotation",
    "the memory growth in the report renderer",
    "the schema of the events table",
    "the timeout of the payment callback",
    "the rollout plan for the new search index",
)
_ASKS = (
    "Let's look at {subject} next, keep it short.",
    "I changed {subject} this morning and it seems fine so far.",
    "Please draft two bullet points on {subject} for the weekly notes.",
    "Can you suggest a safer default for {subject}, nothing fancy.",
    "We agreed to leave {subject} as it is until the release is out.",
    "Remind me later to double check {subject} with the team.",
)


def filler(turn: int) -> str:
    """A short, varied, fact-free user message; ``turn`` picks it deterministically."""
    subject = _SUBJECTS[turn % len(_SUBJECTS)]
    ask = _ASKS[(turn // len(_SUBJECTS)) % len(_ASKS)]
    return f"Step {turn}: " + ask.format(subject=subject)


_LOG_LINES = (
    "2026-03-14T09:12:{s:02d}.{ms:03d}Z INFO  api-gateway request_id=req-{n:05d} method=POST path=/v2/orders "
    "status=202 latency_ms={lat}",
    "2026-03-14T09:12:{s:02d}.{ms:03d}Z INFO  order-worker picked job=ord-{n:05d} queue=orders attempt=1",
    "2026-03-14T09:12:{s:02d}.{ms:03d}Z WARN  order-worker slow dependency host=inventory-db-2 "
    "query_ms={lat} threshold_ms=250",
    "2026-03-14T09:12:{s:02d}.{ms:03d}Z ERROR order-worker job=ord-{n:05d} failed: connection reset by peer "
    "(inventory-db-2:5432), retrying in {backoff}s",
    "2026-03-14T09:12:{s:02d}.{ms:03d}Z INFO  scheduler heartbeat workers=6 busy={busy} pending={pending}",
)
_TRACEBACK = """Traceback (most recent call last):
  File "/srv/app/order_worker/jobs.py", line 214, in reserve_stock
    rows = await conn.fetch(RESERVE_SQL, order.sku, order.quantity)
  File "/srv/app/.venv/lib/python3.12/site-packages/asyncpg/connection.py", line 690, in fetch
    return await self._execute(query, args, 0, timeout)
ConnectionResetError: [Errno 104] Connection reset by peer"""


def pasted_log(target_chars: int = 5_000) -> str:
    """A realistic ~5,000-character application log a user pastes into the chat, traceback included."""
    lines: list[str] = []
    for n in range(400):  # bounded; stops as soon as the target size is reached
        template = _LOG_LINES[n % len(_LOG_LINES)]
        lines.append(
            template.format(
                s=n % 60,
                ms=(n * 37) % 1000,
                n=4100 + n,
                lat=120 + (n * 53) % 900,
                backoff=2 ** (n % 4),
                busy=n % 7,
                pending=(n * 11) % 40,
            )
        )
        if n == 9:
            lines.append(_TRACEBACK)
        if sum(len(line) + 1 for line in lines) >= target_chars:
            break
    return "Here is the log from the failed deploy, please have a look:\n" + "\n".join(lines)


def script(filler_turns: int, log_at: tuple[int, ...] = (20,)) -> list[str]:
    """The user messages of one session: the fact, ``filler_turns`` fillers (logs at ``log_at``), the question."""
    log = pasted_log()
    middle = [log if i in log_at else filler(i) for i in range(filler_turns)]
    return [FACT, *middle, QUESTION]


def recalled(answer: str) -> bool:
    """Whether an answer names every fact of the first message."""
    return all(fact in answer for fact in FACTS)
