"""tests/update_slow.py reads pytest's `--durations=0` lines into tests/slow.txt's entries."""

from __future__ import annotations

from tests.update_slow import slow_entries

DURATIONS = """\
============================== slowest durations ===============================
60.45s call     tests/flower/test_own_app.py::test_in_a_deployment@flower
27.21s call     tests/flower/test_own_app.py::test_in_simulation[a]@flower
3.00s call     tests/flower/test_own_app.py::test_in_simulation[b]@flower
69.28s setup    tests/flower/test_simulation.py::test_first@flower
4.00s call     tests/cli/test_x.py::test_fast[1]
4.00s call     tests/cli/test_x.py::test_fast[2]
0.50s call     tests/cli/test_x.py::test_quick
"""


def test_grouped_tests_are_named_without_their_xdist_group_and_parametrisations_summed():
    entries = slow_entries(DURATIONS, threshold=5.0, load=1.0)
    assert entries == [
        "tests/flower/test_simulation.py",  # its module-scoped set-up alone is slow: the whole module
        "tests/cli/test_x.py::test_fast",  # 4 + 4 s over its parametrisations
        "tests/flower/test_own_app.py::test_in_a_deployment",
        "tests/flower/test_own_app.py::test_in_simulation",
    ]


def test_a_loaded_machine_counts_less():
    assert slow_entries(DURATIONS, threshold=5.0, load=2.0) == [
        "tests/flower/test_simulation.py",
        "tests/flower/test_own_app.py::test_in_a_deployment",
        "tests/flower/test_own_app.py::test_in_simulation",
    ]
