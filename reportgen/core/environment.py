"""Run environment of one host: device type and core count, as XProf reports them.

Rules: `docs/xprof/op_stats.md` §3.1. GPU planes first, then TPU TensorCore
planes, else a CPU-only capture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reportgen.capture import HostCapture

GPU_PREFIX = "/device:GPU:"
TPU_CORE_RE = re.compile(r"^/device:TPU:([0-9]*)$")

_NVIDIA_MODELS = {2: "Fermi", 3: "Kepler", 5: "Maxwell", 6: "Pascal", 9: "Hopper", 10: "Blackwell"}


@dataclass(frozen=True)
class HostEnvironment:
    hostname: str
    device_type: str  # "CPU", a GPU model name, or the TPU type string
    device_core_count: int
    hardware_type: str  # "CPU_ONLY", "GPU" or "TPU"


def nvidia_model_name(major: int, minor: int) -> str:
    if major == 7:
        return "Nvidia GPU (Volta)" if minor < 5 else "Nvidia GPU (Turing)"
    if major == 8:
        return "Nvidia GPU (Ampere)" if minor < 9 else "Nvidia GPU (Ada Lovelace)"
    name = _NVIDIA_MODELS.get(major)
    return f"Nvidia GPU ({name})" if name else "Nvidia GPU"


def _plane_stat(capture: HostCapture, plane: int, name: str) -> tuple[int, str] | None:
    """(int value, string value) of a plane stat, or None when absent."""
    rows = capture.stat_rows(capture.plane_stats, name)
    sel = rows.owner == plane
    if not sel.any():
        return None
    first = rows.select(sel)
    return int(first.int_values()[0]), str(capture.string(int(first.str_id[0])))


def host_environment(capture: HostCapture) -> HostEnvironment:
    hostname = capture.hostnames[0] if capture.hostnames else "localhost"
    names = capture.planes["name"]
    gpu = capture.planes.index[names.str.startswith(GPU_PREFIX)]
    if len(gpu):
        first = int(gpu[0])
        vendor = _plane_stat(capture, first, "device_vendor")
        model = ""
        if vendor and vendor[1] == "Nvidia":
            major = _plane_stat(capture, first, "compute_cap_major")
            minor = _plane_stat(capture, first, "compute_cap_minor")
            model = nvidia_model_name(major[0] if major else 0, minor[0] if minor else 0)
        elif vendor and vendor[1] == "AMD":
            name = _plane_stat(capture, first, "gpu_device_name")
            model = name[1] if name else ""
        return HostEnvironment(hostname, model or "GPU", len(gpu), "GPU")
    tpu = capture.planes.index[names.map(lambda n: bool(TPU_CORE_RE.match(n)))]
    if len(tpu):
        dtype = _plane_stat(capture, int(tpu[0]), "device_type_string")
        return HostEnvironment(hostname, dtype[1] if dtype else "", len(tpu), "TPU")
    return HostEnvironment(hostname, "CPU", 0, "CPU_ONLY")
