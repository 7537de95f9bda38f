"""The estimated size of the Agent's request: what the history does not control (instructions, tools, the
user's input) and the whole request with a given history, as the fitting and the "prompt too long" re-run
compare it with the window."""

from langchain_core.tools import BaseTool
from lfx.schema.message import Message

from langflow_session_memory.services.session_memory.agent.component_inputs import bool_input, search_switched_on
from langflow_session_memory.services.session_memory.agent.search import TOOL_NAME, tool_schema_tokens
from langflow_session_memory.services.session_memory.rules import token_estimate
from langflow_session_memory.services.session_memory.rules.policy import CALL_FIT
from langflow_session_memory.services.session_memory.rules.turn import Turn


def request_tokens(turn: Turn, messages) -> int:
    """The estimated size of the Agent's request with ``messages`` as its history."""
    return turn.fixed_tokens + token_estimate.estimated_size(token_estimate.text_of(message) for message in messages)


def fixed_tokens(component) -> int:
    """Estimated tokens the history does not control: instructions, tools and the user's input."""
    given = getattr(component, "input_value", None)
    input_text = given.text if isinstance(given, Message) else given
    return (
        token_estimate.estimate_tokens(getattr(component, "system_prompt", None) or "")
        + token_estimate.estimate_tokens(input_text if isinstance(input_text, str) else "")
        + _tools_tokens(component)
    )


def _tools_tokens(component) -> int:
    """The tools' schemas, sent with every request: those on the component, and those added to it after
    the history is read (Langflow's date and calculator tools where switched on, the search tool)."""
    tools = [tool for tool in getattr(component, "tools", None) or [] if isinstance(tool, BaseTool)]
    names = {tool.name for tool in tools}
    added_later = [
        (wanted and name not in names, size)
        for wanted, name, size in (
            (
                bool_input(component, "add_current_date_tool", default=False),
                "get_current_date",
                CALL_FIT.built_in_tool_tokens,
            ),
            (
                bool_input(component, "add_calculator_tool", default=False),
                "evaluate_expression",
                CALL_FIT.built_in_tool_tokens,
            ),
            (search_switched_on(component), TOOL_NAME, tool_schema_tokens()),
        )
    ]
    return sum(token_estimate.tool_tokens(tool) for tool in tools) + sum(
        size for missing, size in added_later if missing
    )
