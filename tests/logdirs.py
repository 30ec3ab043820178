"""Small logdirs made of the bundled sample captures, and byte-level site comparison."""

from __future__ import annotations

from pathlib import Path

from reportgen.publish import site_files

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "reportgen" / "sample" / "plugins" / "profile"
FAST = SAMPLE / "tf_keras_fast" / "vm.xplane.pb"
INPUT_BOUND = SAMPLE / "tf_keras_input_bound" / "vm.xplane.pb"


def make_logdir(root: Path, runs: dict[str, dict[str, Path | bytes]]) -> Path:
    """`root/plugins/profile/<run>/<host>.xplane.pb` from files or bytes."""
    for run, hosts in runs.items():
        folder = root / "plugins" / "profile" / run
        folder.mkdir(parents=True, exist_ok=True)
        for host, source in hosts.items():
            data = source if isinstance(source, bytes) else source.read_bytes()
            (folder / f"{host}.xplane.pb").write_bytes(data)
    return root


def pod_runs() -> dict[str, dict[str, Path | bytes]]:
    """A run of five host files (one of them truncated) and a run of one."""
    return {
        "pod": {
            "worker-0": FAST,
            "worker-1": INPUT_BOUND,
            "worker-2": FAST,
            "worker-3": INPUT_BOUND,
            "worker-4": INPUT_BOUND.read_bytes()[:5000],
        },
        "solo": {"vm": FAST},
    }


def site_bytes(site: Path) -> dict[str, bytes]:
    """Every file of a built site (what publishing uploads), by path."""
    return {rel: (site / rel).read_bytes() for rel in site_files(site)}


def assert_same_site(a: Path, b: Path) -> None:
    left, right = site_bytes(a), site_bytes(b)
    assert sorted(left) == sorted(right)
    different = [rel for rel in left if left[rel] != right[rel]]
    assert not different, f"files differ: {different[:10]}"
