"""Ray for one Flower simulation: started here rather than inside Flower, so that its start is
timed and reported, its failure is named (`EngineError`), and every process it started is gone
when the simulation ends, however it ends.

Flower's Ray backend starts Ray only when none is running (`RayBackend.init_ray`), with the
arguments given here; when `ray.init` fails inside Flower, the processes Ray had already started
(gcs_server, raylet, log_monitor...) are never shut down, and Flower's ServerApp thread waits on
for its silos (issue 34: a `gcs_server` zombie and a process that would not exit). Ray's own
`shutdown` signals its processes without waiting for them, so one could outlive the command by
seconds (a log_monitor once by more than 30 s), and the raylet may start an agent as it is
stopped. So `ray.init` runs with a variable of its own in the environment (`SESSION_VARIABLE`, a
fresh random value), which every process Ray starts inherits, re-parented or not; at the end
exactly the processes that carry it are ended and waited for, and no other process (a library
caller's own subprocesses are not ours to end or to reap).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from uldp.errors import EngineError

#: Seconds Ray's processes get to exit after SIGTERM before they are killed.
GRACE_S = 5.0
#: Rounds of ending what is left after Ray's shutdown (a process may start another as it stops).
SWEEPS = 5
#: The environment variable that marks the processes of one Ray session started here.
SESSION_VARIABLE = "ULDP_RAY_SESSION"
#: The signals Ray's start replaces the handler of, and the clean-up holds back.
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

START_FAILED = "Ray, the engine of Flower's simulation, could not start"
IMPORT_FAILED = "Flower's simulation engine (Ray) could not be imported"

#: What to try when Ray cannot start or breaks down: the environment's remedies, not a bug report.
REMEDIES = (
    "try --engine local (the same rounds, every silo in this process), fewer --silos, or free "
    "memory and cores (a loaded machine slows Ray's start past its timeouts; docs/flower.md)"
)


def engine_failure(what: str, error: BaseException) -> EngineError:
    """`what` failed because of `error` (Ray's, or Flower's about Ray): one line with the cause's
    first sentence and what to try."""
    return EngineError(f"{what}: {_first_sentence(root_cause(error))}; {REMEDIES}")


def caused_by_ray(error: BaseException) -> bool:
    """Whether Ray's failure lies under `error`: a `ray.exceptions.RayError` in its chain of
    causes (Flower wraps it twice: "An error was encountered. Ending simulation.", "Simulation
    Runtime crashed."), or a root cause raised by Ray's own code (its node's "timed out during
    startup" is a plain Exception). Anything else, an ImportError of our ClientApp, a ValueError
    of our backend settings, is uldp's to fix, not the environment's."""
    try:
        from ray.exceptions import RayError
    except ImportError:
        return False
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    if any(isinstance(link, RayError) for link in chain):
        return True
    return _raised_in_ray(chain[-1])


def _raised_in_ray(error: BaseException) -> bool:
    """Whether the innermost frame of `error`'s traceback is Ray's code."""
    trace = error.__traceback__
    if trace is None:
        return False
    while trace.tb_next is not None:
        trace = trace.tb_next
    module = str(trace.tb_frame.f_globals.get("__name__", ""))
    return module == "ray" or module.startswith("ray.")


@contextlib.contextmanager
def ray_running(say: Callable[[str], None]) -> Iterator[None]:
    """Ray started for the block, `say` told its stages; `EngineError` if it cannot start. On the
    way out (a return, an exception, a signal), Ray shut down and every process it started ended;
    SIGINT, SIGTERM and SIGHUP arriving meanwhile are held back until that is done.

    A Ray already running in this process (an embedding application's) is used as it is, not
    started again; Flower's backend shuts it down when the simulation ends (`RayBackend.terminate`
    calls `ray.shutdown`), so it does not outlive the block either."""
    try:
        import ray
    except ModuleNotFoundError:
        raise  # the missing 'flower' extra: the CLI names it
    except ImportError as error:  # installed but broken (a binary that does not load)
        raise engine_failure(IMPORT_FAILED, error) from error
    if ray.is_initialized():
        yield
        return
    mark = uuid.uuid4().hex
    say("starting Ray...")
    started = time.perf_counter()
    services: list[Any] = []
    try:
        try:
            _init(ray, mark)
        except Exception as error:  # noqa: BLE001 - any failure to start is the environment's
            raise engine_failure(START_FAILED, error) from error
        finally:
            # The head's services (this process's children) while they live: once stopped they
            # are zombies, which carry no environment to find them by, but are still reaped.
            services = processes_marked(mark)
        cpus = int(ray.cluster_resources().get("CPU", 0))
        say(f"Ray started in {time.perf_counter() - started:.1f} s ({cpus} CPU{'s' * (cpus != 1)})")
        yield
    finally:
        with signals_held():  # a second Ctrl-C must not cut the clean-up short
            _end_session(ray, mark, services)


def _end_session(ray: Any, mark: str, services: list[Any]) -> None:
    """Ray shut down and every process marked `mark` ended; `services` waited for too."""
    listed = {p.pid: p for p in [*services, *processes_marked(mark)]}
    with contextlib.suppress(Exception):
        ray.shutdown()
    end_processes(list(listed.values()))
    for _ in range(SWEEPS):  # what the raylet started while it was being stopped
        left = processes_marked(mark)
        if not left:
            break
        end_processes(left)


def _init(ray: Any, mark: str) -> None:
    """`ray.init` as Flower's backend calls it: its workers import this process's modules (the
    ClientApp, uldp from a checkout), so they get its sys.path as PYTHONPATH; every process it
    starts carries `SESSION_VARIABLE=mark`. This process's signal handlers are kept: `ray.init`
    replaces SIGTERM's with one that exits at once (status 15, no clean-up, no resume line)."""
    pythonpath = os.pathsep.join(sys.path)
    previous = {name: os.environ.get(name) for name in ("PYTHONPATH", SESSION_VARIABLE)}
    if previous["PYTHONPATH"]:
        pythonpath = f"{pythonpath}{os.pathsep}{previous['PYTHONPATH']}"
    # Ray's services inherit the environment at start; reset afterwards, so that later
    # subprocesses neither import the checkout's folders top-level nor pass for Ray's.
    os.environ["PYTHONPATH"] = pythonpath
    os.environ[SESSION_VARIABLE] = mark
    handlers = _handlers()
    try:
        ray.init(
            runtime_env={"env_vars": {"PYTHONPATH": pythonpath}},
            include_dashboard=False,
            log_to_driver=False,
            logging_level=logging.DEBUG if os.environ.get("ULDP_DEBUG") else logging.ERROR,
        )
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        for signum, handler in handlers.items():
            signal.signal(signum, handler)


def _handlers() -> dict[int, Any]:
    """The handlers of `SIGNALS` that Python can set back (main thread only; else none)."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    handlers = {signum: signal.getsignal(signum) for signum in SIGNALS}
    return {signum: handler for signum, handler in handlers.items() if handler is not None}


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP noted but not acted on while the block runs, then raised again,
    once each, to the handlers of before (main thread only; elsewhere the block just runs)."""
    previous = _handlers()
    received: list[int] = []

    def note(signum: int, frame: object) -> None:
        received.append(signum)

    for signum in previous:
        signal.signal(signum, note)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        for signum in dict.fromkeys(received):
            signal.raise_signal(signum)


def processes_marked(mark: str) -> list[Any]:
    """The live processes (psutil, which Ray ships in its thirdparty_files) whose environment
    carries `SESSION_VARIABLE=mark`: the processes of that Ray session and no other."""
    import psutil  # Ray ships it (ray/thirdparty_files), importable once ray is

    marked = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):  # gone meanwhile, a zombie, or not ours to read
            if process.pid != os.getpid() and process.environ().get(SESSION_VARIABLE) == mark:
                marked.append(process)
    return marked


def end_processes(processes: list[Any], grace: float = GRACE_S) -> None:
    """SIGTERM `processes` (psutil), wait up to `grace` s, SIGKILL those left and wait for them
    (this process's children among them are reaped): when this returns, none runs."""
    import psutil

    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _, alive = psutil.wait_procs(processes, timeout=grace)
    for process in alive:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(alive, timeout=grace)


def root_cause(error: BaseException) -> BaseException:
    """The first cause of `error`: Flower wraps Ray's failure twice ("Simulation Runtime crashed.",
    "An error was encountered. Ending simulation.")."""
    while error.__cause__ is not None:
        error = error.__cause__
    return error


def _first_sentence(error: BaseException, limit: int = 200) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    first = text.split(". ")[0].rstrip(".")
    return first if len(first) <= limit else first[: limit - 3] + "..."
