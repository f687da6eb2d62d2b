"""Privacy when participants drop out of distributed-noise federated averaging (Baek, Kim, Nam,
Park 2021, §IV-V): a round's noise after dropouts (`rounds`), its epsilon released and as the
server sees it (`accounting`), the per-rate tables of `uldp dropout` (`tables`) and their
assumptions (`assumptions`), and what a run with a dropout schedule really spent (`run_spend`).
"""
