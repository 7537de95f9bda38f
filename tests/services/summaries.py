"""Sample batches and summaries shared by the summary tests, and a tracer that records runs."""

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.messages import AIMessage

from langflow_session_memory.services.session_memory.summary.prompt import ChatLine

BATCH = [ChatLine("User", f"we deploy project PRJ-123 on the EU cluster, step {i}") for i in range(20)]
GOOD = "Key facts:\n- project PRJ-123 runs on the EU cluster\nConversation so far:\n- deployment steps 0 to 19"


class RecordedRuns(AsyncCallbackHandler):
    """A tracer's view: every chat model run it is told about, with its name and tags."""

    def __init__(self):
        self.runs = []

    async def on_chat_model_start(self, serialized, messages, *, run_id, name=None, tags=None, **kwargs):
        self.runs.append({"run_id": run_id, "name": name or kwargs.get("metadata", {}).get("name"), "tags": tags})


def cached_answer(cache_read: int = 1024) -> AIMessage:
    """A good summary, with usage as LangChain reports a provider's prompt-cache hit."""
    usage = {"input_tokens": 1500, "output_tokens": 40, "total_tokens": 1540}
    return AIMessage(content=GOOD, usage_metadata={**usage, "input_token_details": {"cache_read": cache_read}})


# What Qwen2.5-Coder 1.5B wrote for a batch of twenty one-line turns of the recall eval (docs/real-model.md), shortened:
# every fact in "Key facts", then the transcript copied under "Conversation so far", one line many times over.
FACT_LINES = [f"- The badge code of team {13 + 3 * i} is BADGE-{1000 + 7 * i}." for i in range(8)]
COPIED = [f"- Step {i}: let's look at the nightly export job next, keep it short." for i in range(12)]
OVER_THE_CAP = "\n".join(
    [
        "Key facts:",
        *FACT_LINES,
        "",
        "Conversation so far:",
        *[line for step in COPIED for line in (step, FACT_LINES[0])],
    ]
)
