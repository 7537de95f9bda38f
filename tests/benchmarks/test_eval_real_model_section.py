"""docs/eval.md holds both runs: a real model's run writes only its own section, and the bundled run keeps it."""

import json

from benchmarks import eval as recall_eval
from benchmarks.eval import REAL_MODEL_CONFIGURATIONS, REAL_MODEL_MARKER, Question, Result, Size

SIZE = Size(facts=1, updates=1, filler_turns=2, logs=0)


def result(configuration, answer: str) -> Result:
    question = Question("What is the badge code of team 13?", "BADGE-1000", None)
    return Result(configuration, turn_seconds=[1.0, 3.0], turn_input_tokens=[100, 200], answers=[(question, answer)])


def test_the_real_model_section_names_the_model_and_compares_every_configuration():
    results = [result(c, "BADGE-1000" if c.n_messages == 100 else "I don't know") for c in REAL_MODEL_CONFIGURATIONS]
    section = recall_eval.real_model_section(
        results, name="Qwen2.5-Coder 1.5B Instruct", size=SIZE, seconds=60, settings={}
    )

    assert section.startswith(f"{REAL_MODEL_MARKER}\n## On a real model: Qwen2.5-Coder 1.5B Instruct")
    rows = [line for line in section.splitlines() if line.startswith("| stock Agent") or line.startswith("| switch")]
    assert [row.split(" | ")[0][2:] for row in rows] == [c.label for c in REAL_MODEL_CONFIGURATIONS]
    assert "| 1/1 (100%) |" in rows[0]
    assert "Missed by stock Agent, N=10:" in section


def test_with_the_server_s_log_tokens_are_the_server_s_count_of_each_session(tmp_path):
    results = [result(c, "BADGE-1000") for c in REAL_MODEL_CONFIGURATIONS]
    for index, session in enumerate(results):
        session.served_between = (100.0 * index, 100.0 * index + 50)
    log = tmp_path / "requests.jsonl"
    entries = [(10, 1000, 900), (20, 1000, 100), (110, 500, 500), (210, 800, 40), (260, 9999, 9999)]
    log.write_text(
        "".join(json.dumps({"started": t, "prompt_tokens": p, "evaluated_tokens": e}) + "\n" for t, p, e in entries)
    )

    section = recall_eval.real_model_section(results, name="M", size=SIZE, seconds=60, settings={}, server_log=log)

    rows = [line for line in section.splitlines() if line.startswith(("| stock Agent", "| switch"))]
    assert "| 2,000 | 1.00x | 1,000 | 1.00x |" in rows[0]
    assert "| 500 | 0.25x | 500 | 0.50x |" in rows[1]
    assert "| 800 | 0.40x | 40 | 0.04x |" in rows[2]  # the last entry started after the session ended


def test_a_bundled_run_keeps_the_real_model_section(tmp_path):
    previous, current = tmp_path / "eval.previous", tmp_path / "eval.md"
    previous.write_text(f"# Recall eval\n\nold figures\n\n{REAL_MODEL_MARKER}\n## On a real model: X\n\nrows\n")
    current.write_text("# Recall eval\n\nnew figures\n")

    recall_eval.with_section(current, previous, REAL_MODEL_MARKER)

    assert (
        current.read_text() == f"# Recall eval\n\nnew figures\n\n{REAL_MODEL_MARKER}\n## On a real model: X\n\nrows\n"
    )


def test_without_a_real_model_section_a_bundled_run_writes_its_own_page_only(tmp_path):
    previous, current = tmp_path / "eval.previous", tmp_path / "eval.md"
    previous.write_text("# Recall eval\n\nold figures\n")
    current.write_text("# Recall eval\n\nnew figures\n")

    recall_eval.with_section(current, previous, REAL_MODEL_MARKER)

    assert current.read_text() == "# Recall eval\n\nnew figures\n"
