"""How many torch CPU threads a run should use: the CPUs that are free now, not all of them.

torch defaults to one thread per core. On a machine other processes are using, its threads then
wait on each other at every barrier of every operation: on the 2-core machine of
docs/performance.md, a round that takes 2.7 s with one thread took 13.1 s with torch's two
while another process was busy. So the default counts the CPUs this process may run on
(`os.sched_getaffinity`, which respects taskset and container limits) minus the load the rest
of the machine puts on them (the 1-minute load average), and uses at least one.
"""

from __future__ import annotations

import math
import os


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def free_cpus(cpus: int | None = None, load: float | None = None) -> int:
    """max(1, cpus - ceil(load - 0.5)): the CPUs other processes leave free (at least one).

    `load` is the 1-minute load average (os.getloadavg()[0]) and counts processes that run or
    wait to run; a load of 0.4 leaves a core free, 0.6 takes one.
    """
    cpus = usable_cpus() if cpus is None else cpus
    if load is None:
        try:
            load = os.getloadavg()[0]
        except (AttributeError, OSError):  # not on every platform
            load = 0.0
    busy = max(0, math.ceil(load - 0.5))
    return max(1, min(cpus, cpus - busy))
