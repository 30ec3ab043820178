"""One converter per tool, as XProf's `op_stats_to_<tool>`: each module computes every number its page and
summary.json block show, from the host's `HostContext` (per host) and the hosts' parts (per run).

A new tool: its numbers here (`<tool>.py`), its page in `reportgen/sections/<tool>.py` and
`templates/<tool>.html`, and its section in `reportgen/sections/registry.py`.
"""
