"""`uldp train` as a user steers it: Ctrl-C, checkpoint directories, progress, table rows, the
server's view under user sampling, and the tuned defaults named in --help."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

from click.testing import CliRunner

from uldp.cli.main import cli

from .invoke import command_runner

run, run_json = command_runner("train")

WATCHDOG_S = 180
HEART = ["--algo", "uldp-avg", "--dataset", "heart-disease", "--users", "20", "--noise-seed", "0"]


def _start(args: list[str], cwd: Path) -> subprocess.Popen:
    """`uldp train ARGS` as a separate process, its stderr a pipe (not a terminal)."""
    return subprocess.Popen(
        [sys.executable, "-m", "uldp.cli", "train", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A shell's background job starts with SIGINT ignored, and Python then keeps it ignored;
        # restore the default so the child turns SIGINT into KeyboardInterrupt as in a terminal.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        env={**os.environ, "COLUMNS": "100"},
    )


def _interrupt_after(proc: subprocess.Popen, rounds: int) -> list[str]:
    """Read progress lines until `rounds` rounds are reported, then send SIGINT (Ctrl-C).

    A watchdog kills the run after WATCHDOG_S seconds, so a run that never reports its rounds
    fails the test instead of hanging it.
    """
    seen = []
    assert proc.stderr is not None
    watchdog = threading.Timer(WATCHDOG_S, proc.kill)
    watchdog.start()
    try:
        for line in proc.stderr:
            seen.append(line)
            if f"round {rounds:>6}/" in line:
                proc.send_signal(signal.SIGINT)
                break
    finally:
        watchdog.cancel()
    return seen


def test_ctrl_c_exits_130_with_the_round_the_epsilon_and_the_resume_command(tmp_path):
    args = [*HEART, "--rounds", "100000", "--checkpoint", str(tmp_path / "ck")]
    proc = _start(args, tmp_path)
    _interrupt_after(proc, 2)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Aborted!" not in err and "Traceback" not in err
    message = err.strip().splitlines()
    done = int(message[-2].split("after round ")[1].split()[0])
    assert (
        done >= 2 and f"of 100000: the model after round {done} has spent user-level epsilon" in message[-2]
    )
    # The epsilon it names is the checkpointed run's after that round.
    epsilon = float(message[-2].split("user-level epsilon ")[1].split()[0])
    doc = run_json(*HEART, "--rounds", str(done))
    assert f"{doc['summary']['epsilon']:.4g}" == f"{epsilon:.4g}"
    # The resume command is the same command with --resume, and it continues at the next round.
    assert message[-1].startswith(f"Resume from round {done + 1} with: uldp train ")
    command = shlex.split(message[-1].split(" with: ", 1)[1])
    assert command[2:] == [*args, "--resume"]
    resumed = _start(command[2:], tmp_path)
    lines = _interrupt_after(resumed, done + 1)
    resumed.communicate(timeout=60)
    assert resumed.returncode == 130
    assert f"round {done + 1:>6}/100000" in lines[0]  # no round ran twice


def test_ctrl_c_without_checkpoint_says_it_cannot_resume(tmp_path):
    proc = _start([*HEART, "--rounds", "100000"], tmp_path)
    _interrupt_after(proc, 1)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "No --checkpoint DIR was given, so the run cannot be resumed." in err


def test_a_checkpoint_is_not_overwritten_without_overwrite(tmp_path):
    args = [*HEART, "--rounds", "1", "--checkpoint", str(tmp_path / "ck")]
    run_json(*args)
    saved = (tmp_path / "ck" / "checkpoint.pt").read_bytes()
    refused = run(*args, "--rounds", "2")
    assert refused.exit_code == 2
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:") and "--overwrite" in lines[0]
    assert "--resume" in lines[0] and (tmp_path / "ck" / "checkpoint.pt").read_bytes() == saved
    assert run_json(*args, "--overwrite")["summary"]["rounds"] == 1
    both = run(*args, "--overwrite", "--resume")
    assert both.exit_code == 2 and "give one" in both.output


def test_without_a_terminal_every_round_prints_a_line_as_it_completes(tmp_path):
    proc = _start([*HEART, "--rounds", "3"], tmp_path)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    lines = [line for line in err.splitlines() if "round" in line]
    assert [line.split("round ")[1].split()[0] for line in lines] == ["1/3", "2/3", "3/3"]
    assert all("accuracy" in line and "epsilon" in line for line in lines)
    assert "┃ round" in out  # the table still goes to stdout


def test_json_output_stays_one_document():
    doc = json.loads(CliRunner().invoke(cli, ["train", *HEART, "--rounds", "2", "--format", "json"]).output)
    assert len(doc["history"]) == 2


def test_table_says_which_rounds_it_shows_and_every_n_chooses():
    shown = run(*HEART, "--rounds", "20")
    assert shown.exit_code == 0
    assert "shows every 2nd round and the last (10 of 20; --every 1 shows all)" in " ".join(
        shown.output.split()
    )
    every = run(*HEART, "--rounds", "7", "--every", "3")
    rows = [line.split("│")[1].strip() for line in every.output.splitlines() if line.startswith("│")]
    assert rows == ["3", "6", "7"]
    all_rows = run(*HEART, "--rounds", "20", "--every", "1")
    assert "shows every" not in all_rows.output
    assert sum(line.startswith("│") for line in all_rows.output.splitlines()) == 20


def test_user_sampling_shows_the_models_and_the_servers_epsilon(tmp_path):
    args = [
        *HEART,
        "--rounds",
        "3",
        "--sigma",
        "5",
        "--user-q",
        "0.5",
        "--metrics",
        str(tmp_path / "m.jsonl"),
    ]
    doc = run_json(*args)
    account = CliRunner().invoke(
        cli,
        ["account", "--algo", "uldp-avg", "--sigma", "5", "--rounds", "3", "--silos", "4", "--user-q", "0.5"]
        + ["--format", "json"],
    )
    model, server = (row["epsilon"] for row in json.loads(account.output)["results"][:2])
    assert doc["summary"]["epsilon"] == model and doc["summary"]["server_epsilon"] == server > model
    assert all(row["server_epsilon"] > row["epsilon"] for row in doc["history"])
    lines = (tmp_path / "m.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["server_epsilon"] == server
    table = CliRunner(env={"COLUMNS": "120"}).invoke(cli, ["train", *args])
    assert "epsilon (model)" in table.output and "epsilon (server)" in table.output
    assert "against the server" in table.output
    plain = run_json(*HEART, "--rounds", "1")
    assert "server_epsilon" not in plain["summary"] and "server_epsilon" not in plain["history"][0]


def test_help_states_the_tuned_defaults():
    # Click wraps help at 80 columns, breaking lines after hyphens: join those back.
    text = re.sub(r"-\s+", "-", " ".join(CliRunner().invoke(cli, ["train", "--help"]).output.split()))
    assert "default: 30 for uldp-avg(-w) on mnist, else 10" in text
    assert "default: 3 for uldp-avg(-w) on mnist, else 5" in text
    assert "default: 20 for uldp-avg(-w) on mnist, 10 for uldp-avg(-w) on heart-disease, else 1" in text
    assert "default: 1000 for uldp-avg(-w) on mnist, 200 for uldp-avg(-w) on heart-disease, else 100" in text
    assert "default: logistic for uldp-avg(-w) on mnist, else auto" in text


def test_the_run_says_which_settings_came_from_the_defaults():
    doc = run_json("--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "1", "--noise-seed", "0")
    summary = doc["summary"]
    assert (summary["users"], summary["sigma"], summary["lr"], summary["global_lr"]) == (200, 5, 0.5, 10)
    table = " ".join(run(*HEART, "--rounds", "1", "--lr", "0.1").output.split())
    assert "1 rounds, sigma 5, clip 1, lr 0.1, global lr 10, local epochs 1" in table
    assert "(defaults: sigma, global-lr, local-epochs; docs/train.md)" in table
