"""``make test`` runs in two processes with pytest-xdist's ``--dist loadgroup``: each backend's app tests, and
each benchmark smoke module, are one group, run whole by one process (``tests/conftest.py``). A group spread over
both processes starts every shared app and every benchmark twice, and nothing fails: this test does.

xdist marks a grouped test by adding ``@<group>`` to its id; pytest 9.2 ignores that, which is why
``pyproject.toml`` keeps pytest below 9.2 (pytest-dev/pytest-xdist#1386).
"""

import pytest

pytestmark = pytest.mark.xdist_group("grouping-check")


def test_loadgroup_keeps_a_group_on_one_process(request):
    if not getattr(request.config.option, "loadgroup", False):  # set in each process of --dist loadgroup
        pytest.skip("runs under make test (pytest-xdist --dist loadgroup)")
    assert request.node.nodeid.endswith("@grouping-check"), (
        "pytest-xdist no longer groups tests: every group of make test is spread over both processes"
    )
