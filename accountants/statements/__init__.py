"""What a guarantee says and how it meets the rest of the field.

One privacy statement per run (`statement`) with what each (epsilon, delta) means to a
membership-inference attacker (`tradeoff`) and the JSON schema of its report (`report_schema`);
interop: runs described by Opacus and TF-Privacy read as our events (`external`), our events as
dp-accounting's `DpEvent`s (`dp_events`); and the empirical lower bound of a one-run audit
(`audit_bound`, Steinke, Nasr, Jagielski 2023).
"""
