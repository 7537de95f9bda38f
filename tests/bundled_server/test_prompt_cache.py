"""The prompt-cache simulator follows the providers' documented rules (sources in its module docstring)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st
from lfx.base.models.anthropic_constants import ANTHROPIC_MODELS_DETAILED

from langflow_session_memory.bundled_server.prompt_cache import (
    ANTHROPIC_MINIMUM_TOKENS,
    RATES,
    Block,
    CacheRates,
    InputTokens,
    PromptCache,
    anthropic_family,
    anthropic_minimum_tokens,
    anthropic_request,
    billed_input,
    openai_request,
)

TTL = 300.0
SONNET = ANTHROPIC_MINIMUM_TOKENS["claude-sonnet-4-5"]


def prompt(length: int, seed: int = 0) -> list[int]:
    return [seed * 1_000_000 + i for i in range(length)]


def served_twice(first: list, second: list, gap_s: float = 1.0, ttl_s: float = TTL) -> InputTokens:
    _, cache = openai_request(PromptCache(), first, now=0.0, ttl_s=ttl_s)
    tokens, _ = openai_request(cache, second, now=gap_s, ttl_s=ttl_s)
    return tokens


def step_down(tokens: int) -> int:
    """What the docs say a shared prefix of ``tokens`` yields: 0 below 1,024, else 1,024 plus whole 128s."""
    return 0 if tokens < 1024 else 1024 + (tokens - 1024) // 128 * 128


@given(length=st.integers(0, 1023))
def test_a_prompt_below_1024_tokens_is_never_cached(length):
    assert served_twice(prompt(length), prompt(length)) == InputTokens(uncached=length)


@given(length=st.integers(1024, 6000))
def test_an_identical_prompt_hits_all_but_the_part_past_the_last_full_step(length):
    first, _ = openai_request(PromptCache(), prompt(length), now=0.0)
    assert first == InputTokens(uncached=length)
    second = served_twice(prompt(length), prompt(length))
    assert second.cache_read == length - (length - 1024) % 128
    assert second.total == length


@given(first=st.integers(0, 5000), second=st.integers(0, 5000), shared=st.integers(0, 5000))
def test_hits_come_in_steps_of_128_from_1024_up_to_the_shared_prefix(first, second, shared):
    earlier = prompt(first)
    later = [*prompt(min(shared, second)), *prompt(second - min(shared, second), seed=1)]
    cached = served_twice(earlier, later).cache_read
    assert cached == step_down(min(first, second, shared))
    assert cached == 0 or (cached >= 1024 and (cached - 1024) % 128 == 0)
    assert cached <= second


@given(length=st.integers(1024, 5000))
def test_a_change_in_the_first_token_kills_the_hit(length):
    changed = ["another first message", *prompt(length)[1:]]
    assert served_twice(prompt(length), changed).cache_read == 0


def test_a_prefix_expires_its_ttl_after_its_last_use():
    assert served_twice(prompt(2000), prompt(2000), gap_s=TTL - 0.001).cache_read == 1920
    assert served_twice(prompt(2000), prompt(2000), gap_s=TTL).cache_read == 0
    assert served_twice(prompt(2000), prompt(2000), gap_s=61, ttl_s=60).cache_read == 0


def test_every_use_keeps_the_prefix_another_ttl():
    cache, reads = PromptCache(), []
    for now in (0.0, 0.9 * TTL, 1.8 * TTL, 2.7 * TTL):
        tokens, cache = openai_request(cache, prompt(1500), now)
        reads.append(tokens.cache_read)
    assert reads == [0, 1408, 1408, 1408]


def test_the_longest_prefix_of_any_cached_prompt_is_read():
    _, cache = openai_request(PromptCache(), [*prompt(1200), *prompt(800, seed=1)], now=0.0)
    _, cache = openai_request(cache, [*prompt(1700), *prompt(300, seed=2)], now=1.0)
    tokens, _ = openai_request(cache, prompt(2000), now=2.0)
    assert tokens.cache_read == 1664  # the second prompt's 1,700 shared tokens, down to 1,024 + 5 x 128


def test_a_request_leaves_the_cache_it_was_given_alone_and_drops_what_expired():
    _, cache = openai_request(PromptCache(), prompt(2000), now=0.0)
    before = dict(cache.expires_at)
    _, after = openai_request(cache, prompt(1024, seed=1), now=TTL + 1)
    assert dict(cache.expires_at) == before
    assert len(after.expires_at) == 1  # only the new prompt's one cacheable prefix


def sonnet(cache: PromptCache, blocks: list[Block], now: float = 0.0) -> tuple[InputTokens, PromptCache]:
    return anthropic_request(cache, blocks, now, minimum_tokens=SONNET)


def conversation(turns: int, breakpoint_at: set[int]) -> list[Block]:
    """A 3,000-token system prompt and ``turns`` 10-token messages; ``cache_control`` on the blocks named."""
    blocks = [Block("system prompt", 3000), *(Block(f"message {i}", 10) for i in range(turns))]
    return [Block(b.content, b.tokens, cache_control=i in breakpoint_at) for i, b in enumerate(blocks)]


@given(sizes=st.lists(st.integers(0, 3000), max_size=8))
def test_without_breakpoints_nothing_is_cached(sizes):
    blocks = [Block(i, size) for i, size in enumerate(sizes)]
    _, cache = sonnet(PromptCache(), blocks)
    tokens, _ = sonnet(cache, blocks, now=1.0)
    assert tokens == InputTokens(uncached=sum(sizes))


def test_a_breakpoint_writes_its_prefix_and_a_later_request_reads_it():
    blocks = conversation(1, breakpoint_at={0})
    written, cache = sonnet(PromptCache(), blocks)
    read, _ = sonnet(cache, blocks, now=1.0)
    assert written == InputTokens(uncached=10, cache_write=3000)
    assert read == InputTokens(uncached=10, cache_read=3000)


def test_a_moving_breakpoint_reads_the_last_turn_and_writes_only_the_new_part():
    _, cache = sonnet(PromptCache(), conversation(2, breakpoint_at={2}))
    tokens, _ = sonnet(cache, conversation(4, breakpoint_at={4}), now=1.0)
    assert tokens == InputTokens(uncached=0, cache_read=3020, cache_write=20)


@pytest.mark.parametrize("model", sorted(ANTHROPIC_MINIMUM_TOKENS))
def test_a_prefix_shorter_than_the_models_minimum_is_not_cached(model):
    minimum = ANTHROPIC_MINIMUM_TOKENS[model]
    for size, cached in ((minimum - 1, False), (minimum, True)):
        blocks = [Block("instructions", size, cache_control=True), Block("question", 5)]
        _, cache = anthropic_request(PromptCache(), blocks, 0.0, minimum_tokens=minimum)
        tokens, _ = anthropic_request(cache, blocks, 1.0, minimum_tokens=minimum)
        assert tokens.cache_read == (size if cached else 0)


def test_documented_minimums():
    assert ANTHROPIC_MINIMUM_TOKENS["claude-sonnet-4-5"] == ANTHROPIC_MINIMUM_TOKENS["claude-opus-4-1"] == 1024
    assert ANTHROPIC_MINIMUM_TOKENS["claude-haiku-3"] == ANTHROPIC_MINIMUM_TOKENS["claude-haiku-3-5"] == 2048
    assert ANTHROPIC_MINIMUM_TOKENS["claude-opus-4-5"] == ANTHROPIC_MINIMUM_TOKENS["claude-haiku-4-5"] == 4096


def test_the_documented_4_6_minimums():
    assert ANTHROPIC_MINIMUM_TOKENS["claude-sonnet-4-6"] == 1024
    assert ANTHROPIC_MINIMUM_TOKENS["claude-opus-4-6"] == 4096


@pytest.mark.parametrize("model", [m["name"] for m in ANTHROPIC_MODELS_DETAILED if not m.get("deprecated")])
def test_every_current_claude_model_langflow_offers_has_a_documented_minimum(model):
    assert anthropic_family(model) in ANTHROPIC_MINIMUM_TOKENS, f"{model}: add its minimum to ANTHROPIC_MINIMUM_TOKENS"


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-sonnet-4-5-20250929", 1024),
        ("claude-haiku-4-5-20251001", 4096),
        ("claude-3-5-haiku-20241022", 2048),
        ("claude-3-7-sonnet-latest", 1024),
        ("claude-opus-4-6", 4096),
        ("claude-next-model", 1024),  # unknown: the lowest documented minimum
    ],
)
def test_a_dated_or_old_style_name_gets_its_model_s_minimum(model, minimum):
    assert anthropic_minimum_tokens(model) == minimum


@given(added=st.integers(1, 40))
def test_the_lookback_finds_a_cached_prefix_up_to_20_blocks_back(added):
    _, cache = sonnet(PromptCache(), conversation(5, breakpoint_at={5}))
    tokens, _ = sonnet(cache, conversation(5 + added, breakpoint_at={5 + added}), now=1.0)
    assert tokens.cache_read == (3050 if added < 20 else 0)


def test_a_breakpoint_near_the_cached_prefix_finds_it_beyond_the_lookback():
    _, cache = sonnet(PromptCache(), conversation(5, breakpoint_at={5}))
    tokens, _ = sonnet(cache, conversation(40, breakpoint_at={5, 40}), now=1.0)
    assert tokens == InputTokens(uncached=0, cache_read=3050, cache_write=350)


def test_a_change_before_the_last_breakpoint_reads_the_breakpoint_before_it():
    blocks = conversation(3, breakpoint_at={0, 3})
    _, cache = sonnet(PromptCache(), blocks)
    edited = [*blocks[:2], Block("an edited message", 10), blocks[3]]
    tokens, _ = sonnet(cache, edited, now=1.0)
    assert tokens == InputTokens(uncached=0, cache_read=3000, cache_write=30)


def test_more_than_four_breakpoints_are_refused():
    with pytest.raises(ValueError, match="at most 4"):
        sonnet(PromptCache(), conversation(4, breakpoint_at={0, 1, 2, 3, 4}))


def test_an_anthropic_prefix_lives_five_minutes_from_its_last_read():
    blocks = conversation(1, breakpoint_at={0})
    _, cache = sonnet(PromptCache(), blocks, now=0.0)
    read, cache = sonnet(cache, blocks, now=TTL - 1)
    assert read.cache_read == 3000
    again, _ = sonnet(cache, blocks, now=2 * TTL - 2)
    assert again.cache_read == 3000
    expired, _ = sonnet(cache, blocks, now=2 * TTL)
    assert expired == InputTokens(uncached=10, cache_write=3000)


blocks_strategy = st.lists(
    st.builds(Block, content=st.integers(0, 3), tokens=st.integers(0, 1500), cache_control=st.booleans()),
    max_size=12,
).filter(lambda blocks: sum(b.cache_control for b in blocks) <= 4)


@given(requests=st.lists(blocks_strategy, min_size=1, max_size=4))
def test_reads_writes_and_the_rest_add_up_to_the_prompt(requests):
    cache = PromptCache()
    for now, blocks in enumerate(requests):
        tokens, cache = sonnet(cache, blocks, now=float(now))
        assert tokens.total == sum(b.tokens for b in blocks)
        assert min(tokens.uncached, tokens.cache_read, tokens.cache_write) >= 0
        assert tokens.cache_read == 0 or tokens.cache_read >= SONNET
        if not any(b.cache_control for b in blocks):
            assert tokens.cache_read == tokens.cache_write == 0


def test_rates_are_the_cited_price_ratios():
    assert RATES["gpt-4o"] == CacheRates(cache_read=0.5)
    assert RATES["gpt-4.1"] == CacheRates(cache_read=0.25)
    assert RATES["gpt-5"] == CacheRates(cache_read=0.1)
    assert RATES["anthropic"] == CacheRates(cache_read=0.1, cache_write=1.25)


@given(uncached=st.integers(0, 10**6), read=st.integers(0, 10**6), write=st.integers(0, 10**6))
def test_billed_input_counts_uncached_tokens_whole_and_the_rest_at_their_rates(uncached, read, write):
    tokens = InputTokens(uncached=uncached, cache_read=read, cache_write=write)
    assert billed_input(InputTokens(uncached=uncached), RATES["gpt-5"]) == uncached
    assert billed_input(tokens, RATES["anthropic"]) == pytest.approx(uncached + 0.1 * read + 1.25 * write)
    assert billed_input(tokens, RATES["gpt-4o"]) == pytest.approx(uncached + 0.5 * read + write)


def test_a_cached_prompt_costs_a_tenth_at_gpt_5_and_half_at_gpt_4o():
    hit = served_twice(prompt(4096), prompt(4096))
    assert hit == InputTokens(uncached=0, cache_read=4096)
    assert billed_input(hit, RATES["gpt-5"]) == pytest.approx(409.6)
    assert billed_input(hit, RATES["gpt-4o"]) == 2048
