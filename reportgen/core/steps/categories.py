"""XProf's generic step-time categories: the one table every tool, page and comparison uses.

Each category has XProf's key (summary.json's `breakdown_ms` keys), its label as XProf's input pipeline and
pod viewer show it, its id in the pod viewer's step-breakdown events, and the step event types whose time it
sums (`core.steps.events`). Older captures' per-tool files are mapped onto the same keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from reportgen.core.steps import events as et


@dataclass(frozen=True)
class StepCategory:
    key: str
    label: str
    xprof_id: int  # the pod viewer's step-breakdown event id
    event_types: tuple[int, ...]


GENERIC_CATEGORIES: list[StepCategory] = [
    StepCategory("device_compute", "Device compute", 1, (et.DEVICE_COMPUTE_16, et.DEVICE_COMPUTE_32)),
    StepCategory("device_to_device", "Device to device", 2, (et.DEVICE_TO_DEVICE, et.DEVICE_WAIT_DEVICE)),
    StepCategory("device_collectives", "Device collective communication", 3, (et.DEVICE_COLLECTIVES,)),
    StepCategory("host_compute", "Host compute", 4, (et.HOST_COMPUTE,)),
    StepCategory("kernel_launch", "Kernel launch", 5, (et.HOST_PREPARE,)),
    StepCategory("input", "Input", 6, (et.HOST_WAIT_INPUT, et.HOST_TO_DEVICE, et.DEVICE_WAIT_HOST)),
    StepCategory("output", "Output", 7, (et.DEVICE_TO_HOST,)),
    StepCategory("compile", "Compilation", 8, (et.HOST_COMPILE,)),
    StepCategory("other", "All others", 9, (et.UNKNOWN_TIME,)),
]
CATEGORY_KEYS = [c.key for c in GENERIC_CATEGORIES]
CATEGORY_LABELS = {c.key: c.label for c in GENERIC_CATEGORIES}

__all__ = ["CATEGORY_KEYS", "CATEGORY_LABELS", "GENERIC_CATEGORIES", "StepCategory"]
