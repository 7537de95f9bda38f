"""Every event this extension writes to Langflow's log, in one catalogue: its name, level, fields and meaning.

A log line is ``<event> key=value ...``, carrying ids, counts and reasons, never message or summary
text. The code writes each event by its entry here (``f"{FOLD_FAILED} mode=..."``), docs/operations.md's
table is :func:`markdown_table` (``python -m langflow_session_memory.services.session_memory.log_events``
prints it; ``tests/test_log_events.py`` checks both), and the tests' and benchmarks' watch for failures
is :data:`FAILURES` and :data:`PROBLEMS`.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """One log event: ``name`` starts its line, ``fields`` are what it may carry, ``when`` why it is written."""

    name: str
    level: str
    fields: str
    when: str
    problem: bool = False  # the memory path did not do its job for a turn or a session (benchmarks count these)

    def __str__(self) -> str:
        return self.name


FOLD = Event(
    "session_summary_fold",
    "INFO",
    "latency_ms= folded= summary_words_before= summary_words_after= version= mode= session_id=",
    "a batch of 20 folded and committed; `mode=inline` inside a turn, `mode=background` after an answer (also when"
    " awaited where no server loop runs)",
)
FOLD_ELSEWHERE = Event(
    "session_summary_fold_elsewhere",
    "INFO",
    "waited_ms= still_claimed= session_id=",
    "another worker had claimed the fold; this compaction (a turn refused as too long) waited and used its summary"
    " (`still_claimed=true`: the wait ran out first, a slow or a dead worker's fold)",
)
FOLD_DEFERRED = Event(
    "session_summary_fold_deferred",
    "INFO",
    "reason=busy running=",
    "16 background folds already run in this process; the session's next turn starts its fold",
)
FOLD_WAITED = Event(
    "session_summary_fold_waited",
    "INFO",
    "waited_ms= folds= still_running=",
    "on a self-hosted server, a new turn waited for the folds running there before reading its history"
    " (`still_running`: those the fold timeout left running; the turn went on)",
)
BACKGROUND_STOPPED = Event(
    "session_summary_background_stopped",
    "INFO",
    "cancelled= stuck=",
    "Langflow shut down with background folds running; they were cancelled and gave back their claims",
)
LOST_RACE = Event(
    "session_summary_lost_race",
    "INFO",
    "seen_version= winner_version= session_id=",
    "another worker committed first (after this worker's claim ran out); its summary is used",
)
FOLD_DISCARDED = Event(
    "session_summary_fold_discarded",
    "INFO",
    "reason=messages_changed session_id=",
    "a message of the batch was deleted or edited while it was being folded; folded again later without it",
)
FOLD_FAILED = Event(
    "session_summary_fold_failed",
    "WARNING",
    "mode= latency_ms= reason= session_id=",
    "a fold failed (after `latency_ms`); folding pauses for the session, `FoldPolicy.pause` (`session_summary_paused`)",
    problem=True,
)
PAUSED = Event(
    "session_summary_paused",
    "WARNING",
    "until= next_request_messages= session_id=",
    "folding pauses for the session until `until`; the attempt after the pause asks about `next_request_messages`"
    " messages at a time (half the refused request's after a refused summary or a time-out: never the same request"
    " again)",
    problem=True,
)
FOLD_SKIPPED = Event(
    "session_summary_fold_skipped",
    "INFO",
    "messages=1 reason= session_id=",
    "a lone message whose summary the checks still refused, or whose fold ran out of time, was passed over, the"
    " summary unchanged, so no message"
    " stalls the session; its text stays in the table, where excerpts and the search tool find it",
)
SALVAGED = Event(
    "session_summary_salvaged",
    "INFO",
    "why= lines_dropped= words_written= words_kept=",
    "a fold's answer had flaws and its usable lines were kept instead of refusing the fold: `why` lists them"
    " (`cut_at_the_output_cap` or `stream_ended_without_a_finish_reason`: the line being written dropped;"
    " `copied_instructions`: lines copied from the fold's instructions dropped; `headings_repaired`; "
    "`unstorable_characters` removed)",
)
SHORTENED = Event(
    "session_summary_shortened",
    "INFO",
    "dropped_lines= dropped_facts= words_written= words_kept=",
    "the summary would pass its word limit (`SummaryPolicy.word_limit`) with a fold's new lines; the oldest"
    ' "Conversation so far" lines went first (`dropped_lines`), then the oldest "Key facts" (`dropped_facts`); a'
    " fact is never lost without this line",
)
RESET = Event(
    "session_summary_reset",
    "WARNING",
    "reason= folded_count= detail= session_id=",
    "`reason=folded_range_changed`: the messages at or before the cursor no longer number `folded_count` (a message"
    " stored late behind it, or one removed behind Langflow's back); `reason=summary_invalid detail=`: the stored"
    " summary fails the checks of an edit (over a cap of `SummaryPolicy`, or a control character) and is"
    " not sent. Either way the session is folded again",
    problem=True,
)
EXCERPTS = Event(
    "session_memory_excerpts",
    "INFO",
    "words= candidates= quoted= best_score= meant= pool= latency_ms= session_id=",
    "older messages quoted in this turn's request without a tool call: the user's words that neither the summary"
    " nor the messages sent hold found them, and with an Embedding Model (`pool=` messages compared) `meant=` of"
    ' them by meaning (docs/switch.md, "Excerpts of older messages")',
)
EXCERPTS_FAILED = Event(
    "session_memory_excerpts_failed",
    "ERROR",
    "[where=] reason=",
    "the query for excerpts failed and the turn went on without them; `where=embedding_model`: the embedding model"
    " failed and the turn kept its word excerpts",
)
PASSAGES = Event(
    "session_memory_passages",
    "INFO",
    "words= searched= matched= quoted= hits= best_score= latency_ms= session_id=",
    "older messages quoted in this turn's request from the full-text index: of the question's `words`, the"
    " `searched` rarest matched `matched` messages; the best `hits` are quoted with their neighbours (`quoted` lines)",
)
INDEXED = Event(
    "session_memory_indexed",
    "INFO",
    "messages= batches= latency_ms= session_id=",
    "after an answer, messages older than the next turn's window were added to the full-text index",
)
FACTS_KEPT = Event(
    "session_memory_facts_kept",
    "INFO",
    "facts= sourced= session_id=",
    "a fold's notes went over the word limit: the `facts` they dropped were kept in the full-text index, `sourced`"
    " of them beside the message they came from, where a question still finds them",
)
INDEX_BEHIND = Event(
    "session_memory_index_behind",
    "INFO",
    "session_id=",
    "a turn asked about older messages the full-text index does not hold yet (a session switched on late, or"
    " its indexing after the last answer still running): they were searched by their words, as before the index",
)
INDEX_FAILED = Event(
    "session_memory_index_failed",
    "ERROR",
    "where= reason=",
    "the full-text index could not be read (`where=search`: the turn searched by words instead) or written"
    " (`where=indexing`, after an answer: the next answer retries; `where=notes`: the facts a fold dropped were not"
    " kept, the fold stands; `where=reset`: a reset left them)",
)
SEARCH = Event(
    "session_memory_search",
    "INFO",
    "keywords= candidates= matches= latency_ms=",
    "the model called the search tool (`search_earlier_messages`) and got `matches` older messages",
)
SEARCH_FAILED = Event(
    "session_memory_search_failed",
    "ERROR",
    "reason=",
    "the search tool's query failed; the model was told that nothing could be searched",
)
HISTORY_TRIMMED = Event(
    "session_memory_history_trimmed",
    "INFO",
    "left_out= reason= summary_sent= session_id=",
    "unfolded messages older than the window were left out of this turn: `context_window` (to fit it), `paused`,"
    " `backlog` (over two batches, folded over the next turns), `waiting_tokens` (messages waiting over their token"
    " budget while they could not be folded)",
)
TURN = Event(
    "session_memory_turn",
    "INFO",
    "input_tokens= output_tokens= fold_input_tokens= fold_output_tokens= cached_input_tokens="
    " cache_write_input_tokens= fold_cached_input_tokens= usage= folded= history_messages= excerpts= excerpt_tokens=",
    "every turn with memory: the older messages quoted and their estimated tokens; the usage reported (or"
    " `usage=estimated` where the provider reported none, e.g. llama.cpp's streams, also shown on the Session memory"
    " step); `cached_input_tokens` is the part of the Agent's own requests' input the provider served from its prompt"
    " cache (OpenAI's `prompt_tokens_details.cached_tokens`, Anthropic's `cache_read_input_tokens`, as LangChain"
    " reports them), `cache_write_input_tokens` the part it wrote to the cache (Anthropic's"
    " `cache_creation_input_tokens`, billed at 1.25x), `fold_cached_input_tokens` the cached input of the folds it"
    " reports; all are on the Session memory step too, since Langflow's usage has no field for them",
)
EARLY_FOLD = Event(
    "session_context_early_fold",
    "INFO",
    "size_before= size_after= context_window= folded_from_window= / reason=waiting_tokens waiting_messages="
    " waiting_tokens= budget= folding= session_id=",
    "the prompt neared the context window: raw messages folded early; with `reason=waiting_tokens`, the raw messages"
    " waiting beyond the window passed their token budget: folded at once (`folding=True`) or left out",
)
OVERFLOW = Event(
    "session_context_overflow",
    "WARNING",
    "call= attempt= result= action= reason= size= size_after= context_window= folded=",
    "the provider refused the prompt as too long; compaction and one retry (`call=after_tool`: a call after a tool,"
    " retried once smaller); the retry's outcome too (`result=answered` or `refused`)",
)
REDUCED = Event(
    "session_context_reduced",
    "INFO",
    "reason=window|refused limit= size_before= size_after= history_left_out= tool_results_clipped="
    " tool_result_tokens_before= tool_result_tokens_after=",
    "a model call after a tool was made to fit the window: history reduced to the summary, tool results clipped"
    " (docs/context-safety.md)",
)
FALLBACK = Event(
    "session_memory_fallback",
    "ERROR",
    "[where=] reason=",
    "anything else failed; the turn used the stock history (`reason=table_missing ... fix=` when the table is gone);"
    " with `where=`, one hook or middleware of ours failed and the turn went on as the stock Agent's from there"
    " (`agent_model`, `agent_middleware`, `agent_tools`, `call_fit`, `memory_step`, `usage`, `fold_after_answer`,"
    " `stored_message`, `handed_on`: docs/design.md)",
    problem=True,
)
HOOK_OUT_OF_ORDER = Event(
    "session_memory_hook_out_of_order",
    "ERROR",
    "hook= phase=",
    "a hook of ours found no run of the attempt (`phase=none`) or one in a phase it does not act in (Langflow called"
    " the Agent's hooks in an order this version does not know); memory was left out of that hook and the attempt"
    ' went on as the stock Agent\'s (docs/design.md, "The path of a turn")',
    problem=True,
)
CLEANUP_FAILED = Event(
    "session_memory_cleanup_failed",
    "ERROR",
    "action= reason=",
    "a cleanup statement failed inside Langflow's transaction; only it was rolled back, Langflow's own work committed",
)
CALL_SIZE_FAILED = Event(
    "session_memory_call_size_failed",
    "ERROR",
    "reason=",
    "keeping the last model call's size failed after the answer; the next turn uses the estimate",
)
CACHE_BREAKPOINT_FAILED = Event(
    "session_memory_cache_breakpoint_failed",
    "ERROR",
    "reason=",
    "marking the summary as an Anthropic cache breakpoint failed; the request went to the model unmarked (it costs"
    " more, nothing else changes)",
)
API_FAILED = Event(
    "session_memory_api_failed",
    "ERROR",
    "reason=",
    "a REST API request met a database error; it answered 503 (`reason=table_missing ... fix=` when the table is gone)",
)
SETTING_IGNORED = Event(
    "session_memory_setting_ignored",
    "WARNING",
    "input= / variable= reason= default= replacement=",
    "an input or environment variable held a value that is not usable; its default is used",
)
MIGRATED = Event("session_memory_migrated", "INFO", "revision= latency_ms=", "the start-up migration ran")
MIGRATION_FAILED = Event(
    "session_memory_migration_failed",
    "ERROR",
    "reason=",
    "the start-up migration failed; Langflow starts, and every turn with the switch on falls back to the stock history",
)
STARTER_FLOW = Event(
    "session_memory_starter_flow",
    "INFO",
    "action=",
    "the Session Memory Chat template at start-up (`created`, `updated`, `skipped reason=`,"
    " `kept reason=created_by_another_worker`)",
)
STARTER_FLOW_FAILED = Event(
    "session_memory_starter_flow_failed",
    "ERROR",
    "reason=",
    "the Session Memory Chat template could not be added; Langflow starts without it",
)
SWEEP = Event("session_memory_sweep", "INFO", "removed=", "the hourly sweep of state rows whose session is gone")
SWEEP_FAILED = Event("session_memory_sweep_failed", "ERROR", "reason=", "the hourly sweep failed; it runs again")

CATALOGUE = (
    FOLD,
    FOLD_ELSEWHERE,
    FOLD_DEFERRED,
    FOLD_WAITED,
    BACKGROUND_STOPPED,
    LOST_RACE,
    FOLD_DISCARDED,
    FOLD_FAILED,
    PAUSED,
    FOLD_SKIPPED,
    SALVAGED,
    SHORTENED,
    RESET,
    EXCERPTS,
    EXCERPTS_FAILED,
    PASSAGES,
    INDEXED,
    FACTS_KEPT,
    INDEX_BEHIND,
    INDEX_FAILED,
    SEARCH,
    SEARCH_FAILED,
    HISTORY_TRIMMED,
    TURN,
    EARLY_FOLD,
    OVERFLOW,
    REDUCED,
    FALLBACK,
    HOOK_OUT_OF_ORDER,
    CLEANUP_FAILED,
    CALL_SIZE_FAILED,
    CACHE_BREAKPOINT_FAILED,
    API_FAILED,
    SETTING_IGNORED,
    MIGRATED,
    MIGRATION_FAILED,
    STARTER_FLOW,
    STARTER_FLOW_FAILED,
    SWEEP,
    SWEEP_FAILED,
)
# Events that say a part of ours failed (ERROR): a test run through the real app that meets one fails.
FAILURES = tuple(event.name for event in CATALOGUE if event.level == "ERROR")
# Events that say the memory path did not do its job (a failed fold, a pause, a reset, a fallback).
PROBLEMS = tuple(event.name for event in CATALOGUE if event.problem)


def markdown_table() -> str:
    """docs/operations.md's table of log events, one row per event, in the catalogue's order."""
    rows = [
        f"| `{event.name} {event.fields.replace('|', chr(92) + '|')}` | {event.level} | {event.when} |"
        for event in CATALOGUE
    ]
    return "\n".join(["| event | level | when |", "| --- | --- | --- |", *rows])


if __name__ == "__main__":
    print(markdown_table())  # noqa: T201
