"""Silos as separate parties on Flower (flwr's Message API): the same algorithm objects as in
process, the silo's update in a ClientApp (client_app.py), the server's plan, aggregation and
accounting in the ServerApp (`runner.run` driving server.py's `FlowerSilos`), the messages
between them explicit (records.py), Protocol 1 as message rounds (protocol1.py), a silo's working
set between messages (working_set.py), each silo's data in a file of its own (partitions.py), and
Flower's simulation engine behind `uldp train --engine flower` (simulation.py, with Ray started and
ended by ray_session.py; deployment.py on a deployed federation), both handed the round loop by
`runner.train`. Needs the `flower` extra; nothing here is imported by `uldp account`, nor imports
the round loop.
"""
