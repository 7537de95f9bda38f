"""Running Langflow in a test process leaves the process's own signal handling alone."""

import subprocess
import sys

PROBE = """
import signal
from langflow_session_memory.testing.langflow_env import import_langflow_main
import_langflow_main()
import langflow.__main__
print(signal.getsignal(signal.SIGTERM) is signal.SIG_DFL, signal.getsignal(signal.SIGINT) is signal.default_int_handler)
"""


def test_importing_langflow_main_keeps_the_default_sigterm_and_sigint_handlers():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]
