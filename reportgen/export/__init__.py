"""Trace export: a host's complete timeline as Chrome trace JSON chunks and a Perfetto file.

`export.export_host` is the entry point; the mapping from capture to trace
events follows XProf's trace viewer (docs/xprof/trace_viewer.md).
"""
