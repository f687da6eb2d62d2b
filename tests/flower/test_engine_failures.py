"""`uldp train --engine flower` when its engine fails (issue 34): Ray that cannot start, breaks
down under a waiting server or loses a silo's worker mid-run is one `Error:` line naming Ray and
what to try, exit status 1 and no bug report (uldp's own errors stay bugs); the process exits,
and no process Ray started outlives it. The stages a person waiting sees before round 1."""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.flower.leftovers import marked_env, new_mark, processes_marked
from uldp.cli.main import cli

ARGS = ["train", "--algo", "uldp-avg", "--dataset", "heart-disease", "--rounds", "2", "--engine", "flower"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # starts Ray's head processes and raylet: 10-30 s
def test_ray_that_cannot_start_is_one_line_exit_1_and_leaves_no_process():
    """Ray's node times out after its gcs_server, raylet and log_monitor are up (as on a loaded
    machine, tests/flower/ray_start_fails.py): the real CLI says so in one line and exits, and
    none of them is left (issue 34: the process hung in threading._shutdown, a gcs_server left)."""
    pytest.importorskip("ray", reason="the 'flower' extra is not installed")
    mark = new_mark()
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "tests.flower.ray_start_fails", *ARGS],
        capture_output=True,
        text=True,
        timeout=240,  # exits, rather than wait for a silo that never comes (SETUP_TIMEOUT, 600 s)
        env=marked_env(mark),
        cwd=ROOT,
    )
    elapsed = time.monotonic() - started
    assert processes_marked(mark) == []  # no wait: the CLI ended them before it exited
    assert proc.returncode == 1, proc.stderr
    lines = proc.stderr.splitlines()
    errors = [line for line in lines if line.startswith("Error:")]
    assert errors == [lines[-1]], proc.stderr
    assert errors[0].startswith(
        "Error: Ray, the engine of Flower's simulation, could not start: "
        "The current node timed out during startup; try --engine local"
    )
    assert "report" not in errors[0] and "internal error" not in errors[0]
    assert "Traceback" not in proc.stderr and "\x1b[" not in proc.stderr
    # Before the error, only the stage the run had reached (no terminal: one plain line).
    assert lines[:-1] == [
        "uldp-avg on heart-disease: loading Flower and Ray...",
        "uldp-avg on heart-disease: starting Ray...",
    ], proc.stderr
    assert proc.stdout == ""
    assert elapsed < 200


def test_an_engine_error_is_one_line_with_exit_status_1(monkeypatch):
    """The CLI's face of `EngineError`, however raised: not "internal error ... please report it"
    (that is for uldp's bugs), not a usage error (exit status 2 is for bad input)."""
    from uldp.trainers.flower.ray_session import engine_failure

    crash = RuntimeError("An error was encountered. Ending simulation.")
    crash.__cause__ = RuntimeError("Simulation Runtime crashed.")
    crash.__cause__.__cause__ = OSError("raylet died. Check its log\nfor details")

    def fail(options):
        raise engine_failure("Flower's simulation engine (Ray) failed", crash) from crash

    monkeypatch.setattr(importlib.import_module("uldp.cli.commands.train.command"), "start", fail)
    result = CliRunner().invoke(cli, ARGS)
    assert result.exit_code == 1
    assert result.output.splitlines() == [
        "Error: Flower's simulation engine (Ray) failed: raylet died; try --engine local (the same "
        "rounds, every silo in this process), fewer --silos, or free memory and cores (a loaded "
        "machine slows Ray's start past its timeouts; docs/flower.md)"
    ]
    assert isinstance(result.exception, SystemExit)
    monkeypatch.setenv("ULDP_DEBUG", "1")  # for whoever digs deeper: Ray's error under it
    debug = CliRunner().invoke(cli, ARGS)
    assert debug.exit_code == 1
    assert "Traceback" in debug.output and "OSError: raylet died" in debug.output
    assert debug.output.splitlines()[-1] == result.output.splitlines()[-1]


@pytest.mark.parametrize(
    "error",
    [
        ImportError("libstdc++.so.6: version `GLIBCXX_3.4.32' not found"),
        ModuleNotFoundError("No module named 'ray._raylet'", name="ray._raylet"),
    ],
    ids=["binary", "module"],
)
def test_a_broken_ray_install_is_an_engine_error_not_a_missing_extra(monkeypatch, error):
    """Ray installed but failing to import (a binary that does not load, one of its own modules
    missing) is the environment's: exit status 1 with what to try; a Ray not installed at all
    names the extra (status 2, test_engine_cli.py)."""
    pytest.importorskip("flwr", reason="the 'flower' extra is not installed")
    import builtins
    import types

    import torch  # noqa: F401 - imported before the patch, which slows every import

    # Flower's simulation module takes seconds to import and is not what fails here.
    monkeypatch.setitem(sys.modules, "flwr.simulation", types.ModuleType("flwr.simulation"))

    real_import = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "ray":
            raise error
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", broken)
    result = CliRunner().invoke(cli, ARGS)
    assert result.exit_code == 1, result.output
    stage, line = result.output.splitlines()
    assert stage == "uldp-avg on heart-disease: loading Flower and Ray..."  # said before the imports
    assert line.startswith(
        "Error: Flower's simulation engine (Ray) could not be imported: " + str(error).split(".")[0]
    )
    assert "--engine local" in line and "report" not in line


def test_the_start_up_note_says_what_elapsed_leaves_out():
    from uldp.cli.commands.train.render import _startup_note

    assert _startup_note({"startup_s": 19.94}) == [
        "engine start-up: 19.9 s before round 1, not counted in elapsed s"
    ]
    assert _startup_note({"elapsed_s": 0.1}) == []  # the local engine has no start-up to speak of


def test_flower_logs_carry_no_colour_codes_off_a_terminal(monkeypatch):
    """Flower colours its log lines' levels; in a log file or a pipe they are noise (issue 34)."""
    pytest.importorskip("flwr", reason="the 'flower' extra is not installed")
    import logging

    from flwr.common.logger import ConsoleHandler

    from uldp.trainers.flower.simulation import quiet_colours

    handler = next(h for h in logging.getLogger("flwr").handlers if isinstance(h, ConsoleHandler))
    record = logging.LogRecord("flwr", logging.ERROR, __file__, 1, "a silo failed", None, None)
    assert "\x1b[" in handler.format(record)  # Flower's default, on a terminal or not
    for terminal, coloured in ((False, False), (True, True)):
        monkeypatch.setattr(sys.stderr, "isatty", lambda terminal=terminal: terminal)
        with quiet_colours():
            assert ("\x1b[" in handler.format(record)) is coloured
            if not coloured:
                assert handler.format(record) == "ERROR :     a silo failed"
        assert "\x1b[" in handler.format(record)  # restored


def test_start_up_stages_are_lines_on_stderr_off_a_terminal_and_silent_for_json(capsys):
    """What `--engine flower` says before round 1 (piped, in a CI log): a line per stage, as the
    rounds get; `--format json` stays one clean document even with stderr merged into it."""
    from uldp.cli.progress import round_progress

    with round_progress("table", 2, "uldp-avg on heart-disease") as update:
        update.stage("starting Ray...")
        update(1, "accuracy 0.79  epsilon 0.79")
    assert capsys.readouterr().err.splitlines() == [
        "uldp-avg on heart-disease: starting Ray...",
        "uldp-avg on heart-disease: round 1/2  accuracy 0.79  epsilon 0.79",
    ]
    with round_progress("json", 2, "uldp-avg on heart-disease") as update:
        update.stage("starting Ray...")
        update(1, "accuracy 0.79  epsilon 0.79")
    assert capsys.readouterr() == ("", "")


class _NoRay:
    """`ray_running` for a simulation whose Ray backend fails before it needs Ray: nothing starts."""

    def __init__(self, say) -> None:
        pass

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc) -> None:
        return None


@pytest.mark.parametrize("rays", [True, False], ids=["ray-failed", "our-bug"])
def test_a_simulation_that_fails_under_a_waiting_server_stops_it(monkeypatch, rays):
    """Flower's backend fails while the ServerApp waits for its silos: the server's thread is
    stopped and joined (issue 34: a process stuck in threading._shutdown), and the failure is an
    `EngineError` when Ray's (exit 1, what to try), raised as it is when not (uldp's bug)."""
    pytest.importorskip("flwr", reason="the 'flower' extra is not installed")
    import threading

    from flwr.server.superlink.fleet.vce.backend import raybackend
    from ray.exceptions import RaySystemError

    from uldp.errors import EngineError
    from uldp.trainers.flower import simulation

    cause = RaySystemError("raylet died") if rays else ValueError("client resources: bad")

    def backend_fails(self, config) -> None:
        raise cause

    monkeypatch.setattr(simulation, "ray_running", _NoRay)
    monkeypatch.setattr(raybackend.RayBackend, "__init__", backend_fails)
    stop = threading.Event()
    waited: list[bool] = []

    def serve(grid) -> None:  # as FlowerSilos waits for its SuperNodes, polling `stop`
        waited.append(stop.wait(timeout=60))

    with pytest.raises(EngineError if rays else ValueError) as raised:
        simulation.run_federation(2, serve, client_app=object(), stop=stop)
    assert waited == [True]  # stopped, not timed out; and joined before the error came
    if rays:
        assert str(raised.value).startswith(
            "Flower's simulation engine (Ray) failed: System error: raylet died; try --engine local"
        )
    else:
        assert raised.value is cause


def test_a_ray_worker_that_died_mid_run_is_the_engines_failure_not_the_silos(monkeypatch):
    """Flower's simulation turns Ray's ActorDiedError into an error reply (ErrorCode.UNKNOWN); that
    is Ray breaking down (exit 1, what to try), where a ClientApp's own exception names the silo
    (SiloFailed, exit 2)."""
    pytest.importorskip("flwr", reason="the 'flower' extra is not installed")
    import dataclasses

    from flwr.app import Error, Message
    from flwr.common.constant import SUPERLINK_NODE_ID, ErrorCode
    from flwr.supercore.task_identity import TaskIdentity

    # Messages are stamped with the running task's ids, which a ServerApp process has and a test
    # has not (it passed alone only after another test had set them).
    for name, value in (("_run_id", 17), ("_node_id", SUPERLINK_NODE_ID), ("_task_id", 3)):
        monkeypatch.setattr(TaskIdentity, name, value)

    from tests.flower.test_reply_matching import DESCRIPTION, SuperLinkGrid, question, silos_on
    from uldp.errors import EngineError
    from uldp.trainers.flower import records

    died = (
        "<class 'ray.exceptions.ActorDiedError'>:<'The actor died unexpectedly before finishing "
        "this task. Worker exit type: SYSTEM_ERROR'>"
    )

    class RayGrid(SuperLinkGrid):
        """SuperNode 4102's Ray worker dies: Flower's `vce_api.worker` replies for it."""

        def pull_messages(self, message_ids):
            dead = [i for i in message_ids if self.sent[i].metadata.dst_node_id == 4102]
            alive = [i for i in message_ids if i not in dead]
            error = Error(ErrorCode.UNKNOWN, died)
            return [*super().pull_messages(alive), *(Message(error, reply_to=self.sent[i]) for i in dead)]

    simulated = silos_on(RayGrid({4101: "ok", 4102: "ok", 4103: "ok"}))
    simulated.run = dataclasses.replace(DESCRIPTION, partitions="/tmp/partitions")
    with pytest.raises(EngineError) as failed:
        simulated.exchange(question(2), records.ROUND, 2)
    assert str(failed.value).startswith(
        "Flower's simulation engine (Ray) failed in round 2, at silo 1 (SuperNode 4102): "
        "ActorDiedError: The actor died unexpectedly before finishing this task; try --engine local"
    )
    with pytest.raises(records.SiloFailed):  # a ClientApp that raised is the silo's
        silos_on(SuperLinkGrid({4101: "raised", 4102: "ok", 4103: "ok"})).exchange(
            question(2), records.ROUND, 2
        )
