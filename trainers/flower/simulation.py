"""`uldp train --engine flower`: the run on Flower's simulation engine (Ray backend).

One SuperNode per silo runs the ClientApp (client_app.py) in Ray worker processes; the ServerApp
runs the round loop it is handed (`runner.run`, by `runner.train`) with `FlowerSilos` in a thread
of this process, so the per-round table,
metrics file, checkpoint and resume are those of the in-process engine. Each silo's training
records are written to a private temporary directory (mode 0700, removed afterwards), one file
per silo (partitions.py), and each ClientApp reads only its own: the same separation as a
deployment, where each SuperNode is started with its own silo's file (docs/flower.md).

With --seed and --noise-seed fixed the rounds equal the in-process ones (to float rounding):
every party draws from the same streams (round_rngs.py).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

from uldp.errors import EngineError, InvalidParameter

from .ray_session import REMEDIES, caused_by_ray, engine_failure, ray_running, root_cause
from .records import RunDescription
from .server import FlowerSilos

#: Each ClientApp worker takes one CPU: as many workers as cores, each training one silo at a time.
CLIENT_RESOURCES: dict[str, Any] = {"num_cpus": 1, "num_gpus": 0}

#: Seconds to wait for the server's thread once the simulation is down (it polls `stop` every
#: 0.05 s while it waits for silos; what it is computing then, it finishes).
SERVER_JOIN_S = 60.0

T = TypeVar("T")


def simulate(
    data, cfg, loop: Callable[..., T], *, on_stage: Callable[[str], None] | None = None, **options: Any
) -> T:
    """The round loop `loop` (`runner.run`) with the silos as Flower ClientApps in Flower's
    simulation engine; `on_stage(text)` hears the start-up's stages (Ray, the ClientApps,
    Protocol 1's keys). The result's summary holds `startup_s`: the seconds from this call to
    round 1's first message to the silos (Ray, the silos' setup, Protocol 1's keys, the round
    loop's own preparation), which the rounds' `elapsed_s` leave out."""
    started = time.perf_counter()
    model, name = options.pop("model", None), options.pop("model_name", None)
    model = model if model is not None else name
    stop = threading.Event()
    made: list[FlowerSilos] = []

    def silos(grid: Any) -> FlowerSilos:
        made.append(
            FlowerSilos(grid, description, should_stop=stop.is_set, on_stage=on_stage, started=started)
        )
        return made[-1]

    with private_partitions(data) as directory:
        description = describe(data, model, directory)
        result = run_federation(
            data.n_silos,
            lambda grid: loop(data, silos(grid), cfg, model=model, **options),
            stop=stop,
            on_stage=on_stage,
        )
    with_startup(result, made)
    return result


def with_startup(result: Any, silos: list[FlowerSilos]) -> None:
    """`result.summary["startup_s"]`: the seconds before round 1 (`FlowerSilos.startup_s`)."""
    if silos and silos[-1].startup_s is not None and isinstance(getattr(result, "summary", None), dict):
        result.summary["startup_s"] = round(silos[-1].startup_s, 2)


def describe(data, model: Any = None, partitions: str = "") -> RunDescription:
    """What the silos are told of `data`'s federation and model (public), and where, in a
    simulation, their partition files lie.

    `model` is what `own_model.resolve_model` takes (a built-in name, a reference, a ModelSpec;
    None: the data's own). The silos run in other processes and rebuild the model and its loss
    from their references, so a model or loss that only this process has (a lambda, an
    nn.Module instance) is refused here, before Ray starts."""
    from ..models import parameter_count
    from ..module_check import check_layers
    from ..own_model import resolve_model
    from .partitions import federation_id

    spec = resolve_model(model, data=data)
    if spec.reference is None or spec.loss_reference is None:
        option, what = ("--model", spec.name) if spec.reference is None else ("--loss", "this loss")
        raise InvalidParameter(
            f"{option}: --engine flower runs the silos in other processes, which rebuild the "
            f"{option[2:]} from an importable reference (FILE.py:NAME or package.module:NAME); "
            f"{what} was given as a Python object"
        )
    return RunDescription(
        task=data.task,
        model=spec.reference,
        loss=spec.loss_reference,
        feature_shape=tuple(data.feature_shape),
        n_classes=data.n_classes,
        n_users=data.n_users,
        n_silos=data.n_silos,
        n_params=parameter_count(check_layers(spec.factory())),
        federation=federation_id(data),
        partitions=partitions,
    )


@contextlib.contextmanager
def private_partitions(data) -> Iterator[str]:
    """Each silo's records of `data` in a file of its own, in a directory only this user can
    read, removed afterwards."""
    from .partitions import write_partitions

    with tempfile.TemporaryDirectory(prefix="uldp-silos-") as directory:
        os.chmod(directory, 0o700)
        write_partitions(data, directory)
        yield directory


def run_federation(
    n_silos: int,
    serve: Callable[[Any], T],
    client_app: Any = None,
    stop: threading.Event | None = None,
    on_stage: Callable[[str], None] | None = None,
) -> T:
    """Flower's simulation with one SuperNode per silo running `client_app` (the uldp ClientApp
    by default), and `serve(grid)` as the ServerApp's main (in a thread of this process); its
    result, or the exception it raised. One call may train several runs on the same SuperNodes.

    Ray is started before Flower (ray_session.py): `on_stage` hears when, a failure to start is
    an `EngineError`, as is a simulation that Ray's failure breaks down under the server
    (Flower's "An error was encountered. Ending simulation." over a Ray error; any other
    exception of the simulation is raised as it is: a bug of uldp's), and on the way out,
    however it goes, the server's thread is stopped and joined (a non-daemon thread still
    waiting for its silos kept the process from exiting) and every Ray process is ended.

    Flower's simulation and Ray swallow Ctrl-C, so while it runs SIGINT, SIGTERM and SIGHUP set
    `stop` (which the server's `FlowerSilos` polls: its run ends with KeyboardInterrupt, the
    previous round's checkpoint whole) and are raised again here once the simulation is down,
    for the caller's own handling (the CLI's one line and exit 128 + n)."""
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    if client_app is None:
        from .client_app import app as client_app

    stop = stop or threading.Event()
    outcome: dict[str, Any] = {}
    server_threads: list[threading.Thread] = []
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        server_threads.append(threading.current_thread())
        try:
            outcome["result"] = serve(grid)
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread below
            outcome["error"] = error

    received: list[int] = []
    say = on_stage or (lambda text: None)
    with _quiet_flower(), _stop_on_signals(stop, received), ray_running(say):
        try:
            if not received:  # else Ctrl-C came while Ray was starting: nothing to run
                run_simulation(
                    server_app,
                    client_app,
                    num_supernodes=n_silos,
                    backend_config={
                        "client_resources": CLIENT_RESOURCES,
                        "init_args": {"logging_level": logging.ERROR, "log_to_driver": False},
                    },
                )
        except Exception as error:  # the server's own errors are in `outcome`, not here
            if received:
                pass  # the simulation was being stopped: the signal is what the caller hears
            elif caused_by_ray(error):
                raise engine_failure("Flower's simulation engine (Ray) failed", error) from error
            else:  # uldp's own (our ClientApp does not import, a bad backend setting): a bug,
                raise root_cause(error) from None  # named, not Flower's "An error was encountered"
        finally:
            stop.set()  # a server still waiting for its silos stops waiting
            for thread in server_threads:
                thread.join(SERVER_JOIN_S)
    if received:  # raised once the handlers are the caller's again
        _stopped(received)
    if "error" in outcome:
        raise outcome["error"]
    if "result" not in outcome:
        raise EngineError("Flower's simulation ended without running the server; " + REMEDIES)
    return outcome["result"]


def _stopped(received: list[int]) -> NoReturn:
    """The stop request, raised as the caller would have seen it (KeyboardInterrupt for SIGINT)."""
    if received[0] == signal.SIGINT:
        raise KeyboardInterrupt
    signal.raise_signal(received[0])
    raise KeyboardInterrupt  # a signal whose handler returned (none of the CLI's does)


@contextlib.contextmanager
def _stop_on_signals(stop: threading.Event, received: list[int]) -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP set `stop` and are noted in `received` (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def handler(signum: int, frame: object) -> None:
        received.append(signum)
        stop.set()

    previous = {signum: signal.signal(signum, handler) for signum in signals}
    try:
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


@contextlib.contextmanager
def _quiet_flower() -> Iterator[None]:
    """Flower's INFO logs and deprecation notes, and Ray's, would interleave with the round
    table, and Flower's ERROR logs (a traceback) would precede the one line in which the caller
    reports the same failure; ULDP_DEBUG=1 shows them all. Off a terminal, Flower's log lines
    carry no colour codes (they would end up in log files)."""
    plain = quiet_colours()
    if os.environ.get("ULDP_DEBUG"):
        with plain:
            yield
        return
    loggers = [logging.getLogger(name) for name in ("flwr", "ray")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL)
    # Ray's notice about accelerator variables, printed at every start on a CPU machine.
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    try:
        with plain:
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


@contextlib.contextmanager
def quiet_colours() -> Iterator[None]:
    """Flower's console log handler without ANSI colours while stderr is not a terminal."""
    from flwr.common.logger import ConsoleHandler

    handlers = [h for h in logging.getLogger("flwr").handlers if isinstance(h, ConsoleHandler)]
    colored = [h.colored for h in handlers]
    if not sys.stderr.isatty():
        for handler in handlers:
            handler.colored = False
    try:
        yield
    finally:
        for handler, was in zip(handlers, colored):
            handler.colored = was
