"""docs/design.md's generated Contracts table is the code's, and the step's counts are all listed."""

import ast
import inspect
import textwrap
from pathlib import Path

from langflow_session_memory import contracts
from langflow_session_memory.services.session_memory.agent import component_hooks, model_calls, playground
from tests.generated_docs import generated_table

DESIGN = Path(__file__).resolve().parents[1] / "docs" / "design.md"
# Where a step's counts are written or read: their keys must all be in playground.STEP_FIELDS.
FACT_WRITERS = (
    playground.memory_step,
    playground.described,
    component_hooks._cache_facts,
    component_hooks._add_fold_usage,
    model_calls.CallReductions.facts,
)


def step_keys(function) -> set[str]:
    """The string keys ``function`` puts in a dict literal, stores as ``facts[...]`` or reads with ``.get``."""
    keys = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function)))):
        if isinstance(node, ast.Dict):
            keys |= {key.value for key in node.keys if isinstance(key, ast.Constant) and isinstance(key.value, str)}
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            keys.add(node.slice.value)
        elif (
            isinstance(node, ast.Call)
            and getattr(node.func, "attr", None) == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            keys.add(node.args[0].value)
    return keys


def test_the_design_pages_contracts_table_is_the_codes():
    assert generated_table(DESIGN, "contracts.markdown_table") == contracts.markdown_table(), (
        "docs/design.md's Contracts table is stale: python -m langflow_session_memory.contracts"
    )


def test_every_count_a_step_carries_is_a_listed_step_field():
    written = set().union(*(step_keys(function) for function in FACT_WRITERS))
    assert written - {"usage"} <= set(playground.STEP_FIELDS), sorted(written - set(playground.STEP_FIELDS))
    assert set(playground.STEP_FIELDS) <= written, sorted(set(playground.STEP_FIELDS) - written)


def test_the_table_names_the_inputs_columns_and_routes_users_rely_on():
    table = contracts.markdown_table()
    for name in ("summarize_older_messages", "embedding_model", "fold_batch_limit", "source_message_id"):
        assert f"`{name}`" in table
    assert "`GET /{flow_id}/summary`" in table
