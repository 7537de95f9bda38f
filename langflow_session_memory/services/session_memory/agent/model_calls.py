"""What one attempt's model calls were: counted as they run, and what fitting them to the window changed.

Both travel with the attempt's :class:`agent.run.Run`; the answer's usage, the log line and the Session memory
step are read from them after the answer.
"""

from dataclasses import dataclass

from langchain_core.callbacks import AsyncCallbackHandler

from langflow_session_memory.services.session_memory.rules import token_estimate, usage
from langflow_session_memory.services.session_memory.rules.call_fit import Reduction
from langflow_session_memory.services.session_memory.rules.usage import TokenUsage


class ModelCalls(AsyncCallbackHandler):
    """Counts the Agent's model calls in a run and keeps what the provider reported for the last one.

    Attached to the Agent's own model, so it sees every call of the tool loop (and none of
    the folds, which run on a copy without callbacks). The last call's size is what the
    next turn's prompt grows from; the usage Langflow stores sums every call of the turn.
    """

    def __init__(self) -> None:
        self.started = 0
        self.last_call_tokens: int | None = None
        self.usage = TokenUsage()  # over the run's calls: as reported, else estimated
        self._prompt_estimate = 0

    async def on_chat_model_start(self, _serialized, messages, **_kwargs) -> None:
        self.started += 1
        self._prompt_estimate = token_estimate.messages_tokens(messages[0])

    async def on_llm_end(self, response, **_kwargs) -> None:
        """The call's size as the provider reported it; estimated when it reported none (llama.cpp's streams)."""
        for generations in response.generations:
            for generation in generations:
                call = usage.of_call(
                    getattr(getattr(generation, "message", None), "usage_metadata", None),
                    prompt_tokens=self._prompt_estimate,
                    answer=generation.text,
                )
                self.usage += call
                self.last_call_tokens = call.input_tokens + call.output_tokens


@dataclass
class CallReductions:
    """What fitting the run's model calls to the window changed (``call_fit``): how many calls, whether one
    was retried after "prompt too long", and the last reduction, for the log line and the Session memory step."""

    calls: int = 0
    retried: bool = False
    last: Reduction | None = None

    def add(self, reduction: Reduction, retry: bool) -> None:
        self.calls += 1
        self.retried = self.retried or retry
        self.last = reduction

    def facts(self) -> dict:
        """Counts and estimated sizes, never text; empty when no call was reduced."""
        if self.last is None:
            return {}
        return {
            "calls_fitted_to_window": self.calls,
            "retried_after_too_long": self.retried,
            "history_left_out": self.last.history_left_out,
            "tool_results_clipped": self.last.results_clipped,
            "tool_result_tokens": f"{self.last.result_tokens_before} -> {self.last.result_tokens_after}",
        }
