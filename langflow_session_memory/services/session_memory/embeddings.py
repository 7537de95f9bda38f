"""The builder's embedding model ("Embedding Model"): the vectors of a turn's message and of older messages.

A LangChain ``Embeddings`` from any of Langflow's embedding components. An older message's vector is
kept per process (its model, its id and its text name it), so a session's pool is embedded once
and each later turn embeds only the messages that left the window since. The cache is bounded by
the floats it holds; a vector is a compact float array. The caller bounds a turn's calls with one
deadline (``settings.embedding_timeout_seconds``): a model that does not answer leaves the turn with its
word excerpts.
"""

import hashlib
from array import array
from collections import OrderedDict
from collections.abc import Sequence

from langchain_core.embeddings import Embeddings

# Where an embedding class keeps the length of the vectors it asks for (OpenAI's, Google's, Cohere's, Ollama's).
_DIMENSION_FIELDS = ("dimensions", "output_dimensionality", "embedding_dimension", "dimension")


def model_key(model: Embeddings) -> str:
    """What names an embedding model across turns: its class, model name, endpoint and the vectors' length asked
    for (another length gives vectors that score against nothing); of the instance inside Langflow's wrapper
    (``EmbeddingsWithModels.embeddings``), whose own class names no model."""
    inner = getattr(model, "embeddings", None)
    if isinstance(inner, Embeddings):
        model = inner
    name = next(
        (getattr(model, field) for field in ("model", "model_name", "model_id") if getattr(model, field, None)), ""
    )
    endpoint = next(
        (getattr(model, field) for field in ("openai_api_base", "base_url", "endpoint") if getattr(model, field, None)),
        "",
    )
    dimensions = next((getattr(model, field) for field in _DIMENSION_FIELDS if getattr(model, field, None)), "")
    return f"{type(model).__module__}.{type(model).__qualname__}|{name}|{endpoint}|{dimensions}"


class MessageVectors:
    """Vectors of older messages, least recently used dropped first past ``max_floats``; of each message its
    first ``characters`` are embedded, ``batch`` messages a call (``EmbeddingPolicy``'s, handed in)."""

    def __init__(self, *, max_floats: int, characters: int, batch: int) -> None:
        self._vectors: OrderedDict[tuple[str, object, str], array] = OrderedDict()
        self._floats = 0
        self._max_floats = max_floats
        self.characters = characters
        self._batch = batch

    async def of_messages(self, model: Embeddings, messages: Sequence[tuple[object, str]]) -> dict[object, array]:
        """The vectors of ``messages`` (id, text), embedding only those not kept yet, in batches."""
        key = model_key(model)
        names = {message_id: (key, message_id, _digest(text[: self.characters])) for message_id, text in messages}
        missing = [
            (message_id, text[: self.characters])
            for message_id, text in messages
            if names[message_id] not in self._vectors
        ]
        for start in range(0, len(missing), self._batch):
            batch = missing[start : start + self._batch]
            vectors = await model.aembed_documents([text for _, text in batch])
            for (message_id, _), vector in zip(batch, vectors, strict=True):
                self._keep(names[message_id], array("f", vector))
        found = {}
        for message_id, name in names.items():
            vector = self._vectors.get(name)
            if vector is not None:
                self._vectors.move_to_end(name)
                found[message_id] = vector
        return found

    def _keep(self, name: tuple[str, object, str], vector: array) -> None:
        if name in self._vectors:
            return
        self._vectors[name] = vector
        self._floats += len(vector)
        while self._floats > self._max_floats and self._vectors:
            _, dropped = self._vectors.popitem(last=False)
            self._floats -= len(dropped)


async def of_query(model: Embeddings, text: str, characters: int) -> list[float]:
    """The vector of a turn's message, of its first ``characters`` as an older message's."""
    return await model.aembed_query(text[:characters])


def _digest(text: str) -> str:
    """A short name of the text embedded: an edited message gets a new vector."""
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()
