"""Ray's session as uldp starts and ends it (trainers/flower/ray_session.py), without starting
Ray: its start keeps this process's signal handlers, its end ends exactly the processes Ray
started (marked by their environment) and never a caller's own, and a signal during the clean-up
waits for it. Which failures are Ray's (an `EngineError`, exit 1) and which are uldp's bugs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

pytest.importorskip("ray", reason="the 'flower' extra is not installed")  # CI installs it

from uldp.trainers.flower import ray_session  # noqa: E402
from uldp.trainers.flower.ray_session import SESSION_VARIABLE, caused_by_ray  # noqa: E402


class FakeRay:
    """What `ray_running` calls of Ray; `init` does what the real one does to this process's
    SIGTERM handler (ray/_private/worker.py: `set_sigterm_handler(... sys.exit(signum))`) and
    starts a process as Ray starts its services, inheriting the environment."""

    def __init__(self) -> None:
        self.services: list[subprocess.Popen] = []
        self.seen: dict[str, str | None] = {}

    def is_initialized(self) -> bool:
        return False

    def init(self, **kwargs) -> None:
        self.seen = {name: os.environ.get(name) for name in ("PYTHONPATH", SESSION_VARIABLE)}
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))
        self.services.append(_sleeper())

    def cluster_resources(self) -> dict[str, float]:
        return {"CPU": 2.0}

    def shutdown(self) -> None:
        pass  # as Ray's own, which signals its processes without waiting for them: left to uldp


def _sleeper(env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env)


@pytest.fixture
def fake_ray(monkeypatch):
    ray = FakeRay()
    monkeypatch.setitem(sys.modules, "ray", ray)
    yield ray
    for process in ray.services:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_ray_start_keeps_the_signal_handlers_and_its_end_ends_only_its_own_processes(fake_ray):
    """issue 34: `ray.init` replaced SIGTERM's handler (exit 15, no resume line); and the sweep of
    every new descendant ended (and reaped) a library caller's own subprocesses too."""

    def ours(signum, frame):
        pass

    previous = signal.signal(signal.SIGTERM, ours)
    stages: list[str] = []
    try:
        with ray_session.ray_running(stages.append):
            assert signal.getsignal(signal.SIGTERM) is ours
            callers = _sleeper()  # the caller's own, started while Ray runs
            mark = fake_ray.seen[SESSION_VARIABLE]
            assert mark and [p.pid for p in ray_session.processes_marked(mark)] == [fake_ray.services[0].pid]
        assert signal.getsignal(signal.SIGTERM) is ours
    finally:
        signal.signal(signal.SIGTERM, previous)
    try:
        assert fake_ray.services[0].poll() is not None  # ended, and waited for
        assert callers.poll() is None  # left alone, still the caller's to wait for
    finally:
        callers.kill()
        assert callers.wait(timeout=10) == -signal.SIGKILL  # no ECHILD: nobody reaped it
    assert SESSION_VARIABLE not in os.environ  # only Ray's processes carry it
    assert fake_ray.seen["PYTHONPATH"] and fake_ray.seen["PYTHONPATH"].startswith(sys.path[0])
    assert stages[0] == "starting Ray..." and stages[1].startswith("Ray started in ")


def test_a_signal_during_the_clean_up_waits_for_it_then_reaches_the_handler(signals_reach_main_thread):
    """A second Ctrl-C (or SIGTERM) while Ray's processes are being ended must not cut that short."""
    heard: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: heard.append(signum))
    try:
        with ray_session.signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # Python runs handlers between bytecodes: give it many
                pass
            assert heard == []
        assert heard == [signal.SIGTERM]  # once, once the block is done
    finally:
        signal.signal(signal.SIGTERM, previous)


def _raised(error: BaseException, *causes: BaseException) -> BaseException:
    """`error` raised from `causes[0]`, raised from `causes[1]`..., as Flower chains them."""
    for outer, inner in zip((error, *causes), causes):
        outer.__cause__ = inner
    return error


def test_only_rays_failures_are_the_engines():
    from ray.exceptions import RaySystemError

    def flowers(root: BaseException) -> BaseException:
        return _raised(
            RuntimeError("An error was encountered. Ending simulation."),
            RuntimeError("Simulation Runtime crashed."),
            root,
        )

    assert caused_by_ray(flowers(RaySystemError("raylet died")))
    assert not caused_by_ray(flowers(ValueError("client resources are expected to be of type int")))
    assert not caused_by_ray(ImportError("cannot import name 'app' from 'uldp.trainers.flower.client_app'"))
    # Ray's node, which raises a plain Exception when it times out starting: known by where it raised.
    try:
        exec(
            compile("raise Exception('The current node timed out during startup')", "node.py", "exec"),
            {"__name__": "ray._private.node"},
        )
    except Exception as error:  # noqa: BLE001
        assert caused_by_ray(flowers(error))
