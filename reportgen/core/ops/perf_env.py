"""Device peak capabilities (XProf's PerfEnv, docs/xprof/op_stats.md §3.3).

Peak FLOP rate and memory bandwidths of the first device plane: read from
plane stats on TPU, derived from the device capabilities (SM count, clock,
compute capability) on NVIDIA GPUs. CPU-only captures have none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from reportgen.capture import KIND_DOUBLE, KIND_REF, KIND_STR, HostCapture
from reportgen.core.events import schema

# Per SM per cycle: (cuda fp32, cuda fp16, tensor-core tf32, tensor-core fp16), keyed by major*1000+minor*10.
_NVIDIA_FLOPS = {
    10000: (296, 592, 4096, 8192), 9000: (256, 512, 2048, 4096), 8090: (256, 256, 512, 1024),
    8060: (256, 256, 256, 1024), 8000: (128, 512, 1024, 2048), 7050: (128, 256, 0, 1024),
    7000: (128, 256, 0, 1024), 6010: (256, 4, 0, 0), 6000: (128, 256, 0, 0), 5000: (256, 0, 0, 0),
    3000: (384, 0, 0, 0), 2000: (64, 0, 0, 0),
}


@dataclass
class PerfEnv:
    peak_tera_flops_per_second: float = 0.0
    # Indexed by XProf's MemBwType: HBM_RW, SRAM_RD, SRAM_WR, CMEM_RD, CMEM_WR, VMEM_RD, VMEM_WR (GB/s).
    peak_bws_giga_bytes_per_second: list[float] = field(default_factory=list)

    @property
    def ridge_point(self) -> float:
        bws = self.peak_bws_giga_bytes_per_second
        if not bws or bws[0] == 0:
            return 0.0
        return self.peak_tera_flops_per_second * 1e3 / bws[0]


def plane_stats(capture: HostCapture, plane: int) -> dict[str, object]:
    """Plane stats by name: numbers as float/int, strings as str."""
    st = capture.plane_stats
    sel = np.flatnonzero(st.owner == plane)
    out: dict[str, object] = {}
    for i in sel[::-1]:
        name = str(capture.string(int(st.key[i])))
        kind = int(st.kind[i])
        if kind == KIND_DOUBLE:
            out[name] = float(np.int64(st.raw[i]).view(np.float64))
        elif kind in (KIND_STR, KIND_REF):
            out[name] = capture.string(int(st.str_id[i]))
        else:
            out[name] = int(st.raw[i])
    return out


def _nvidia_flops_per_sm_cycle(major: int, minor: int) -> int:
    key = major * 1000 + minor * 10
    keys = sorted(_NVIDIA_FLOPS)
    usable = [k for k in keys if k <= key]
    return max(_NVIDIA_FLOPS[usable[-1] if usable else keys[0]])


def perf_env(capture: HostCapture, device_planes: list[int]) -> PerfEnv:
    if not device_planes:
        return PerfEnv()
    plane = device_planes[0]
    stats = plane_stats(capture, plane)
    name = capture.planes["name"].iloc[plane]

    def num(key: str) -> float:
        value = stats.get(key, 0.0)
        return float(value) if isinstance(value, (int, float)) else 0.0

    def whole(key: str) -> int:
        # XProf's IntValue: a compute capability given as a double (or text) reads as 0.
        value = stats.get(key, 0)
        return value if isinstance(value, int) else 0

    if name.startswith(schema.TPU_PLANE_PREFIX):
        bws = [num("peak_hbm_bw_gigabytes_per_second"), num("peak_sram_rd_bw_gigabytes_per_second"),
               num("peak_sram_wr_bw_gigabytes_per_second"), num("peak_cmem_rd_bw_gigabytes_per_second"),
               num("peak_cmem_wr_bw_gigabytes_per_second"), num("peak_vmem_rd_bw_gigabytes_per_second"),
               num("peak_vmem_wr_bw_gigabytes_per_second")]
        return PerfEnv(num("peak_teraflops_per_second"), bws)
    cores = num("core_count")
    clock_ghz = num("clock_rate") / 1e6
    vendor = stats.get("device_vendor", "")
    major, minor = whole("compute_cap_major"), whole("compute_cap_minor")
    if vendor == "Nvidia":
        per_sm = clock_ghz * _nvidia_flops_per_sm_cycle(major, minor)
        shm = cores * (64 if major <= 2 else 256) * clock_ghz
    else:
        per_sm, shm = 0.0, 0.0
    peak = num("peak_teraflops_per_second") or cores * per_sm / 1e3
    hbm = num("memory_bandwidth") / 1e9
    sram_rd = num("peak_sram_rd_bw_gigabytes_per_second") or shm
    sram_wr = num("peak_sram_wr_bw_gigabytes_per_second") or shm
    return PerfEnv(peak, [hbm, sram_rd, sram_wr])
