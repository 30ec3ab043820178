"""XProf's OpStats layer: what every tool reads of a host, and of a run.

`op_metrics.OpMetricsDb` is the op table; `host_db` and `device_db` build the host and device databases;
`op_stats.compute_host_op_stats` is one host's result (`HostContext.op_stats`) and `combine_op_stats` a run's;
`views.run_views` gives each host alone and all hosts combined. Beside them: `perf_env` (peak FLOP rate and
bandwidths), `training` (training or inference), `kernel_reports` (the GPU kernel stats DB), and, for the
device op tools, `device_details` (per-op details beyond the DB), `device_records` (the DB joined with them)
and `device_run` (a run's device hosts combined).
"""
