"""Every number reportgen shows, computed the way XProf computes it, from plain data only.

Core reads what the loaders made (`reportgen.capture.HostCapture` columns, `core.hlo.model` dataclasses)
and never imports protobuf or the loaders. `host.HostContext` is one decoded host while it is in memory:
its shared analyses (event table, step grouping, OpStats, device op details) are computed once, on first use.

* `events/` — the capture as per-event columns (`table.EventTable`), XSpace names (`schema`), framework op
  names (`tf_op`), the compiled per-line kernels (`nesting`) and the step grouping of every event (`grouping`).
* `steps/` — step events and the step database (`step_db`; TPU steps in `tpu_steps`, `tpu_details`).
* `ops/` — XProf's OpStats layer: op metrics databases (`op_metrics`, `host_db`, `device_db`), the host's
  result and the run's combination (`op_stats`, per-host and combined `views`), peak capabilities
  (`perf_env`), training or inference (`training`), the GPU kernel stats DB (`kernel_reports`) and what the
  device op tools share (`device_details`, `device_records`, `device_run`).
* `input/` — input-pipeline building blocks: host-side input ops, tf.data statistics, their graph and advice.
* `hlo/` — HLO modules as dataclasses (`model`), printed as XLA prints them (`text`, `shapes`) and described
  for the op tools (`ops`).
* `tools/` — one converter per tool, as XProf's `op_stats_to_<tool>`: `overview`, `input_pipeline`,
  `tf_stats`, `kernel_stats`, `op_profile`, `hlo_stats`, `roofline`, `memory_profile`, `memory_viewer`,
  `pod_viewer`, `inventory`. Each computes every number its page and its summary.json block show; the
  sections only turn them into charts, CSVs and template data.
"""
