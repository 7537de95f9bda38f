"""Every tunable of the service is a field of a policy, and docs/design.md's tables of the policies are the code's
own: a setting added, renamed or given another default changes the docs with it."""

import ast
from dataclasses import fields
from pathlib import Path

import langflow_session_memory.services.session_memory as session_memory
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


# Numbers a module may hold that nobody tunes: what a provider documents, not a choice of ours.
NOT_TUNABLE = {
    "agent/prompt_caching.py": {"MAX_BREAKPOINTS"},  # Anthropic: "up to 4 cache breakpoints"; a 5th is refused
}
POLICY_MODULE = "rules/policy.py"


def _is_number(node: ast.expr) -> bool:
    """A number written in code: a literal, a sum or product of literals, or a ``timedelta(...)`` of them."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int | float) and not isinstance(node.value, bool)
    if isinstance(node, ast.UnaryOp):
        return _is_number(node.operand)
    if isinstance(node, ast.BinOp):
        return _is_number(node.left) and _is_number(node.right)
    if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "timedelta":
        return all(_is_number(keyword.value) for keyword in node.keywords) and all(map(_is_number, node.args))
    return False


def module_level_numbers(source: str) -> list[str]:
    """The names a module binds to a number at its top level."""
    found = []
    for statement in ast.parse(source).body:
        if isinstance(statement, ast.Assign) and _is_number(statement.value):
            found += [target.id for target in statement.targets if isinstance(target, ast.Name)]
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None and _is_number(statement.value):
            found.append(statement.target.id)
    return found


def test_no_module_of_the_service_holds_a_tunable_number_outside_the_policies():
    root = Path(session_memory.__file__).parent
    stray = {
        f"{path.relative_to(root)}: {name}"
        for path in root.rglob("*.py")
        if path.relative_to(root).as_posix() != POLICY_MODULE
        for name in module_level_numbers(path.read_text(encoding="utf-8"))
        if name not in NOT_TUNABLE.get(path.relative_to(root).as_posix(), ())
    }
    assert not stray, f"make these fields of a policy in {POLICY_MODULE}, each with its meaning: {sorted(stray)}"


def test_the_check_finds_a_number_however_it_is_written():
    source = "A = 3\nB: float = 0.5\nC = 8 * 1024\nD = timedelta(minutes=10)\nE = -1\nNAME = 'x'\nF = True\n"
    assert module_level_numbers(source) == ["A", "B", "C", "D", "E"]
