"""The tokenizer counts the token estimate is held to (``tests/services/token_counts.json``), counted again with the
tier's own Qwen2.5 and Gemma 3 vocabularies: the record stays what the tokenizers say."""

import json

from tests.real_model.token_counts import RECORD, measured


def test_the_recorded_counts_are_what_the_tier_s_tokenizers_count_today():
    recorded = json.loads(RECORD.read_text())
    today = measured()
    assert today["samples"] == recorded["samples"]
    for tokenizer, counts in today["counts"].items():
        assert counts == recorded["counts"][tokenizer], tokenizer
