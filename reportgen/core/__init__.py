"""Aggregates shared by every tool: XProf's OpStats layer.

Entry points (see each module's docstring for the rules it follows):

* `op_stats.compute_host_op_stats(capture) -> HostOpStats` — once per host
  (sections get it as `HostContext.op_stats`): host and device op metrics
  databases, the step database, run environment, peak capabilities,
  diagnostics. Picklable, so it travels from worker processes.
* `op_stats.combine_op_stats([HostOpStats, …]) -> RunOpStats` — hosts merged
  as XProf merges them (step intersection, global core ids host×1000+core).
  `op_stats.drop_incomplete_steps` applies XProf 2.24.2's overview rule first.
* `step_analysis.analyze_steps(step_db, hardware_type, host_db)` — per-step
  category times, summaries and the input-bound classification (overview,
  input pipeline, pod viewer).
* `op_metrics.OpMetricsDb`, `framework_op_db`, `combine_dbs` — op tables
  (DataFrames keyed by hlo_module_id and name, with an IDLE row).

Lower layers, for tools that need more than OpStats: `events.EventTable`
(per-event columns and stat lookup), `grouping.group_events` (step group of
every event), `step_events` (typed step spans and markers), `hlo` (HLO
modules in `/host:metadata`), `nesting` (the compiled per-line kernels).
"""
