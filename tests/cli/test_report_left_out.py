"""`uldp report` leaves nothing out unsaid (issue 32, items 11 and 14): a DpEvent export lists every
claim it does not carry, a TF-Privacy description takes TF-Privacy's microbatching default and says
so, and a group over an Opacus history of several phases gets the tight PLD bound."""

from __future__ import annotations

import json
import math

import jsonschema
import pytest

from tests.cli.fuzz import assert_contract
from tests.cli.invoke import command_runner
from uldp.accountants.statements.report_schema import schema

report, report_json = command_runner("report")

MNIST = ("--sigma", "1.1", "--dataset-size", "60000", "--batch-size", "256", "--epochs", "60")


def _dp_event(*args: str) -> dict:
    result = report(*args, "--dp-event")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def _claims(document: dict) -> dict:
    return {c["unit"]: c for c in document["claims"] if c["view"] == "released model"}


def test_a_dp_event_export_lists_the_group_claim_it_leaves_out():
    document = _dp_event("--sigma", "5", "--q", "0.01", "--steps", "100000", "--k", "1,8")
    assert [line.split(":")[0] for line in document["not_covered"]] == ["any 8 records"]
    assert "no group-privacy event" in document["not_covered"][0]


def test_a_dp_sgd_export_lists_its_user_and_once_per_epoch_claims():
    document = _dp_event(*MNIST, "--max-examples-per-user", "3")
    covered = [line.split(":")[0] for line in document["not_covered"]]
    assert covered == [
        "one user (at most 3 records)",
        "one record (once per epoch)",
        "one user (at most 3 records, once per epoch)",
    ]
    # TF-Privacy's default: microbatching halves the multiplier the event carries.
    assert document["events"][0]["event"]["event"]["noise_multiplier"] == pytest.approx(0.55)


def _tf_privacy_rdp_epsilon(noise_multiplier: float) -> float:
    """What TF-Privacy's compute_dp_sgd_privacy_statement prints for the MNIST setting (its RDP
    line, Poisson sampling): dp-accounting's RdpAccountant on the event it builds."""
    import dp_accounting

    q = 256 / 60000
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(noise_multiplier)),
        int(math.ceil(60 / q)),
    )
    return dp_accounting.rdp.RdpAccountant().compose(event).get_epsilon(1e-5)


@pytest.mark.parametrize(
    "flag,used,multiplier",
    [((), True, 0.55), (("--microbatching",), True, 0.55), (("--no-microbatching",), False, 1.1)],
)
def test_a_tf_privacy_description_takes_its_microbatching_default_and_states_it(flag, used, multiplier):
    document = report_json(*MNIST, *flag, "--accountant", "rdp")
    jsonschema.validate(document, schema())
    assert document["settings"]["used_microbatching"] is used
    assert document["assumptions"]["microbatching"].startswith(f"used_microbatching={used}")
    ours = _claims(document)["one record"]["epsilon"]
    theirs = _tf_privacy_rdp_epsilon(multiplier)  # 16.42 with microbatching, 2.6 without
    assert ours <= theirs * (1 + 1e-9) and ours >= theirs * 0.99


def test_the_microbatching_assumption_is_printed_in_every_format():
    table = report(*MNIST, "--accountant", "rdp")
    assert table.exit_code == 0 and "used_microbatching=True" in table.output
    markdown = report(*MNIST, "--accountant", "rdp", "--format", "markdown")
    assert "- **microbatching**: used_microbatching=True" in markdown.output


@pytest.mark.parametrize(
    "base", [("--sigma", "1", "--q", "0.01", "--steps", "10"), ("--sigma", "1", "--algo", "uldp-avg")]
)
@pytest.mark.parametrize("flag", ["--microbatching", "--no-microbatching"])
def test_microbatching_outside_a_dp_sgd_description_is_refused_in_one_line(base, flag):
    args = [*base, flag, "--accountant", "rdp"]
    result = report(*args)
    assert_contract(result, ["report", *args])
    assert result.exit_code == 2 and "'--microbatching'" in result.stderr


def test_a_group_over_an_opacus_history_of_two_phases_gets_the_pld_bound(tmp_path):
    state = tmp_path / "opacus.json"
    state.write_text(json.dumps({"history": [[2.0, 0.5, 20], [1.5, 0.3, 10]], "mechanism": "rdp"}))
    document = report_json("--opacus", str(state), "--k", "3", "--accountant", "rdp,pld")
    jsonschema.validate(document, schema())
    group = _claims(document)["any 3 records"]
    bounds = {b["method"]: b["epsilon"] for b in group["bounds"]}
    assert set(bounds) == {"rdp", "normal", "pld"}
    assert group["epsilon"] == bounds["pld"] < bounds["normal"]
    assert not [c for c in document["caveats"] if "groups of runs only" in c]
