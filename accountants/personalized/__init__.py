"""Personalised budgets: per-record (rPDP-FL) and per-user (ULDP-FL Algorithm 4) sampling rates.

`record_spend` is epsilon*(q), what a record sampled with probability q spends; `rate_search`
inverts it (grid, SCF, bisection); `record_rates` turns a table of per-record budgets into rates
(rPDP-FL, slides ch. 3 III); `user_rates` does the same for users; `budgets` draws budgets from
the rPDP-FL experiments' preference distributions.
"""
