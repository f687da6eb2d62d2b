"""The RDP accountant and what it rests on (ULDP-FL §2.2): Rényi DP curves of the Gaussian and
the Poisson-subsampled Gaussian (`curves`), the accountant that composes and converts them
(`accountant`), group privacy by Lemmas 5 and 6 (`group`), an event's curve cached order by
order (`profile`), and the view of an observer who knows the sample (`participation`).
"""
