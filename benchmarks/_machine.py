"""The machine a benchmark ran on, printed with every figure, and the CPU seconds benchmarks count."""

import os
import platform
import resource


def describe() -> str:
    cpu = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next(l.split(":", 1)[1].strip() for l in fh if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{platform.node()}: {cpu}, {os.cpu_count()} cores, {mem_gib:.0f} GiB, "
            f"{platform.platform()}, Python {platform.python_version()}")


def children_cpu_seconds() -> float:
    """User + system CPU seconds of the child processes this process has waited for: what a
    benchmark's jobs cost when they run as subprocesses (on a shared machine a fairer cost than
    their wall time, which grows with everyone else's load)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def cpu_seconds() -> float:
    """User + system CPU seconds of this process and the children it has waited for."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))
