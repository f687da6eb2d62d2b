"""A trivial Flower App that exercises the loopback deployment of federation.py.

Each round the ServerApp sends one ``query`` message to every connected SuperNode;
the ClientApp answers with the ``partition-id`` of its node config and the sum of
the numbers in its ``data-file`` (one number per line), which only that SuperNode
was given. The ServerApp prints one line per node and round, sorted by partition,
so a test can compare the output exactly, plus the wall time of each round.

It stands in for ``uldp.trainers.flower.server_app:app`` /
``uldp.trainers.flower.client_app:app``: the harness does not care which app runs.
"""

from __future__ import annotations

import time
from pathlib import Path

from flwr.app import Context, Message, MessageType, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp

REPLY_KEY = "toy-reply"

server_app = ServerApp()
client_app = ClientApp()


def sum_data_file(path: Path) -> float:
    """Return the sum of the numbers in ``path``, one per line (blank lines skipped)."""
    text = path.read_text(encoding="utf-8")
    return sum((float(line) for line in text.splitlines() if line.strip()), 0.0)


@client_app.query()
def answer(message: Message, context: Context) -> Message:
    """Reply with this node's partition id and the sum of its own data file."""
    partition_id = int(context.node_config["partition-id"])
    data_sum = sum_data_file(Path(str(context.node_config["data-file"])))
    reply = MetricRecord({"partition-id": partition_id, "sum": data_sum})
    return Message(RecordDict({REPLY_KEY: reply}), reply_to=message)


def wait_for_nodes(grid: Grid, count: int, timeout_s: float) -> list[int]:
    """Return the ids of at least ``count`` connected nodes, polling until timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        node_ids = sorted(grid.get_node_ids())
        if len(node_ids) >= count:
            return node_ids
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {len(node_ids)} of {count} nodes connected")
        time.sleep(0.2)


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    """Query every node ``num-rounds`` times and print what each one replied."""
    num_rounds = int(context.run_config["num-rounds"])
    min_nodes = int(context.run_config["min-nodes"])
    node_ids = wait_for_nodes(grid, min_nodes, timeout_s=60.0)
    print(f"toy: {len(node_ids)} nodes connected", flush=True)
    failed = False
    for server_round in range(1, num_rounds + 1):
        started = time.perf_counter()
        messages = [
            Message(RecordDict(), dst_node_id=node_id, message_type=MessageType.QUERY) for node_id in node_ids
        ]
        replies = list(grid.send_and_receive(messages, timeout=120.0))
        elapsed = time.perf_counter() - started
        lines = []
        for reply in replies:
            if reply.has_error():
                failed = True
                print(f"toy: round {server_round}: error {reply.error.reason}", flush=True)
                continue
            record = reply.content.metric_records[REPLY_KEY]
            partition_id, data_sum = record["partition-id"], record["sum"]
            assert isinstance(partition_id, int) and isinstance(data_sum, (int, float))
            lines.append((partition_id, float(data_sum)))
        for partition_id, data_sum in sorted(lines):
            print(
                f"toy: round {server_round}/{num_rounds}: partition {partition_id} sum {data_sum:g}",
                flush=True,
            )
        print(f"toy: round {server_round} took {elapsed:.2f} s", flush=True)
        if len(lines) != len(node_ids):
            failed = True
    if failed:
        # Raise, never sys.exit(): flwr-serverapp marks the run failed (and flushes the
        # streamed stdout) only for an Exception; a SystemExit kills it silently and the
        # SuperLink declares the run failed a minute later, for a missing heartbeat.
        raise RuntimeError("some nodes replied with an error")
    print("toy: done", flush=True)
