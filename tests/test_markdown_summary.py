"""`reportgen summary`: Markdown for a pull-request comment, rendered as a reader would see it."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import markdown
import pytest

from reportgen.cli.main import main
from reportgen.compare import BuiltSite, compare_runs
from reportgen.compare import pr_summary as markdown_summary
from reportgen.compare.pr_summary import build_summary, md_code, md_escape
from tests.builtsite import XSS_LINE, XSS_OP, XSS_RUN
from tests.comparesite import BASELINE, CANDIDATE, PAGE, copy_of_built_site

# What the Markdown itself may produce; anything else would come from capture text.
ALLOWED_TAGS = {"h2", "h3", "p", "strong", "em", "code", "sub", "a", "img", "table", "thead", "tbody", "tr", "th",
                "td"}
HOSTILE = [XSS_RUN, XSS_OP, XSS_LINE, "a|b|c", "*bold* _it_ `tick` ~~gone~~", "[link](http://x)", "![i](x.png)",
           "# heading", "1. item", "<b>b</b> &amp; &lt;", "$x^2$ @octocat :tada:", "back\\slash\\", "line\nbreak"]


class _Rendered(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str, str | None]] = []
        self.text: list[str] = []
        self.comments: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attributes += [(tag, k, v) for k, v in attrs]

    def handle_data(self, data):
        self.text.append(data)

    def handle_comment(self, data):
        self.comments.append(data)


def render(text: str) -> _Rendered:
    html = markdown.markdown(text, extensions=["tables"])
    parsed = _Rendered()
    parsed.feed(html)
    parsed.close()
    return parsed


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    dest = copy_of_built_site(tmp_path_factory.mktemp("summary") / "site")
    assert main(["compare", f"{dest}:{BASELINE}", f"{dest}:{CANDIDATE}", "-q"]) == 0
    return dest


@pytest.mark.parametrize("text", HOSTILE)
def test_capture_text_renders_as_itself(text):
    expected = " ".join(text.split())
    for source in (md_escape(text), md_code(text, None), f"| {md_code(text, None)} | x |\n| --- | --- |\n| y | z |"):
        parsed = render(source)
        assert set(parsed.tags) <= {"p", "code", "table", "thead", "tbody", "tr", "th", "td"}, source
        assert not parsed.attributes and not parsed.comments
        cells = "".join(parsed.text)
        assert expected in cells, source


def test_long_names_keep_their_head_and_tail():
    name = "StatefulPartitionedCall/gradient_tape/model/block_7/conv2d_3/Conv2DBackpropFilter"
    cut = md_escape(name, 40).replace("\\", "")
    assert len(cut) == 40 and cut.startswith("StatefulPart") and cut.endswith("Conv2DBackpropFilter")


def test_comparison_summary(site, tmp_path):
    out = tmp_path / "comment" / "pr.md"
    url = "https://storage.example.com/bucket/site/"
    assert main(["summary", str(site), "--compare", BASELINE, CANDIDATE, "--site-url", url, "-o", str(out)]) == 0
    text = out.read_text(encoding="utf-8")
    assert len(text) < 65_000
    parsed = render(text)
    assert set(parsed.tags) <= ALLOWED_TAGS
    shown = "".join(parsed.text)
    summary = json.loads((site / "summary.json").read_text())["runs"]
    speedup = summary[BASELINE]["overview"]["step_time_ms"]["average"] / \
        summary[CANDIDATE]["overview"]["step_time_ms"]["average"]
    assert f"{speedup:.2f}× faster" in shown and "beyond the runs' own noise" in shown
    assert "Input-bound: HIGHLY → NOT" in shown
    assert "tf.data bottleneck: Iterator::Root::MapAndBatch → Iterator::Root::Prefetch" in shown
    assert "| Step time (average) | 137.82 ms | 24.24 ms | -113.58 ms | -82.4% |" in text.replace("\\", "")
    links = {v for t, k, v in parsed.attributes if t == "a" and k == "href"}
    assert url + PAGE in links and url + "index.html" in links and f"{url}{BASELINE}/index.html" in links
    images = [v for t, k, v in parsed.attributes if t == "img" and k == "src"]
    assert images == ["pr-breakdown.png", "pr-steps.png", "pr-ops.png"]
    for image in images:
        assert (out.parent / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_hostile_names_in_a_summary_stay_text(site):
    site_obj = BuiltSite.open(str(site))
    comparison = compare_runs(site_obj.run(XSS_RUN), site_obj.run(CANDIDATE))
    document = build_summary(site_obj, comparison, with_charts=False)
    parsed = render(document.markdown)
    assert set(parsed.tags) <= ALLOWED_TAGS and not parsed.comments
    assert not [a for a in parsed.attributes if a[1].startswith("on") or a[0] == "img"]
    shown = "".join(parsed.text)
    assert XSS_RUN in shown  # (its capture holds no framework ops: op names are tested above)
    assert "cannot be compared" in shown  # the hostile run has no steps
    assert document.data["charts"] == [] and "![" not in document.markdown


def test_json_format_carries_the_same_figures(site, capsys):
    assert main(["summary", str(site), "--compare", BASELINE, CANDIDATE, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    summary = json.loads((site / "summary.json").read_text())["runs"]
    step = data["comparison"]["step_time_ms"]
    assert step["baseline"] == summary[BASELINE]["overview"]["step_time_ms"]["average"]
    assert step["candidate"] == summary[CANDIDATE]["overview"]["step_time_ms"]["average"]
    assert step["delta"] == step["candidate"] - step["baseline"]
    assert data["runs"][BASELINE]["input_bound"] == "HIGHLY"
    assert data["runs"][BASELINE]["bottleneck_iterator"] == "Iterator::Root::MapAndBatch"
    assert len(data["comparison"]["tf_stats"]["ops"]) == 10
    assert data["charts"] == []  # written only beside an output file


def test_a_comparison_lists_only_its_two_runs(site, capsys):
    """The site holds a third run (the hostile one): a summary of two runs neither lists nor charts it."""
    assert main(["summary", str(site), "--compare", BASELINE, CANDIDATE]) == 0
    text = capsys.readouterr().out
    assert "### Runs (2)" in text and XSS_RUN not in "".join(render(text).text)
    assert main(["summary", str(site), "--compare", BASELINE, CANDIDATE, "--format", "json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["runs"]) == [BASELINE, CANDIDATE]


def test_a_run_without_steps_says_so(site, capsys):
    """As the site index does: no "0 | 0.00 ms ± 0.00 ms" for a run whose capture marks no steps."""
    assert main(["summary", str(site)]) == 0
    text = capsys.readouterr().out
    row = next(line for line in text.splitlines() if line.startswith("|") and "no steps" in line)
    assert "0.00 ms" not in row and row.split("|")[2].strip() == "–", row
    assert "0.00 ms ± 0.00 ms" not in text
    assert main(["summary", str(site), "--format", "json"]) == 0
    stepless = [h for h in json.loads(capsys.readouterr().out)["runs"].values() if h["step_time_ms"] is None]
    assert stepless and all(h["step_time_sd_ms"] is None for h in stepless)


def test_summary_without_comparison_goes_to_stdout(site, capsys):
    assert main(["summary", str(site)]) == 0
    text = capsys.readouterr().out
    parsed = render(text)
    assert set(parsed.tags) <= ALLOWED_TAGS
    shown = "".join(parsed.text)
    assert BASELINE in shown and CANDIDATE in shown and "137.82 ms ± 11.87 ms" in shown
    assert "![" not in text


def test_a_long_summary_is_cut_to_fit(site, monkeypatch):
    site_obj = BuiltSite.open(str(site))
    comparison = compare_runs(site_obj.run(BASELINE), site_obj.run(CANDIDATE))
    full = build_summary(site_obj, comparison, with_charts=False).markdown
    monkeypatch.setattr(markdown_summary, "MAX_CHARS", len(full) - 200)
    shorter = build_summary(site_obj, comparison, with_charts=False).markdown
    assert len(shorter) <= len(full) - 200
    assert set(render(shorter).tags) <= ALLOWED_TAGS
