"""`uldp audit` end to end (issue 18): for every auditable algorithm the lower bound stays below the
upper bound, and a mechanism broken on purpose (`--break-mechanism`) is caught with exit status 3.

Settings are chosen so that each run takes a second or two and a broken mechanism is far beyond
its claim: heart-disease (4 hospitals) with 400 users and 200 canaries for the per-user
algorithms, the synthetic creditcard data in one silo with 1,000 users and 1,000 canaries for
DP-SGD (uldp-group, and at k = 1 record-level DP-SGD) and for rPDP-FL's record-level
algorithms (rpdp, unidp; the three-levels budgets, whose smallest is 0.1). A fixed --noise-seed
makes every run the same on every machine.
"""

from __future__ import annotations

import json

import pytest

from tests.cli.invoke import command_runner
from uldp.accountants.account import account_plan
from uldp.trainers.algorithms import plan_algorithm

run, run_json = command_runner("audit")

HEART = [
    "--dataset",
    "heart-disease",
    "--users",
    "400",
    "--canaries",
    "200",
    "--rounds",
    "10",
    "--sigma",
    "5",
]
HEART_SGD = [*HEART, "--global-lr", "10", "--noise-seed", "1"]  # ULDP-SGD has no local learning rate
HEART += ["--lr", "0.5", "--global-lr", "10", "--noise-seed", "1"]
CREDIT = ["--dataset", "creditcard", "--silos", "1", "--users", "1000", "--canaries", "1000"]
CREDIT += ["--batch-size", "3200", "--rounds", "3", "--noise-seed", "1"]
GROUP = ["--algo", "uldp-group", *CREDIT, "--group-k", "4", "--sigma", "20"]
RECORD = ["--algo", "uldp-group", *CREDIT, "--group-k", "1", "--sigma", "5"]
SAMPLED = ["--algo", "uldp-avg", *HEART, "--user-q", "0.5"]
RPDP = [
    "--distribution",
    "three-levels",
    *CREDIT[:8],
    "--rounds",
    "2",
    "--local-steps",
    "10",
    "--noise-seed",
    "1",
]

HONEST = {
    "uldp-avg": ["--algo", "uldp-avg", *HEART],
    "uldp-avg-w": ["--algo", "uldp-avg-w", *HEART],
    "uldp-sgd": ["--algo", "uldp-sgd", *HEART_SGD],
    "uldp-sgd-w": ["--algo", "uldp-sgd-w", *HEART_SGD],
    "uldp-group": GROUP,
    "record-level DP-SGD": RECORD,
    "uldp-avg, user sampling": SAMPLED,
    "rpdp": ["--algo", "rpdp", *RPDP],
    "unidp": ["--algo", "unidp", *RPDP, "--batch-size", "3200"],
}
BROKEN = [
    ("uldp-avg", "noise"),
    ("uldp-avg", "clip"),
    ("uldp-avg", "weights"),
    ("uldp-avg-w", "noise"),
    ("uldp-avg-w", "weights"),
    ("uldp-sgd", "noise"),
    ("uldp-sgd", "clip"),
    ("uldp-group", "noise"),
    ("uldp-group", "clip"),
    ("record-level DP-SGD", "noise"),
    ("record-level DP-SGD", "clip"),
    ("uldp-avg, user sampling", "noise"),
    ("rpdp", "noise"),
    ("rpdp", "clip"),
    ("unidp", "noise"),
    ("unidp", "clip"),
]


@pytest.fixture(scope="module")
def honest() -> dict[str, dict]:
    return {name: run_json(*args) for name, args in HONEST.items()}


@pytest.mark.parametrize("name", list(HONEST))
def test_without_a_fault_the_lower_bound_stays_below_the_upper_bound(honest, name):
    """Every auditable algorithm, run as written: lower <= upper in every view, exit 0."""
    document = honest[name]
    assert document["violated"] is False
    for view in document["views"]:
        assert 0 <= view["lower_bound"] <= view["upper_bound"], view
        assert view["verdict"] in ("consistent", "too weak to say anything")
        assert view["lower_bound"] <= view["ceiling"] + 1e-9


def test_the_audit_is_not_vacuous_where_the_canaries_can_be_told_apart(honest):
    """At sigma 5 over 10 rounds 200 canaries show a lower bound above 1 (the audit has power)."""
    assert honest["uldp-avg"]["views"][0]["lower_bound"] > 1.0


@pytest.mark.parametrize(("name", "fault"), BROKEN)
def test_a_broken_mechanism_is_caught_with_exit_status_3(name, fault):
    """A fault the accounting cannot see: the lower bound exceeds the upper bound, exit 3, one line."""
    result = run(*HONEST[name], "--break-mechanism", fault, "--format", "json")
    assert result.exit_code == 3, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "guarantee violated" in errors[0], result.stderr
    document = json.loads(result.stdout)
    assert document["violated"] is True
    assert "BROKEN ON PURPOSE" in document["fault"]
    assert any(v["lower_bound"] > v["upper_bound"] for v in document["views"])


def test_under_user_sampling_both_views_are_audited_against_their_own_bound(honest):
    """The server knows its sample: audited against the known-participation epsilon, larger."""
    views = {v["view"]: v for v in honest["uldp-avg, user sampling"]["views"]}
    assert set(views) == {"released model", "server"}
    assert views["server"]["upper_bound"] > views["released model"]["upper_bound"]
    assert "sample known" in views["server"]["upper_bound_accountant"]


def test_the_upper_bound_is_the_tightest_accountant_for_the_same_plan(honest):
    """The claimed epsilon is min(RDP, PLD) of the run's plan, at or below the RDP epsilon it printed."""
    plan = plan_algorithm("uldp-avg", sigma=5.0, rounds=10, silos=4)
    expected = min(
        account_plan(plan, delta=1e-5, accountants=(a,), server_view=False)[0].epsilon for a in ("rdp", "pld")
    )
    document = honest["uldp-avg"]
    assert document["views"][0]["upper_bound"] == pytest.approx(expected, rel=1e-9)
    assert document["views"][0]["upper_bound"] <= document["run"]["epsilon"] + 1e-12


def test_the_record_level_path_audits_canary_records(honest):
    """uldp-group at k = 1 is record-level DP-SGD: its canaries are records, its claim the
    tightest record-level bound (PLD, below RDP)."""
    document = honest["record-level DP-SGD"]
    assert document["unit"] == "record" and honest["uldp-group"]["unit"] == "user"
    view = document["views"][0]
    bounds = {b["accountant"]: b["epsilon"] for b in view["upper_bounds"]}
    assert view["upper_bound_accountant"] == "PLD" and view["upper_bound"] == min(bounds.values())
    assert bounds["PLD"] < bounds["RDP"]


@pytest.mark.parametrize("name", ["rpdp", "unidp"])
def test_rpdp_canaries_are_records_of_the_smallest_budget(honest, name):
    """rPDP-FL: canary records at the smallest budget's rate, audited against that budget."""
    document = honest[name]
    assert document["unit"] == "record"
    assert "of the smallest budget" in document["method"]["canaries"]
    view = document["views"][0]
    assert "rPDP-FL" in view["upper_bound_accountant"]
    assert view["upper_bound"] <= 0.1 * (1 + 1e-9)  # three-levels' smallest budget, met


def test_the_table_states_the_method_confidence_and_the_run(tmp_path):
    """The table for people: both bounds, the verdict, the method and its source (seconds in JSON)."""
    out, plot = tmp_path / "audit.json", tmp_path / "scores.png"
    result = run(*HONEST["uldp-avg"], "--out", str(out), "--plot", str(plot))
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    for words in (
        "(audit)",
        "consistent",
        "Steinke, Nasr, Jagielski",
        "Dirac",
        "95% confidence",
        "Bonferroni",
    ):
        assert words in text, words
    document = json.loads(out.read_text())
    assert document["command"] == "audit" and document["canaries"] == 200
    assert document["seconds"]["train"] > 0 and document["seconds"]["audit"] > 0
    assert plot.read_bytes().startswith(b"\x89PNG")


def test_a_weak_audit_says_so_rather_than_print_a_number_that_looks_meaningful():
    """Much noise, few canaries: lower bound 0 and the note that the audit cannot say anything."""
    args = ["--algo", "uldp-avg", *HEART[:4], "--canaries", "20", "--rounds", "2", "--sigma", "50"]
    result = run(*args, "--noise-seed", "1")
    assert result.exit_code == 0, result.output
    assert "lower bound 0: at this noise the audit cannot tell" in " ".join(result.stdout.split())
    view = run_json(*args, "--noise-seed", "1")["views"][0]
    assert view["lower_bound"] == 0 and view["verdict"] == "too weak to say anything"


def test_a_fraction_of_the_users_as_canaries():
    """--canaries 0.25 of 400 users plants 100 canaries."""
    document = run_json(
        "--algo", "uldp-avg", *HEART[:4], "--canaries", "0.25", "--rounds", "1", "--noise-seed", "1"
    )
    assert document["canaries"] == 100


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--canaries", "500"], "--canaries 500 is more canaries than the data's 400 users"),
        (["--canaries", "1.5"], "nor a fraction of the users in (0, 1)"),
        (["--canaries", "0"], "nor a fraction of the users in (0, 1)"),
        (["--canaries", "-0.5"], "nor a fraction of the users in (0, 1)"),
        (["--canaries", "nan"], "nor a fraction of the users in (0, 1)"),
        (["--canaries", "0.001"], "an audit needs at least 2"),
        (["--confidence", "1"], "--confidence"),
        (["--confidence", "0"], "--confidence"),
        (["--confidence", "0.49"], "--confidence"),
    ],
)
def test_bad_audit_input_gets_one_line_and_exit_2(args, says):
    """Bad counts, fractions and confidences: one `Error:` line naming the option, exit 2."""
    result = run("--algo", "uldp-avg", "--dataset", "heart-disease", "--users", "400", "--rounds", "1", *args)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    assert says in " ".join(result.stderr.split()), result.stderr


@pytest.mark.parametrize(
    ("algo", "extra", "says"),
    [
        ("uldp-naive", [], "--algo uldp-naive has no canary construction yet"),
        ("rpdp", [], "rpdp needs per-record budgets: give --distribution NAME"),
        ("uldp-avg", ["--distribution", "three-levels"], "--distribution applies to rpdp and unidp"),
        ("uldp-avg", ["--group-k", "3"], "--group-k does not apply here: uldp-avg does not use it"),
        ("uldp-avg", ["--alpha", "2"], "--alpha applies to --allocation power"),
        ("default", [], "--algo default is not private"),
        (
            "uldp-group",
            ["--break-mechanism", "weights"],
            "--break-mechanism weights does not apply to uldp-group",
        ),
    ],
)
def test_an_algorithm_or_fault_without_a_canary_construction_is_refused(algo, extra, says):
    """An algorithm the audit cannot plant canaries in, or options it would ignore: one line, exit 2."""
    result = run("--algo", algo, "--dataset", "heart-disease", "--rounds", "1", *extra)
    assert result.exit_code == 2, result.output
    assert says in " ".join(result.stderr.split()), result.stderr
    assert len([line for line in result.stderr.splitlines() if line.startswith("Error:")]) == 1


def test_the_test_only_switch_is_hidden_from_help():
    """--break-mechanism is for tests: not in --help."""
    result = run("--help")
    assert result.exit_code == 0
    assert "--break-mechanism" not in result.output and "--canaries" in result.output
