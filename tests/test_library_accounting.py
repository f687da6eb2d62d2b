"""`uldp.calibrate` and `uldp.account` (uldp/accounting.py): the commands' keywords, the commands'
numbers, and the DP-SGD libraries' definitions of steps from epochs (issue 34, item 7)."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

import uldp
from uldp.cli.main import cli


def _json(*args: str) -> dict:
    result = CliRunner().invoke(cli, [*args, "--format", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_calibrate_from_epochs_is_the_clis_sigma():
    found = uldp.calibrate(epsilon=3, q=0.01, epochs=10, delta=1e-5)
    document = _json("calibrate", "--epsilon", "3", "--q", "0.01", "--epochs", "10", "--delta", "1e-5")
    assert found.sigma == document["sigma"]
    assert found.steps == document["steps"] == 1000
    assert found.epsilon == document["epsilon"] <= 3
    assert {"command": "calibrate", **found.as_dict()} == document


def test_steps_from_epochs_match_opacus_and_tf_privacy_and_dp_accounting_agrees():
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    found = uldp.calibrate(epsilon=3, q=0.01, epochs=10, delta=1e-5)
    # Opacus' get_noise_multiplier: steps = int(epochs / sample_rate); TF-Privacy: ceil.
    assert found.steps == int(10 / 0.01) == math.ceil(10 / 0.01)

    def epsilon(sigma: float) -> float:
        accountant = rdp_privacy_accountant.RdpAccountant()
        event = dp_event.PoissonSampledDpEvent(0.01, dp_event.GaussianDpEvent(sigma))
        accountant.compose(event, int(10 / 0.01))
        return accountant.get_epsilon(1e-5)

    # dp-accounting's own RDP accountant (its orders and conversion) lands on the budget too, and
    # 1% less noise would overspend it.
    assert epsilon(found.sigma) == pytest.approx(3, abs=0.01)
    assert epsilon(found.sigma * 0.99) > 3.03


def test_a_fractional_epochs_over_q_takes_the_ceiling():
    found = uldp.calibrate(epsilon=3, q=0.03, epochs=1, delta=1e-5)
    assert found.steps == math.ceil(1 / 0.03) == int(1 / 0.03) + 1
    assert "ceil(epochs / q)" in found.assumptions["steps"]


def test_dataset_and_batch_size_give_q_as_tf_privacy():
    found = uldp.account(sigma=1.1, dataset_size=60000, batch_size=256, epochs=60, delta=1e-5)
    same = uldp.account(sigma=1.1, q=256 / 60000, steps=math.ceil(60 / (256 / 60000)), delta=1e-5)
    assert found.epsilon == same.epsilon
    assert "256 / 60000" in found.assumptions["q"]
    document = _json(
        "account", "--sigma", "1.1", "--dataset-size", "60000", "--batch-size", "256", "--epochs", "60"
    )
    assert document["results"][0]["epsilon"] == found.epsilon
    assert document["assumptions"] == found.assumptions


def test_account_of_an_algorithm_is_the_clis():
    found = uldp.account(sigma=5, algo="uldp-avg", rounds=100, user_q=0.5)
    document = _json("account", "--algo", "uldp-avg", "--sigma", "5", "--rounds", "100", "--user-q", "0.5")
    assert [g.epsilon for g in found.guarantees] == [r["epsilon"] for r in document["results"]]
    assert found.assumptions == document["assumptions"]


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        (dict(epsilon=3, q=0.01, epochs=10, steps=5), "steps"),
        (dict(epsilon=3, epochs=10), "epochs"),
        (dict(epsilon=3, dataset_size=100, epochs=1), "batch_size"),
        (dict(epsilon=3, q=0.1, dataset_size=100, batch_size=10, epochs=1), "dataset_size"),
        (dict(epsilon=3, dataset_size=10, batch_size=100, epochs=1), "batch_size"),
        (dict(epsilon=3, algo="uldp-avg", rounds=10, epochs=1), "epochs"),
        (dict(epsilon=3, q=0.01, epochs=10, sigma=1), "sigma"),
        (dict(epsilon=3, q=0.01, epochs=-1), "epochs"),
        (dict(epsilon=3, dataset_size=0, batch_size=1, epochs=1), "dataset_size"),
        (dict(epsilon=3, algo="uldp-avg", rounds=10, view="server"), "view"),
    ],
)
def test_bad_input_raises_invalid_parameter_naming_the_keyword(kwargs: dict, named: str):
    with pytest.raises(uldp.InvalidParameter, match=named):
        uldp.calibrate(**kwargs)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--epochs", "10", "--steps", "5"], "Error: give --steps or --epochs, not both"),
        (["--dataset-size", "100", "--epochs", "1"], "Error: --dataset-size needs --batch-size"),
        (
            ["--q", "0.1", "--dataset-size", "100", "--batch-size", "10", "--epochs", "1"],
            "Error: give --q or",
        ),
    ],
)
def test_the_cli_names_the_options_in_one_error_line(args: list[str], line: str):
    q = [] if "--q" in args or "--dataset-size" in args else ["--q", "0.01"]
    result = CliRunner().invoke(cli, ["calibrate", "--epsilon", "3", *q, *args])
    assert result.exit_code == 2
    assert result.output.strip().splitlines()[-1].startswith(line), result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_library_page_example_runs_and_prints_what_it_says(capsys: pytest.CaptureFixture[str]):
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "library.md").read_text(encoding="utf-8")
    block = page.split("```python\n", 1)[1].split("```", 1)[0]
    assert len([line for line in block.splitlines() if line.strip()]) == 5
    exec(compile(block, "docs/library.md", "exec"), {})
    printed = capsys.readouterr().out.splitlines()
    # Each print's comment starts with the numbers it prints, rounded as shown.
    comments = [line.split("# ", 1)[1] for line in block.splitlines() if line.startswith("print(")]
    assert len(printed) == len(comments) == 2
    for shown, comment in zip(printed, comments, strict=True):
        claimed = re.match(r"([\d. ]+)", comment)
        assert claimed is not None
        numbers = [float(x) for x in claimed.group(1).split()]
        got = [float(x) for x in shown.split()]
        assert got == pytest.approx(numbers, rel=1e-4), (shown, comment)


def test_uldp_groups_user_level_is_its_group_k_whatever_k_are_stated():
    # Issue 34 review: `--group-k 8 --k 2` printed only k = 2 rows tagged "user", and
    # uldp.account(k=[1, 8]).epsilon was the record-level figure; a user keeps 8 records.
    plan = ["--algo", "uldp-group", "--sigma", "5", "--rounds", "10", "--record-q", "0.01"]
    rows = _json("account", *plan, "--group-k", "8", "--k", "2")["results"]
    assert [(r["k"], r["level"]) for r in rows] == [(2, "group"), (2, "group"), (8, "user"), (8, "user")]
    assert [r["note"] for r in rows] == ["", ""] + ["user level: 8 records"] * 2
    found = uldp.account(sigma=5, algo="uldp-group", rounds=10, record_q=0.01, k=[1, 8])
    assert [(g.k, g.level) for g in found.guarantees] == [(1, "record"), (8, "user"), (8, "user")]
    assert found.headline is found.guarantees[1] and found.epsilon > found.guarantees[0].epsilon
    alone = uldp.account(sigma=5, algo="uldp-group", rounds=10, record_q=0.01, group_k=8, group_method="rdp")
    assert found.epsilon == alone.epsilon == rows[2]["epsilon"]
    # uldp report states the same user level.
    report = ["--accountant", "rdp", "--group-method", "rdp"]
    claims = _json("report", *plan, "--group-k", "8", "--k", "2", *report)["claims"]
    (user,) = [c for c in claims if c["level"] == "user"]
    assert user["bounds"][0]["epsilon"] == found.epsilon


def test_a_bare_mechanisms_epsilon_is_the_first_k_given():
    both = uldp.account(sigma=5, q=0.01, steps=1000, k=[1, 4])
    assert both.epsilon == both.guarantees[0].epsilon and both.headline.k == 1
    group_first = uldp.account(sigma=5, q=0.01, steps=1000, k=[4, 1])
    assert group_first.headline.k == 4 and group_first.epsilon > both.epsilon


def test_an_event_as_the_one_positional_argument_still_works():
    # The entry point before issue 34 was uldp.accountants.account(event, ...).
    from uldp.accountants import account

    event = uldp.SubsampledGaussian(1, 0.01, 100)
    assert uldp.account(event) == account(event)
    assert uldp.account(event, delta=1e-6, k=[1, 2], group_method="normal") == account(
        event, delta=1e-6, ks=[1, 2], methods=["normal"]
    )
    assert uldp.account(event, ks=[2], methods=["rdp"]) == account(event, ks=[2], methods=["rdp"])
    with pytest.raises(uldp.InvalidParameter, match="sigma"):
        uldp.account(event, sigma=1)
    with pytest.raises(TypeError, match="ks"):
        uldp.account(sigma=1, q=0.01, steps=100, ks=[1])


@pytest.mark.parametrize(
    ("call", "kwargs", "named"),
    [
        # Item 5: what the CLI refuses as an unused option, the library refuses naming the keyword.
        ("calibrate", dict(epsilon=3, q=0.01, epochs=10, rounds=50, user_q=0.1, record_q=0.5), "rounds"),
        ("calibrate", dict(epsilon=3, q=0.01, steps=100, group_k=8), "group_k"),
        ("calibrate", dict(epsilon=3, algo="uldp-avg", rounds=10, k=4), "k"),
        ("account", dict(sigma=5, algo="uldp-avg", rounds=10, record_q=0.1), "record_q"),
        ("account", dict(sigma=5, q=0.1, steps=10, group_method="pld"), "group_method"),
        # Item 6: counts are integers in [1, 1e12], derived steps included.
        ("calibrate", dict(epsilon=3, q=1e-9, epochs=1e6), "epochs"),
        ("account", dict(sigma=1, dataset_size=10**13, batch_size=1, epochs=1), "dataset_size"),
        ("account", dict(sigma=1, q=0.01, epochs=True), "epochs"),
        ("account", dict(sigma=1, q=0.01, steps=1.5), "steps"),
        ("account", dict(sigma=1, q=0.01, steps=0), "steps"),
        ("account", dict(sigma=1, algo="uldp-avg", rounds=2.0), "rounds"),
        ("account", dict(sigma=1, q=1.5, steps=10), "q"),
        # Item 9: an algorithm's own check names the keyword, not the CLI's --batch-size.
        (
            "calibrate",
            dict(epsilon=3, algo="uldp-group", rounds=10, batch_size=10),
            "batch_size needs silo_sizes",
        ),
    ],
)
def test_the_library_refuses_what_the_cli_refuses_naming_the_keyword(call: str, kwargs: dict, named: str):
    with pytest.raises(uldp.InvalidParameter, match=rf"^{named}\b|\b{named} "):
        getattr(uldp, call)(**kwargs)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["calibrate", "--epsilon", "3", "--q", "0.01", "--epochs", "10", "--rounds", "50"],
            "Error: Invalid value for '--rounds': not used without --algo (only by",
        ),
        (
            ["account", "--sigma", "1", "--q", "1e-9", "--epochs", "1000000"],
            "Error: --epochs 1e+06 at q = 1e-09 is 1e+15 steps, above the 1e+12 accounted",
        ),
    ],
)
def test_the_cli_refuses_the_same_in_its_spelling(args: list[str], line: str):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2 and result.stderr.startswith(line), result.output


def test_count_max_is_the_clis():
    from uldp.accounting import COUNT_MAX
    from uldp.cli.options import COUNT_MAX as CLI_COUNT_MAX

    assert COUNT_MAX == CLI_COUNT_MAX


def test_the_assumptions_say_there_is_no_microbatching_and_report_halves_sigma():
    tf = ["--sigma", "1.1", "--dataset-size", "60000", "--batch-size", "256", "--epochs", "60"]
    found = uldp.account(sigma=1.1, dataset_size=60000, batch_size=256, epochs=60)
    assert "used_microbatching=False" in found.assumptions["microbatching"]
    claims = _json("report", *tf, "--accountant", "rdp", "--no-microbatching")["claims"]
    assert claims[0]["bounds"][0]["epsilon"] == found.epsilon
    halved = _json("report", *tf, "--accountant", "rdp")["claims"][0]["bounds"][0]["epsilon"]
    assert halved == uldp.account(sigma=0.55, dataset_size=60000, batch_size=256, epochs=60).epsilon


def test_dir_lists_the_entry_points_and_the_module_attributes_not_the_helpers():
    names = dir(uldp)
    assert {"calibrate", "account", "Calibrated", "Accounting", "EngineError", "SubsampledGaussian"} <= set(
        names
    )
    assert {"__doc__", "__file__", "__path__", "__version__", "__name__"} <= set(names)
    assert not {"Any", "annotations", "import_module", "version"} & set(names)


def test_calibrated_as_dict_has_the_clis_keys_and_numbers_with_user_sampling():
    found = uldp.calibrate(epsilon=2, algo="uldp-avg", user_q=0.5, rounds=100, view="server")
    args = ["calibrate", "--epsilon", "2", "--algo", "uldp-avg", "--user-q", "0.5", "--rounds", "100"]
    document = _json(*args, "--view", "server")
    mine = found.as_dict()
    assert set(mine) | {"command"} == set(document)
    assert {k: v for k, v in mine.items() if k != "assumptions"} == {
        k: v for k, v in document.items() if k not in ("assumptions", "command")
    }
    # Text naming an option spells the keyword: the one difference.
    assert mine["assumptions"]["view"].replace("(view", "(--view") == document["assumptions"]["view"]


def test_the_library_pages_event_example_prints_what_it_says():
    import doctest
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "library.md").read_text(encoding="utf-8")
    block = page.split("## An event of your own", 1)[1].split("```\n", 1)[1].split("```", 1)[0]
    test = doctest.DocTestParser().get_doctest(block, {"uldp": uldp}, "library.md", None, 0)
    assert len(test.examples) == 1
    assert doctest.DocTestRunner().run(test).failed == 0
