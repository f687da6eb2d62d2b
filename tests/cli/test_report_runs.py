"""`uldp report --run` for runs accounted other than by one plan (issue 17): per subject, per
budget tier, round by round with dropouts. The report states the figures the run recorded for its
last round, with the caveats the run earned, and follows the schema."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.cli.invoke import command_runner
from uldp.accountants.statements.report_schema import schema

report, report_json = command_runner("report")
train, _ = command_runner("train")

RUNS = {
    "subject": (
        *(
            "--algo",
            "higradavgdp",
            "--dataset",
            "mnist",
            "--users",
            "30",
            "--silos",
            "4",
            "--model",
            "logistic",
        ),
        *("--rounds", "2", "--local-steps", "2", "--batch-size", "16", "--epsilon", "3"),
    ),
    "dropout": (
        *("--algo", "dp-fedavg-robust", "--dataset", "mnist", "--users", "40", "--silos", "40"),
        *("--silo-q", "0.5", "--model", "logistic", "--sigma", "1", "--rounds", "2", "--dropout", "0.3"),
    ),
    "tiers": (
        *("--algo", "rpdp", "--dataset", "heart-disease", "--distribution", "three-levels"),
        *("--rounds", "2", "--local-steps", "5"),
    ),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    where = tmp_path_factory.mktemp("runs")
    for name, args in RUNS.items():
        result = train(*args, "--noise-seed", "1", "--metrics", str(where / f"{name}.jsonl"))
        assert result.exit_code == 0, result.output
    return where


def _last(runs, name) -> dict:
    return json.loads((runs / f"{name}.jsonl").read_text().splitlines()[-1])


@pytest.mark.parametrize("name", list(RUNS))
def test_a_run_accounted_otherwise_states_what_it_recorded(runs, name):
    document = report_json("--run", str(runs / f"{name}.jsonl"))
    jsonschema.validate(document, schema())
    last = _last(runs, name)
    stated = {c["unit"] + " / " + c["view"]: c["epsilon"] for c in document["claims"]}
    if name == "subject":
        assert stated["one subject, across all members / server (every member's update)"] == pytest.approx(
            last["subject_epsilon_federation"], rel=1e-12
        )
        assert last["subject_epsilon_federation"] <= 3.0  # the --epsilon it was calibrated to
    elif name == "dropout":
        assert stated["one participant / released model"] == pytest.approx(last["epsilon"], rel=1e-12)
        assert stated["one participant / server"] == pytest.approx(last["server_epsilon"], rel=1e-12)
        assert any("dropouts happened" in c for c in document["caveats"])
    else:
        tiers = {k: v for k, v in last.items() if k.startswith("tier") and "_epsilon_" in k}
        assert sorted(stated.values()) == pytest.approx(sorted(tiers.values()), rel=1e-12)
    assert any("fixed --noise-seed" in c for c in document["caveats"])
    for claim in document["claims"]:
        assert claim["bounds"][0]["method"] == "recorded"
        assert claim["attack"]["source"] == "(epsilon, delta) point"


def test_a_run_without_one_mechanism_has_no_dp_event(runs):
    result = report("--run", str(runs / "subject.jsonl"), "--dp-event")
    assert result.exit_code == 2
    assert "no single mechanism to export: it is accounted per subject" in result.output
