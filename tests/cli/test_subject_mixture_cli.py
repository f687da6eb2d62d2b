"""`uldp subject --algo localitemdp|localgroupdp`: a subject's m items at a member accounted as
the Binomial(m, q) mixture of their draws, the sensitivity-m bound printed as the cross-check
(issue 32, item 13)."""

from __future__ import annotations

import pytest

from uldp.accountants.subject.horizontal import FederationRun, subject_guarantee

from .fuzz import assert_contract
from .invoke import command_runner

run, run_json = command_runner("subject")

#: The audit's setting: 4 members, each holding 2 of the subject's items, all 4 every round.
AUDIT = [
    *["--silos", "4", "--silos-per-round", "4", "--rounds", "100", "--local-steps", "10"],
    *["--record-q", "0.01", "--sigma", "2", "--subject-silos", "4", "--items-per-silo", "2"],
]


@pytest.mark.parametrize("algo", ["localitemdp", "localgroupdp"])
def test_the_mixture_is_printed_with_the_old_bound_as_cross_check(algo):
    doc = run_json(*AUDIT, "--algo", algo)
    expected = subject_guarantee(FederationRun(4, 4, 100, 10, 0.01, 2.0, algo), [2] * 4, 1e-5)
    assert doc["local_epsilon"] == expected.local_epsilon == pytest.approx(1.5807, abs=1e-4)
    assert doc["federation_epsilon"] == expected.federation_epsilon == pytest.approx(3.3295, abs=1e-4)
    check = doc["cross_check"]
    assert check["local_epsilon"] == pytest.approx(4.3004, abs=1e-4)  # what the audit found
    assert check["federation_epsilon"] == pytest.approx(8.9218, abs=1e-4)
    assert "sigma / m" in check["bound"]
    assert "Binomial(m, q)" in doc["assumptions"]["local mechanism"]


def test_the_table_names_the_mixture_and_the_cross_check():
    result = run(*AUDIT, "--algo", "localitemdp", "--epsilon", "4")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "Binomial(2, q), accounted as that mixture" in text
    assert "cross-check, the sensitivity-m bound" in text and "local 4.3, federation 8.922" in text
    assert "1.581" in text and "3.329" in text


def test_no_cross_check_where_the_mixture_is_the_old_bound():
    # HiGradAvgDP and UserLDP move a batch by C or 2C whatever is drawn: nothing to cross-check;
    # LocalItemDP with one item per member is its item's own sub-sampled Gaussian
    for args in ([*AUDIT, "--algo", "higradavgdp"], [*AUDIT, "--algo", "userldp"]):
        assert run_json(*args)["cross_check"] is None
    assert run_json(*AUDIT[:-1], "1", "--algo", "localitemdp")["cross_check"] is None


def test_holdings_list_each_subjects_cross_check(tmp_path):
    path = tmp_path / "items.csv"
    path.write_text("subject,member\na,0\na,0\na,1\nb,2\n")
    doc = run_json(
        *["--silos", "4", "--silos-per-round", "2", "--rounds", "50", "--local-steps", "10"],
        *["--record-q", "0.01", "--sigma", "2", "--holdings", str(path), "--algo", "localitemdp"],
    )
    by_name = {entry["subject"]: entry for entry in doc["subjects"]}
    assert by_name["a"]["local_epsilon"] < by_name["a"]["local_cross_check"]
    assert "local_cross_check" not in by_name["b"]  # one item: no cross-check


def test_pld_serves_the_exact_mixture_and_refuses_one_line():
    doc = run_json(
        *["--silos", "2", "--silos-per-round", "2", "--rounds", "5"],
        *["--local-steps", "10", "--record-q", "0.2"],
        *["--sigma", "2", "--subject-silos", "1", "--items-per-silo", "2", "--algo", "localitemdp"],
        *["--accountant", "pld"],
    )
    assert doc["local_epsilon"] < doc["cross_check"]["local_epsilon"]
    args = [*AUDIT[:-1], "20000", "--algo", "localitemdp", "--accountant", "pld"]
    result = run(*args)
    assert_contract(result, ["subject", *args])
    assert result.exit_code == 2 and "up to 16384 items" in result.output
