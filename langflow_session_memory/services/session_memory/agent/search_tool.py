"""The Agent's ``search_earlier_messages`` tool: the session's messages older than its raw window.

Offered only where the history has memory (the switch on, "Search Older Messages" on, and the run's Turn, read
by the history's guard), so its scope is the history's key. A turn that does not call it costs nothing but the
tool's description in the request; a call runs the full-text search a turn's excerpts run (a few bounded
statements), or two while the index is behind. Its answer goes to the model only: Langflow shows the call
among the Agent's steps, and no chat message is stored for it. A failed search answers "unavailable" and is
logged without any text; the turn goes on.
"""

from langchain_core.tools import StructuredTool

from langflow_session_memory.services.session_memory import log_events
from langflow_session_memory.services.session_memory.agent.component_inputs import (
    memory_switched_on,
    search_switched_on,
)
from langflow_session_memory.services.session_memory.agent.guard import with_memory
from langflow_session_memory.services.session_memory.agent.run import Run, run_for
from langflow_session_memory.services.session_memory.agent.search import (
    TOOL_DESCRIPTION,
    TOOL_NAME,
    SearchQuery,
    answer,
)

SEARCH_UNAVAILABLE = "The search of earlier messages is unavailable right now; answer with what you have."


async def with_search_tool(component, tools):
    """The Agent's tools plus ``search_earlier_messages`` where it applies; ``tools`` untouched otherwise.

    A tool of the same name already connected wins (providers reject duplicate names), as
    for Langflow's own date and calculator tools.
    """
    if not (memory_switched_on(component) and search_switched_on(component)):
        return tools
    if any(getattr(tool, "name", None) == TOOL_NAME for tool in tools or []):
        return tools
    run = run_for(component, "agent_tools")
    if run is None or run.turn is None:
        return tools
    tool = search_tool(run)
    component.set_tools_callbacks([tool], list(run.turn.tracing))
    return [*(tools or []), tool]


def search_tool(run: Run) -> StructuredTool:
    """The tool, bound to the run: it searches with the run's Turn (its key and window)."""

    async def search_earlier_messages(query: str) -> str:
        found = await with_memory(
            run,
            lambda service, turn: service.retrieval.earlier(turn, query),
            failure_event=log_events.SEARCH_FAILED,
        )
        return SEARCH_UNAVAILABLE if found is None else answer(*found[1])

    return StructuredTool.from_function(
        coroutine=search_earlier_messages,
        name=TOOL_NAME,
        description=TOOL_DESCRIPTION,
        args_schema=SearchQuery,
    )
