"""An Agent object built without ``__init__`` (as Langflow's own Agent tests build it) behaves as the stock Agent."""

import importlib.util
from pathlib import Path
from types import SimpleNamespace

from lfx.components.models_and_agents.agent import AgentComponent

import langflow_session_memory

COMPONENT_FILE = Path(langflow_session_memory.__file__).parent / "components/session_memory/session_memory_agent.py"


def load_component_class():
    """The class as Langflow loads a bundle file: by path, under a synthetic module name."""
    spec = importlib.util.spec_from_file_location("_lfx_ext_test.session_memory_agent", COMPONENT_FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SessionMemoryAgentComponent


def bare(cls):
    agent = cls.__new__(cls)
    agent.n_messages, agent.context_id, agent.input_value = 5, "", "hello"
    agent._vertex = SimpleNamespace(graph=SimpleNamespace(session_id="s", flow_id=None, user_id=None))
    return agent


async def test_get_memory_data_without_init_matches_the_stock_agent():
    ours = await bare(load_component_class()).get_memory_data()
    stock = await bare(AgentComponent).get_memory_data()
    assert ours == stock == []
