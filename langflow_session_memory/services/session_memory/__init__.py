"""Session memory: fold older chat messages into a per-session summary.

Saved flows run the component code they were saved with. Every version imports its hooks from one module,
``agent_history`` (the seam, docs/design.md "Contracts"), some of them under one of its old paths: those paths
are names of the seam, never modules of their own, so every other module can move. Importing an old path gives
the seam (:class:`_OldSeamPaths`, consulted only after Python's own finders found no such module).
"""

import importlib
import importlib.abc
import importlib.util
import sys

SEAM = "langflow_session_memory.services.session_memory.agent_history"
# The paths saved component code imported its hooks from before the seam had one name (tests/app/saved_components).
OLD_SEAM_PATHS = frozenset(
    {
        "langflow_session_memory.services.session_memory.agent.hooks",  # 2026-12-04 to 2026-12-05
        "langflow_session_memory.services.session_memory.playground",  # 2026-11-30
        "langflow_session_memory.services.session_memory.recall_tool",  # 2026-11-30
    }
)


class _OldSeamPaths(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds each of :data:`OLD_SEAM_PATHS` as the seam module itself."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ARG002 - the finder protocol's parameters
        return importlib.util.spec_from_loader(fullname, self) if fullname in OLD_SEAM_PATHS else None

    def create_module(self, spec):  # noqa: ARG002 - the loader protocol's parameter
        return importlib.import_module(SEAM)

    def exec_module(self, module):
        """Nothing to run: the seam ran when it was imported."""


if not any(isinstance(finder, _OldSeamPaths) for finder in sys.meta_path):
    sys.meta_path.append(_OldSeamPaths())
