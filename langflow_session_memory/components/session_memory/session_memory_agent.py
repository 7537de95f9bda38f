from lfx.components.models_and_agents.agent import AgentComponent
from lfx.io import BoolInput, HandleInput, IntInput

from langflow_session_memory.services.session_memory.agent_history import (
    CONTEXT_WINDOW_INFO,
    SWITCH_INFO,
    agent_middleware,
    agent_model_once,
    agent_tools,
    finish_turn,
    history_with_memory,
    memory_switched_on,
    run_with_context_recovery,
    stored_message,
    with_memory_step,
)


class SessionMemoryAgentComponent(AgentComponent):
    """Langflow's Agent plus a switch that folds messages older than the last N into a summary.

    Saved flows re-run a frozen copy of this file, so it only declares inputs and hands
    off to the installed package; all logic and state live there.
    """

    display_name = "Session Memory Agent"
    description = (
        "Agent that folds the messages older than its chat history window into a short summary it keeps per "
        "session (Summarize Older Messages)."
    )
    name = "SessionMemoryAgent"
    icon = "bot"

    # The stock inputs, with N shown on the node next to the switch it goes with.
    inputs = [
        *(
            stock.model_copy(update={"advanced": False}) if stock.name == "n_messages" else stock
            for stock in AgentComponent.inputs
        ),
        BoolInput(
            name="summarize_older_messages",
            display_name="Summarize Older Messages",
            advanced=False,
            value=False,
            info=SWITCH_INFO,
        ),
        HandleInput(
            name="summary_model",
            display_name="Summary Model",
            input_types=["LanguageModel"],
            required=False,
            advanced=True,
            info=(
                "With Summarize Older Messages on: a Language Model component that writes the summaries instead of "
                "the Agent's own model, for example a cheaper one. Its tokens are counted with the turn's usage."
            ),
        ),
        HandleInput(
            name="embedding_model",
            display_name="Embedding Model",
            input_types=["Embeddings"],
            required=False,
            advanced=True,
            info=(
                "With Summarize Older Messages on: an Embedding Model component that also finds the older messages a "
                'question means without sharing its words ("instrument" for "cello"), quoted in the request '
                "as the word matches are. Each older message is embedded once per Langflow process."
            ),
        ),
        IntInput(
            name="context_window_tokens",
            display_name="Context Window (tokens)",
            advanced=True,
            value=0,
            info=CONTEXT_WINDOW_INFO,
        ),
        BoolInput(
            name="search_older_messages",
            display_name="Search Older Messages",
            advanced=True,
            value=True,
            info=(
                "With Summarize Older Messages on: give the Agent a tool, search_earlier_messages, that finds this "
                "session's messages older than the chat history window by keywords (at most 5, clipped), for details "
                "the summary left out. Its results go to the model only and are not stored as chat messages."
            ),
        ),
    ]

    def _get_llm(self):
        if not memory_switched_on(self):
            return super()._get_llm()
        return agent_model_once(self, super()._get_llm)

    def _build_middleware(self, llm, *, allow_interrupts: bool = True):
        middleware = super()._build_middleware(llm, allow_interrupts=allow_interrupts)
        if not memory_switched_on(self):
            return middleware
        return agent_middleware(self, llm, middleware)

    async def get_agent_requirements(self):
        llm, chat_history, tools = await super().get_agent_requirements()
        return llm, chat_history, await agent_tools(self, tools)

    async def get_memory_data(self):
        if not memory_switched_on(self):
            return await super().get_memory_data()
        return await history_with_memory(self, stock=super().get_memory_data)

    async def run_agent(self, agent):
        if not memory_switched_on(self):
            return await super().run_agent(agent)
        result = await run_with_context_recovery(self, agent, super().run_agent)
        return await finish_turn(self, result)

    def _build_initial_agent_message(self):
        message = super()._build_initial_agent_message()
        if not memory_switched_on(self):
            return message
        return with_memory_step(self, message)

    async def _store_message(self, message):
        return await stored_message(message, super()._store_message)

    async def _update_stored_message(self, message):
        return await stored_message(message, super()._update_stored_message)
