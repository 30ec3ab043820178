"""The findings engine: what is wrong with a run, what it costs, the evidence, and what to do.

* `model` — `Finding` (id, severity, title, time or memory at stake and how it was estimated, evidence,
  action, links) and `Evidence` (each number with the place the site shows it).
* `facts` — the few per-host facts no tool computes (GPU busy time per step and idle gaps, synchronous and
  pageable copies, synchronisation calls, collective overlap, repeated XLA programs, step windows), taken in
  the host stage.
* `inputs` — `RunInputs`: the tools' results for one run plus the hosts' facts; what every rule reads.
* `steps`, `device`, `gpu`, `memory`, `capture` — the rules, one module per family, each a pure function of
  `RunInputs`.
* `registry` — every rule and the ids it emits; `evaluate(inputs)` orders the findings most costly first.
"""
