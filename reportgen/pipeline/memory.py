"""How much memory one host's stage may use: the default share of this machine, and `--max-memory`.

Hosts are decoded by `--jobs` processes at once, so by default each may use
`SHARE` of the memory available now divided among them: the least of what the
system reports available (`MemAvailable`), what the process's cgroup still
allows, and what its address-space limit (`ulimit -v`) leaves. A host whose
estimate exceeds its budget is refused with a message naming both
(`reportgen/loaders/limits.py`); the other hosts build.
"""

from __future__ import annotations

import os
import re
import resource
from pathlib import Path

SHARE = 0.75  # of the available memory, for the hosts' stages together; the rest is the build's own
# A budget never goes below this: a busy machine still builds small captures (a host's estimate counts the
# process's own ≈ 220 MB, loaders/xspace.py's COST_FIXED).
FLOOR = 512 << 20

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """`8G`, `512M`, `1.5GiB`, `2000000000` → bytes (units are powers of 1024)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", text.lower())
    if not match or float(match.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a size (give e.g. 8G, 512M or a number of bytes)")
    return int(float(match.group(1)) * _UNITS[match.group(2)])


def _meminfo_available() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    try:  # other systems: free physical pages
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _cgroup_available() -> int | None:
    """What the cgroup's memory limit leaves (v2, then v1); None without a limit."""
    for limit_file, usage_file in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                                   ("/sys/fs/cgroup/memory/memory.limit_in_bytes",
                                    "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        try:
            limit = Path(limit_file).read_text().strip()
            usage = int(Path(usage_file).read_text().strip())
        except (OSError, ValueError):
            continue
        if limit == "max" or not limit.isdigit() or int(limit) >= 1 << 60:
            return None
        return max(0, int(limit) - usage)
    return None


def _address_space_left() -> int | None:
    """What `ulimit -v` leaves this process (each worker process has as much of its own)."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    if soft == resource.RLIM_INFINITY:
        return None
    try:
        status = Path("/proc/self/status").read_text()
        used = int(re.search(r"^VmSize:\s+(\d+) kB", status, re.M).group(1)) * 1024
    except (OSError, AttributeError, ValueError):
        used = 0
    return max(0, soft - used)


def default_budget(jobs: int) -> int | None:
    """Bytes each of `jobs` concurrent host stages may use; None when nothing can be measured."""
    shared = [v for v in (_meminfo_available(), _cgroup_available()) if v is not None]
    per_process = _address_space_left()
    candidates = [int(min(shared) * SHARE / max(1, jobs))] if shared else []
    if per_process is not None:
        candidates.append(int(per_process * SHARE))
    return max(FLOOR, min(candidates)) if candidates else None
