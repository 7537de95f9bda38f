"""Older messages found by meaning with a connected embedding model, on SQLite and PostgreSQL (issue 38, item 3).

The embedding model here is a LangChain ``Embeddings`` that places a text by the concepts its words belong
to (``CONCEPTS``), so that "instrument" is near "cello" as in a real model; the database, the turn and
the service are the real ones. What a real model finds is measured by ``make eval-real`` (docs/eval.md).
"""

import asyncio

from langchain_core.embeddings import Embeddings
from langchain_ollama import OllamaEmbeddings
from langchain_openai import OpenAIEmbeddings
from lfx.base.embeddings.embeddings_class import EmbeddingsWithModels

from langflow_session_memory.services.session_memory.embeddings import model_key
from langflow_session_memory.services.session_memory.rules.turn import Turn
from langflow_session_memory.services.session_memory.settings import embedding_timeout_seconds
from tests.chat import ScriptedChatModel, chat_rows, store_rows
from tests.services.test_service import WINDOW

CONCEPTS = {
    "music": ("cello", "instrument", "lessons", "bowing"),
    "home": ("kitchen", "repaint", "flat"),
    "work": ("work", "meeting", "report"),
    "food": ("dinner", "recipe", "curry"),
    "weather": ("rain", "weather", "walk"),
}
AXES = {word: axis for axis, words in enumerate(CONCEPTS.values()) for word in words}
FACT = "I signed up for cello lessons on Thursdays, my teacher says my bowing is enthusiastic."
QUESTION = "What instrument am I learning?"
FILLER = (
    "Work was long, another meeting about the report.",
    "I tried a new curry recipe for dinner.",
    "Went for a walk, the weather was nice.",
    "Thinking of whether to repaint the kitchen.",
)


class ConceptEmbeddings(Embeddings):
    """A text's vector: one count per concept of its words, and one per other word's first letter; the texts it
    was asked to embed are kept in ``embedded``."""

    def __init__(self, fail: Exception | None = None) -> None:
        self.embedded: list[str] = []
        self.fail = fail

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.fail:
            raise self.fail
        self.embedded += texts
        return [self._vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]

    @staticmethod
    def _vector(text: str) -> list[float]:
        vector = [0.0] * (len(CONCEPTS) + 26)
        for word in (word.strip(".,!?'").lower() for word in text.split()):
            if word in AXES:
                vector[AXES[word]] += 1.0
            elif word[:1].isascii() and word[:1].isalpha():
                vector[len(CONCEPTS) + ord(word[0]) - ord("a")] += 0.2
        return vector


async def session_with_an_old_fact(sessions, key, count: int = 60):
    rows = chat_rows(key, count + 1)
    rows[0].text = FACT
    for index, filler in enumerate(rows[1:-1]):
        filler.text = FILLER[index % len(FILLER)] + f" Day {index}."
    rows[-1].text = QUESTION
    return await store_rows(sessions, rows)


def turn_for(key, rows, text: str = QUESTION) -> Turn:
    return Turn(key=key, n_messages=WINDOW, input_message_id=rows[-1].id, input_text=text)


async def test_a_message_the_question_means_without_its_words_is_quoted(service, sessions, key):
    rows = await session_with_an_old_fact(sessions, key)
    without = await service.build_history(turn_for(key, rows), ScriptedChatModel())
    assert without.excerpts == ()  # no word of the question is in the fact

    history = await service.build_history(turn_for(key, rows), ScriptedChatModel(), ConceptEmbeddings())

    [excerpt] = history.excerpts
    assert excerpt.text == FACT
    assert excerpt.standout is not None
    assert FACT in history.messages[-2].text


async def test_each_older_message_is_embedded_once_per_process(service, sessions, key):
    rows = await session_with_an_old_fact(sessions, key)
    model = ConceptEmbeddings()
    await service.build_history(turn_for(key, rows), ScriptedChatModel(), model)
    first = len(model.embedded)
    assert FACT in model.embedded  # the older messages, then the question
    assert model.embedded[-1] == QUESTION

    await service.build_history(turn_for(key, rows, "Which instrument again?"), ScriptedChatModel(), model)

    assert model.embedded[first:] == ["Which instrument again?"]


async def test_a_statement_embeds_nothing(service, sessions, key):
    rows = await session_with_an_old_fact(sessions, key)
    model = ConceptEmbeddings()
    history = await service.build_history(turn_for(key, rows, "I love my cello."), ScriptedChatModel(), model)
    assert (history.excerpts, model.embedded) == ((), [])


async def test_a_failing_embedding_model_leaves_the_word_excerpts_and_is_logged(service, sessions, key, captured_logs):
    rows = await session_with_an_old_fact(sessions, key)
    question = "What did I say about cello?"
    history = await service.build_history(
        turn_for(key, rows, question), ScriptedChatModel(), ConceptEmbeddings(fail=ConnectionRefusedError("down"))
    )
    assert [excerpt.text for excerpt in history.excerpts] == [FACT]  # found by its word
    [failure] = [log for log in captured_logs if log["event"].startswith("session_memory_excerpts_failed")]
    assert failure["event"] == "session_memory_excerpts_failed where=embedding_model reason=ConnectionRefusedError"


def test_each_embedding_model_has_its_own_vectors_inside_langflows_wrapper():
    def wrapped(name: str) -> EmbeddingsWithModels:
        return EmbeddingsWithModels(OllamaEmbeddings(model=name, base_url="http://127.0.0.2:11434"))

    assert model_key(wrapped("all-minilm")) != model_key(wrapped("nomic-embed-text"))
    assert model_key(wrapped("all-minilm")) == model_key(wrapped("all-minilm"))


class NotVectors(ConceptEmbeddings):
    """A model whose answers are not vectors (a misconfigured endpoint answering something else)."""

    def embed_documents(self, texts: list[str]) -> list:
        return [["not", "a", "number"] for _ in texts]


async def test_answers_that_are_not_vectors_leave_the_word_excerpts(service, sessions, key, captured_logs):
    rows = await session_with_an_old_fact(sessions, key)
    history = await service.build_history(
        turn_for(key, rows, "What did I say about cello?"), ScriptedChatModel(), NotVectors()
    )
    assert [excerpt.text for excerpt in history.excerpts] == [FACT]
    assert any(log["event"].startswith("session_memory_excerpts_failed where=embedding_model") for log in captured_logs)


class SlowEmbeddings(ConceptEmbeddings):
    """A model that answers each call after ``seconds``: each call within any per-call limit, all of them not."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self.seconds = seconds

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        await asyncio.sleep(self.seconds)
        return self.embed_documents(texts)

    async def aembed_query(self, text: str) -> list[float]:
        await asyncio.sleep(self.seconds)
        return self.embed_query(text)


async def test_the_embedding_model_has_one_deadline_for_all_of_a_turns_calls(service, sessions, key, captured_logs):
    rows = await session_with_an_old_fact(sessions, key)
    service.retrieval.embedding_timeout_seconds = 0.5  # the operator's SESSION_MEMORY_EMBEDDING_TIMEOUT_SECONDS
    model = SlowEmbeddings(0.3)  # the pool's vectors, then the question's: 0.6 s in all

    history = await service.build_history(turn_for(key, rows), ScriptedChatModel(), model)

    assert history.excerpts == ()  # "instrument" shares no word with the fact: only its meaning could find it
    [failure] = [log for log in captured_logs if log["event"].startswith("session_memory_excerpts_failed")]
    assert failure["event"] == "session_memory_excerpts_failed where=embedding_model reason=TimeoutError"


def test_vectors_asked_at_another_length_are_kept_apart():
    def sized(dimensions: int) -> OpenAIEmbeddings:
        return OpenAIEmbeddings(model="text-embedding-3-small", dimensions=dimensions, api_key="sk-local")

    assert model_key(sized(256)) != model_key(sized(512))
    assert model_key(sized(256)) == model_key(sized(256))


def test_the_embedding_deadline_is_the_operators_setting():
    assert embedding_timeout_seconds({}) == 5.0
    assert embedding_timeout_seconds({"SESSION_MEMORY_EMBEDDING_TIMEOUT_SECONDS": "2.5"}) == 2.5
