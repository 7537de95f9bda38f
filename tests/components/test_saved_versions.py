"""Every version of the component that reaches main is kept for the saved-flows test (tests/app/test_saved_flows.py):
a flow saved with it runs that code for as long as the flow lives."""

from pathlib import Path

import langflow_session_memory.components.session_memory.session_memory_agent as component

SAVED = Path(__file__).resolve().parents[1] / "app" / "saved_components"


def test_the_component_as_it_is_now_is_among_the_saved_versions():
    now = Path(component.__file__).read_text(encoding="utf-8")
    kept = {path.read_text(encoding="utf-8") for path in SAVED.glob("*.component")}
    assert now in kept, (
        "the component changed: flows saved with this version will run it, so keep it for the saved-flows test: "
        f"cp {Path(component.__file__).name} tests/app/saved_components/<date>_<commit>.component"
    )
