"""Media types, cache policy and publish order of site files."""

from __future__ import annotations

import pytest

from reportgen.output.web_types import IMMUTABLE, REVALIDATE, SHORT, cache_control, content_type, publish_phase


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("index.html", "text/html; charset=utf-8"),
        ("run/tf_stats.html", "text/html; charset=utf-8"),
        ("summary.json", "application/json"),
        ("run/trace/manifest.json", "application/json"),
        ("run/trace/vm/0001.json.gz", "application/gzip"),  # served as the gzip file it is
        ("run/trace/vm/0001.pftrace", "application/octet-stream"),
        ("run/data/tf_stats/framework_op_stats.csv", "text/csv; charset=utf-8"),
        ("run/data/overview/steps.png", "image/png"),
        ("assets/vega-bundle-991525309fce.js", "application/javascript"),
        ("assets/style-456549357971.css", "text/css"),
        ("run/summary.md", "text/markdown; charset=utf-8"),
        ("run/unknown.bin-ish", "application/octet-stream"),
    ],
)
def test_content_type(name, expected):
    assert content_type(name) == expected


def test_cache_control():
    assert cache_control("assets/vega-bundle-991525309fce.js") == IMMUTABLE
    assert cache_control("assets/style-456549357971.css") == IMMUTABLE
    assert cache_control("assets/notes.txt") == SHORT  # no content hash, so it may change
    assert cache_control("index.html") == cache_control("summary.json") == REVALIDATE
    assert cache_control("run/index.html") == SHORT
    assert cache_control("run/data/x/y.csv") == SHORT


def test_publish_phases_put_entry_points_last():
    names = ["summary.json", "index.html", "run/index.html", "run/tf_stats.html", "run/data/t/x.csv",
             "assets/a-0123456789ab.js", "run/trace/vm/0.json.gz"]
    ordered = sorted(names, key=publish_phase)
    assert ordered[-3:] == ["run/index.html", "index.html", "summary.json"]
    assert ordered[-4] == "run/tf_stats.html"
