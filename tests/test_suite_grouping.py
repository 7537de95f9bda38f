"""``make test`` runs in two processes with pytest-xdist's ``--dist loadgroup``: each backend's app tests, and
each benchmark smoke module, are one group, run whole by one process (``tests/conftest.py``). A group spread over
both processes starts every shared app and every benchmark in both, and nothing fails: this test does.

xdist marks a grouped test by adding ``@<group>`` to its id, in a collection hook of its own. Two things have
silently undone that: pytest 9.2 ignores the changed id (pytest-dev/pytest-xdist#1386; ``pyproject.toml`` keeps
pytest below 9.2), and a group added by ``tests/conftest.py`` after xdist's hook ran (it runs first).
"""

import pytest


def test_every_grouped_test_is_sent_with_its_group(request):
    if not getattr(request.config.option, "loadgroup", False):  # set in each process of --dist loadgroup
        pytest.skip("runs under make test (pytest-xdist --dist loadgroup)")
    grouped = [item for item in request.session.items if item.get_closest_marker("xdist_group")]
    if not grouped:
        pytest.skip("no grouped test collected (the shared apps' tests, the benchmark smoke modules)")
    assert [item.nodeid for item in grouped if "@" not in item.nodeid] == []
