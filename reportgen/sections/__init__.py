"""Tool pages: one module per tool, turning the numbers of `reportgen.core.tools` into charts, CSVs and
template data (never reading a capture or a loader).

Each section (`base.Section`) has a per-host part (`host_part`, where the capture is decoded), a run-level
`combine`, its summary.json block (`summary`) and its pages (`render`, through `reportgen.output.site.PageWriter`
and `templates/<tool>.html`). `registry.SECTIONS` lists them in page order. Shared drawing: `vega.py` (Altair
to Vega-Lite specs), `charts.py` (the stacked step chart), `busy_chart.py` (busy-% heatmaps); the input
pipeline's charts are in `input_pipeline_charts.py`. Older captures' pages are in `reportgen.legacy`.
"""
