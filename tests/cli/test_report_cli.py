"""`uldp report` as a user runs it (issue 17): every number is the one `uldp account` prints for the
same settings, a run's report re-accounts what the run recorded, the JSON follows the shipped
schema, the DpEvent export re-accounts to the same epsilon in dp-accounting, Opacus and
TF-Privacy descriptions are stated the same way, and bad input gets one line and exit status 2."""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import pytest

from tests.cli.invoke import command_runner
from uldp.accountants.statements.report_schema import schema, schema_text
from uldp.trainers.run_record import record_path, write_record

report, report_json = command_runner("report")
account, account_json = command_runner("account")
train, _ = command_runner("train")

REPO = Path(__file__).resolve().parents[2]
MECHANISM = ("--sigma", "2", "--q", "0.02", "--steps", "2000")
AVG = ("--algo", "uldp-avg", "--sigma", "3", "--rounds", "40", "--user-q", "0.3")


def _claims(document: dict, view: str = "released model") -> dict:
    return {c["unit"]: c for c in document["claims"] if c["view"] == view}


def _by(claim: dict) -> dict:
    return {(b["accountant"], b["method"]): b["epsilon"] for b in claim["bounds"]}


def test_a_plan_states_what_uldp_account_prints_for_it():
    document = report_json(*MECHANISM, "--k", "4")
    jsonschema.validate(document, schema())
    claims = _claims(document)
    accounted = account_json(*MECHANISM, "--k", "1,4", "--accountant", "rdp,pld,prv", "--group-method", "all")
    expected = {(r["accountant"], r["method"]): r["epsilon"] for r in accounted["results"]}
    assert _by(claims["one record"]) == {k: v for k, v in expected.items() if k[1] == "record"}
    assert _by(claims["any 4 records"]) == {k: v for k, v in expected.items() if k[1] != "record"}
    record = claims["one record"]
    assert record["epsilon"] == min(_by(record).values()) and record["accountant"] == "pld"
    assert record["rdp_over_tight"] == pytest.approx(_by(record)[("rdp", "record")] / record["epsilon"])


def test_a_user_level_algorithm_states_the_user_and_the_servers_view_as_uldp_account():
    document = report_json(*AVG, "--accountant", "rdp,pld")
    accounted = account_json(*AVG, "--accountant", "rdp,pld")
    released = {r["accountant"]: r["epsilon"] for r in accounted["results"] if r["method"] == "user"}
    server = next(r["epsilon"] for r in accounted["results"] if r["method"] == "server view")
    user = _claims(document)["one user (every silo)"]
    assert {a: e for (a, _), e in _by(user).items()} == released
    seen = _claims(document, "server")["one user (every silo)"]
    assert _by(seen)[("rdp", "server view")] == server
    assert seen["epsilon"] <= server  # PLD's exact view is tighter than RDP's
    assert _claims(document)["one record"]["epsilon"] == user["epsilon"]  # a record is part of a user


def test_uldp_group_states_its_records_and_its_users_as_uldp_account():
    group = ("--algo", "uldp-group", "--sigma", "5", "--rounds", "10", "--record-q", "0.01", "--silos", "3")
    document = report_json(*group, "--k", "4", "--accountant", "rdp,pld")
    accounted = account_json(*group, "--k", "4", "--group-method", "all")
    user = _claims(document)["one user (every silo)"]
    assert _by(user) == {(r["accountant"], r["method"]): r["epsilon"] for r in accounted["results"]}
    assert "at most 4 records" in user["note"]


def test_every_attack_bound_is_a_valid_and_ordered_rate():
    document = report_json(*MECHANISM, "--k", "2")
    for claim in document["claims"]:
        attack, point = claim["attack"], claim["point_attack"]
        assert attack["fpr"] == [0.001, 0.01, 0.1]
        for fpr, tight, crude in zip(attack["fpr"], attack["tpr"], point["tpr"]):
            assert fpr <= tight <= crude + 1e-12 <= 1 + 1e-12
        assert attack["tpr"] == sorted(attack["tpr"])


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    where = tmp_path_factory.mktemp("run")
    args = (
        "--algo",
        "uldp-avg",
        "--dataset",
        "heart-disease",
        "--user-q",
        "0.5",
        "--rounds",
        "3",
        "--noise-seed",
        "0",
    )
    result = train(*args, "--metrics", str(where / "m.jsonl"), "--checkpoint", str(where / "ck"))
    assert result.exit_code == 0, result.output
    return where


def test_a_runs_report_re_accounts_what_it_recorded(run):
    document = report_json("--run", str(run / "m.jsonl"), "--accountant", "rdp,pld")
    jsonschema.validate(document, schema())
    assert document["source"] == "run" and document["settings"]["rounds_done"] == 3
    assert document["checks"] and document["checks"][0].endswith(": equal")
    assert any("fixed --noise-seed" in c for c in document["caveats"])
    assert any("sampled at q = 0.5" in c for c in document["caveats"])
    recorded = json.loads((run / "m.jsonl").read_text().splitlines()[-1])["epsilon"]
    user = _claims(document)["one user (every silo)"]
    assert _by(user)[("rdp", "user")] == recorded
    # The plan with the run's settings states the same numbers: one code path.
    record = json.loads(record_path(run / "m.jsonl").read_text())["plan_params"]
    planned = report_json(
        "--algo",
        "uldp-avg",
        "--sigma",
        str(record["sigma"]),
        "--rounds",
        "3",
        "--user-q",
        "0.5",
        "--silos",
        str(record["silos"]),
        "--accountant",
        "rdp,pld",
    )
    assert [c["bounds"] for c in planned["claims"]] == [c["bounds"] for c in document["claims"]]
    from_checkpoint = report_json("--run", str(run / "ck"), "--accountant", "rdp,pld")
    assert from_checkpoint["claims"] == document["claims"]


def test_an_interrupted_run_is_stated_for_the_rounds_it_completed(run, tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text("".join((run / "m.jsonl").read_text().splitlines(True)[:2]))
    record = json.loads(record_path(run / "m.jsonl").read_text())
    record.update(finished=False, rounds_done=0, rounds=5)  # as written before round 1
    # An unfinished run's record carries no metrics digest; its own digest is rewritten.
    for key in ("sha256", "metrics_sha256"):
        record.pop(key, None)
    write_record(path, record)
    document = report_json("--run", str(path), "--accountant", "rdp")
    assert any("stopped after 2 of 5 rounds" in c for c in document["caveats"])
    assert document["checks"][0].endswith("for round 2: equal")


def test_markdown_is_a_model_card_section():
    result = report(*MECHANISM, "--format", "markdown", "--accountant", "rdp,pld")
    assert result.exit_code == 0, result.output
    text = result.output
    assert text.startswith("## Privacy: ")
    assert "| protects | against | epsilon |" in text and "### Assumptions" in text
    assert "inf" not in text.replace("inference", "")


def test_the_dp_event_export_re_accounts_to_the_same_epsilon_in_dp_accounting():
    from dp_accounting.pld import PLDAccountant
    from dp_accounting.rdp import RdpAccountant

    from uldp.accountants.statements.dp_events import dp_event_from_dict

    result = report(*MECHANISM, "--dp-event")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    event = dp_event_from_dict(document["events"][0])
    ours = _by(
        _claims(report_json(*MECHANISM, "--accountant", "rdp", "--orders", "2,4,8,16,32,64"))["one record"]
    )
    theirs = RdpAccountant(orders=[2, 4, 8, 16, 32, 64]).compose(event).get_epsilon(1e-5)
    assert theirs == pytest.approx(ours[("rdp", "record")], rel=1e-9)
    pld = PLDAccountant(value_discretization_interval=1e-3).compose(event).get_epsilon(1e-5)
    assert pld == pytest.approx(
        _by(_claims(report_json(*MECHANISM, "--accountant", "pld"))["one record"])[("pld", "record")],
        rel=2e-2,
    )


def test_an_opacus_accountant_is_stated_as_the_same_mechanism(tmp_path):
    state = tmp_path / "opacus.json"
    state.write_text(json.dumps({"history": [[2.0, 0.02, 1000], [2.0, 0.02, 1000]], "mechanism": "rdp"}))
    document = report_json("--opacus", str(state), "--accountant", "rdp,pld")
    assert document["source"] == "opacus"
    same = report_json(*MECHANISM, "--accountant", "rdp,pld")
    assert _by(_claims(document)["one record"]) == _by(_claims(same)["one record"])


def test_a_tf_privacy_description_gets_record_and_user_level():
    args = ("--sigma", "1.1", "--dataset-size", "60000", "--batch-size", "256", "--epochs", "1")
    # One record per microbatch: the multiplier as given (TF-Privacy's default would halve it).
    args += ("--no-microbatching",)
    document = report_json(*args, "--max-examples-per-user", "2", "--accountant", "rdp,pld")
    claims = _claims(document)
    steps = math.ceil(1 / (256 / 60000))  # TF-Privacy: ceil(epochs / q)
    direct = account_json(
        "--sigma",
        "1.1",
        "--q",
        str(256 / 60000),
        "--steps",
        str(steps),
        "--k",
        "1,2",
        "--accountant",
        "rdp,pld",
        "--group-method",
        "all",
    )
    expected = {(r["accountant"], r["method"]): r["epsilon"] for r in direct["results"]}
    assert _by(claims["one record"]) == {k: v for k, v in expected.items() if k[1] == "record"}
    user = next(c for c in document["claims"] if c["level"] == "user")
    assert user["unit"] == "one user (at most 2 records)"
    assert _by(user) == {k: v for k, v in expected.items() if k[1] != "record"}
    # TF-Privacy's second line: each record once per epoch, no amplification (1 epoch: 1 Gaussian);
    # a user's 2 records in one batch: the Gaussian at sigma / 2.
    for unit, sigma in (
        ("one record (once per epoch)", "1.1"),
        ("one user (at most 2 records, once per epoch)", "0.55"),
    ):
        once = account_json("--sigma", sigma, "--q", "1", "--steps", "1", "--accountant", "rdp,pld")
        assert _by(claims[unit]) == {(r["accountant"], r["method"]): r["epsilon"] for r in once["results"]}


def test_the_roc_plot_is_written(tmp_path):
    plot = tmp_path / "roc.png"
    result = report(*MECHANISM, "--k", "2", "--accountant", "rdp,pld", "--plot", str(plot))
    assert result.exit_code == 0, result.output
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_schema_is_shipped_and_documented():
    result = report("--schema")
    assert result.exit_code == 0
    assert result.output == schema_text() == (REPO / "docs" / "report-schema.json").read_text()
    jsonschema.Draft202012Validator.check_schema(schema())


def _error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def test_bad_input_gets_one_line(tmp_path, run):
    truncated = tmp_path / "m.jsonl"
    truncated.write_text((run / "m.jsonl").read_text()[:-30])
    record_path(truncated).write_text(record_path(run / "m.jsonl").read_text())
    assert "truncated or damaged at line 3" in _error(report("--run", str(truncated)))
    state = tmp_path / "prv.json"
    state.write_text(json.dumps({"history": [[1.0, 0.01, 10]], "mechanism": "prv"}))
    assert "'prv'" in _error(report("--opacus", str(state)))
    assert "one of --run and --opacus" in _error(
        report("--run", str(run / "m.jsonl"), "--opacus", str(state))
    )
    assert "give --sigma" in _error(report("--q", "0.1", "--steps", "10"))
    assert "'--epochs'" in _error(report(*MECHANISM, "--epochs", "2"))
    assert "'--max-examples-per-user'" in _error(report(*AVG, "--max-examples-per-user", "3"))
    assert "--batch-size and --epochs" in _error(report("--sigma", "1", "--dataset-size", "100"))
    assert "'--sigma'" in _error(report("--run", str(run / "m.jsonl"), "--sigma", "2"))
