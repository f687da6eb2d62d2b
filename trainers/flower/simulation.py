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
import functools
import logging
import os
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from .records import RunDescription
from .server import FlowerSilos

#: Each ClientApp worker takes one CPU: as many workers as cores, each training one silo at a time.
CLIENT_RESOURCES: dict[str, Any] = {"num_cpus": 1, "num_gpus": 0}

T = TypeVar("T")


def simulate(data, cfg, loop: Callable[..., T], **options: Any) -> T:
    """The round loop `loop` (`runner.run`) with the silos as Flower ClientApps in Flower's
    simulation engine."""
    model_name = options.pop("model_name", None)
    stop = threading.Event()
    with private_partitions(data) as directory:
        description = describe(data, model_name, directory)
        silos = functools.partial(FlowerSilos, run=description, should_stop=stop.is_set)
        return run_federation(
            data.n_silos,
            lambda grid: loop(data, silos(grid), cfg, model_name=description.model, **options),
            stop=stop,
        )


def describe(data, model_name: str | None, partitions: str = "") -> RunDescription:
    """What the silos are told of `data`'s federation and model (public), and where, in a
    simulation, their partition files lie."""
    from ..models import build_model, default_model_name, parameter_count
    from .partitions import federation_id

    model_name = model_name or default_model_name(data.name, data.task, data.feature_shape)
    model = build_model(
        model_name, task=data.task, feature_shape=data.feature_shape, n_classes=data.n_classes
    )
    return RunDescription(
        task=data.task,
        model=model_name,
        feature_shape=tuple(data.feature_shape),
        n_classes=data.n_classes,
        n_users=data.n_users,
        n_silos=data.n_silos,
        n_params=parameter_count(model),
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
    n_silos: int, serve: Callable[[Any], T], client_app: Any = None, stop: threading.Event | None = None
) -> T:
    """Flower's simulation with one SuperNode per silo running `client_app` (the uldp ClientApp
    by default), and `serve(grid)` as the ServerApp's main (in a thread of this process); its
    result, or the exception it raised. One call may train several runs on the same SuperNodes.

    Flower's simulation and Ray swallow Ctrl-C, so while it runs SIGINT, SIGTERM and SIGHUP set
    `stop` (which the server's `FlowerSilos` polls: its run ends with KeyboardInterrupt, the
    previous round's checkpoint whole) and are raised again here once the simulation is down,
    for the caller's own handling (the CLI's one line and exit 128 + n)."""
    from flwr.app import Context
    from flwr.serverapp import Grid, ServerApp
    from flwr.simulation import run_simulation

    if client_app is None:
        from .client_app import app as client_app

    outcome: dict[str, Any] = {}
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        try:
            outcome["result"] = serve(grid)
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread below
            outcome["error"] = error

    # Flower's Ray backend sets this process's PYTHONPATH to its sys.path (for its workers) and
    # leaves it so: every later subprocess would then import the checkout's folders top-level.
    pythonpath = os.environ.get("PYTHONPATH")
    received: list[int] = []
    with _quiet_flower(), _stop_on_signals(stop or threading.Event(), received):
        try:
            run_simulation(
                server_app,
                client_app,
                num_supernodes=n_silos,
                backend_config={
                    "client_resources": CLIENT_RESOURCES,
                    "init_args": {"logging_level": logging.ERROR, "log_to_driver": False},
                },
            )
        finally:
            if pythonpath is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = pythonpath
    if received:  # the stop request: raised as the caller would have seen it
        if received[0] == signal.SIGINT:
            raise KeyboardInterrupt
        signal.raise_signal(received[0])
    if "error" in outcome:
        raise outcome["error"]
    if "result" not in outcome:
        raise RuntimeError("Flower's simulation ended without running the server")
    return outcome["result"]


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
    table; errors still pass (ULDP_DEBUG=1 shows everything)."""
    if os.environ.get("ULDP_DEBUG"):
        yield
        return
    loggers = [logging.getLogger(name) for name in ("flwr", "ray")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    # Ray's notice about accelerator variables, printed at every start on a CPU machine.
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)
