"""Overview page: XProf's overview_page (numbers from `reportgen.core.tools.overview`).

Performance summary (step time, its breakdown, idle, precision, eager
share), the step-time graph, the top device ops (host ops without a
device), the run environment and the recommendation, for each host and,
with several hosts, for all hosts combined.
"""

from __future__ import annotations

import pandas as pd

from reportgen.core.input.advice import in_our_words
from reportgen.core.ops.op_stats import HostOpStats
from reportgen.core.ops.views import ALL_HOSTS, host_views_note
from reportgen.core.pages import OVERVIEW_STEPS_CSV, step_anchor
from reportgen.core.tools.overview import OverviewView, overview_summary, overview_views
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.sections.charts import step_chart
from reportgen.summary_blocks import OverviewBlock


class OverviewSection(Section):
    slug = "overview"
    title = "Overview"

    def host_part(self, host: HostContext) -> HostOpStats:
        return host.op_stats

    def combine(self, run: RunContext, parts: dict[str, HostOpStats]) -> dict:
        return {"run": run.name, "views": overview_views(parts, run.host_names),
                "views_note": host_views_note(len(parts))}

    def summary(self, data: dict) -> OverviewBlock:
        views = list(data["views"].items())
        per_host = {label: view for label, view in views[1:]} if len(views) > 1 else None
        return overview_summary(views[0][1], per_host)

    def render(self, data: dict, page) -> None:
        views: dict[str, OverviewView] = data["views"]
        frames = []
        rendered = []
        for label, view in views.items():
            frame = view.steps.rename(columns={"step_name": "Step number", "step_num": "Step id",
                                               "step_time_ms": "Step time (ms)"})
            frame = frame.rename(columns={k: f"{v} (ms)" for k, v in view.category_labels.items()})
            frames.append(frame.assign(Host=label)[["Host", *frame.columns]])
            r = view.recommendation
            # Row ids on the first view only: it is the run's (and the CSV's first rows).
            rows = [{**row, "anchor": "" if rendered else step_anchor(row["step_num"])}
                    for row in view.steps.to_dict("records")]
            rendered.append({"view": view, "chart": step_chart(view.steps, view.category_labels),
                             "step_rows": rows,
                             # XProf's advice, its references to XProf's own page layout in this site's words
                             "next_step": in_our_words(r["next_step"], on_input_page=False),
                             "host_tips": [(slug, in_our_words(text, on_input_page=False))
                                           for slug, text in r["host_tips"]]})
        csv = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        page.write_csv(OVERVIEW_STEPS_CSV, csv)
        page.write_html("overview.html", "overview.html", views=rendered, labels=list(views),
                        all_hosts=ALL_HOSTS, tool_titles={item["href"].removesuffix(".html"): item["title"]
                                                          for item in page.nav},
                        views_note=data.get("views_note", ""))


