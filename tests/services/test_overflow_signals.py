"""What real servers say when a prompt does not fit: one row per server wording, each recognised.

Each text is the server's own, as its client raises it (the OpenAI SDK prefixes ``Error code: 400 - ``),
read from the source named in the row: the server's code, its SDK, LiteLLM's exception mapping
(``litellm/litellm_core_utils/exception_mapping_utils.py``), LangChain's own classification
(``langchain_openai/chat_models/base.py`` ``_handle_openai_bad_request``), or measured here.
"""

import pytest
from langchain_core.exceptions import ContextOverflowError

from langflow_session_memory.services.session_memory.rules.context_size import (
    EMPTY_STREAM,
    OVERFLOW_PHRASES,
    is_context_length_error,
    is_probable_overflow,
)

# (server, where the text was read, the text)
OVERFLOW_TEXTS = [
    (
        "OpenAI chat completions",
        "OpenAI API (code context_length_exceeded); LiteLLM's mapping",
        "Error code: 400 - {'error': {'message': \"This model's maximum context length is 128000 tokens. However, "
        'your messages resulted in 130521 tokens. Please reduce the length of the messages.", '
        "'type': 'invalid_request_error', 'param': 'messages', 'code': 'context_length_exceeded'}}",
    ),
    (
        "OpenAI Responses API",
        "langchain_openai _handle_openai_api_error ('exceeds the context window')",
        "Your input exceeds the context window of this model. Please adjust your input and try again.",
    ),
    (
        "Azure OpenAI",
        "Azure OpenAI error body (code context_length_exceeded); LiteLLM's Azure mapping",
        "Error code: 400 - {'error': {'message': \"This model's maximum context length is 8192 tokens. However, "
        "you requested 9001 tokens (8001 in the messages, 1000 in the completion). Please reduce the length of the "
        "messages or completion.\", 'type': 'invalid_request_error', 'param': 'messages', "
        "'code': 'context_length_exceeded'}}",
    ),
    (
        "vLLM (OpenAI server, before 0.6)",
        "vllm/entrypoints/openai/serving_engine.py",
        "Error code: 400 - {'object': 'error', 'message': \"This model's maximum context length is 4096 tokens. "
        "However, you requested 4200 tokens (4000 in the messages, 200 in the completion). Please reduce the length "
        "of the messages or completion.\", 'type': 'BadRequestError', 'param': None, 'code': 400}",
    ),
    (
        "vLLM (OpenAI server, 0.6 and later)",
        "vllm/entrypoints/openai/serving_engine.py _validate_input",
        "Error code: 400 - {'object': 'error', 'message': \"This model's maximum context length is 2048 tokens. "
        'However, your request has 2229 input tokens. Please reduce the length of the input messages.", '
        "'type': 'BadRequestError', 'param': None, 'code': 400}",
    ),
    (
        "llama-cpp-python server, not streamed",
        "llama_cpp/server/errors.py ErrorResponseFormatters.context_length_exceeded; measured (docs/real-model.md)",
        "Error code: 400 - {'error': {'message': \"This model's maximum context length is 2048 tokens. However, you "
        "requested 2229 tokens (2229 in the messages, None in the completion). Please reduce the length of the "
        "messages or completion.\", 'type': 'invalid_request_error', 'param': 'messages', "
        "'code': 'context_length_exceeded'}}",
    ),
    (
        "llama-cpp-python in-process",
        "llama_cpp/llama.py Llama._create_completion",
        "Requested tokens (2229) exceed context window of 2048",
    ),
    (
        "llama-server (llama.cpp), current",
        "llama.cpp tools/server: format_error_response, ERROR_TYPE_EXCEED_CONTEXT_SIZE",
        "Error code: 400 - {'error': {'code': 400, 'message': 'request (2229 tokens) exceeds the available context "
        "size (2048 tokens), try increasing it', 'type': 'exceed_context_size_error', 'n_prompt_tokens': 2229, "
        "'n_ctx': 2048}}",
    ),
    (
        "llama-server (llama.cpp), earlier",
        "llama.cpp examples/server; LiteLLM's list ('llama.cpp/Lemonade')",
        "Error code: 400 - {'error': {'code': 400, 'message': 'the request exceeds the available context size, "
        "try increasing it', 'type': 'invalid_request_error'}}",
    ),
    (
        "Ollama",
        "ollama server (400 on /api/chat and /api/embed when it does not truncate)",
        "registry.ollama.ai/library/llama3: the input length exceeds the context length (status code: 400)",
    ),
    (
        "LM Studio, keep tokens",
        "lmstudio-ai/lmstudio-bug-tracker issue 237",
        "Error code: 400 - {'error': 'Trying to keep the first 15857 tokens when context the overflows. However, "
        "the model is loaded with context length of only 4096 tokens, which is not enough. Try to load the model "
        "with a larger context length, or provide a shorter input'}",
    ),
    (
        "LM Studio, initial prompt",
        "LM Studio server error text",
        "Error code: 400 - {'error': 'The number of tokens to keep from the initial prompt is greater than the "
        "context length. Try to load the model with a larger context length, or provide a shorter input.'}",
    ),
    (
        "Anthropic",
        "Anthropic API; langchain_anthropic _handle_anthropic_bad_request",
        "Error code: 400 - {'type': 'error', 'error': {'type': 'invalid_request_error', "
        "'message': 'prompt is too long: 208310 tokens > 200000 maximum'}}",
    ),
    (
        "Google Gemini",
        "Gemini API INVALID_ARGUMENT; LiteLLM's list ('Gemini')",
        "400 The input token count (1198452) exceeds the maximum number of tokens allowed (1048575).",
    ),
    (
        "Amazon Bedrock",
        "Bedrock ValidationException; LiteLLM's Bedrock mapping",
        "An error occurred (ValidationException) when calling the Converse operation: Input is too long for "
        "requested model.",
    ),
    (
        "Mistral",
        "Mistral API; the vLLM-based error it returns",
        "Prompt contains 40123 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
    ),
    (
        "Groq",
        "Groq API (code context_length_exceeded)",
        "Error code: 400 - {'error': {'message': 'Please reduce the length of the messages or completion.', "
        "'type': 'invalid_request_error', 'param': 'messages', 'code': 'context_length_exceeded'}}",
    ),
    (
        "xAI",
        "xAI API",
        "Error code: 400 - {'code': 'Client specified an invalid argument', 'error': \"This model's maximum "
        'prompt length is 131072 but the request contains 140000 tokens."}',
    ),
    (
        "DeepSeek",
        "DeepSeek API (OpenAI-compatible)",
        "Error code: 400 - {'error': {'message': \"This model's maximum context length is 65536 tokens. However, you "
        "requested 70000 tokens (70000 in the messages, 0 in the completion). Please reduce the length of the "
        "messages or completion.\", 'type': 'invalid_request_error', 'param': None, 'code': 'invalid_request_error'}}",
    ),
    (
        "OpenRouter",
        "OpenRouter API",
        "Error code: 400 - {'error': {'message': \"This endpoint's maximum context length is 128000 tokens. However, "
        "you requested about 140000 tokens (140000 of text input). Please reduce the length of either one, or use "
        'the "middle-out" transform to compress your prompt automatically.", \'code\': 400}}',
    ),
    (
        "Cohere",
        "Cohere API; LiteLLM's Cohere mapping ('too many tokens')",
        "too many tokens: total number of tokens in the prompt cannot exceed 4081 - received 5120. Try using a "
        "shorter prompt, or enabling prompt truncating.",
    ),
    (
        "Hugging Face TGI / Together",
        "text-generation-inference validation; LiteLLM's Together and SageMaker mappings",
        "Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4097. Given: 4000 `inputs` tokens "
        "and 200 `max_new_tokens`",
    ),
    (
        "Cerebras",
        "LiteLLM's list ('Cerebras pattern')",
        "Please reduce the length of the messages or completion. Current length is 9000 while limit is 8192",
    ),
    (
        "OpenAI-compatible gateway",
        "langchain_openai _handle_openai_bad_request",
        "Error code: 400 - {'error': {'message': 'Input tokens exceed the configured limit of 272000 tokens.'}}",
    ),
]
NOT_OVERFLOWS = [
    "context deadline exceeded",
    "Invalid context_id: 'abc'",
    "Could not load the context for this flow",
    "<ContextVar name='current_graph' at 0x7f>",
    "Error code: 429 - Rate limit reached for requests; the context of this request was saved",
    "Error code: 429 - {'error': {'message': 'Rate limit reached for gpt-4o in organization org-x on tokens per "
    "min (TPM): Limit 30000, Used 29000, Requested 2000.', 'code': 'rate_limit_exceeded'}}",
    "Connection error.",
    "Error code: 400 - {'error': {'message': \"Invalid 'user': string too long. Expected a string with maximum "
    "length 64\", 'code': 'string_above_max_length'}}",
]


@pytest.mark.parametrize(("server", "source", "text"), OVERFLOW_TEXTS, ids=[row[0] for row in OVERFLOW_TEXTS])
def test_the_server_s_own_overflow_text_is_recognised(server, source, text):
    assert is_context_length_error(RuntimeError(text))


@pytest.mark.parametrize("text", NOT_OVERFLOWS)
def test_other_errors_are_not_overflows(text):
    assert not is_context_length_error(RuntimeError(text))


@pytest.mark.parametrize("phrase", OVERFLOW_PHRASES)
def test_every_phrase_stands_for_a_real_server_text(phrase):
    assert any(phrase.lower() in text.lower() for _server, _source, text in OVERFLOW_TEXTS)


def test_langchain_s_own_overflow_class_is_recognised_whatever_its_text():
    assert is_context_length_error(ContextOverflowError("provider said something new"))


def test_a_wrapped_overflow_matches_through_its_cause():
    wrapped = RuntimeError("Agent run failed after a partial message was emitted")
    wrapped.__cause__ = ValueError(OVERFLOW_TEXTS[0][2])
    assert is_context_length_error(wrapped)


EMPTY = ValueError(f"{EMPTY_STREAM}.")


@pytest.mark.parametrize(
    ("request_tokens", "context_window", "overflow"),
    [(2229, 2048, True), (1600, 2048, True), (900, 2048, False), (50, None, True)],
)
def test_an_empty_stream_is_an_overflow_where_the_request_could_be_one(request_tokens, context_window, overflow):
    assert is_probable_overflow(EMPTY, request_tokens=request_tokens, context_window=context_window) is overflow


def test_other_failures_are_no_overflow_whatever_the_size():
    assert not is_probable_overflow(ConnectionError("Connection error."), request_tokens=5000, context_window=2048)
