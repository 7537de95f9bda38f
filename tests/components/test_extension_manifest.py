"""The bundle passes Langflow's own extension validator, imports included."""

import subprocess
import sys
from pathlib import Path

import langflow_session_memory

PACKAGE = Path(langflow_session_memory.__file__).parent


def test_lfx_extension_validate_passes_with_imports():
    lfx = Path(sys.executable).parent / "lfx"
    result = subprocess.run(
        [str(lfx), "extension", "validate", str(PACKAGE), "--execute-imports"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "validate: ok" in result.stdout
