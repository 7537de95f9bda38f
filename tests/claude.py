"""Claude through langchain-anthropic against the bundled server's Messages API (``bundled_server/fake_anthropic``)."""

from langchain_anthropic import ChatAnthropic
from langchain_core.tools import tool

SONNET = "claude-sonnet-4-5-20250929"  # caches prefixes from 1,024 tokens
HAIKU = "claude-haiku-4-5-20251001"  # from 4,096


def claude(server, model: str = SONNET, **settings) -> ChatAnthropic:
    """A Claude model served by ``server`` (the SDK adds ``/v1/messages`` to the address)."""
    return ChatAnthropic(
        model=model, api_key="sk-ant-test", anthropic_api_url=server.base_url.removesuffix("/v1"), **settings
    )


@tool
def search_earlier_messages(query: str) -> str:
    """Find this session's older messages by keywords."""
    return "nothing found"
