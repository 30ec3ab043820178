"""Pages that open on what matters and say what is there: headers aligned with their columns, and no
"Top 0 operations" heading over an empty table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from reportgen.pipeline.build import BuildOptions, build_site
from tests.clirun import sample_site_build
from tests.conftest import REPO

MESH_CPU = REPO / "tests" / "captures" / "jax_mesh_cpu"


@pytest.fixture(scope="module")
def jax_site(tmp_path_factory) -> Path:
    """The JAX 0.12 CPU capture: XLA modules, no framework op on the host."""
    logdir = tmp_path_factory.mktemp("logdir")
    run = logdir / "plugins" / "profile" / "jax_mesh_cpu"
    run.mkdir(parents=True)
    (run / "vm.xplane.pb").write_bytes((MESH_CPU / "vm.xplane.pb").read_bytes())
    out = tmp_path_factory.mktemp("site") / "site"
    assert build_site([str(logdir)], BuildOptions(output=str(out), jobs=1)).exit_code == 0
    return out


def test_an_overview_without_host_ops_says_there_are_none(jax_site):
    page = (jax_site / "jax_mesh_cpu" / "overview.html").read_text(encoding="utf-8")
    assert "Top 0 operations" not in page
    assert "<h2>Top operations</h2>" in page and "the host ran no framework op either" in page
    assert "<table>" not in page.split("<h2>Top operations</h2>", 1)[1].split("<h2>", 1)[0]


def test_tf_stats_text_columns_have_left_aligned_headers():
    """The Type column's cells are text, left-aligned: its header was right-aligned (`num`) over them."""
    cwd, proc = sample_site_build()
    assert proc.returncode == 0, proc.stderr
    page = (cwd / "site" / "tf_keras_fast" / "tf_stats.html").read_text(encoding="utf-8")
    header = re.search(r"<thead><tr>(.*?)</tr></thead>", page, re.S).group(1)
    cells = dict((label, attrs) for attrs, label in re.findall(r"<th([^>]*)>([^<]*)</th>", header))
    assert 'class="num"' not in cells["Type"] and 'class="num"' not in cells["Operation"]
    assert 'class="num"' in cells["Rank"]
    # Its rows ship as data, drawn by reportgen.js: the Type column's format draws text cells (`name short`).
    block = re.search(r'<script type="application/json" id="[^"]*-rows">(.*?)</script>', page, re.S)
    formats = json.loads(block.group(1))["formats"] if block else None
    if formats is None:  # rows still written as HTML
        first_row = re.search(r"<tbody>\s*<tr[^>]*>(.*?)</tr>", page, re.S).group(1)
        assert re.findall(r"<td([^>]*)>", first_row)[2] == ' class="name short"'
    else:
        assert formats[2] == "label"
        js = (REPO / "reportgen" / "static" / "reportgen.js").read_text(encoding="utf-8")
        assert 'label: "name short"' in js


def test_the_trace_page_names_the_command_that_serves_the_site(jax_site):
    """The trace page said `python -m http.server` where the single-file report says `reportgen serve`."""
    page = (jax_site / "jax_mesh_cpu" / "trace.html").read_text(encoding="utf-8")
    assert "<code>reportgen serve</code>" in page and "http.server" not in page
