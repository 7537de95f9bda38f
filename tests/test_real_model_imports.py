"""The real-model tests are collected only where a model is served (``REAL_MODEL_URL``, set by ``make test-real``);
each of their modules must still import on every run, or ``make test-real`` breaks unseen (one did, when the tier
moved to ``local_model/``)."""

import importlib
import pkgutil

import pytest

import tests.real_model as real_model

MODULES = sorted(module.name for module in pkgutil.iter_modules(real_model.__path__))


def test_the_real_model_tests_are_found():
    assert {"conftest", "test_instruct_model", "token_counts"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_each_real_model_test_module_imports(name):
    importlib.import_module(f"{real_model.__name__}.{name}")
