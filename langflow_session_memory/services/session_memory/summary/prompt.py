"""What a fold asks the model for: the summary's form (two sections, a word cap) and the request that carries it.

Pure: the instructions, the transcript of a batch, and how a batch is cut into requests that
fit a small context window. The wording is what a real instruct model was judged on
(docs/real-model.md): changing it needs that judge again.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import HumanMessage, SystemMessage
from lfx.utils.constants import MESSAGE_SENDER_NAME_AI, MESSAGE_SENDER_NAME_USER

from langflow_session_memory.services.session_memory.rules import clipping, token_estimate
from langflow_session_memory.services.session_memory.rules.policy import SUMMARY

SECTION_HEADINGS = ("Key facts", "Conversation so far")
# Where a message was clipped for the fold request (rules/clipping; the table keeps it whole).
FOLD_CLIP_MARKER = " [... {cut:,} more characters ...] "


# The format is described in words, not shown with sample bullets: small instruct models copy
# sample lines verbatim (Qwen2.5-Coder 0.5B returned "- one short line per fact (who, what, ...)").
# The request holds the batch alone, the question after it: shown the current notes, Qwen2.5-Coder
# 1.5B copied them back unchanged fold after fold, or copied the messages (docs/real-model.md,
# issue 38); asked what one part of the chat states, it wrote facts. ``notes`` merges them.
SUMMARY_INSTRUCTIONS = """You keep the running notes of a long conversation between a user and an assistant, in two
sections, "Key facts" and "Conversation so far". You read the next part of the conversation and write down the
lasting facts it states, in your own words. You never copy messages and you leave out chit-chat."""
FACT_QUESTION = (
    f"""Which lasting facts does this part of the conversation state? Lasting facts are: people and their
names, relatives, pets, things bought or owned, where someone lives or works, dates, numbers, names and identifiers
of things, plans, decisions, commitments, allergies, hobbies. Not facts: weather, meals, TV, moods, sleep, greetings.
Write the line "Key facts:" and then each lasting fact on its own line, starting with "- ", at most """
    f"""{SUMMARY.fact_line_words}
words, saying who or what it is about. Then write the line "Conversation so far:" and one line starting with "- "
naming the topics."""
)
_INSTRUCTION_TOKENS = token_estimate.estimate_tokens(SUMMARY_INSTRUCTIONS) + token_estimate.estimate_tokens(
    FACT_QUESTION
)


@dataclass(frozen=True)
class ChatLine:
    """One message of a batch, as the fold request shows it."""

    role: str
    text: str


@dataclass(frozen=True)
class FoldBudget:
    """The fold's output cap, and how much transcript one request may carry (None: a whole batch)."""

    output_tokens: int
    transcript_tokens: int | None = None


def speaker(sender: str, sender_name: str | None) -> str:
    """Who a line of the transcript says wrote it: the name the flow gave the speaker (a person's, a persona's), so a
    fact is written down as theirs; else Langflow's sender (User, Machine), as the fold was judged with."""
    if sender_name and sender_name not in (MESSAGE_SENDER_NAME_USER, MESSAGE_SENDER_NAME_AI):
        return sender_name
    return sender


def fold_request(batch: Sequence[ChatLine]) -> list:
    """The instructions, then the batch's transcript (each message clipped) and the question about it."""
    transcript = "\n".join(f"{line.role}: {clipped(line.text, SUMMARY.message_tokens)}" for line in batch)
    return [
        SystemMessage(content=SUMMARY_INSTRUCTIONS),
        HumanMessage(content=f"Conversation:\n{transcript}\n\n{FACT_QUESTION}"),
    ]


def fold_budget(output_tokens: int, context_window: int | None) -> FoldBudget:
    """What one fold request may hold so that it fits the model's context window, when known.

    ``output_tokens`` is the fold's own output cap for the model. A small window (a local
    model's 2,048 tokens) keeps a quarter for the summary written, and a batch of long
    messages is then folded in several requests, each merged into the notes in turn. The request
    gets only ``SUMMARY.request_share`` of what remains: real tokenizers count more tokens
    than the ``characters / 4`` estimate on digits, code and logs.
    """
    if not context_window:
        return FoldBudget(output_tokens)
    output = min(output_tokens, max(context_window // 4, SUMMARY.min_output_tokens))
    room = int((context_window - output) * SUMMARY.request_share) - _INSTRUCTION_TOKENS
    return FoldBudget(output, max(room, SUMMARY.min_transcript_tokens))


def transcript_chunks(batch: Sequence[ChatLine], budget: FoldBudget) -> list[list[ChatLine]]:
    """The batch in order, cut into the fewest runs of messages that each fit one request.

    A message too long for any request is clipped to fit (its text in the table is untouched).
    """
    if budget.transcript_tokens is None:
        return [list(batch)]
    limit = budget.transcript_tokens
    longest = min(SUMMARY.message_tokens, limit - SUMMARY.line_overhead_tokens)
    chunks: list[list[ChatLine]] = [[]]
    used = 0
    for line in batch:
        shortened = ChatLine(role=line.role, text=clipped(line.text, longest))
        size = token_estimate.estimate_tokens(shortened.text) + SUMMARY.line_overhead_tokens
        if chunks[-1] and used + size > limit:
            chunks.append([])
            used = 0
        chunks[-1].append(shortened)
        used += size
    return chunks


def clippable(chunk: Sequence[ChatLine]) -> bool:
    """Whether a chunk of one message may still be clipped to half (it is longer than the smallest clip)."""
    return len(chunk) == 1 and token_estimate.estimate_tokens(chunk[0].text) > SUMMARY.smallest_clip_tokens


def halved(chunk: Sequence[ChatLine]) -> list[list[ChatLine]]:
    """The chunk as two smaller ones: its messages split, or a lone message clipped to half."""
    if len(chunk) > 1:
        middle = len(chunk) // 2
        return [list(chunk[:middle]), list(chunk[middle:])]
    line = chunk[0]
    return [[ChatLine(role=line.role, text=clipped(line.text, token_estimate.estimate_tokens(line.text) // 2))]]


def clipped(text: str, max_tokens: int) -> str:
    """The text in ``max_tokens`` for a fold request: its head and its tail, where a pasted log's summary line and an
    error often are, the middle marked as cut."""
    return clipping.clipped(text, max_tokens, FOLD_CLIP_MARKER)
