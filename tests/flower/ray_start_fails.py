"""`uldp` (the real CLI) on a machine where Ray's node does not come up: Ray starts its head
processes and its raylet, then gives up as it does under load ("The current node timed out
during startup", issue 34), leaving them running. Run as `python -m tests.flower.ray_start_fails
train ... --engine flower`."""

from __future__ import annotations

import sys

from ray._private.node import Node

#: Ray's own message (ray/_private/node.py) when its raylet does not register in time.
TIMED_OUT = (
    "The current node timed out during startup. This could happen because some of the raylet "
    "failed to startup or the GCS has become overloaded."
)


def _start_then_time_out(self: Node) -> None:
    _start_ray_processes(self)  # gcs_server, raylet, log_monitor... are up when Ray gives up
    raise Exception(TIMED_OUT)  # noqa: TRY002 - Ray raises exactly this


_start_ray_processes = Node.start_ray_processes
Node.start_ray_processes = _start_then_time_out  # type: ignore[method-assign]

if __name__ == "__main__":
    from uldp.cli.main import cli

    sys.exit(cli(prog_name="uldp"))
