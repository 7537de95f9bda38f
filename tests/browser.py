"""Chromium from the OS packages (``/usr/bin/chromium``; ``.ci/run`` installs it), driven by Playwright from PyPI;
no browser is ever downloaded. The fixtures that open it are ``tests/conftest.py``'s ``chromium_path`` and
``page``; screenshots go to ``test-artifacts/browser/``."""

from pathlib import Path

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).parent.parent / "test-artifacts" / "browser"
UI_TIMEOUT_MS = 30_000
# Like Langflow's own e2e runs: nothing in the background competes with the test for two cores.
CHROMIUM_ARGS = [
    "--no-sandbox",  # as root, Chromium's sandbox cannot start
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
