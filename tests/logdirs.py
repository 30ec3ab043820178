"""Small logdirs made of the bundled sample captures, and byte-level site comparison."""

from __future__ import annotations

import gzip
from pathlib import Path

from reportgen.output.publish import site_files
from tests.xspace import gpu_space

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
    """A run of three host files (the last one truncated) and a run of one small host."""
    return {
        "pod": {
            "worker-0": FAST,
            "worker-1": INPUT_BOUND,
            "worker-2": INPUT_BOUND.read_bytes()[:5000],
        },
        "solo": {"vm": small_capture(1)},
    }


def small_capture(i: int) -> bytes:
    """A real XSpace file, kept small: one host plane, two threads, a few events (`i` varies them)."""
    space = gpu_space(f"host{i}")
    line = space.host_plane().line(2, "worker")
    for k in range(1, 4):
        line.event(f"op{k}", k * 1_000_000, i * 1000 + k)
    return space.serialize()


def site_bytes(site: Path) -> dict[str, bytes]:
    """Every file of a built site (what publishing uploads), by path."""
    return {rel: (site / rel).read_bytes() for rel in site_files(site)}


def assert_same_site(a: Path, b: Path) -> None:
    left, right = site_bytes(a), site_bytes(b)
    assert sorted(left) == sorted(right)
    different = [rel for rel in left if left[rel] != right[rel]]
    assert not different, f"files differ: {different[:10]}" + _gzip_diagnosis(different, left, right)


def _gzip_diagnosis(different: list[str], left: dict[str, bytes], right: dict[str, bytes]) -> str:
    """Whether differing gzip files hold the same content: a difference in the compressed bytes alone
    (the other files then differ only by the sizes they quote) is the compressor's, not the build's."""
    notes = []
    for rel in different:
        if rel.endswith(".gz"):
            try:
                content = "same" if gzip.decompress(left[rel]) == gzip.decompress(right[rel]) else "different"
            except (OSError, EOFError) as exc:  # a truncated or corrupt file: said, not raised over the assertion
                content = f"unreadable ({exc})"
            notes.append(f"{rel}: {content} content, {len(left[rel]):,} and {len(right[rel]):,} compressed bytes")
    return ("; " + "; ".join(notes)) if notes else ""
