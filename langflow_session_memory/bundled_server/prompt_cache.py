"""Prompt caching as OpenAI and Anthropic document it, so a report can say what the input would be billed.

Token counts alone overstate what a provider charges: both bill input read from their prompt cache at a fraction
of the input price, and a hit needs an exact prompt prefix. Whether a history keeps its prefix from one request to
the next (a summary followed by raw messages that only grow) or changes it every turn (a window of the newest N
that slides) therefore changes the bill, not the count.

This module is the pure core: a function takes the cache as it stands, the request and the time, and returns the
request's input as billed (read, written, the rest) with the cache after the request. Nothing here reads a clock
or does I/O; the bundled model server (``fake_openai.py``) keeps one cache per running app.

A prompt is a sequence of tokens, each any hashable value: the caller decides what a token is, so that a hit is
counted in the same units as the caller's token count (``fake_openai.serialized_prompt``). Hits are found through
a chain of hashes of the prefix (Python's ``hash``, 64 bits): two different prefixes sharing a key is possible in
principle and ignored.

The rules and where they are written (read in the stored copies of these pages, 2026):

OpenAI, automatic caching (Chat Completions and Responses alike):

* Prompts of 1,024 tokens or more are cached; shorter ones never are. Guide, "How it works": "Caching is
  enabled automatically for prompts that are 1024 tokens or longer." (``OPENAI_PROMPT_CACHING``)
* A hit is the exact prefix shared with an earlier prompt still cached, counted in 128-token blocks from 1,024:
  "Cache hits require an exact, repeated prefix match ... for prompts that are 1024 tokens or longer. You can get
  a match until the first mismatched token in 128 token blocks." (``OPENAI_CACHING_201``, 1.1). So
  ``cached_tokens`` is 0, or 1,024 + 128k, and never more than the prompt.
* The prefix is the whole request in order, tools included: "The entire request prefix is cacheable: messages,
  images, audio, tool definitions, and structured output schemas" (same page); tools "must be identical between
  requests" (guide, "Structuring prompts").
* A cached prefix stays while it is used: in-memory retention keeps it after "5 to 10 minutes of inactivity"
  and never beyond an hour (guide, "In-memory prompt cache retention"; the same words in Microsoft's Azure OpenAI
  page). ``OPENAI_TTL_S`` takes the low end, 5 minutes after the last use; the hour's cap and the 24-hour
  ``prompt_cache_retention`` are not modelled.
* Not modelled: routing. OpenAI routes by a hash of the first ~256 tokens (and ``prompt_cache_key``) and a
  machine serves ~15 requests a minute per prefix, so a real hit is best-effort; here every cached prefix hits.
  Nor the cache writes that GPT-5.6 and later bill at 1.25x: the rates below are for models before it, which
  bill no write.

Anthropic, explicit breakpoints (``ANTHROPIC_PROMPT_CACHING``):

* The request is tools, then system, then messages, as content blocks; ``cache_control`` on a block is a
  breakpoint, at most 4 a request ("You can define up to 4 cache breakpoints"). Without one nothing is cached.
  The top-level ``cache_control`` ("automatic caching") "applies the cache breakpoint to the last cacheable
  block and moves it forward as the conversation grows", taking one of the 4: give that block
  ``cache_control=True``.
* A request writes the prefix up to each breakpoint ("caches the full prefix ... up to and including the block
  designated with cache_control"), if that prefix has at least the model's minimum ("The minimum cacheable
  prompt length is: 4096 tokens for Claude Opus 4.6, Claude Opus 4.5 ... 1024 tokens for Claude Sonnet 4.6,
  Claude Sonnet 4.5, Claude Opus 4.1, Claude Opus 4, Claude Sonnet 4, and Claude Sonnet 3.7 ... 4096 tokens for
  Claude Haiku 4.5; 2048 tokens for Claude Haiku 3.5 ... and Claude Haiku 3. Shorter prompts cannot be cached"):
  ``ANTHROPIC_MINIMUM_TOKENS``, looked up for a dated model name by ``anthropic_minimum_tokens``. A request with
  more than 4 breakpoints is refused: "A maximum of 4 blocks with cache_control may be provided. Found 5."
  (the API's ``invalid_request_error``, as reported in public issues of Anthropic SDK users).
* It reads the longest cached prefix ending at a block boundary within the lookback of one of its breakpoints:
  "The system checks for cache hits by working backwards from your explicit breakpoint ... The system only
  checks up to 20 blocks before each explicit cache_control breakpoint" (the breakpoint's own block is the first
  of the 20 checks). A prefix is cached only where some request had a breakpoint, so the blocks looked back on
  hit where an earlier request's breakpoint was (the last turn's, when the breakpoint moves with the
  conversation).
* Usage: ``cache_read_input_tokens`` (the hit), ``cache_creation_input_tokens`` (up to the last breakpoint,
  past the hit) and ``input_tokens`` ("tokens after the last cache breakpoint"); they add up to the prompt.
* "By default, the cache has a 5-minute lifetime. The cache is refreshed for no additional cost each time the
  cached content is used." The 1-hour TTL (writes at 2x) is not modelled, nor that an entry is only readable
  once the first response has begun (requests here are served one after another).

Billing (``RATES``): OpenAI's cached input against its input price per 1M tokens (``OPENAI_PRICING``; the
Prompt Caching 201 table gives the same discounts): gpt-4o $2.50 and $1.25 (0.5x), gpt-4.1 $2.00 and $0.50
(0.25x), gpt-5 $1.25 and $0.125 (0.1x); no write surcharge. Anthropic, every model: "5-minute cache write
tokens are 1.25 times the base input tokens price ... Cache read tokens are 0.1 times the base input tokens
price" (e.g. Claude Sonnet 4.5: $3, $3.75 and $0.30 per MTok).
"""

import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

OPENAI_PROMPT_CACHING = "https://developers.openai.com/api/docs/guides/prompt-caching"
OPENAI_CACHING_201 = "https://developers.openai.com/cookbook/examples/prompt_caching_201"
OPENAI_PRICING = "https://developers.openai.com/api/docs/pricing"
ANTHROPIC_PROMPT_CACHING = "https://platform.claude.com/docs/en/build-with-claude/prompt-caching"

OPENAI_MINIMUM_TOKENS = 1024
OPENAI_STEP_TOKENS = 128
OPENAI_TTL_S = 5 * 60.0

ANTHROPIC_MAX_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK_BLOCKS = 20
ANTHROPIC_TTL_S = 5 * 60.0
ANTHROPIC_MINIMUM_TOKENS = {
    "claude-opus-4-6": 4096,
    "claude-sonnet-4-6": 1024,
    "claude-opus-4-5": 4096,
    "claude-opus-4-1": 1024,
    "claude-opus-4": 1024,
    "claude-sonnet-4-5": 1024,
    "claude-sonnet-4": 1024,
    "claude-sonnet-3-7": 1024,
    "claude-haiku-4-5": 4096,
    "claude-haiku-3-5": 2048,
    "claude-haiku-3": 2048,
}


# Langflow's names of older models put the family after the version ("claude-3-5-haiku-20241022").
_ANTHROPIC_OLD_NAME = re.compile(r"^claude-(\d(?:-\d)?)-(opus|sonnet|haiku)")
_ANTHROPIC_DATE = re.compile(r"-(?:\d{8}|latest)$")


def anthropic_family(model: str) -> str:
    """A model's name as the documentation's table has it: ``claude-3-5-haiku-20241022`` is ``claude-haiku-3-5``."""
    name = _ANTHROPIC_DATE.sub("", model)
    return _ANTHROPIC_OLD_NAME.sub(lambda m: f"claude-{m.group(2)}-{m.group(1)}", name)


def anthropic_minimum_tokens(model: str) -> int:
    """The shortest prefix ``model`` caches, for a name as Langflow lists it (dated, ``-latest``, or old-style).

    A model the table does not know gets 1,024, the lowest documented minimum.
    """
    return ANTHROPIC_MINIMUM_TOKENS.get(anthropic_family(model), min(ANTHROPIC_MINIMUM_TOKENS.values()))


@dataclass(frozen=True)
class CacheRates:
    """What one input token costs, as a share of the provider's uncached input price, by how it was served."""

    cache_read: float
    cache_write: float = 1.0


RATES = {
    "gpt-4o": CacheRates(cache_read=1.25 / 2.50),
    "gpt-4.1": CacheRates(cache_read=0.50 / 2.00),
    "gpt-5": CacheRates(cache_read=0.125 / 1.25),
    "anthropic": CacheRates(cache_read=0.1, cache_write=1.25),
}


@dataclass(frozen=True)
class InputTokens:
    """One request's input tokens by how they are billed: read from the cache, written to it, neither."""

    uncached: int
    cache_read: int = 0
    cache_write: int = 0

    @property
    def total(self) -> int:
        return self.uncached + self.cache_read + self.cache_write


def billed_input(tokens: InputTokens, rates: CacheRates) -> float:
    """The input's price in uncached-token equivalents: comparable across requests, whatever the price per token."""
    return tokens.uncached + rates.cache_read * tokens.cache_read + rates.cache_write * tokens.cache_write


@dataclass(frozen=True)
class PromptCache:
    """The prefixes a provider holds, each by its key, with the time it expires (its last use plus the TTL).

    Never mutated: a request returns a new cache, which holds no expired prefix.
    """

    expires_at: Mapping[Hashable, float] = field(default_factory=dict)

    def live(self, now: float) -> dict[Hashable, float]:
        return {key: expiry for key, expiry in self.expires_at.items() if now < expiry}


def _openai_prefix_keys(prompt: Sequence[Hashable]) -> list[tuple[int, Hashable]]:
    """(length, key) of every prefix OpenAI may cache: 1,024 tokens, then every 128 more, as far as the prompt goes."""
    keys: list[tuple[int, Hashable]] = []
    chained, start = 0, 0
    for end in range(OPENAI_MINIMUM_TOKENS, len(prompt) + 1, OPENAI_STEP_TOKENS):
        chained = hash((chained, tuple(prompt[start:end])))
        keys.append((end, (end, chained)))
        start = end
    return keys


def openai_request(
    cache: PromptCache, prompt: Sequence[Hashable], now: float, ttl_s: float = OPENAI_TTL_S
) -> tuple[InputTokens, PromptCache]:
    """Serve ``prompt`` at ``now``: its longest cached prefix is read (``cached_tokens`` is ``cache_read``), and
    every cacheable prefix of it is kept for ``ttl_s`` from now, the one read included."""
    keys = _openai_prefix_keys(prompt)
    live = cache.live(now)
    cached = max((length for length, key in keys if key in live), default=0)
    kept = {**live, **{key: now + ttl_s for _, key in keys}}
    return InputTokens(uncached=len(prompt) - cached, cache_read=cached), PromptCache(kept)


@dataclass(frozen=True)
class Block:
    """One content block of an Anthropic request, in the request's order (tools, system, messages)."""

    content: Hashable
    tokens: int
    cache_control: bool = False


def anthropic_request(
    cache: PromptCache, blocks: Sequence[Block], now: float, minimum_tokens: int, ttl_s: float = ANTHROPIC_TTL_S
) -> tuple[InputTokens, PromptCache]:
    """Serve ``blocks`` at ``now`` for a model caching prefixes of at least ``minimum_tokens``: the longest cached
    prefix within the lookback of a breakpoint is read, the rest up to the last breakpoint written, and each
    breakpoint's prefix long enough is kept for ``ttl_s`` from now (as is the one read)."""
    breakpoints = [index for index, block in enumerate(blocks) if block.cache_control]
    if len(breakpoints) > ANTHROPIC_MAX_BREAKPOINTS:
        raise ValueError(f"at most {ANTHROPIC_MAX_BREAKPOINTS} blocks can have cache_control, not {len(breakpoints)}")
    keys, ends = [], []
    chained, total = 0, 0
    for index, block in enumerate(blocks):
        chained = hash((chained, block.content, block.tokens))
        total += block.tokens
        keys.append((index, chained))
        ends.append(total)
    live = cache.live(now)
    checked = {i for b in breakpoints for i in range(b, max(b - ANTHROPIC_LOOKBACK_BLOCKS, -1), -1)}
    hit = max((i for i in checked if keys[i] in live), default=None)
    read = ends[hit] if hit is not None else 0
    written = [b for b in breakpoints if ends[b] >= minimum_tokens]
    write = ends[written[-1]] - read if written else 0
    kept = {**live, **{keys[b]: now + ttl_s for b in written}}
    if hit is not None:
        kept[keys[hit]] = now + ttl_s
    return InputTokens(uncached=total - read - write, cache_read=read, cache_write=write), PromptCache(kept)
