"""The tight accountants: privacy loss distributions by dp-accounting (`pld`), privacy random
variables by prv-accountant (`prv`), both behind the accountant interface (`accountants`), and
the exact mu-GDP curve of composed plain Gaussians (`gaussian`, Dong, Roth, Su 2022).

dp-accounting and prv-accountant are imported inside the functions that need them, so importing
this package stays light.
"""
