"""The service's folders import down, never back up (docs/design.md, "Layering").

Each unit below imports only from units of a lower rank, never from one of its own rank but
itself (``storage`` and ``summary``, ``reasons`` and ``settings`` stay apart), at module level
and inside functions. An import that runs back up ties a lower layer to the Langflow adapter
or to the service's orchestration, which is how the flat package had come to need callbacks.
"""

import ast
from pathlib import Path

import langflow_session_memory.services.session_memory as session_memory

PACKAGE = session_memory.__name__
ROOT = Path(session_memory.__file__).parent
RANKS = {
    "log_events": 0,
    "rules": 1,
    "reasons": 2,
    "settings": 2,
    "storage": 3,
    "summary": 3,
    "embeddings": 3,
    "folding": 4,
    "retrieval": 4,
    "service": 5,
    "runtime": 6,
    "agent": 7,
    "agent_history": 8,
}


def unit_of(module: str) -> str:
    """The folder or top-level module of a module of the service package."""
    return module.removeprefix(f"{PACKAGE}.").split(".", 1)[0]


def imports_of(path: Path) -> set[str]:
    """The service's modules that ``path`` imports, wherever in the file the import stands."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(PACKAGE):
            found |= {node.module} if node.module != PACKAGE else {f"{PACKAGE}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith(f"{PACKAGE}.")}
    return found


def test_every_module_of_the_service_belongs_to_a_ranked_unit():
    units = {unit_of(".".join(path.relative_to(ROOT).with_suffix("").parts)) for path in ROOT.rglob("*.py")}
    assert units - {"__init__"} == set(RANKS)


def test_no_import_runs_back_up_a_layer_or_across_one():
    upward = []
    for path in ROOT.rglob("*.py"):
        importer = unit_of(".".join(path.relative_to(ROOT).with_suffix("").parts))
        for module in imports_of(path):
            imported = unit_of(module)
            if imported != importer and RANKS.get(imported, 0) >= RANKS.get(importer, 0):
                upward.append(f"{path.relative_to(ROOT)} imports {module}")
    assert upward == []
