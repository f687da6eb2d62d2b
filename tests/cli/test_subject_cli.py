"""`uldp subject` end to end: the JSON contract, holdings CSV, LocalGroupDP, config and bad input."""

from pathlib import Path

import pytest

from uldp.accountants.subject.horizontal import (
    MECHANISMS,
    FederationRun,
    group_noise,
    max_rounds,
    subject_guarantee,
    user_ldp_epsilon,
)

from .invoke import command_runner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BASE = [
    "--silos",
    "16",
    "--silos-per-round",
    "4",
    "--rounds",
    "50",
    "--local-steps",
    "10",
    "--record-q",
    "0.01",
    "--sigma",
    "1",
]
RUN = FederationRun(16, 4, 50, 10, 0.01, 1.0)


run, run_json = command_runner("subject")


def test_json_contract_worst_case():
    doc = run_json(*BASE, "--epsilon", "4", "--k", "1,3")
    expected = subject_guarantee(RUN, [1] * 16, 1e-5)
    assert doc["local_epsilon"] == pytest.approx(expected.local_epsilon, rel=1e-12)
    assert doc["federation_epsilon"] == pytest.approx(expected.federation_epsilon, rel=1e-12)
    assert doc["members_holding"] == 16 and doc["members_composed"] == 4
    assert [g["z"] for g in doc["group_noise"]] == [1, 3]
    assert doc["group_noise"][1]["sigma"] == group_noise(3, 4.0, 1e-5, 0.01, 500).sigma
    assert doc["rule_of_thumb"]["rounds"] == 25 and doc["max_rounds"]["budget"] == 4
    assert doc["max_rounds"]["federation"] < doc["max_rounds"]["local"]


def test_fewer_holders_and_distributions():
    one = run_json(*BASE, "--subject-silos", "1")
    assert one["federation_epsilon"] == pytest.approx(one["local_epsilon"])
    spread = run_json(*BASE, "--subject-items", "32", "--distribution", "power", "--alpha", "4")
    assert sum(spread["holding"]) == 32 and spread["holding"][0] > 2
    assert "power, alpha = 4" in spread["assumptions"]["holdings"]


def test_holdings_csv_per_subject(tmp_path):
    path = tmp_path / "items.csv"
    path.write_text("subject,member\nalice,shop1\nalice,shop2\nalice,shop2\nbob,shop1\n")
    doc = run_json(*BASE, "--holdings", str(path))
    subjects = {s["subject"]: s for s in doc["subjects"]}
    assert subjects["alice"]["members"] == 2 and subjects["alice"]["max_items"] == 2
    assert subjects["bob"]["federation_epsilon"] == pytest.approx(subjects["bob"]["local_epsilon"])
    assert doc["worst_subject"] == "alice"
    assert doc["federation_epsilon"] == subjects["alice"]["federation_epsilon"]
    result = run(*BASE, "--holdings", str(path), "--format", "csv")
    assert result.output.splitlines()[0] == "subject,members,max_items,local_epsilon,federation_epsilon"


def test_table_and_config():
    result = run("--config", str(EXAMPLES / "subject-femnist.yaml"))
    assert result.exit_code == 0, result.output
    for text in ("uldp subject", "sigma_Z", "LocalGroupDP", "Assumptions", "Corollary 3.5", "R/sqrt(s)"):
        assert text in result.output


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--silos-per-round", "17"], "--silos-per-round"),
        (["--k", "2"], "--epsilon"),
        (["--subject-silos", "20"], "--subject-silos"),
        (["--record-q", "0"], "--record-q"),
        (["--alpha", "2"], "--subject-items"),
        (["--subject-items", "5", "--distribution", "power"], "--alpha"),
        (["--subject-items", "5", "--alpha", "2"], "--alpha"),
        (["--subject-items", "5", "--items-per-silo", "2"], "--items-per-silo"),
    ],
)
def test_bad_input_is_one_line_exit_2(args, needle):
    result = run(*BASE, *args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("Error:") and needle in lines[-1]
    assert "Traceback" not in result.output


def test_holdings_with_too_many_members(tmp_path):
    path = tmp_path / "items.csv"
    path.write_text("subject,member\n" + "".join(f"s,m{i}\n" for i in range(20)))
    result = run(*BASE, "--holdings", str(path))
    assert result.exit_code == 2 and "--holdings" in result.output and "held by 20 members" in result.output


PAPER = [
    "--silos",
    "16",
    "--silos-per-round",
    "16",
    "--local-steps",
    "10",
    "--record-q",
    "0.01",
    "--sigma",
    "1",
    "--epsilon",
    "4",
]
WIDE = "subject,member\n" + "".join(f"wide,m{i}\n" for i in range(1, 17))


@pytest.mark.parametrize(
    "rounds, deep, local, federation",
    [
        ("100", 3, "deep", "wide"),  # deep's 3 items at m1 bind the local limit
        ("1000", 4, "deep", "deep"),  # wide is worst at R = 1000, deep binds the federation limit
    ],
)
def test_round_limits_bind_every_subject(tmp_path, rounds, deep, local, federation):
    path = tmp_path / "h.csv"
    path.write_text(WIDE + "deep,m1\n" * deep)
    doc = run_json(*PAPER, "--rounds", rounds, "--holdings", str(path))
    run16 = FederationRun(16, 16, int(rounds), 10, 0.01, 1.0)
    holdings = {"wide": [1] * 16, "deep": [deep]}
    limits = doc["max_rounds"]
    assert limits["local_subject"] == local and limits["federation_subject"] == federation
    assert limits["local"] == max_rounds(run16, holdings[local], 4.0, 1e-5, federation=False)
    assert limits["federation"] == max_rounds(run16, holdings[federation], 4.0, 1e-5)
    for h in holdings.values():
        assert max_rounds(run16, h, 4.0, 1e-5, federation=False) >= limits["local"]
        assert max_rounds(run16, h, 4.0, 1e-5) >= limits["federation"]
    # the local row is the largest local epsilon, and says whose
    row = doc["results"][0]
    assert doc["local_subject"] == "deep" and row["epsilon"] == doc["local_epsilon"] and "deep" in row["note"]
    thumb = doc["rule_of_thumb"]
    assert thumb["local_epsilon"] == next(
        s["local_epsilon"] for s in doc["subjects"] if s["subject"] == thumb["subject"]
    )


@pytest.mark.parametrize("header", ["subject,member", "member,subject", "Member,note,SUBJECT"])
def test_holdings_header_in_any_order(tmp_path, header):
    names = [c.strip().lower() for c in header.split(",")]
    rows = [{"subject": "alice", "member": m, "note": "x"} for m in ("shop1", "shop2", "shop2")]
    rows.append({"subject": "bob", "member": "shop1", "note": "y"})
    path = tmp_path / "items.csv"
    path.write_text(header + "\n" + "".join(",".join(r[n] for n in names) + "\n" for r in rows))
    subjects = {s["subject"]: s for s in run_json(*BASE, "--holdings", str(path))["subjects"]}
    assert set(subjects) == {"alice", "bob"}
    assert subjects["alice"]["members"] == 2 and subjects["alice"]["max_items"] == 2


@pytest.mark.parametrize("text", ["subject_id,member_id\nalice,shop1\n", "alice,shop1\nbob,shop2\n"])
def test_holdings_without_the_header_is_refused(tmp_path, text):
    path = tmp_path / "items.csv"
    path.write_text(text)
    result = run(*BASE, "--holdings", str(path))
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 or lines[-2].startswith("Try")
    assert lines[-1].startswith("Error: --holdings") and "subject and member" in lines[-1]


def test_huge_budget_for_local_group_dp_is_one_line():
    result = run(*BASE, "--epsilon", "2000", "--k", "2")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines[-1].startswith("Error: --epsilon 2000 with --k 2") and "Traceback" not in result.output


def test_local_group_dp_is_per_member_and_warns_on_a_small_z(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text(WIDE + "deep,m1\n" * 3)
    output = " ".join(run(*PAPER, "--rounds", "100", "--holdings", str(path), "--k", "2,3").output.split())
    assert "LocalGroupDP noise per member" in output
    assert "Z = 2 is below the 3 items subject deep has at one member" in output and "use Z = 3" in output
    enough = run(*PAPER, "--rounds", "100", "--holdings", str(path), "--k", "3").output
    assert "use Z =" not in " ".join(enough.split())


def test_local_guarantee_and_default_are_worded_as_they_are():
    doc = run_json(*BASE)
    local = doc["assumptions"]["local guarantee"]
    assert "other member" in local and "Definition 2.3" in local and "held by one member" in local
    assert doc["results"][0]["guarantee"] == "local (per member)"
    holdings = doc["assumptions"]["holdings"]
    assert "every member holds the subject, one item each" in holdings and "(worst case" not in holdings
    help_text = " ".join(run("--help").output.split())
    assert "default N: every member, one item each" in help_text and "the worst case" not in help_text


def test_user_ldp_prints_its_ldp_row_and_json_keys():
    doc = run_json(*BASE, "--algo", "userldp", "--subject-items", "32")
    run_ = FederationRun(16, 4, 50, 10, 0.01, 1.0, "userldp")
    expected = subject_guarantee(run_, [2] * 16, 1e-5)
    assert doc["algo"] == "userldp" and doc["holding"] == [2] * 16
    assert doc["local_epsilon"] == pytest.approx(expected.local_epsilon, rel=1e-12)
    assert doc["federation_epsilon"] == pytest.approx(expected.federation_epsilon, rel=1e-12)
    assert doc["user_ldp_epsilon"] == pytest.approx(user_ldp_epsilon(run_, 1e-5), rel=1e-12)
    ldp = [row for row in doc["results"] if row["guarantee"] == "user-level LDP (per member)"]
    assert len(ldp) == 1 and ldp[0]["epsilon"] == doc["user_ldp_epsilon"] and ldp[0]["rounds"] == 50
    assert "no sampling amplification" in ldp[0]["note"]
    assumptions = doc["assumptions"]
    assert assumptions["algorithm"].startswith("UserLDP")
    assert "2C" in assumptions["local mechanism"] and "Lemma 3.2" in assumptions["local mechanism"]
    assert "Theorem 3.3" in assumptions["user-level LDP"]
    table = run(*BASE, "--algo", "userldp")
    assert table.exit_code == 0 and "user-level" in table.output
    assert "moves by up to 2 C" in " ".join(table.output.split())
    rows = run(*BASE, "--algo", "userldp", "--format", "csv").output.splitlines()
    assert rows[2].startswith("user-level LDP (per member),50,1,")
    assert rows[2].endswith(",whole member data set replaced; no sampling amplification")


def test_default_algo_is_higradavgdp_without_ldp():
    doc = run_json(*BASE)
    assert doc["algo"] == "higradavgdp" and doc["user_ldp_epsilon"] is None
    assert "algorithm" not in doc["assumptions"] and "user-level LDP" not in doc["assumptions"]
    assert doc["assumptions"]["local mechanism"].startswith("HiGradAvgDP")
    assert all("LDP" not in row["guarantee"] for row in doc["results"])
    assert run_json(*BASE, "--algo", "higradavgdp") == doc


@pytest.mark.parametrize("algo", MECHANISMS)
def test_every_row_accounts_the_chosen_mechanism(tmp_path, algo):
    path = tmp_path / "h.csv"
    path.write_text("subject,member\nalice,m1\nalice,m2\nalice,m2\nbob,m3\nbob,m3\nbob,m3\n")
    doc = run_json(*BASE, "--algo", algo, "--holdings", str(path), "--epsilon", "30")
    run_ = FederationRun(16, 4, 50, 10, 0.01, 1.0, algo)
    for entry in doc["subjects"]:
        holding = {"alice": [2, 1], "bob": [3]}[entry["subject"]]
        g = subject_guarantee(run_, holding, 1e-5)
        assert (
            entry["local_epsilon"] == g.local_epsilon and entry["federation_epsilon"] == g.federation_epsilon
        )
    worst = max(doc["subjects"], key=lambda e: e["federation_epsilon"])
    assert doc["federation_epsilon"] == worst["federation_epsilon"]
    limits = doc["max_rounds"]
    assert limits["local"] == min(max_rounds(run_, h, 30.0, 1e-5, federation=False) for h in ([2, 1], [3]))
    assert limits["federation"] == min(max_rounds(run_, h, 30.0, 1e-5) for h in ([2, 1], [3]))
    assert doc["algo"] == algo and (doc["user_ldp_epsilon"] is None) == (algo != "userldp")
    if algo != "higradavgdp":
        assert doc["assumptions"]["algorithm"].lower().startswith(algo)
    mechanism = doc["assumptions"]["local mechanism"]
    assert ("Binomial(m, q)" in mechanism) == (algo in ("localgroupdp", "localitemdp"))  # issue 32


def test_k_goes_with_any_algo():
    doc = run_json(*BASE, "--algo", "localitemdp", "--epsilon", "4", "--k", "2")
    assert doc["group_noise"][0]["sigma"] == group_noise(2, 4.0, 1e-5, 0.01, 500).sigma


@pytest.mark.parametrize("value", ["dpsgd", "HiGradAvg", ""])
def test_bad_algo_is_one_line_exit_2(value):
    result = run(*BASE, "--algo", value)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("Error: Invalid value for '--algo'") and "Traceback" not in result.output
    assert len(lines) == 1 or lines[-2].startswith("Try")
