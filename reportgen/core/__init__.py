"""Aggregates shared by every tool: XProf's OpStats layer.

Entry points (see each module's docstring for the rules it follows):

* `op_stats.compute_host_op_stats(capture[, EventTable, …]) -> HostOpStats` — once per host
  (sections get it as `HostContext.op_stats`): host and device op metrics
  databases, the step database, run environment (`environment`, also the
  index pages' device facts), peak capabilities, GPU kernel stats,
  diagnostics. Picklable, so it travels from worker processes.
* `op_stats.combine_op_stats([HostOpStats, …]) -> RunOpStats` — hosts merged
  as XProf merges them (step intersection, global core ids host×1000+core).
  `op_stats.drop_incomplete_steps` applies XProf 2.24.2's overview rule first.
* `step_analysis.analyze_steps(step_db, hardware_type, host_db, core_details)`
  — XProf's input-pipeline analysis: per-step category times (generic, or
  TPU via `tpu_step_details`), summaries, the input-bound classification and
  statements, and the host-side input ops (`input_ops.input_op_analysis` on
  the host DB) — for the overview, input pipeline and pod viewer.
* `tf_data.tf_data_stats(EventTable, host)` + `bottleneck_analysis` — the
  tf.data bottleneck analysis (`HostContext.events` is the shared table).
* `op_metrics.OpMetricsDb`, `framework_op_db`, `combine_dbs` — op tables
  (DataFrames keyed by hlo_module_id and name, with an IDLE row).
* `kernel_stats.kernel_reports`, `kernel_time_by_op` — the kernel stats DB
  and its per-op view (TensorCore use of framework ops).
* `device_op_details.device_op_details(capture, device_db, is_tpu)` — per host
  (`HostContext.device_op_details`): what the op tools read beyond the device
  op DB (normalized time, memory traffic by memory space, source, HLO text,
  fusion contents via `hlo_ops`/`hlo_text`); `hlo_op_records` joins it to the
  DB. From those records: `op_profile.build_op_profile` (the op tree),
  `hlo_stats.hlo_stats_table`, `roofline.roofline_model`; from the step DB:
  `pod_stats.pod_stats` (the pod viewer).

Lower layers, for tools that need more than OpStats. Each is built once per
host and shared: sections get them from `HostContext` (`events`, `grouping`,
`hlo_modules`).

* `events.EventTable` — per-event columns and stat lookup (`int_stat`,
  `str_stat`, `double_stat`; XProf's GetStat by default, `last=True` for
  converters that walk every stat);
* `grouping.group_events(table) -> Grouping` — the step group of every event;
* `step_events` (typed step spans and markers), `nesting` (the compiled
  per-line kernels), `tf_op` (framework op names), `model` (training or
  inference);
* HLO modules come from `reportgen.loaders.hlo.hlo_modules` (instructions by
  name, their framework op), the schema from `loaders/proto/hlo.proto`.
"""
