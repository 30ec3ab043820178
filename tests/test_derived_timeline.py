"""The rows XProf derives on TPU cores (core/events/derived_timeline.py), on XSpaces built here: framework
ops and name scopes merged per step group, the 1 ns stacking of equal scopes, source lines, host-offload
copies packed into rows, async ops left out; and the event order, against libstdc++'s std::sort itself.

Parity with XProf on a real capture is in tests/test_trace_parity.py (every row of tpu_inference_2)."""

from __future__ import annotations

import random
import shutil
import subprocess

import numpy as np
import pytest

from reportgen.core.events.derived_timeline import derived_tpu_lines, tf_op_event_name, xprof_event_order
from reportgen.core.events.grouping import Grouping
from reportgen.core.events.table import EventTable
from reportgen.core.events.tf_op import parse_tf_op_fullname
from tests.xspace import Space

NS = 1000


def _rows(space: Space, groups: dict[int, int] | None = None) -> dict[str, list[tuple[str, int, int]]]:
    """Derived rows by name: (event name, start, duration) in time order. `groups`: event start → step group."""
    table = EventTable(space.capture())
    group_id = np.array([(groups or {}).get(int(start), -1) for start in table.start], dtype=np.int64)
    derived = derived_tpu_lines(table, Grouping(group_id, {}, np.full(table.n, -1, np.int8)))
    out: dict[str, list[tuple[str, int, int]]] = {}
    for line, start, duration, name in zip(derived.line, derived.start_ps, derived.duration_ps, derived.name):
        out.setdefault(derived.lines[line][2], []).append((name, int(start), int(duration)))
    return out


def _tpu(space: Space):
    plane = space.plane("/device:TPU:0", 1)
    return plane, plane.line(3, "XLA Ops")


def test_framework_ops_and_scopes_merge_consecutive_ops_of_a_step_and_stack_scopes_1ns_apart():
    space = Space()
    plane, ops = _tpu(space)
    for name, tf_op in (("add.1", "jit(f)/jit(main)/add:"), ("add.2", "jit(f)/jit(main)/add:"),
                        ("mul.1", "jit(f)/jit(main)/mul:")):
        plane.metadata(name, stats={"tf_op": tf_op, "source": "model.py:7"})
    ops.event("add.1", 0, 10 * NS).event("add.2", 10 * NS, 10 * NS)  # one step: one Framework Ops event
    ops.event("add.1", 100 * NS, 10 * NS)  # the next step: a new one, however close
    ops.event("mul.1", 110 * NS, 5 * NS)
    rows = _rows(space, groups={0: 1, 10 * NS: 1, 100 * NS: 2, 110 * NS: 3})
    rows_again = _rows(space, groups={0: 1, 10 * NS: 1, 100 * NS: 2, 110 * NS: 2})
    assert rows["Framework Ops"] == [("add", 0, 20 * NS), ("add", 100 * NS, 10 * NS), ("mul", 110 * NS, 5 * NS)]
    # Scopes: two levels of one timespan; the inner one ends 1 ns earlier so that the viewer stacks them.
    assert rows["Framework Name Scope"][:2] == [("jit(f)", 0, 20 * NS), ("jit(main)", 0, 19 * NS)]
    assert rows["Source code"] == [("model.py:7", 0, 20 * NS), ("model.py:7", 100 * NS, 10 * NS),
                                   ("model.py:7", 110 * NS, 5 * NS)]
    # In one step the scopes of add.1 and mul.1 continue one another (their ops do not: other names).
    assert rows_again["Framework Name Scope"][2:] == [("jit(f)", 100 * NS, 15 * NS), ("jit(main)", 100 * NS, 14 * NS)]


def test_without_a_step_an_op_continues_the_last_event_only_within_twice_its_duration():
    space = Space()
    plane, ops = _tpu(space)
    plane.metadata("op", stats={"tf_op": "model/dense/MatMul:MatMul"})
    ops.event("op", 0, 10 * NS).event("op", 25 * NS, 10 * NS)  # gap 15 ≤ 2 × 10: continued
    ops.event("op", 110 * NS, 10 * NS)  # gap 75 > 2 × 35: a new event
    assert _rows(space)["Framework Ops"] == [("MatMul", 0, 35 * NS), ("MatMul", 110 * NS, 10 * NS)]


def test_host_offload_copies_pair_start_and_done_and_pack_into_rows():
    space = Space()
    plane, ops = _tpu(space)
    for name in ("copy-start", "copy-done", "copy-start.1", "copy-done.1"):
        plane.metadata(f"%{name} = f32[8]{{0:S(5)}} {name.split('.')[0]}()", name)
    plane.metadata("%copy-start.2 = f32[8]{0} copy-start()", "copy-start.2")  # device memory: not offload
    ops.event("%copy-start = f32[8]{0:S(5)} copy-start()", 0, NS, display_name="copy-start")
    ops.event("%copy-start.1 = f32[8]{0:S(5)} copy-start()", 2 * NS, NS, display_name="copy-start.1")
    ops.event("%copy-done = f32[8]{0:S(5)} copy-done()", 50 * NS, 10 * NS, display_name="copy-done")
    ops.event("%copy-done.1 = f32[8]{0:S(5)} copy-done()", 70 * NS, 10 * NS, display_name="copy-done.1")
    ops.event("%copy-start = f32[8]{0:S(5)} copy-start()", 90 * NS, NS, display_name="copy-start")
    ops.event("%copy-done = f32[8]{0:S(5)} copy-done()", 95 * NS, NS, display_name="copy-done")
    ops.event("%copy-start.2 = f32[8]{0} copy-start()", 0, NS, display_name="copy-start.2")
    # An async op is left out whatever it is.
    plane.line(4, "Async XLA Ops").event("%copy-done = f32[8]{0:S(5)} copy-done()", 0, NS, _a=1,
                                          display_name="copy-done")
    rows = _rows(space)
    assert rows["Host Offload Ops row 0"] == [("offload-copy.0", 0, 60 * NS), ("offload-copy.0", 90 * NS, 6 * NS)]
    assert rows["Host Offload Ops row 1"] == [("offload-copy.1", 2 * NS, 78 * NS)]
    assert set(rows) == {"Host Offload Ops row 0", "Host Offload Ops row 1"}


def test_planes_other_than_tensor_cores_get_no_rows():
    space = Space()
    plane = space.plane("/device:TPU:0 SparseCore 0", 1)
    plane.metadata("op", stats={"tf_op": "a/b:B"})
    plane.line(3, "XLA Ops").event("op", 0, NS)
    assert _rows(space) == {}


def _libstdcxx_sort(keys: list[tuple[int, int]], workdir) -> list[int]:
    """The order std::sort (this machine's g++ and libstdc++) leaves positions in, comparing (begin, duration)."""
    source = workdir / "sort.cc"
    source.write_text("""
#include <algorithm>
#include <cstdio>
#include <vector>
struct E { long long b, d; int i; };
int main() {
  int n; std::vector<E> v;
  if (std::scanf("%d", &n) != 1) return 1;
  for (int i = 0; i < n; ++i) { E e; std::scanf("%lld %lld", &e.b, &e.d); e.i = i; v.push_back(e); }
  std::sort(v.begin(), v.end(), [](const E& a, const E& b) {
    if (a.b < b.b) return true;
    if (a.b > b.b) return false;
    return a.d < b.d; });
  for (const E& e : v) std::printf("%d\\n", e.i);
}
""")
    binary = workdir / "sort"
    if not binary.exists():
        subprocess.run(["g++", "-O1", "-o", str(binary), str(source)], check=True)
    text = f"{len(keys)}\n" + "".join(f"{b} {d}\n" for b, d in keys)
    out = subprocess.run([str(binary)], input=text, capture_output=True, text=True, check=True).stdout
    return [int(x) for x in out.split()]


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ to run libstdc++'s std::sort")
def test_the_event_order_is_libstdcxx_std_sort_ties_included(tmp_path):
    rng = random.Random(7)
    cases = [[(0, 0)] * 40, [(i, 0) for i in range(50)], [(50 - i, i % 3) for i in range(50)],
             [(rng.randrange(3), rng.randrange(2)) for _ in range(17)]]
    cases += [[(rng.randrange(n // 3 + 1), rng.randrange(3)) for _ in range(n)] for n in (5, 16, 33, 200, 5000)]
    for keys in cases:
        begin = np.array([b for b, _ in keys], np.int64)
        duration = np.array([d for _, d in keys], np.int64)
        assert xprof_event_order(begin, duration).tolist() == _libstdcxx_sort(keys, tmp_path), len(keys)


def test_a_built_site_exports_the_derived_rows_and_its_timeline_shows_them(tmp_path):
    from reportgen.pipeline.build import BuildOptions, build_site
    from tests.chrome_json import named_events, read_chunk
    from tests.test_device_tools_pages import XSS_OP, tpu_space

    tpu_space("tpuhost").write(tmp_path / "logs" / "plugins" / "profile" / "tpu", "tpuhost")
    out = tmp_path / "site"
    assert build_site([str(tmp_path / "logs")], BuildOptions(output=str(out), jobs=1)).exit_code == 0
    chunks = sorted((out / "tpu" / "trace" / "tpuhost").glob("*.json.gz"))
    events = [e for chunk in chunks for e in named_events(read_chunk(chunk))]
    ops = [e for e in events if e["thread"] == "Framework Ops"]
    # Three steps, one framework op run in each, named by its type (capture text: data, never markup).
    assert [e["process"] for e in ops] == ["tpuhost /device:TPU:0"] * 3
    assert {e["name"] for e in ops} == {tf_op_event_name(parse_tf_op_fullname(XSS_OP + ":"))}
    assert {e["thread"] for e in events} >= {"Framework Ops", "Framework Name Scope", "XLA Ops"}
    index = (out / "tpu" / "trace" / "tpuhost" / "timeline" / "index.js").read_text()
    assert "Framework Ops" in index and "Framework Name Scope" in index and "<script>" not in index
