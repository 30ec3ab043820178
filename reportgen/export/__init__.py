"""The trace export of an XSpace host: its complete timeline as chunked Chrome trace JSON and a Perfetto file.

`host_export.export_host` is the entry point (called by the trace section's per-host stage). The capture is
mapped to trace processes, threads, events, flows and counters as XProf's trace viewer maps it
(docs/xprof/trace_viewer.md): `layout.py` (planes and lines to processes and threads), `tables.py` (the
per-event columns the writers read: names, stats, roles), `flows.py`, `steps.py`, `stat_select.py`,
`strings.py`; `chunks.py` cuts the timeline into chunk files on step (or time) boundaries and `activity.py`
computes the busy overview the trace page draws. Writers: `json_writer.py` (the compiled `json_kernel.py`
renders events, `gzip_stream.py` deflates them in parallel into one gzip member), `timeline.py` (the trace
page's in-page timeline, whose windows render each event's JSON once for their own files and for the chunks:
`host_export.ChunkFiles`) and `perfetto_writer.py` (with the compiled `perfetto_kernel.py`). Older
profilers' timelines are exported by `reportgen.legacy` with the same chunk records and gzip writer.
"""
