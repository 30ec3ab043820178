"""Reading XProf's outputs in the oracle folder, and computing ours on the same files."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pandas as pd

from reportgen.core.ops.op_stats import HostOpStats, compute_host_op_stats
from reportgen.loaders.hlo import hlo_modules
from reportgen.loaders.xspace import decode_xspace
from tests.conftest import ORACLE, host_files


def oracle_runs() -> list[str]:
    return sorted(p.name for p in ORACLE.iterdir() if (p / "overview_page.json").exists()) if ORACLE.exists() else []


def oracle_dirs() -> list[tuple[str, str | None, Path]]:
    """(run, host or None for the whole run, folder) for every oracle output set."""
    out = []
    for run in oracle_runs():
        out.append((run, None, ORACLE / run))
        per_host = ORACLE / run / "per_host"
        if per_host.exists():
            out += [(run, h.name, h) for h in sorted(per_host.iterdir()) if (h / "overview_page.json").exists()]
    return out


@cache
def host_op_stats(run: str) -> dict[str, HostOpStats]:
    """Our per-host core result for every host file of a run (host name → result)."""
    out = {}
    for path in host_files(run):
        capture = decode_xspace(str(path), path.read_bytes())
        out[capture.host] = compute_host_op_stats(capture, hlo_modules(capture))
    return out


def load_json(folder: Path, tool: str):
    return json.loads((folder / f"{tool}.json").read_text())


def datatable_frame(table: dict) -> pd.DataFrame:
    cols = [c["id"] for c in table.get("cols", [])]
    return pd.DataFrame([[c.get("v") for c in r["c"]] for r in table.get("rows", [])], columns=cols)
