"""Graph layout libraries for the graph viewer, timed in headless Chromium from file://.

    PYTHONPATH=. python bench/graph_layout.py [--nodes 50,200,1000] [--repeat 5] [--scratch DIR] [--keep]

Fetches the candidates from the npm registry (`npm pack`): dagre
(`@dagrejs/dagre`, `dist/dagre.min.js`), elkjs (`lib/elk.bundled.js`) and
Graphviz compiled to WebAssembly (`@hpcc-js/wasm`, `dist/graphviz.umd.js`, the
wasm inlined; the newer `@hpcc-js/wasm-graphviz` ships only an ES module,
which Chromium refuses on file://). Each goes into a page of its own, loaded
with a classic `<script>` from file://, which lays out HLO-shaped graphs:
`n` nodes of 150–260 × 44 px, each with one to three operands among the 30
nodes before it (HLO's locality) and one in ten reading one of the first five
nodes (parameters, constants), top to bottom.

Prints per library: whether it loaded from file:// without console errors,
the size of the file the page loads, the first-layout start-up (Graphviz
instantiates its wasm), and per size the median layout time over
`--repeat` runs, the drawing's size and the edge crossings (straight
segments between the ends each library reports, a proxy for readability).
The machine is shared: compare the libraries within one run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tarfile
import tempfile
import time
from pathlib import Path

PACKAGES = {
    "dagre": ("@dagrejs/dagre", "dist/dagre.min.js"),
    "elkjs": ("elkjs", "lib/elk.bundled.js"),
    "graphviz": ("@hpcc-js/wasm", "dist/graphviz.umd.js"),
}

PAGE = """<!doctype html><meta charset="utf-8"><title>bench</title>
<script src="lib.js"></script>
<script>
function rng(seed) { return () => (seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648; }
function hloGraph(n) {
  const r = rng(n), nodes = [], edges = [];
  for (let i = 0; i < n; i++) {
    nodes.push({id: "n" + i, width: 150 + Math.floor(r() * 110), height: 44});
    if (i === 0) continue;
    const k = 1 + Math.floor(r() * 3), seen = new Set();
    for (let j = 0; j < k; j++) {
      const src = r() < 0.1 ? Math.floor(r() * Math.min(5, i)) : Math.max(0, i - 1 - Math.floor(r() * 30));
      if (!seen.has(src)) { seen.add(src); edges.push(["n" + src, "n" + i]); }
    }
  }
  return {nodes, edges};
}
function crossings(segs) {
  let c = 0;
  const cross = (a, b) => {
    const d = (p, q, r) => (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0]);
    return d(a[0], a[1], b[0]) * d(a[0], a[1], b[1]) < 0 && d(b[0], b[1], a[0]) * d(b[0], b[1], a[1]) < 0;
  };
  for (let i = 0; i < segs.length; i++) for (let j = i + 1; j < segs.length; j++) if (cross(segs[i], segs[j])) c++;
  return c;
}
const LIB = "%LIB%";
let gv = null;
async function layout(g) {
  if (LIB === "dagre") {
    const d = new dagre.graphlib.Graph();
    d.setGraph({rankdir: "TB", nodesep: 24, ranksep: 40});
    d.setDefaultEdgeLabel(() => ({}));
    for (const n of g.nodes) d.setNode(n.id, {width: n.width, height: n.height});
    for (const [s, t] of g.edges) d.setEdge(s, t);
    dagre.layout(d);
    const segs = [];
    for (const e of d.edges()) {
      const p = d.edge(e).points;
      for (let i = 1; i < p.length; i++) segs.push([[p[i-1].x, p[i-1].y], [p[i].x, p[i].y]]);
    }
    return {w: d.graph().width, h: d.graph().height, segs};
  }
  if (LIB === "elkjs") {
    const elk = new ELK();
    const out = await elk.layout({id: "root", layoutOptions: {"elk.algorithm": "layered", "elk.direction": "DOWN",
      "elk.spacing.nodeNode": "24", "elk.layered.spacing.nodeNodeBetweenLayers": "40"},
      children: g.nodes.map(n => ({id: n.id, width: n.width, height: n.height})),
      edges: g.edges.map(([s, t], i) => ({id: "e" + i, sources: [s], targets: [t]}))});
    const segs = [];
    for (const e of out.edges) for (const s of e.sections) {
      const p = [s.startPoint, ...(s.bendPoints || []), s.endPoint];
      for (let i = 1; i < p.length; i++) segs.push([[p[i-1].x, p[i-1].y], [p[i].x, p[i].y]]);
    }
    return {w: out.width, h: out.height, segs};
  }
  if (!gv) gv = await window["@hpcc-js/wasm/graphviz"].Graphviz.load();
  const dot = "digraph{nodesep=0.33;ranksep=0.55;node[shape=box,fixedsize=true,label=\\"\\"];" +
    g.nodes.map(n => `${n.id}[width=${n.width / 72},height=${n.height / 72}]`).join(";") + ";" +
    g.edges.map(([s, t]) => `${s}->${t}`).join(";") + "}";
  const out = JSON.parse(gv.layout(dot, "json", "dot"));
  const bb = out.bb.split(",").map(Number), segs = [];
  for (const e of out.edges || []) {
    const pts = e._draw_.filter(d => d.op === "b").flatMap(d => d.points);
    for (let i = 3; i < pts.length; i += 3) segs.push([pts[i - 3], pts[i]]);
  }
  return {w: bb[2], h: bb[3], segs};
}
async function bench(sizes, repeat) {
  const t0 = performance.now();
  await layout(hloGraph(3));
  const out = {startup_ms: performance.now() - t0, sizes: {}};
  for (const n of sizes) {
    const g = hloGraph(n), times = [];
    let last = null;
    for (let i = 0; i < repeat; i++) {
      const t = performance.now();
      last = await layout(g);
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    out.sizes[n] = {median_ms: times[Math.floor(times.length / 2)], edges: g.edges.length,
                    width: Math.round(last.w), height: Math.round(last.h), crossings: crossings(last.segs)};
  }
  return out;
}
</script>
"""


def fetch(scratch: Path) -> dict[str, tuple[Path, str]]:
    found = {}
    for lib, (package, path) in PACKAGES.items():
        folder = scratch / lib
        folder.mkdir(parents=True, exist_ok=True)
        name = subprocess.run(["npm", "pack", package, "--silent"], cwd=folder, check=True, capture_output=True,
                              text=True).stdout.strip().splitlines()[-1]
        with tarfile.open(folder / name) as tar:
            tar.extractall(folder, filter="data")
        version = json.loads((folder / "package" / "package.json").read_text())["version"]
        found[lib] = (folder / "package" / path, f"{package}@{version}")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", default="50,200,1000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--scratch", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.nodes.split(",")]
    scratch = args.scratch or Path(tempfile.mkdtemp(prefix="graph-layout-bench-"))
    from tests.browser import chromium, console_errors

    try:
        libs = fetch(scratch)
        print(f"load average: {Path('/proc/loadavg').read_text().split()[:3]}")
        for lib, (path, label) in libs.items():
            page_dir = scratch / f"page-{lib}"
            page_dir.mkdir(exist_ok=True)
            shutil.copy(path, page_dir / "lib.js")
            (page_dir / "index.html").write_text(PAGE.replace("%LIB%", lib))
            with chromium(scratch / f"profile-{lib}") as driver:
                driver.set_script_timeout(600)
                driver.get((page_dir / "index.html").as_uri())
                started = time.perf_counter()
                result = driver.execute_async_script(
                    "const done = arguments[arguments.length - 1];"
                    "bench(arguments[0], arguments[1]).then(done, e => done({error: String(e)}));", sizes, args.repeat)
                wall = time.perf_counter() - started
                errors = console_errors(driver)
            print(f"\n{label}: {path.name}, {path.stat().st_size / 1024:.0f} KiB, file:// console errors: "
                  f"{len(errors)}, wall {wall:.1f} s")
            if "error" in result:
                print("  failed:", result["error"])
                continue
            print(f"  start-up (first layout of 3 nodes): {result['startup_ms']:.1f} ms")
            for n, row in result["sizes"].items():
                print(f"  {n:>5} nodes / {row['edges']:>5} edges: {row['median_ms']:9.1f} ms median, "
                      f"{row['width']} x {row['height']} px, {row['crossings']} crossings")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
