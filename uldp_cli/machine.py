"""One line naming the machine a timing was taken on, for benchmark output and docs."""

from __future__ import annotations

import os
import platform


def describe_machine() -> str:
    """CPU model, core count and Python version, e.g. 'AMD EPYC, 2 cores, Python 3.11.7'."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"
