"""Silos as separate parties on Flower (flwr's Message API): the same algorithm objects as in
process, the silo's update in a ClientApp (client_app.py), the server's plan, aggregation and
accounting in the ServerApp (server.py running `runner.run`), the messages between them explicit
(records.py), Protocol 1 as message rounds (protocol1.py), each silo's data in a file of its own
(partitions.py), and Flower's simulation engine behind `uldp train --engine flower`
(simulation.py). Needs the `flower` extra; nothing here is imported by `uldp account`.
"""
