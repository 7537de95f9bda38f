"""The seam saved flows import (``agent_history``): every name any kept version of the component imports is there,
under every path it imported from, with the parameters it calls."""

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from langflow_session_memory.services import session_memory
from langflow_session_memory.services.session_memory import agent_history

SAVED = Path(__file__).resolve().parents[1] / "app" / "saved_components"
PACKAGE = "langflow_session_memory"


def imported_from_package(code: str) -> set[tuple[str, str]]:
    """(module, name) of every ``from langflow_session_memory... import name`` in a component's code."""
    return {
        (node.module, alias.name)
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE)
        for alias in node.names
    }


IMPORTS = sorted(
    set().union(*(imported_from_package(p.read_text(encoding="utf-8")) for p in SAVED.glob("*.component")))
)


def test_every_kept_version_imports_only_the_seam_under_one_of_its_paths():
    assert IMPORTS, "no kept version of the component"
    assert {module for module, _ in IMPORTS} <= {session_memory.SEAM, *session_memory.OLD_SEAM_PATHS}


@pytest.mark.parametrize(("module", "name"), IMPORTS, ids=[f"{m.rsplit('.', 1)[1]}.{n}" for m, n in IMPORTS])
def test_each_name_a_kept_version_imports_is_the_seams(module, name):
    assert importlib.import_module(module) is agent_history
    assert name in agent_history.__all__


def test_the_seam_exports_its_texts_hooks_and_old_names_only():
    assert set(agent_history.__all__) == {*agent_history.TEXTS, *agent_history.HOOKS, *agent_history.OLD_NAMES}


def test_each_hook_keeps_the_parameters_saved_code_calls_it_with():
    for name, parameters in agent_history.HOOKS.items():
        assert tuple(inspect.signature(getattr(agent_history, name)).parameters) == parameters, name
    for old, new in agent_history.OLD_NAMES.items():
        assert getattr(agent_history, old) is getattr(agent_history, new)


def test_an_old_path_is_a_name_of_the_seam_not_a_module_of_its_own():
    for path in session_memory.OLD_SEAM_PATHS:
        spec = importlib.util.find_spec(path)
        assert spec is not None, path
        assert spec.origin is None, f"{path} is a file again: {spec.origin}"
