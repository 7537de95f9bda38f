"""Finding the older messages a turn's message means without sharing its words: the pure part.

With an embedding model connected ("Embedding Model"), the user's message and a bounded pool of
the session's older messages are vectors; a message is quoted when its similarity to the question
stands out of the pool's (:func:`standouts`), measured in the pool's own standard deviations, so
one rule holds for models whose similarities sit in different ranges. Words (``recall``) and
meaning each rank their candidates; :func:`fused` joins the two rankings by reciprocal rank.
No I/O: the service reads the pool and the adapter (``embeddings``) embeds it.
"""

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

import numpy as np

from langflow_session_memory.services.session_memory.rules.policy import EMBEDDING

K = TypeVar("K", bound=Hashable)


def similarities(query: Sequence[float], vectors: Sequence[Sequence[float]]) -> np.ndarray:
    """The cosine similarity of ``query`` to each of ``vectors``, in one matrix product (the query's norm taken
    once); 0 for a vector of another length (another model's) or where either is all zeros."""
    found = np.zeros(len(vectors))
    same = [index for index, vector in enumerate(vectors) if len(vector) == len(query)]
    if not same:
        return found
    matrix = np.asarray([vectors[index] for index in same], dtype=np.float64)
    asked = np.asarray(query, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(asked)
    products = matrix @ asked
    found[same] = np.divide(products, norms, out=np.zeros_like(products), where=norms > 0)
    return found


def standouts(
    query: Sequence[float],
    pool: Mapping[K, Sequence[float]],
    *,
    min_standout: float = EMBEDDING.min_standout,
    most: int = 3,
) -> list[tuple[K, float]]:
    """The pool's keys whose similarity to ``query`` is at least ``min_standout`` standard deviations above
    the pool's mean, best first, at most ``most``, each with its standing; none from a pool smaller than
    ``EMBEDDING.min_pool`` or without spread."""
    if len(pool) < EMBEDDING.min_pool:
        return []
    keys = list(pool)
    similar = similarities(query, [pool[key] for key in keys])
    mean = math.fsum(similar) / len(similar)
    spread = math.sqrt(math.fsum((value - mean) ** 2 for value in similar) / len(similar))
    if spread <= 1e-9:
        return []
    standing = {key: float(value - mean) / spread for key, value in zip(keys, similar, strict=True)}
    ranked = sorted((entry for entry in standing.items() if entry[1] >= min_standout), key=lambda e: -e[1])
    return ranked[:most]


def fused(*rankings: Sequence[K]) -> list[K]:
    """The keys of ``rankings`` (each best first) in order of their reciprocal rank fusion score, ties in the
    order they were first met."""
    scores: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1 / (EMBEDDING.rank_constant + rank)
    return sorted(scores, key=lambda key: -scores[key])
