"""Captures of older profilers, from their files to their pages: everything "legacy" lives here.

Three generations are read (README: "Older captures build too"): TF 2.2-2.3 per-tool result files (protobuf)
and Cloud TPU `capture_tpu_profile` files (JSON DataTables, memory viewer HloProto JSON) in `tool_files.py`;
timelines (`<host>.trace.json.gz`, Cloud TPU `.trace`, `tf.train.ProfilerHook` `timeline-<step>.json`) in
`chrome_trace.py` (with the compiled `.trace` wire walker of `trace_proto.py`), their chunked Chrome JSON in
`timeline_chunks.py` and the host's trace export in `trace_export.py`; the ProfilerHook op table in
`step_stats.py`. `host_stage.py` is the per-host stage of such a host (no XSpace: its files are decoded and
handed to the sections as parts), and `sections.py` the pages that show what the files hold, with the
XSpace runs' summary.json keys. Older hosts share the XSpace pages where the data allows (the memory viewer,
the trace page).
"""
