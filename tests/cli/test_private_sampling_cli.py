"""`--private-sampling` (ULDP-FL §4.1) in `uldp account`, `uldp calibrate` and `uldp report`: the
user q rounded to m/P and said so, the server's view amplified as the released model's, and every
setting it cannot serve refused in one line."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.cli.invoke import command_runner
from uldp.accountants.statements.report_schema import schema
from uldp.trainers.run_record import record_path, record_sha256

account, account_json = command_runner("account")
calibrate, calibrate_json = command_runner("calibrate")
report, report_json = command_runner("report")
train, _ = command_runner("train")

PLAN = ("--algo", "uldp-avg-w", "--sigma", "5", "--rounds", "100", "--user-q", "0.333")
ROUNDING = "user q 0.333 rounded to m/P = 33/100 = 0.33 (private sampling draws at rates m/P)"


def _server_and_user(results: list[dict]) -> tuple[dict, dict]:
    return (
        next(r for r in results if r["method"] == "server view"),
        next(r for r in results if r["method"] == "user"),
    )


def test_account_gives_the_server_the_released_models_epsilon_at_m_over_p() -> None:
    document = account_json(*PLAN, "--private-sampling")
    server, user = _server_and_user(document["results"])
    assert server["epsilon"] == user["epsilon"] and server["order"] == user["order"]
    assert "private sampling, §4.1" in server["note"]
    assert document["assumptions"]["private sampling"] == ROUNDING
    assert "oblivious transfer" in document["assumptions"]["server view"]
    assert "m/P = 33/100" in document["assumptions"]["user sampling"]
    assert document["private_sampling"] == {"m": 33, "slots": 100, "q": 0.33, "requested_q": 0.333}
    # The same as accounting q = 0.33 itself; without the flag the server's row is larger.
    plain = account_json(*PLAN[:-1], "0.33")
    plain_server, plain_user = _server_and_user(plain["results"])
    assert plain_user["epsilon"] == user["epsilon"]
    assert plain_server["epsilon"] > 1.2 * server["epsilon"]
    assert plain_server["note"].startswith("knows the user sample")
    assert "private sampling" not in plain["assumptions"] and "private_sampling" not in plain


def test_account_table_states_the_rounding_and_why() -> None:
    result = account(*PLAN, "--private-sampling", "--sampling-slots", "10")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "user q 0.333 rounded to m/P = 3/10 = 0.3" in text
    assert "the silos pick each user's slot by oblivious transfer" in text
    assert "user sampling amplifies only against observers" not in text


def test_account_with_a_tight_accountant_copies_its_figure() -> None:
    document = account_json(*PLAN, "--private-sampling", "--accountant", "pld")
    server, user = _server_and_user(document["results"])
    assert (server["epsilon"], server["accountant"], server["label"]) == (
        user["epsilon"],
        "pld",
        "user level, server's view (PLD)",
    )


def test_calibrate_targets_the_same_sigma_for_either_view() -> None:
    args = ("--epsilon", "2", "--algo", "uldp-sgd-w", "--rounds", "100", "--user-q", "0.333")
    model = calibrate_json(*args, "--private-sampling")
    server = calibrate_json(*args, "--private-sampling", "--view", "server")
    assert model["sigma"] == server["sigma"] and model["q"] == 0.33
    assert server["epsilon_server"] == server["epsilon_model"] <= 2
    assert server["assumptions"]["private sampling"] == ROUNDING
    assert server["private_sampling"]["m"] == 33
    # Without it the server's budget needs far more noise.
    plain = calibrate_json(*args[:-1], "0.33", "--view", "server")
    assert plain["sigma"] > 1.3 * server["sigma"]


def _claim(document: dict, view: str) -> dict:
    return next(c for c in document["claims"] if c["level"] == "user" and c["view"] == view)


def test_report_of_a_plan_gives_the_server_the_released_models_bounds() -> None:
    document = report_json(*PLAN, "--private-sampling", "--accountant", "rdp,pld")
    jsonschema.validate(document, schema())
    server, model = _claim(document, "server"), _claim(document, "released model")
    assert server["bounds"] == model["bounds"] and "ULDP-FL §4.1" in server["note"]
    assert document["assumptions"]["private sampling"] == ROUNDING
    assert document["settings"]["private_sampling"]["slots"] == 100
    plain = report_json(*PLAN[:-1], "0.33", "--accountant", "rdp,pld")
    assert _claim(plain, "released model")["bounds"] == model["bounds"]
    assert _claim(plain, "server")["epsilon"] > 1.2 * server["epsilon"]


@pytest.fixture(scope="module")
def private_run(tmp_path_factory):
    """A uldp-avg-w run whose record says it sampled privately, as `uldp train --private-sampling`
    writes it (user_q already m/P, sampling_slots P), digest and all."""
    where = tmp_path_factory.mktemp("run")
    args = ("--algo", "uldp-avg-w", "--dataset", "heart-disease", "--user-q", "0.5", "--rounds", "3")
    result = train(*args, "--noise-seed", "0", "--metrics", str(where / "m.jsonl"))
    assert result.exit_code == 0, result.output
    plain = where / "plain.jsonl"
    plain.write_bytes((where / "m.jsonl").read_bytes())
    record_path(plain).write_bytes(record_path(where / "m.jsonl").read_bytes())
    _rewrite(where / "m.jsonl", private_sampling=True, sampling_slots=100)
    return where


def _rewrite(metrics, **changes) -> None:
    path = record_path(metrics)
    record = {k: v for k, v in json.loads(path.read_text()).items() if k != "sha256"}
    record.update(changes)
    path.write_text(json.dumps({**record, "sha256": record_sha256(record)}))


def test_report_of_a_privately_sampled_run_honours_its_record(private_run) -> None:
    document = report_json("--run", str(private_run / "m.jsonl"), "--accountant", "rdp,pld")
    jsonschema.validate(document, schema())
    server, model = _claim(document, "server"), _claim(document, "released model")
    assert server["bounds"] == model["bounds"]
    assert document["checks"][0].endswith(": equal")
    assert any("oblivious transfer" in c and "m/P = 50/100" in c for c in document["caveats"])
    assert not any("by the server" in c for c in document["caveats"])
    assert "m/P = 50/100" in document["assumptions"]["user sampling"]
    plain = report_json("--run", str(private_run / "plain.jsonl"), "--accountant", "rdp,pld")
    assert _claim(plain, "server")["epsilon"] > server["epsilon"]
    assert any("sampled at q = 0.5 by the server" in c for c in plain["caveats"])


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"private_sampling": "yes"}, "private_sampling is not true or false"),
        ({"sampling_slots": "100"}, "sampling_slots is not a whole number"),
        ({"user_q": 0.505}, "is not a private sampling rate m/P with P = 100"),
        ({"sampling_slots": 1}, "is not a private sampling rate"),
    ],
)
def test_a_damaged_private_sampling_record_is_refused(private_run, tmp_path, changes, words) -> None:
    metrics = tmp_path / "m.jsonl"
    metrics.write_bytes((private_run / "m.jsonl").read_bytes())
    record_path(metrics).write_bytes(record_path(private_run / "m.jsonl").read_bytes())
    _rewrite(metrics, **changes)
    result = report("--run", str(metrics))
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and words in lines[0], result.output


PRIVATE = ("--algo", "uldp-avg-w", "--user-q", "0.5", "--private-sampling")
REFUSALS = [
    (("--algo", "uldp-avg", "--user-q", "0.5", "--private-sampling"), "'--private-sampling'"),
    (("--algo", "uldp-sgd", "--user-q", "0.5", "--private-sampling"), "uldp-avg-w or uldp-sgd-w"),
    (("--algo", "uldp-avg-w", "--private-sampling"), "--user-q below 1"),
    (("--algo", "uldp-sgd-w", "--user-q", "1", "--private-sampling"), "--user-q below 1"),
    (("--algo", "uldp-avg-w", "--user-q", "0.004", "--private-sampling"), "smallest rate is 1/100"),
    (("--algo", "uldp-avg-w", "--user-q", "0.999", "--private-sampling"), "no sample to hide"),
    ((*PRIVATE, "--sampling-slots", "1"), "[2, 10000]"),
    ((*PRIVATE, "--sampling-slots", "10001"), "10000"),
    (("--algo", "uldp-avg-w", "--user-q", "0.5", "--sampling-slots", "10"), "'--sampling-slots'"),
    (("--algo", "uldp-group", "--record-q", "0.1", "--private-sampling"), "'--private-sampling'"),
]


def _one_error_line(result, words: str) -> None:
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("Error:") and words in lines[0], result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(("args", "words"), REFUSALS)
def test_account_refuses_in_one_line(args, words) -> None:
    _one_error_line(account("--sigma", "5", "--rounds", "10", *args), words)


@pytest.mark.parametrize(("args", "words"), REFUSALS)
def test_calibrate_refuses_in_one_line(args, words) -> None:
    _one_error_line(calibrate("--epsilon", "2", "--rounds", "10", *args), words)


@pytest.mark.parametrize(("args", "words"), REFUSALS)
def test_report_refuses_in_one_line(args, words) -> None:
    _one_error_line(report("--sigma", "5", "--rounds", "10", *args), words)


def test_a_bare_mechanism_is_refused_by_each_command() -> None:
    mechanism = ("--q", "0.1", "--steps", "10", "--private-sampling")
    _one_error_line(account("--sigma", "5", *mechanism), "(got no --algo)")
    _one_error_line(calibrate("--epsilon", "2", *mechanism), "(got no --algo)")
    _one_error_line(report("--sigma", "5", *mechanism), "(got no --algo)")


def test_report_refuses_the_flag_with_a_run_or_another_source(private_run) -> None:
    _one_error_line(report("--run", str(private_run / "m.jsonl"), "--private-sampling"), "run's record says")
    dp_sgd = ("--sigma", "1", "--dataset-size", "1000", "--batch-size", "10", "--epochs", "1")
    _one_error_line(report(*dp_sgd, "--private-sampling"), "applies to a plan")
