"""Runs of many hosts: pages show them combined past MAX_HOST_VIEWS hosts, and combining hosts keeps XProf's
numbers while doing per-host work in numpy (bench/many_hosts.py times it)."""

from __future__ import annotations

import gc
import json
import weakref
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from reportgen.core.ops import op_stats as ops
from reportgen.core.ops.views import MAX_HOST_VIEWS
from reportgen.core.steps.step_db import StepDb, empty_steps
from reportgen.errors import NoCapturesError
from reportgen.pipeline.build import BuildOptions, build_site
from reportgen.pipeline.heap import LongLived
from tests.browser import chromium, console_errors, needs_browser
from tests.clirun import reportgen
from tests.logdirs import make_logdir
from tests.xspace import host_space


def _steps(rows: list[tuple[int, int, int, int]]) -> StepDb:
    """(step_num, core, begin_ps, duration_ps) rows, in the order given."""
    frame = empty_steps()
    frame = pd.DataFrame({column: np.zeros(len(rows), frame[column].dtype) for column in frame.columns})
    frame["name"] = [str(r[0]) for r in rows]
    for index, column in enumerate(["step_num", "core", "begin_ps", "duration_ps"]):
        frame[column] = np.array([r[index] for r in rows], np.int64)
    frame["t1"] = frame["duration_ps"] // 2
    return StepDb(steps=frame)


def _spans_by_groupby(db: StepDb) -> tuple[np.ndarray, np.ndarray]:
    s = db.steps
    g = s.assign(end=s["begin_ps"] + s["duration_ps"]).groupby("step_num", sort=False)
    b, e = g["begin_ps"].min().to_numpy(np.int64), g["end"].max().to_numpy(np.int64)
    empty = b >= e
    return np.where(empty, 0, b), np.where(empty, 0, e)


def test_step_spans_keep_first_appearance_order_and_empty_spans():
    db = _steps([(7, 1, 500, 100), (3, 1, 100, 50), (7, 2, 400, 300), (3, 2, 90, 0), (9, 1, 50, 0)])
    begin, end = db.spans
    reference = _spans_by_groupby(db)
    assert begin.tolist() == reference[0].tolist() == [400, 90, 0]
    assert end.tolist() == reference[1].tolist() == [700, 150, 0]


def _combined_steps_per_host(parts, no_accelerator: bool) -> pd.DataFrame:
    """What the combine did host by host with pandas: the reference the one-pass version must equal."""
    workers = {i: p.step_db for i, p in enumerate(parts) if p.environment.has_device or no_accelerator}
    inter = ops.step_intersection(workers)
    frames = []
    for host_id, db in workers.items():
        first = inter.first_index.get(host_id, 0)
        chosen = db.step_numbers[first:first + inter.num_steps]
        steps = db.steps[db.steps["step_num"].isin(chosen)].copy()
        steps["core"] = host_id * ops.MAX_DEVICES_PER_HOST + steps["core"]
        steps["step_num"] = steps["step_num"].map({old: new for new, old in enumerate(chosen)})
        frames.append(steps)
    steps = pd.concat(frames, ignore_index=True)
    return steps.sort_values(["step_num", "core"], kind="stable", ignore_index=True)


def test_hosts_combine_into_the_same_steps_as_host_by_host():
    step = 1_000
    hosts = [
        _steps([(n, 1, n * step, step - 10) for n in range(10, 16)]),  # six steps
        _steps([(n, 1, (n - 8) * step + 5, step - 20) for n in range(20, 24)]),  # four, shifted
        _steps([(n, c, (n - 1) * step, step // 2) for n in range(1, 8) for c in (1, 2)]),  # two cores
    ]
    parts = [SimpleNamespace(step_db=db, environment=SimpleNamespace(has_device=False)) for db in hosts]
    combined = ops._combine_steps(parts, no_accelerator=True).steps
    reference = _combined_steps_per_host(parts, no_accelerator=True)
    assert len(combined) > 0
    pd.testing.assert_frame_equal(combined, reference)


def test_many_frames_concatenated_in_groups_equal_one_concat():
    """concat_rows joins a pod's thousands of per-host frames in groups: the same frame as one pd.concat, dtypes
    included, with empty typed frames, object, string, float and int columns among them."""
    from reportgen.core.frames import CONCAT_GROUP, concat_rows

    rng = np.random.default_rng(7)
    frames = []
    for i in range(2 * CONCAT_GROUP + 37):
        rows = int(rng.integers(0, 4))
        frame = empty_steps() if rows == 0 else _steps([(i * 10 + n, 1, n * 10, 5) for n in range(rows)]).steps
        if i % 97 == 5:
            frame = frame.astype({"begin_ps": np.float64})  # one host's column of another dtype
        frames.append(frame)
    grouped, at_once = concat_rows(frames), pd.concat(frames, ignore_index=True)
    pd.testing.assert_frame_equal(grouped, at_once)
    assert grouped.dtypes.to_dict() == at_once.dtypes.to_dict()


def test_sections_asking_for_the_same_hosts_the_same_way_share_one_combine(monkeypatch):
    """The overview and the input pipeline combine a run's hosts with the overview's step rule, TF stats and
    the pod viewer without it: each combine runs once, and a new set of hosts or the other rule combines anew
    (the op metrics once for both rules)."""
    from reportgen.core.ops import views

    combines, db_combines = [], []
    monkeypatch.setattr(views, "combine_op_stats", lambda parts, dbs: combines.append(len(parts)) or object())
    monkeypatch.setattr(views, "combine_metric_dbs", lambda parts: db_combines.append(len(parts)) or object())
    monkeypatch.setattr(views, "drop_incomplete_steps", lambda part: SimpleNamespace(dropped_from=part))
    monkeypatch.setattr(views, "_COMBINED", {})
    monkeypatch.setattr(views, "_COMBINED_DBS", {})
    step = 1_000
    run = [SimpleNamespace(step_db=_steps([(n, 1, n * step, step - 10) for n in range(10, 18)])) for _ in range(3)]
    overview = views.combined_hosts(run, overview_steps=True)
    assert views.combined_hosts(list(run), overview_steps=True) is overview  # the input pipeline's ask
    tf_stats = views.combined_hosts(run, overview_steps=False)
    assert tf_stats is not overview and views.combined_hosts(run, overview_steps=False) is tf_stats
    assert views.combined_hosts(run[:2], overview_steps=False) is not tf_stats  # other hosts: combined anew
    assert combines == [3, 3, 2]
    assert db_combines == [3, 2]  # the step rule changes the steps only: both rules share the op metrics
    views.forget_combined()  # what the build does once a run is combined: its hosts are not held any longer
    assert views._COMBINED == {} and views._COMBINED_DBS == {}
    assert views.combined_hosts(run, overview_steps=True) is not overview and combines == [3, 3, 2, 3]


def test_hosts_kernel_reports_combine_as_one_concat_with_a_host_column():
    from reportgen.core.ops.kernel_reports import combine_host_reports, empty_reports, sort_reports

    def reports(name: str, durations: list[int]) -> pd.DataFrame:
        frame = empty_reports()
        rows = {c: np.zeros(len(durations), frame[c].dtype) if frame[c].dtype != object else [""] * len(durations)
                for c in frame.columns}
        frame = pd.DataFrame(rows)[list(frame.columns)]
        frame["name"] = [f"{name}-{i}" for i in range(len(durations))]
        frame["total_duration_ns"] = np.array(durations, np.int64)
        return frame

    per_host = {"a": reports("k", [5, 9]), "idle": empty_reports(), "b": reports("k", [7]), "c": empty_reports()}
    expected = sort_reports(pd.concat([f.assign(host=h) for h, f in per_host.items()], ignore_index=True))
    combined = combine_host_reports(per_host)
    pd.testing.assert_frame_equal(combined, expected)
    assert combined["host"].tolist() == ["a", "b", "a"]
    only_idle = {"idle": empty_reports(), "c": empty_reports()}
    pd.testing.assert_frame_equal(combine_host_reports(only_idle),
                                  pd.concat([f.assign(host=h) for h, f in only_idle.items()], ignore_index=True))


@pytest.fixture(scope="module")
def many_hosts_site(tmp_path_factory):
    """One run just past MAX_HOST_VIEWS tiny hosts, one of two hosts."""
    root = tmp_path_factory.mktemp("many")

    def tiny(i: int) -> bytes:
        space = host_space(f"h{i}")
        line = space.host_plane().line(1, "python")
        for n in range(3):
            line.event("train", n * 1_000_000, 900_000 + i, step_num=n, _r=1)
        return space.serialize()

    hosts = MAX_HOST_VIEWS + 1
    logdir = make_logdir(root / "logs", {"pod": {f"h{i}": tiny(i) for i in range(hosts)},
                                         "pair": {f"h{i}": tiny(i) for i in range(2)}})
    site = root / "site"
    proc = reportgen("build", str(logdir), "-o", str(site), "--no-cache", "--jobs", "1", "-q")
    assert proc.returncode == 0, proc.stderr
    return site, hosts


@pytest.mark.parametrize("page, group", [("overview", "overview"), ("tf_stats", "tfstats"),
                                         ("input_pipeline", "input-view")])
def test_a_run_of_many_hosts_is_shown_combined_and_says_so(many_hosts_site, page, group):
    site, hosts = many_hosts_site
    many = (site / "pod" / f"{page}.html").read_text()
    assert f"This run has {hosts:,} hosts: they are shown combined." in many
    assert f'data-host-select="{group}"' not in many and many.count(f'data-host-panel="{group}"') == 1
    few = (site / "pair" / f"{page}.html").read_text()
    assert "shown combined" not in few and f'data-host-select="{group}"' in few



def test_the_header_names_a_few_hosts_and_counts_them_all():
    """A pod slice's thousands of host names are not repeated in every page's header: the first twenty and
    how many more."""
    from reportgen.output.site import _environment

    header = _environment().from_string('{% import "macros.html" as m %}{{ m.host_switch(none, hosts) }}')
    many = header.render(hosts=[f"worker-{i}" for i in range(10_000)])
    assert "<span class=\"muted\">Hosts</span> 10,000" in many
    assert "worker-19 … and 9,980 more" in many and "worker-20" not in many
    few = header.render(hosts=["a", "b"])
    assert 'title="a, b"' in few and "more" not in few


def _overview_by_altair(part) -> dict:
    """The trace overview chart built through Altair every time: what the shared, relabelled spec must equal."""
    import altair as alt

    from reportgen.sections.busy_chart import busy_heatmap, busy_rects, busy_slices, pool_threads, short_label
    from reportgen.sections.vega import responsive, vega_spec

    export = part.export
    labels = [short_label(label) for label in export.row_labels]
    busy, labels, _ = pool_threads(busy_slices(export.activity), labels)
    x = alt.X("bin_start_ms:Q", title="Trace time (ms)", scale=alt.Scale(zero=False, nice=False))
    layers = [busy_heatmap("busy", x, labels, 300)]
    datasets = {"busy": busy_rects(busy)}
    if export.steps:
        datasets["steps"] = [{"step": n, "start_ms": s / 1e3, "end_ms": e / 1e3} for n, s, e in export.steps]
        layers.append(alt.Chart(alt.Data(name="steps")).mark_rule(color="#59636e", strokeDash=[2, 3]).encode(
            x="start_ms:Q",
            tooltip=[alt.Tooltip("step:Q", title="Step"),
                     alt.Tooltip("start_ms:Q", title="Starts (ms)", format=",.3f"),
                     alt.Tooltip("end_ms:Q", title="Ends (ms)", format=",.3f")]))
    height = max(80, min(14 * len(labels), 2400))
    return responsive(vega_spec(alt.layer(*layers).properties(height=height), datasets))


@pytest.mark.parametrize("labels", [["python", "worker 2"], ["worker 2", "python"], ["x" * 300], []])
def test_trace_overview_charts_share_one_spec_per_shape_and_keep_their_rows(labels):
    from reportgen.sections.trace import TraceHostPart, overview_chart

    activity = pd.DataFrame({"label": labels, "bin_start_ms": [0.0] * len(labels),
                             "bin_end_ms": [1.0] * len(labels), "busy_percent": [50.0] * len(labels)})
    export = SimpleNamespace(row_labels=labels, activity=activity, steps=[(1, 0, 1000)], cuts_us=[], host="h")
    part = TraceHostPart(export=export)
    chart, _ = overview_chart(part)
    assert json.dumps(chart, sort_keys=True) == json.dumps(_overview_by_altair(part), sort_keys=True)


@pytest.mark.parametrize("cores", [3, 200])
def test_pod_chart_names_bottlenecks_above_columns_only_while_they_fit(cores):
    """A pod of hundreds of cores: the bottleneck names above the columns and every core's axis label would print
    over each other, so the chart leaves the names out (the table names them) and Vega thins the axis labels."""
    from reportgen.sections.pod_viewer import MAX_NAMED_COLUMNS, pod_chart

    labels = [f"host {i} (host_{i}) core 1" for i in range(cores)]
    columns = pd.DataFrame({"step_num": 0, "core": np.arange(cores), "label": labels, "host": "h",
                            "total_us": 9.0, "bottleneck": "Input"})
    breakdown = pd.DataFrame({"step_num": 0, "core": np.arange(cores), "label": labels, "host": "h",
                              "part": "Input", "us": 9.0})
    spec = pod_chart(SimpleNamespace(columns=columns, breakdown=breakdown, parts=["Input"]))
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    axis = spec["layer"][0]["encoding"]["x"]["axis"]
    if cores <= MAX_NAMED_COLUMNS:
        assert marks == ["bar", "text"] and "labelOverlap" not in axis
    else:
        assert marks == ["bar"] and axis["labelOverlap"] == "greedy"


SET_UP = """
const tables = Array.from(document.querySelectorAll("table.sortable"));
return tables.map(t => [t.id, t.closest("[data-host-panel]").dataset.host, t.offsetParent !== null,
                        t.querySelector("th button.sort") !== null,
                        t.closest("[data-host-panel]").querySelector("[data-vega-spec] svg") !== null]);
"""


@needs_browser
def test_host_panels_not_shown_are_set_up_when_they_are(many_hosts_site, tmp_path):
    """A page of a pod's hosts has a panel per host: only the one shown has its tables set up and its chart drawn
    (on a page of a thousand hosts, setting them all up took seconds); choosing another host sets up its panel."""
    from selenium.webdriver.support.ui import Select, WebDriverWait

    site, hosts = many_hosts_site
    with chromium(tmp_path / "profile") as driver:
        driver.get((site / "pod" / "inventory.html").as_uri())
        WebDriverWait(driver, 30).until(lambda d: any(row[4] for row in d.execute_script(SET_UP)))
        rows = driver.execute_script(SET_UP)
        assert len(rows) == hosts
        assert [(shown, sortable, drawn) for _, _, shown, sortable, drawn in rows] == (
            [(True, True, True)] + [(False, False, False)] * (hosts - 1))
        Select(driver.find_element("css selector", "select[data-host-select='inventory']")).select_by_value("h7")
        WebDriverWait(driver, 30).until(lambda d: [r for r in d.execute_script(SET_UP) if r[1] == "h7"][0][4])
        by_host = {row[1]: row[2:] for row in driver.execute_script(SET_UP)}
        assert by_host["h7"] == [True, True, True]
        assert by_host["h0"] == [False, True, True]  # set up once, kept while hidden
        assert sum(sortable for _, sortable, _ in by_host.values()) == 2
        assert console_errors(driver) == []


def test_adjacent_equal_slices_of_a_row_become_one_rect_covering_the_same_cells():
    from reportgen.sections.busy_chart import busy_rects
    from reportgen.sections.vega import records

    edges = np.round(np.arange(0, 1.1, 0.1), 4)
    rows = [("a", 0, 100.0), ("a", 1, 100.0), ("a", 2, 100.0), ("a", 4, 100.0),  # a gap: two rects
            ("a", 5, 50.0), ("b", 6, 50.0), ("b", 7, 50.0), ("b", 8, 20.0), ("b", 9, 20.0)]
    slices = pd.DataFrame({"label": np.array([r[0] for r in rows], dtype=object),
                           "bin_start_ms": [edges[r[1]] for r in rows], "bin_end_ms": [edges[r[1] + 1] for r in rows],
                           "busy_percent": [r[2] for r in rows]})
    rects = busy_rects(slices)
    assert [list(r.values()) for r in rects] == [["a", 0.0, 0.3, 100.0], ["a", 0.4, 0.5, 100.0],
                                                 ["a", 0.5, 0.6, 50.0], ["b", 0.6, 0.8, 50.0], ["b", 0.8, 1.0, 20.0]]
    # Every slice lies in exactly one rect of its row, with its busy %.
    for label, start, end, busy in slices.itertuples(index=False):
        covering = [r["busy_percent"] for r in rects
                    if r["label"] == label and r["bin_start_ms"] <= start and r["bin_end_ms"] >= end]
        assert covering == [busy]
    # Nothing to join: the rows the chart had before, key for key.
    apart = slices.iloc[[0, 4, 8]]
    assert busy_rects(apart) == records(apart)
    assert busy_rects(slices.iloc[:0]) == [] and busy_rects(slices.iloc[:1]) == records(slices.iloc[:1])


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_what_the_build_keeps_is_frozen_and_garbage_cycles_are_not():
    heap = LongLived(every=3)
    kept = [_Cycle() for _ in range(3)]
    garbage = _Cycle()
    gone = weakref.ref(garbage)
    del garbage
    assert gc.get_freeze_count() == 0
    try:
        for _ in kept:
            heap.kept()
        assert gone() is None  # collected before the freeze, not kept forever
        assert gc.get_freeze_count() > len(kept)
    finally:
        heap.release()
    assert gc.get_freeze_count() == 0


@pytest.mark.parametrize("good", [True, False], ids=["built", "failed"])
def test_a_build_hands_the_frozen_heap_back_however_it_ends(tmp_path, monkeypatch, good):
    frozen = []
    monkeypatch.setattr(LongLived, "release", lambda self, real=LongLived.release: (
        frozen.append(gc.get_freeze_count()), real(self)))
    space = host_space("h")
    space.host_plane().line(1, "python").event("train", 0, 900_000, step_num=1, _r=1)
    content = space.serialize() if good else b"\x0a\xff\xff"
    logdir = make_logdir(tmp_path / "logs", {"pod": {f"h{i}": content for i in range(5)}})
    options = BuildOptions(output=str(tmp_path / "site"), jobs=1, cache=False)
    if good:
        assert build_site([str(logdir)], options).hosts == 5
    else:
        with pytest.raises(NoCapturesError):
            build_site([str(logdir)], options)
    assert frozen and frozen[0] > 0  # the hosts' results were frozen while the build ran
    assert gc.get_freeze_count() == 0
