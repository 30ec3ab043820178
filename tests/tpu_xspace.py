"""A small TPU capture built in code: one TensorCore with steps, ops and peak capabilities.

Its op names and framework ops are HTML/JS payloads, so every page that
shows them proves they are escaped.
"""

from __future__ import annotations

from pathlib import Path

from tests.xspace_builder import SpaceBuilder

XSS_OP = '</script><script>alert("op")</script>"<!--'
PROGRAM_ID = 7


def tpu_space(hostname: str = "tpuhost", steps: int = 3) -> SpaceBuilder:
    space = SpaceBuilder(hostname)
    space.plane("/host:CPU", 0).line(1, "python").event("main", 0, 10)
    plane = space.plane("/device:TPU:0", 5)
    name = hostname.encode()
    plane.add_stats(plane.plane, {
        "core_details": bytes([0x0A, len(name)]) + name,  # CoreDetails.hostname
        "peak_teraflops_per_second": 100.0, "peak_hbm_bw_gigabytes_per_second": 1000.0,
        "device_type_string": "TPU test",
    })
    step_line = plane.line(1, "Steps")
    op_line = plane.line(2, "XLA Ops")
    for op, symbol, category, flops in ((XSS_OP, 1, "loop fusion", 1000), ("copy.1", 2, "data formatting", 0)):
        md = plane.metadata_id(op)
        plane.add_stats(plane.plane.event_metadata[md], {
            "program_id": PROGRAM_ID, "symbol_id": symbol, "hlo_category": category, "flops": flops,
            "bytes_accessed": 100, "tf_op": XSS_OP + ":"})
    for i in range(steps):
        base = i * 1_000_000
        step_line.event(str(i), base, 900_000)
        op_line.event(XSS_OP, base + 10_000, 500_000)
        op_line.event("copy.1", base + 600_000, 200_000)
    return space


def write_tpu_run(logdir: Path, run: str = "tpu_small", hostname: str = "tpuhost") -> Path:
    """A logdir run folder holding the capture; returns the logdir."""
    folder = logdir / "plugins" / "profile" / run
    folder.mkdir(parents=True, exist_ok=True)
    space = tpu_space(hostname)
    space.capture(hostname)  # sorts the lines as saved captures are
    (folder / f"{hostname}.xplane.pb").write_bytes(space.space.SerializeToString())
    return logdir
