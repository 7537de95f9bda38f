"""Texts a model is sent, as Langflow hands them over, for measuring the token estimate against real tokenizers.

Deterministic: the counts real tokenizers gave for them are recorded in ``token_counts.json`` (measured by
``python -m tests.real_model.token_counts``); a sample that changes no longer matches its recorded digest.

Each is what the Agent's model reads: a tool's DataFrame as LangChain's ToolNode turns it into a
ToolMessage (``str`` of Langflow's DataFrame: every value in full, each column padded to its widest
value), a Data result as JSON (``json.dumps``), a log, code, and chat prose.
"""

import hashlib
import json
import random

from lfx.schema.dataframe import DataFrame

from benchmarks.chatty import chatty_session

WORDS = (
    "release",
    "cluster",
    "deploy",
    "team",
    "build",
    "service",
    "region",
    "owner",
    "customer",
    "invoice",
    "migration",
    "window",
    "schedule",
    "review",
    "decision",
    "budget",
    "project",
    "platform",
    "database",
)
# A web page's sentences, as people write them: varied words, names, numbers, dates and punctuation.
PAGE_SENTENCES = (
    "Release 7.2 ships on 3 March; the EU cluster moves first, then us-east-2 a week later.",
    "If you run the scheduler yourself, upgrade it before the workers: the old one cannot read the new queue format.",
    "We rewrote the retry logic after last quarter's outage, which left 1,482 invoices stuck for almost nine hours.",
    "Dashboards now load in about 40% of the time they took in 7.1, mostly thanks to a smaller query planner cache.",
    "Thanks to Ana Ferreira, Kenji Watanabe and the folks at Northwind Traders for reporting the timezone bug.",
    "Deprecated: the `--legacy-auth` flag will be removed in 8.0 (see the migration guide, section 4.3).",
    "Customers on the Enterprise plan get a dedicated support channel; everyone else can open a ticket as usual.",
    "Known issue: exporting more than 250,000 rows to CSV may time out on instances with less than 4 GB of memory.",
    "Our documentation moved to a new address, and the old links redirect for the next twelve months.",
    "Questions? Join the community call every second Thursday at 16:00 UTC, or write to support@example.com.",
    "Performance budgets were tightened: p95 latency for search must stay below 350 ms under nominal load.",
    "The mobile app gained offline drafts, so a half-written report survives a dropped connection.",
)


def page_text(chooser: random.Random, characters: int) -> str:
    """A page's text: its sentences in an order drawn by ``chooser``, up to ``characters``."""
    text = PAGE_SENTENCES[0]
    while len(text) < characters:
        text += " " + chooser.choice(PAGE_SENTENCES[1:])
    return text[:characters]


def prose(chooser: random.Random, sentences: int) -> str:
    """Sentences of everyday words, numbers and punctuation, as a note in a table reads."""
    return " ".join(chooser.choice(PAGE_SENTENCES) for _ in range(sentences))


def url_page_table(characters: int = 40_000) -> str:
    """The URL tool's result: one row per page (text, url, title, description, content type, language)."""
    chooser = random.Random(1)
    row = {
        "text": page_text(chooser, characters),
        "url": "https://docs.example.com/release-notes",
        "title": "Release notes",
        "description": "What changes in 7.2",
        "content_type": "text/html; charset=utf-8",
        "language": "en",
    }
    return str(DataFrame(data=[row]))


def sql_result_table(rows: int = 40) -> str:
    """The SQL Database tool's result: rows of short fields and one free-text column of varying length."""
    chooser = random.Random(2)
    records = [
        {
            "id": 1000 + i,
            "customer": f"{chooser.choice(WORDS).title()} {chooser.choice(WORDS).title()} Ltd",
            "email": f"{chooser.choice(WORDS)}.{i}@example.com",
            "amount": round(chooser.uniform(5, 5000), 2),
            "note": prose(chooser, chooser.choice([1, 1, 2, 4, 12])),
        }
        for i in range(rows)
    ]
    return str(DataFrame(data=records))


def build_log(lines: int = 400) -> str:
    return "Build 4711 failed at step compile: missing header core.h.\n" + "".join(
        f"[{i:05d}] cc -c src/module_{i % 97}.c -o build/module.o: ok\n" for i in range(lines)
    )


def python_code(functions: int = 30) -> str:
    """Indented code as a code tool or a file reader returns it: classes, methods, nested blocks, docstrings."""
    chooser = random.Random(3)
    parts = ["import json\nfrom dataclasses import dataclass\n\n"]
    for i in range(functions):
        name = f"{chooser.choice(WORDS)}_{chooser.choice(WORDS)}_{i}"
        parts.append(
            f"@dataclass\nclass Record{i}:\n"
            f'    """A {chooser.choice(WORDS)} record kept for the {chooser.choice(WORDS)} report."""\n\n'
            f"    name: str\n    count: int = {chooser.randint(0, 99)}\n\n"
            f"    def {name}(self, items: list[dict], limit: int = {chooser.randint(10, 500)}) -> dict:\n"
            f"        totals = {{}}\n"
            f"        for item in items[:limit]:\n"
            f'            if item.get("{chooser.choice(WORDS)}") is None:\n'
            f"                continue\n"
            f'            key = item["{chooser.choice(WORDS)}"].strip().lower()\n'
            f'            totals[key] = totals.get(key, 0) + item.get("amount", {chooser.randint(1, 9)})\n'
            f'        return {{"name": self.name, "totals": json.dumps(totals, sort_keys=True)}}\n\n\n'
        )
    return "".join(parts)


def api_json(records: int = 40, *, indent: int | None = None) -> str:
    """An API Request or Python Interpreter result as the Agent reads a Data result: its dict as JSON."""
    chooser = random.Random(4)
    data = {
        "status": 200,
        "results": [
            {
                "id": f"ord_{chooser.randint(10**7, 10**8)}",
                "created": f"2026-{chooser.randint(1, 12):02d}-{chooser.randint(1, 28):02d}T10:{i % 60:02d}:00Z",
                "customer": {
                    "name": chooser.choice(WORDS).title(),
                    "region": chooser.choice(["eu-west-1", "us-east-2"]),
                },
                "total": round(chooser.uniform(1, 999), 2),
                "items": [chooser.choice(WORDS) for _ in range(chooser.randint(1, 4))],
                "paid": chooser.random() < 0.5,
            }
            for i in range(records)
        ],
    }
    return json.dumps(data, ensure_ascii=False, indent=indent)


def chat_prose(messages: int = 60) -> str:
    """A long chat's messages, as a person writes them."""
    return "\n".join(text for _sender, text in chatty_session().messages[:messages])


def samples() -> dict[str, str]:
    """Every sample by name."""
    return {
        "url_page_table": url_page_table(),
        "sql_result_table": sql_result_table(),
        "build_log": build_log(),
        "python_code": python_code(),
        "api_json": api_json(),
        "api_json_indented": api_json(indent=2),
        "chat_prose": chat_prose(),
    }


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
