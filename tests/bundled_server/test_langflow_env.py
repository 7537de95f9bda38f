"""Running Langflow in a test process leaves the process's own signal handling alone."""

import subprocess
import sys

# Compared with the handlers the process started with: a process started in the background of a non-interactive
# shell inherits SIGINT ignored (POSIX), so Python's default handler is not what it has.
PROBE = """
import signal
started = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
from langflow_session_memory.bundled_server.langflow_env import import_langflow_main
import_langflow_main()
import langflow.__main__
print(signal.getsignal(signal.SIGTERM) is started[0], signal.getsignal(signal.SIGINT) is started[1])
"""


def test_importing_langflow_main_keeps_the_default_sigterm_and_sigint_handlers():
    result = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "True"]
