"""The per-host stage for hosts written by older profilers.

Their per-tool files are read and decoded here, in the worker, and handed to
the legacy sections as their parts: there is no XSpace to build a
HostContext from.
"""

from __future__ import annotations

from typing import Any

from reportgen.errors import CaptureError
from reportgen.loaders.legacy import decode_legacy_host
from reportgen.loaders.logdir import HostFile, read_file
from reportgen.sections.base import HostSummary
from reportgen.sections.legacy import legacy_parts


def process_legacy_host(host: HostFile, shown_path: str) -> tuple[HostSummary, dict[str, Any]]:
    files = []
    for path in host.legacy:
        try:
            files.append((path, read_file(path)))
        except OSError as exc:
            raise CaptureError(path, f"cannot be read ({exc.strerror or exc})") from exc
    decoded = decode_legacy_host(host.host, files)
    overview = decoded.overview
    summary = HostSummary(
        host=host.host,
        path=shown_path,
        size_bytes=host.size,
        planes=0,
        lines=0,
        events=0,
        duration_ps=0,
        device_type=decoded.device_type,
        device_core_count=(overview.device_core_count or 0) if overview is not None else 0,
    )
    return summary, legacy_parts(decoded)
