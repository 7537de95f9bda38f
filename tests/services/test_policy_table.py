"""docs/design.md's tables of the fold policy and of the values fixed in code are the code's own: a setting added,
renamed or given another default changes the docs with it."""

from dataclasses import fields
from pathlib import Path

from langflow_session_memory.services.session_memory import fixed_values
from langflow_session_memory.services.session_memory.rules import policy
from tests.generated_docs import generated_table

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"


def test_the_design_s_policy_tables_are_generated_from_the_policies():
    assert generated_table(DESIGN, "policy.markdown_tables") == policy.markdown_tables(), (
        "docs/design.md's policy tables are not the policies': replace them with the output of "
        "`python -m langflow_session_memory.services.session_memory.rules.policy`"
    )


def test_every_setting_of_every_policy_says_what_it_means():
    assert all(setting.metadata.get("meaning") for each in policy.POLICIES for setting in fields(each))
    assert "| `record_share` | 0.4 |" in policy.markdown_table()
    assert "| `pause` | 10 minutes |" in policy.markdown_table()


def test_the_design_s_table_of_values_fixed_in_code_is_generated_from_them():
    assert generated_table(DESIGN, "fixed_values.markdown_table") == fixed_values.markdown_table(), (
        "docs/design.md's table of fixed values is not the code's: replace it with the output of "
        "`python -m langflow_session_memory.services.session_memory.fixed_values`"
    )
