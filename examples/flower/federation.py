#!/usr/bin/env python3
"""Run a Flower App on a loopback deployment: one SuperLink, one SuperNode per silo.

    python examples/flower/federation.py --data-file silo0.csv --data-file silo1.csv \
        [--app examples/flower] [--run-config num-rounds=3] [--isolation process]

What it does, in order (the recipe is written out in examples/flower/NOTES.md):

1. makes a temporary directory holding everything: TLS files (make_certificates.sh,
   openssl), one EC P-384 key pair per SuperNode, FLWR_HOME with the `flwr` CLI's
   config.toml (so nothing is written under ~/.flwr), the logs, and a bin/ of
   wrappers that run every Flower command with this interpreter;
2. starts flower-superlink with TLS and `--enable-supernode-auth`;
3. registers each SuperNode's public key with `flwr supernode register`;
4. starts one flower-supernode per data file, each with its own
   `--node-config "partition-id=I num-partitions=N data-file='PATH'"` and its own key;
5. waits until `flwr supernode ls` shows every node online;
6. runs `flwr run APP loopback --stream`, so the ServerApp's stdout is shown;
7. reads the run's final status (`flwr ls`) and exits 0 if it completed, 1 if not;
8. on exit, error, Ctrl-C, SIGTERM or SIGHUP: terminates every process it started
   and every process they started (found by an environment tag every descendant
   inherits, since Flower detaches some of them into new sessions), checks that none
   is left, and deletes the temporary directory (unless --keep-dir).

Exit status: the run's (0 completed, 1 failed), 2 for bad arguments or a deployment
that did not come up, 128+N when stopped by signal N, 1 if a process was left behind.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import FrameType
from typing import Any

HERE = Path(__file__).resolve().parent
CONNECTION = "loopback"
LOOPBACK = "127.0.0.1"
# Every process started here, and every process those start, inherits this variable:
# the teardown finds them by it, including the ones Flower detaches with setsid.
TAG_VARIABLE = "ULDP_FLOWER_FEDERATION"
STARTUP_TIMEOUT_S = 90.0
TERMINATE_GRACE_S = 8.0


class DeploymentError(Exception):
    """The deployment could not be brought up; the message says which step failed."""


class Stopped(BaseException):
    """Raised from a signal handler so that the teardown in `finally` runs."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@dataclass
class Deployment:
    """Where everything of one deployment lives, and the processes it started."""

    root: Path
    env: dict[str, str]
    tag: str
    processes: list[tuple[str, subprocess.Popen[bytes]]] = field(default_factory=list)

    @property
    def certs(self) -> Path:
        return self.root / "certs"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def flwr_home(self) -> Path:
        return self.root / "flwr-home"


# ---------------------------------------------------------------- command line


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    """Parse the command line; argparse exits 2 with one `error:` line on bad input."""
    parser = argparse.ArgumentParser(
        description="Run a Flower App on a loopback SuperLink with one SuperNode per data file "
        "(TLS and SuperNode authentication on).",
    )
    parser.add_argument(
        "--app",
        type=Path,
        default=HERE,
        help="Flower App directory (holding its pyproject.toml) given to `flwr run` "
        "(default: the toy app next to this script).",
    )
    parser.add_argument(
        "--data-file",
        type=Path,
        action="append",
        required=True,
        help="One silo's data file; repeat it: one SuperNode per file, given only that file "
        "(node config data-file), with partition-id 0, 1, ... in the order given.",
    )
    parser.add_argument(
        "--node-config",
        default="",
        help="Extra 'key=value ...' pairs added to every SuperNode's node config.",
    )
    parser.add_argument(
        "--run-config",
        action="append",
        default=[],
        help="'key=value' override of the app's run config, passed to `flwr run --run-config`; repeatable.",
    )
    parser.add_argument(
        "--isolation",
        choices=["subprocess", "process"],
        default="subprocess",
        help="subprocess: SuperLink and SuperNodes start their own SuperExec; process: this "
        "script starts one flower-superexec per SuperLink/SuperNode (default: subprocess).",
    )
    parser.add_argument(
        "--keep-dir",
        action="store_true",
        help="Keep the temporary directory (certificates, keys, logs) and print its path.",
    )
    args = parser.parse_args(argv)
    if not (args.app / "pyproject.toml").is_file():
        parser.error(f"--app: {args.app} holds no pyproject.toml (a Flower App directory is needed)")
    for path in args.data_file:
        if not path.is_file():
            parser.error(f"--data-file: {path} is not a file")
    if any(not item or "=" not in item for item in args.run_config):
        parser.error("--run-config: expected 'key=value'")
    return args


# ---------------------------------------------------------------- set-up steps


def wrapper_bin(directory: Path) -> Path:
    """Write one wrapper per Flower console script that runs it with this interpreter.

    flower-superlink and flower-supernode start `flower-superexec`, which starts
    `flwr-serverapp` / `flwr-clientapp`, all by name from PATH: with these wrappers
    first on PATH every one of them imports the same flwr (and uldp) as this script,
    whatever venv the shell had active.
    """
    directory.mkdir(parents=True)
    for script in entry_points(group="console_scripts"):
        if not script.value.startswith("flwr."):
            continue
        module, _, attr = script.value.partition(":")
        path = directory / script.name
        path.write_text(
            f"#!{sys.executable}\nimport sys\nfrom {module} import {attr}\nsys.exit({attr}())\n",
            encoding="utf-8",
        )
        path.chmod(0o755)
    return directory


def make_node_keys(directory: Path, count: int) -> list[tuple[Path, Path]]:
    """Make one EC P-384 key pair per SuperNode in OpenSSH format.

    flower-supernode --auth-supernode-private-key reads an OpenSSH private key and
    `flwr supernode register` an OpenSSH public key of a NIST curve
    (flwr/supernode/cli/flower_supernode.py, flwr/cli/supernode/register.py); this is
    what `ssh-keygen -t ecdsa -b 384` writes, made here without needing ssh-keygen.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    directory.mkdir(parents=True, mode=0o700)
    pairs = []
    for index in range(count):
        key = ec.generate_private_key(ec.SECP384R1())
        private = directory / f"node{index}"
        public = directory / f"node{index}.pub"
        private.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.OpenSSH,
                serialization.NoEncryption(),
            )
        )
        private.chmod(0o600)
        public.write_bytes(
            key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        )
        pairs.append((private, public))
    return pairs


def free_ports(count: int) -> list[int]:
    """Return `count` distinct TCP ports free on loopback right now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((LOOPBACK, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def write_flwr_config(flwr_home: Path, port: int, ca_cert: Path) -> None:
    """Write the `flwr` CLI's connection to the SuperLink: $FLWR_HOME/config.toml."""
    flwr_home.mkdir(parents=True)
    (flwr_home / "config.toml").write_text(
        "[superlink]\n"
        f'default = "{CONNECTION}"\n\n'
        f"[superlink.{CONNECTION}]\n"
        f'address = "{LOOPBACK}:{port}"\n'
        f'root-certificates = "{ca_cert}"\n',
        encoding="utf-8",
    )


def node_config(index: int, count: int, data_file: Path, extra: str) -> str:
    """The --node-config of SuperNode `index`: its partition and only its own data file."""
    quoted = str(data_file.resolve()).replace("'", "\\'")
    pairs = f"partition-id={index} num-partitions={count} data-file='{quoted}'"
    return f"{pairs} {extra}".strip()


# ---------------------------------------------------------------- processes


def start(deployment: Deployment, name: str, command: list[str]) -> subprocess.Popen[bytes]:
    """Start a long-running command in its own session, its output to logs/NAME.log.

    Its own session, so that a Ctrl-C at the terminal reaches only this script, which
    then stops everything in order, instead of every process at once.
    """
    log = (deployment.logs / f"{name}.log").open("wb")
    try:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=deployment.env,
            cwd=deployment.root,
            start_new_session=True,
        )
    finally:
        log.close()
    deployment.processes.append((name, process))
    return process


def flwr(deployment: Deployment, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run one short `flwr` CLI command against the loopback connection."""
    return subprocess.run(
        ["flwr", *args],
        env=deployment.env,
        cwd=deployment.root,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def check_alive(deployment: Deployment) -> None:
    """Raise DeploymentError naming the first started process that has exited."""
    for name, process in deployment.processes:
        if process.poll() is not None:
            raise DeploymentError(
                f"{name} exited with status {process.returncode}\n{log_tail(deployment, name)}"
            )


def log_tail(deployment: Deployment, name: str, lines: int = 20) -> str:
    """The last lines of a process's log, to explain a failure."""
    path = deployment.logs / f"{name}.log"
    if not path.exists():
        return ""
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(f"  {name}| {line}" for line in text[-lines:])


def wait_for_port(deployment: Deployment, port: int, timeout: float) -> None:
    """Wait until something listens on loopback `port` (the SuperLink's HTTPS API)."""
    deadline = time.monotonic() + timeout
    while True:
        check_alive(deployment)
        try:
            with socket.create_connection((LOOPBACK, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise DeploymentError(f"nothing listens on {LOOPBACK}:{port} after {timeout:.0f} s") from None
            time.sleep(0.2)


def flwr_json(deployment: Deployment, *args: str) -> dict[str, Any]:
    """Run a `flwr ... --format json` command and return its JSON answer."""
    result = flwr(deployment, *args, "--format", "json")
    # Some commands print a status line before the JSON object.
    text = result.stdout[result.stdout.find("{") :] if "{" in result.stdout else ""
    try:
        answer = json.loads(text)
    except json.JSONDecodeError:
        answer = None
    if result.returncode != 0 or not isinstance(answer, dict) or not answer.get("success"):
        raise DeploymentError(
            f"`flwr {' '.join(args)}` failed (status {result.returncode}):\n{result.stdout}{result.stderr}"
        )
    return answer


def register_nodes(deployment: Deployment, public_keys: Sequence[Path]) -> list[str]:
    """Register each SuperNode's public key; return the node ids the SuperLink gave."""
    return [
        str(flwr_json(deployment, "supernode", "register", str(key), CONNECTION)["node-id"])
        for key in public_keys
    ]


def wait_until_online(deployment: Deployment, node_ids: Sequence[str], timeout: float) -> None:
    """Wait until `flwr supernode ls` shows every registered node online."""
    deadline = time.monotonic() + timeout
    while True:
        check_alive(deployment)
        nodes = flwr_json(deployment, "supernode", "ls", CONNECTION)["nodes"]
        online = {str(node["node-id"]) for node in nodes if node.get("status") == "online"}
        if set(node_ids) <= online:
            return
        if time.monotonic() > deadline:
            raise DeploymentError(f"{len(online)} of {len(node_ids)} SuperNodes online after {timeout:.0f} s")
        time.sleep(0.5)


def run_status(deployment: Deployment) -> tuple[str, str]:
    """Return (status, details) of the one run this SuperLink has seen."""
    runs = flwr_json(deployment, "ls", CONNECTION)["runs"]
    if not runs:
        raise DeploymentError("the SuperLink lists no run")
    run = runs[-1]
    return str(run["status"]), str(run.get("status-details", ""))


# ---------------------------------------------------------------- teardown


def tagged_processes(tag: str) -> list[int]:
    """Pids of the live (not zombie) processes whose environment holds the tag."""
    needle = f"{TAG_VARIABLE}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if state not in {"Z", "X"}:
            found.append(int(entry.name))
    return found


def signal_all(pids: Sequence[int], signum: int) -> None:
    """Send `signum` to each pid, ignoring those that are gone already."""
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            pass


def wait_gone(tag: str, timeout: float) -> list[int]:
    """Wait until no tagged process is left; return those still there at the timeout."""
    deadline = time.monotonic() + timeout
    while (left := tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


def teardown(deployment: Deployment) -> list[int]:
    """Stop every process of the deployment; return the pids that would not die.

    First SIGTERM to each started process's group, newest first (the SuperNodes
    before the SuperLink, so none of them retries a vanished link), so Flower shuts
    down as it means to; then SIGTERM and, after a grace period, SIGKILL to whatever
    still carries the tag: SuperExecs, ServerApp and ClientApp processes included.
    """
    for _name, process in reversed(deployment.processes):
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    deadline = time.monotonic() + TERMINATE_GRACE_S  # one grace period for all, not each
    for _name, process in deployment.processes:
        try:
            process.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    left = wait_gone(deployment.tag, 2.0)
    if left:
        signal_all(left, signal.SIGTERM)
        left = wait_gone(deployment.tag, TERMINATE_GRACE_S)
    if left:
        signal_all(left, signal.SIGKILL)
        left = wait_gone(deployment.tag, 2.0)
    for _name, process in deployment.processes:
        if process.poll() is None:
            process.kill()
        process.wait()
    return left


def raise_on_signals() -> None:
    """Turn the first SIGTERM, SIGHUP or SIGINT into `Stopped`, so `finally` blocks run.

    The handler ignores any further signal first: a second Ctrl-C must not interrupt
    the teardown that the first one started.
    """

    def handler(signum: int, _frame: FrameType | None) -> None:
        ignore_signals()
        raise Stopped(signum)

    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, handler)


def ignore_signals() -> None:
    """Let a second Ctrl-C / SIGTERM not interrupt the teardown already under way."""
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, signal.SIG_IGN)


# ---------------------------------------------------------------- the run


def deploy_and_run(deployment: Deployment, args: argparse.Namespace) -> int:
    """Bring the deployment up, run the app, return the run's exit status."""
    started = time.monotonic()
    subprocess.run(
        ["bash", str(HERE / "make_certificates.sh"), str(deployment.certs)],
        check=True,
        capture_output=True,
    )
    ca, cert, key = (deployment.certs / name for name in ("ca.crt", "server.crt", "server.key"))
    count = len(args.data_file)
    keys = make_node_keys(deployment.root / "keys", count)
    link_port, *node_ports = free_ports(1 + count)
    write_flwr_config(deployment.flwr_home, link_port, ca)
    link_address = f"{LOOPBACK}:{link_port}"

    start(
        deployment,
        "superlink",
        [
            "flower-superlink",
            *("--ssl-ca-certfile", str(ca), "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)),
            "--enable-supernode-auth",
            # The FAB's dependencies are the interpreter's own: never pip/uv-install them.
            "--disable-runtime-dependency-installation",
            *("--host", LOOPBACK, "--port", str(link_port)),
            *("--isolation", args.isolation),
        ],
    )
    if args.isolation == "process":
        start(
            deployment,
            "superexec-serverapp",
            [
                "flower-superexec",
                *("--runtime-api-address", link_address),
                *("--root-certificates", str(ca)),
            ],
        )
    wait_for_port(deployment, link_port, STARTUP_TIMEOUT_S)
    node_ids = register_nodes(deployment, [public for _private, public in keys])

    for index, (data_file, (private, _public), port) in enumerate(zip(args.data_file, keys, node_ports)):
        start(
            deployment,
            f"supernode{index}",
            [
                "flower-supernode",
                *("--superlink", link_address, "--root-certificates", str(ca)),
                *("--auth-supernode-private-key", str(private)),
                *("--node-config", node_config(index, count, data_file, args.node_config)),
                # Its Runtime API (for its SuperExec and ClientApps): loopback, one port each.
                *("--host", LOOPBACK, "--port", str(port)),
                *("--isolation", args.isolation),
            ],
        )
        if args.isolation == "process":
            start(
                deployment,
                f"superexec-clientapp{index}",
                [
                    "flower-superexec",
                    *("--runtime-api-address", f"{LOOPBACK}:{port}"),
                    "--insecure",  # the SuperNode's Runtime API is plain HTTP on loopback
                ],
            )
    wait_until_online(deployment, node_ids, STARTUP_TIMEOUT_S)
    up_s = time.monotonic() - started
    print(f"federation: SuperLink {link_address}, {count} SuperNodes online after {up_s:.1f} s", flush=True)

    command = ["flwr", "run", str(args.app.resolve()), CONNECTION, "--stream"]
    for item in args.run_config:
        command += ["--run-config", item]
    runner = start_foreground(deployment, command)
    runner.wait()
    print(f"federation: run took {time.monotonic() - started - up_s:.1f} s", flush=True)
    if runner.returncode != 0:
        print(f"federation: `flwr run` exited with status {runner.returncode}", file=sys.stderr, flush=True)
        return 1
    status, details = run_status(deployment)
    if status != "finished:completed":
        print(f"federation: run {status} ({details})", file=sys.stderr, flush=True)
        return 1
    return 0


def start_foreground(deployment: Deployment, command: list[str]) -> subprocess.Popen[bytes]:
    """Start `flwr run`: its output (the ServerApp's streamed stdout) goes to ours."""
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        env=deployment.env,
        cwd=deployment.root,
        start_new_session=True,
    )
    deployment.processes.append(("flwr-run", process))
    return process


def main(argv: Sequence[str] | None = None) -> int:
    """Run the app on a fresh loopback deployment; always tear it down."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    root = Path(tempfile.mkdtemp(prefix="uldp-flower-"))
    env = dict(os.environ)
    env.update(
        {
            "FLWR_HOME": str(root / "flwr-home"),
            # No network at run time: no telemetry, no update check.
            "FLWR_TELEMETRY_ENABLED": "0",
            "FLWR_DISABLE_UPDATE_CHECK": "1",
            TAG_VARIABLE: str(root),
            "PATH": f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    deployment = Deployment(root=root, env=env, tag=str(root))
    status = 1
    try:
        try:
            raise_on_signals()
            wrapper_bin(root / "bin")
            deployment.logs.mkdir()
            status = deploy_and_run(deployment, args)
        except (DeploymentError, subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
            stderr = err.stderr if isinstance(err, subprocess.CalledProcessError) else None
            detail = stderr.decode(errors="replace") if isinstance(stderr, bytes) else ""
            print(f"federation: error: {err}\n{detail}".rstrip(), file=sys.stderr, flush=True)
            status = 2
    # Outside the inner try, so that a signal during the error report is caught too.
    except Stopped as stop:
        print(f"federation: stopped by signal {stop.signum}", file=sys.stderr, flush=True)
        status = 128 + stop.signum
    finally:
        ignore_signals()
        left = teardown(deployment)
        if left:
            print(f"federation: error: processes left behind: {left}", file=sys.stderr, flush=True)
            status = status or 1
        if args.keep_dir:
            print(f"federation: kept {root}", file=sys.stderr, flush=True)
        else:
            shutil.rmtree(root, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
