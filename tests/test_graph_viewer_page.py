"""The graph viewer page: listed where XProf lists the tool, module scripts, links from the op pages,
and the page itself in headless Chromium from file:// (search, neighbourhood, fusions, large modules)."""

from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path

import jinja2
import pytest

from reportgen.core.hlo.module_text import module_text
from reportgen.loaders.hlo import hlo_modules, to_plain
from reportgen.loaders.proto import hlo_pb2
from reportgen.output.formatting import FILTERS
from reportgen.output.single_file import compose
from reportgen.pipeline.build import BuildOptions, build_site
from reportgen.sections.graph_viewer import MAX_NODES
from tests.browser import chromium, console_errors, needs_browser, screenshot
from tests.conftest import LOGDIR, ORACLE, REPO, RUNS, needs_shared
from tests.decoded import decoded_hosts
from tests.xspace import Space

EVIL = 'body<script>alert("x")</script>"&amp;'
BIG_OPS = 3000


def module_data(script: Path) -> dict:
    """The payload a module script registers with the page."""
    text = script.read_text(encoding="utf-8")
    assert text.startswith("reportgenGraphViewer.register(") and text.endswith(");\n")
    return json.loads(text[len("reportgenGraphViewer.register("):-3])


def big_module() -> hlo_pb2.HloProto:
    """A module of BIG_OPS ops: parameters, adds and fusions reading the ops before them (every third
    op a fusion of two parameters and an add; op.1500's fused computation has a hostile name, and
    computation names are printed as they are)."""
    proto = hlo_pb2.HloProto()
    module = proto.hlo_module
    module.name, module.entry_computation_id = "jit_big", 1

    def shape(target, dims=(128,)):
        target.element_type = hlo_pb2.F32
        target.dimensions.extend(dims)
        target.layout.minor_to_major.extend(reversed(range(len(dims))))

    def body(cid: int, name: str) -> None:  # every fusion owns its fused computation, as in XLA
        comp = module.computations.add(id=cid, name=name, root_id=cid * 10 + 2, is_fusion_computation=True)
        for k, opcode in enumerate(("parameter", "parameter", "add")):
            instr = comp.instructions.add(id=cid * 10 + k, name=f"b{cid}.{k}", opcode=opcode)
            if opcode == "parameter":
                instr.parameter_number = k
            else:
                instr.operand_ids.extend([cid * 10, cid * 10 + 1])
            shape(instr.shape)

    entry = module.computations.add(id=1, name="main")
    for i in range(BIG_OPS):
        instr = entry.instructions.add(id=i + 1, name=f"p.{i}" if i < 4 else f"op.{i}")
        shape(instr.shape)
        if i < 4:
            instr.opcode, instr.parameter_number = "parameter", i
            continue
        operands = [i, i - 3] if i % 7 else [i - 1, (i * 31) % i + 1]
        instr.operand_ids.extend(operands)
        if i % 3 == 0:
            instr.opcode, instr.fusion_kind = "fusion", "kLoop"
            cid = 10_000 + i
            body(cid, EVIL if i == 1500 else f"fused_computation.{i}")
            instr.called_computation_ids.append(cid)
        else:
            instr.opcode = "add"
    entry.root_id = BIG_OPS
    for _ in range(4):
        shape(module.host_program_shape.parameters.add())
    shape(module.host_program_shape.result)
    return proto


@pytest.fixture(scope="module")
def big_site(tmp_path_factory) -> Path:
    space = Space(("host",))
    space.host_plane().line(1, "python").event("step", 0, 10)
    space.plane("/host:metadata").metadata("jit_big(5)", md_id=5, **{"Hlo Proto": big_module().SerializeToString()})
    logdir = tmp_path_factory.mktemp("logdir")
    space.write(logdir / "plugins" / "profile" / "big")
    out = tmp_path_factory.mktemp("out") / "site"
    assert build_site([str(logdir)], BuildOptions(output=str(out), jobs=1)).exit_code == 0
    return out


@pytest.fixture(scope="module")
def plain_site(tmp_path_factory) -> Path:
    """A site whose one run carries no HLO module (so no graph viewer)."""
    space = Space(("host",))
    space.host_plane().line(1, "python").event("step", 0, 10)
    logdir = tmp_path_factory.mktemp("plain")
    space.write(logdir / "plugins" / "profile" / "plain")
    out = tmp_path_factory.mktemp("out") / "site"
    assert build_site([str(logdir)], BuildOptions(output=str(out), jobs=1)).exit_code == 0
    return out


@pytest.fixture(scope="module")
def real_site(tmp_path_factory) -> Path:
    if not LOGDIR.exists():
        pytest.skip("needs the shared captures")
    out = tmp_path_factory.mktemp("real") / "site"
    report = build_site([str(LOGDIR)], BuildOptions(output=str(out), runs={"jax_mlp", "tpu_inference_2"}, jobs=1))
    assert report.exit_code == 0
    return out


# --- the site ---------------------------------------------------------------------------------

@needs_shared
@pytest.mark.parametrize("run", RUNS)
def test_graph_viewer_is_listed_where_xprof_lists_it(run):
    """XProf offers graph_viewer exactly for the captures whose XSpace carries HLO modules."""
    listed = "graph_viewer" in (ORACLE / run / "tool_names.txt").read_text().split("\n", 1)[0].split(",")
    assert listed == any(hlo_modules(capture) for capture in decoded_hosts(run))


@needs_shared
def test_module_scripts_carry_xprofs_text_and_the_op_numbers(real_site):
    summary = json.loads((real_site / "summary.json").read_text())["runs"]
    for run in ("jax_mlp", "tpu_inference_2"):
        assert "graph_viewer" in summary[run]["tools"]
        names = (ORACLE / run / "tool_names.txt").read_text().split("hlo_modules:", 1)[1].strip().split(",")
        assert list(summary[run]["graph_viewer"]["modules"]) == names
        page = (real_site / run / "graph_viewer.html").read_text()
        # The picker lists them by device time (test_module_pickers_…): each option names its module's script.
        scripts = [(html.unescape(n), s) for n, s in re.findall(r'<option value="([^"]+)" data-src="([^"]+)"', page)]
        assert sorted(n for n, _ in scripts) == sorted(names)
        for name, src in scripts:
            data = module_data(real_site / run / src.replace("%28", "(").replace("%29", ")"))
            assert data["name"] == name
            assert data["text"].encode() == (ORACLE / run / "graph_viewer" / f"{name}.short_txt.txt").read_bytes()
            assert data["unprinted"] == []
            lines = data["text"].split("\n")
            for node in data["nodes"]:  # every op points at its own line of the text
                assert re.match(rf"  (ROOT )?{re.escape(node['n'])} = ", lines[node["l"]])
    # TPU ops carry HLO op stats' numbers: jit_f's three fusions ran 400 times each.
    jit_f = [p for p in (real_site / "tpu_inference_2" / "graph_viewer").iterdir() if "jit_f(" in p.name][0]
    timed = {n["n"]: n["m"] for n in module_data(jit_f)["nodes"] if "m" in n}
    assert {"broadcast_add_fusion", "broadcast_add_fusion.1", "broadcast_add_fusion.2"} <= set(timed)
    assert timed["broadcast_add_fusion.1"]["occurrences"] == 400 and timed["broadcast_add_fusion.1"]["flops"] > 0
    assert (real_site / "jax_mlp" / "graph_viewer.html").read_text().count("no device op times") == 1


def _module_options(page: Path) -> list[tuple[str, str]]:
    """(value, text) of each option of the page's module picker, in order."""
    text = page.read_text(encoding="utf-8")
    picker = re.search(r'<select (?:data-gv-module|data-host-select="mv-module")[^>]*>(.*?)</select>', text, re.S)
    return [(html.unescape(v), html.unescape(t)) for v, t in
            re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', picker.group(1))]


@needs_shared
def test_module_pickers_open_on_the_module_with_the_most_device_time(real_site):
    """On tpu_inference_2, jit_f has 99.5 % of the device time and jit__psum 0.5 %: XProf's pickers go by
    name and open on jit__psum; both of ours open on jit_f and list the modules by device time. On jax_mlp
    (CPU: no device ops) they open on the largest module, the training step, not on jit__normal."""
    for page in ("graph_viewer.html", "memory_viewer.html"):
        options = _module_options(real_site / "tpu_inference_2" / page)
        assert options[0][0].startswith("jit_f(") and "99.5% of device time" in options[0][1], options
        shares = [float(re.search(r"([\d.]+)% of device time", t).group(1)) for _, t in options]
        assert shares == sorted(shares, reverse=True) and len(shares) == 4
        cpu = _module_options(real_site / "jax_mlp" / page)
        assert cpu[0][0] == "jit__update(36)" and "device time" not in cpu[0][1], cpu[:3]


@needs_shared
def test_op_pages_link_to_the_graph_viewer(real_site):
    stats = (real_site / "tpu_inference_2" / "hlo_stats.html").read_text()
    # The table's rows are data: each op's cell holds its link's attributes, which the page's script sets.
    block = json.loads(re.search(r'id="hlo-stats-rows">(.*?)</script>', stats, re.S).group(1))
    links = [cell[1]["href"] for row in block["rows"] for cell in row if isinstance(cell, list) and cell[1]]
    assert "graph_viewer.html#program=12190760917235803885&op=broadcast_add_fusion.1" in links
    memory = (real_site / "jax_mlp" / "memory_viewer.html").read_text()
    assert 'href="graph_viewer.html#module=jit_eval_acc%2838%29&amp;op=' in memory


def test_links_only_where_the_run_has_a_graph_viewer():
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(REPO / "reportgen" / "templates"), autoescape=True)
    env.filters.update(FILTERS)
    macro = env.get_template("macros.html").module.graph_link
    with_page = [{"href": "index.html"}, {"href": "graph_viewer.html"}]
    assert str(macro([{"href": "index.html"}], "fusion.1", program="7")) == "<code>fusion.1</code>"
    assert str(macro(with_page, 'a"<b>', module="m(1)")) == (
        '<a href="graph_viewer.html#module=m%281%29&amp;op=a%22%3Cb%3E" title="Show in the graph viewer">'
        "<code>a&#34;&lt;b&gt;</code></a>")


def test_vendored_graphviz_is_the_pinned_npm_file():
    folder = REPO / "reportgen" / "static" / "vendor" / "hpcc-js-wasm"
    pinned = dict(line.split(" = ", 1) for line in (folder / "VERSION").read_text().splitlines())
    assert pinned["package"] == "@hpcc-js/wasm" and re.fullmatch(r"\d+\.\d+\.\d+", pinned["version"])
    assert hashlib.sha256((folder / pinned["file"]).read_bytes()).hexdigest() == pinned["sha256"]
    assert "Apache License" in (folder / "LICENSE").read_text()
    assert "Eclipse Public License" in (folder / "NOTICE.md").read_text()
    script = (REPO / "scripts" / "vendor" / "refresh_hpcc_js_wasm.py").read_text()
    assert "npm pack" in script and "VERSION" in script


def test_big_module_text_and_script(big_site):
    data = module_data(next((big_site / "big" / "graph_viewer").glob("*.js")))
    module = big_module().hlo_module
    assert len(data["nodes"]) == sum(len(c.instructions) for c in module.computations) > BIG_OPS
    assert data["text"] == module_text(to_plain(module)).text
    assert EVIL in data["text"]  # computation names are printed as they are (data, shown as text)
    assert EVIL not in (big_site / "big" / "graph_viewer.html").read_text()


def test_graphviz_goes_into_a_sites_assets_only_when_a_run_has_a_graph_viewer(big_site, plain_site):
    def assets(site: Path) -> set[str]:
        return {p.name.rsplit("-", 1)[0] for p in (site / "assets").iterdir()}

    graph_viewer = {"graphviz", "graph-viewer", "hpcc-js-wasm-LICENSE", "hpcc-js-wasm-NOTICE"}
    assert graph_viewer | {"vega-bundle"} <= assets(big_site)
    assert "vega-bundle" in assets(plain_site) and not graph_viewer & assets(plain_site)
    assert not (plain_site / "plain" / "graph_viewer.html").exists()
    page = (big_site / "big" / "graph_viewer.html").read_text()
    for src in re.findall(r'<script src="([^"]+)"', page):
        assert (big_site / "big" / src).resolve().is_file(), src


def test_the_single_file_leaves_the_graph_viewer_out_and_says_where_it_is(big_site):
    document, report = compose(big_site)
    pages = [html.unescape(p) for p in re.findall(r'<section class="page" id="[^"]+" data-page="([^"]+)">', document)]
    assert "big/index.html" in pages and "big/graph_viewer.html" not in pages
    assert "big/graph_viewer.html" in report.omitted
    assert "The graph viewer is not included in this file" in document
    assert "<code>big/graph_viewer.html</code>" in document
    assert "every page of the site, but the graph viewer" in document
    # Neither Graphviz nor the viewer's script nor a module's data travels in the file.
    graphviz = next((big_site / "assets").glob("graphviz-*.js")).read_text(encoding="utf-8")
    assert graphviz[1000:1200] not in document and "reportgenGraphViewer" not in document
    assert "data-graph-viewer" not in document
    # The run's navigation keeps the entry, as text marked left out (no dead link).
    nav = re.findall(r'<a[^>]*>Graph viewer</a>', document)
    assert nav and all('class="omitted"' in a and "href" not in a and "the graph viewer is in the site" in a
                       for a in nav)


@needs_shared
def test_in_the_single_file_op_rows_name_their_op_without_a_dead_link(real_site):
    document, _report = compose(real_site)
    links = re.findall(r'<a [^>]*title="[^"]*graph viewer[^"]*"[^>]*><code>([^<]+)</code></a>', document)
    assert "broadcast_add_fusion.1" in links
    assert not re.search(r'(?:href|src)="[^"]*graph_viewer', document)
    assert 'title="Show in the graph viewer"' not in document


# --- in the browser -----------------------------------------------------------------------------

def _status(driver) -> str:
    from selenium.webdriver.common.by import By

    return driver.find_element(By.CSS_SELECTOR, "[data-gv-status]").text


def _wait_drawn(driver, wait, op: str) -> None:
    wait.until(lambda d: "laid out" in _status(d) and f" of {op} " in _status(d))


def _drawn(driver) -> set[str]:
    return set(driver.execute_script(
        "return Array.from(document.querySelectorAll('[data-gv-canvas] g.node')).map(g => g.dataset.name)"))


def _edges(driver) -> set[tuple[str, str]]:
    pairs = driver.execute_script("""
        const names = {};
        document.querySelectorAll('[data-gv-canvas] g.node').forEach(g => names[g.id.replace('gvnode-', 'n')] =
            g.dataset.name);
        return Array.from(document.querySelectorAll('[data-gv-canvas] g.edge title'))
            .map(t => t.textContent.split('->')).map(([a, b]) => [names[a], names[b]]);""")
    return {tuple(p) for p in pairs}


def _neighbourhood(computation, center: str, depth: int) -> set[str]:
    by_name = {i.name: i for i in computation.instructions}
    by_id = {i.id: i.name for i in computation.instructions}
    users: dict[str, set[str]] = {}
    for instr in computation.instructions:
        for operand in instr.operand_ids:
            users.setdefault(by_id[operand], set()).add(instr.name)
    seen, frontier = {center}, {center}
    for _ in range(depth):
        frontier = {n for f in frontier for n in [*(by_id[o] for o in by_name[f].operand_ids), *users.get(f, ())]}
        frontier -= seen
        seen |= frontier
    return seen


@needs_shared
@needs_browser
def test_search_draws_the_ops_neighbourhood_and_opens_a_fusion(real_site, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    module = next(m for m in hlo_modules(decoded_hosts("jax_mlp")[0]).values()
                  if m.display_name == "jit_eval_acc(38)").hlo.hlo_module
    entry = next(c for c in module.computations if c.id == module.entry_computation_id)
    body = next(c for c in module.computations if c.name == "fused_computation.7")
    with chromium(tmp_path, window="1280,800") as driver:
        wait = WebDriverWait(driver, 30)
        driver.get((real_site / "jax_mlp" / "graph_viewer.html").as_uri())
        wait.until(lambda d: "laid out" in _status(d))
        Select(driver.find_element(By.CSS_SELECTOR, "[data-gv-module]")).select_by_value("jit_eval_acc(38)")
        wait.until(lambda d: "jit_eval_acc(38):" in _status(d) and "laid out" in _status(d))
        search = driver.find_element(By.CSS_SELECTOR, "[data-gv-search]")
        search.clear()
        search.send_keys("maximum_fusion.1")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#gv-suggestions li"))
        assert driver.find_element(By.CSS_SELECTOR, "#gv-suggestions li").text == "broadcast_maximum_fusion.1"
        search.send_keys(Keys.ENTER)
        _wait_drawn(driver, wait, "broadcast_maximum_fusion.1")
        expected = _neighbourhood(entry, "broadcast_maximum_fusion.1", 3)
        assert _drawn(driver) == expected
        by_id = {i.id: i.name for i in entry.instructions}
        hlo_edges = {(by_id[o], i.name) for i in entry.instructions if i.name in expected
                     for o in i.operand_ids if by_id[o] in expected}
        assert _edges(driver) == hlo_edges
        assert "#module=jit_eval_acc%2838%29&op=broadcast_maximum_fusion.1&depth=3" in driver.current_url
        screenshot(driver, "graph-viewer-search.png")

        driver.find_element(By.CSS_SELECTOR, "[data-gv-toggle-fusion]").click()
        wait.until(lambda d: "inside open fusions" in _status(d))
        inside = {i.name for i in body.instructions}
        assert _drawn(driver) == (expected - {"broadcast_maximum_fusion.1"}) | inside
        edges = _edges(driver)
        assert ("ynn_fusion.2", "param_0.15") in edges and ("params_0__1_.1", "param_1.18") in edges
        assert ("max.10", "ynn_fusion.1") in edges and ("add.4", "max.10") in edges
        cluster = driver.find_element(By.CSS_SELECTOR, "[data-gv-canvas] g.cluster")
        assert cluster.get_attribute("data-fusion") == "broadcast_maximum_fusion.1"
        screenshot(driver, "graph-viewer-fusion.png")

        driver.find_element(By.CSS_SELECTOR, "[data-gv-canvas] g.node[data-name='add.4']").click()
        assert driver.find_element(By.CSS_SELECTOR, "[data-gv-details] h3").text == "add.4"
        driver.find_element(By.CSS_SELECTOR, "[data-gv-show-text]").click()
        assert driver.execute_script("return CSS.highlights.get('gv-line').values().next().value.toString()") == \
            "  add.4 = f32[256,512]{1,0} add(param_0.15, add.5)"
        screenshot(driver, "graph-viewer-text.png")
        assert console_errors(driver) == []


@needs_shared
@needs_browser
def test_hlo_op_stats_and_op_profile_rows_open_the_op(real_site, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    with chromium(tmp_path, window="1280,800") as driver:
        wait = WebDriverWait(driver, 30)
        driver.get((real_site / "tpu_inference_2" / "hlo_stats.html").as_uri())
        driver.find_element(By.CSS_SELECTOR, "a[href*='op=broadcast_add_fusion.1']").click()
        _wait_drawn(driver, wait, "broadcast_add_fusion.1")
        assert "jit_f(12190760917235803885):" in _status(driver)
        details = driver.find_element(By.CSS_SELECTOR, "[data-gv-details]").text
        assert "400 occurrences" in details and "GFLOP" in details
        screenshot(driver, "graph-viewer-from-hlo-stats.png")
        assert console_errors(driver) == []

        driver.get((real_site / "tpu_inference_2" / "op_profile.html").as_uri())
        # by program → jit_f → loop fusion (a category) → its first op
        category = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, "tr[data-path='0/0/1']"))
        assert category.text.startswith("▸loop fusion")
        category.find_element(By.CSS_SELECTOR, ".op-toggle").click()
        driver.find_element(By.CSS_SELECTOR, "tr[data-path='0/0/1/0']").click()
        link = wait.until(lambda d: d.find_element(By.LINK_TEXT, "Show in the graph viewer"))
        assert driver.find_element(By.CSS_SELECTOR, ".op-details h3").text == \
            "broadcast_add_fusion.1 and its duplicate(s)"
        link.click()
        _wait_drawn(driver, wait, "broadcast_add_fusion.1")
        assert "No op" not in _status(driver)
        assert console_errors(driver) == []


@needs_browser
def test_a_large_module_draws_only_a_neighbourhood(big_site, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    with chromium(tmp_path, window="1280,800") as driver:
        wait = WebDriverWait(driver, 60)
        driver.get((big_site / "big" / "graph_viewer.html").as_uri() + "#module=jit_big(5)&op=op.1500&depth=2")
        _wait_drawn(driver, wait, "op.1500")
        drawn = _drawn(driver)
        assert "op.1500" in drawn and len(drawn) < 20
        # A fusion body with a hostile computation name: shown as text, never run.
        driver.find_element(By.CSS_SELECTOR, "[data-gv-toggle-fusion]").click()
        wait.until(lambda d: "inside open fusions" in _status(d))
        assert EVIL in driver.find_element(By.CSS_SELECTOR, "[data-gv-canvas] g.cluster").text
        assert EVIL in driver.find_element(By.CSS_SELECTOR, "[data-gv-text]").get_attribute("textContent")
        screenshot(driver, "graph-viewer-big.png")
        one_open = len(_drawn(driver))
        driver.find_element(By.CSS_SELECTOR, "[data-gv-expand-all]").click()
        wait.until(lambda d: "laid out" in _status(d) and len(_drawn(d)) != one_open)
        assert one_open < len(_drawn(driver)) <= MAX_NODES
        Select(driver.find_element(By.CSS_SELECTOR, "[data-gv-depth]")).select_by_value("8")
        wait.until(lambda d: "within 8 of op.1500" in _status(d))
        assert len(_drawn(driver)) == MAX_NODES and f"cut at {MAX_NODES} ops" in _status(driver)
        assert console_errors(driver) == []


@needs_browser
@pytest.mark.parametrize("which", ["big", pytest.param("real", marks=needs_shared)])
def test_the_single_file_opens_without_a_console_error(which, big_site, request, tmp_path):
    from selenium.webdriver.common.by import By

    site = big_site if which == "big" else request.getfixturevalue("real_site")
    document, _report = compose(site)
    path = tmp_path / "report.html"
    path.write_text(document, encoding="utf-8")
    with chromium(tmp_path, window="1280,800") as driver:
        driver.get(path.as_uri())
        note = driver.find_element(By.XPATH, "//p[contains(., 'The graph viewer is not included')]")
        assert note.is_displayed()
        screenshot(driver, f"single-file-{which}.png")
        if which == "real":  # an HLO op stats row: the op's name, marked as left out
            cell = driver.find_element(By.CSS_SELECTOR, "a.omitted[title*='graph viewer'] code")
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
            screenshot(driver, "single-file-hlo-stats.png")
        assert console_errors(driver) == []
