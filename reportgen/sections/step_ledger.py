"""The step ledger: each step's wall time given to exactly one cause (`core.steps.ledger`), per host and for the run.

It has no page of its own: the run's summary page draws it ("Where the step goes"), the findings take their time
at stake from it, and summary.json carries it as the run's `step_ledger` block. Its steps are those the overview
analyses (XProf's), or, where XProf finds none, steps inferred from the capture and marked as such.
"""

from __future__ import annotations

import pandas as pd

from reportgen.core.steps.ledger import (
    LEDGER_KEYS,
    LEDGER_LABELS,
    HostLedger,
    RunLedger,
    host_ledger,
    inferred_steps,
    run_ledger,
    step_windows,
)
from reportgen.sections.base import HostContext, RunContext, Section
from reportgen.summary_blocks import LedgerEvent, LedgerOneOff, LedgerStartup, LedgerSteady, LedgerStep, StepLedgerBlock

CSV_PATH = "data/step_ledger/steps.csv"
PRECEDENCE = " > ".join(LEDGER_KEYS)
MAX_STEPS_LISTED = 1000  # per-step rows in summary.json (the CSV has every step)


def _kept_steps(run: RunContext) -> dict[str, set[str]] | None:
    """Per host, the step names the overview's step analysis keeps (None: the overview has no steps)."""
    views = list(((run.sections.get("overview") or {}).get("views") or {}).items())
    if not views or not any(len(v.steps) for _, v in views):
        return None
    if len(views) == 1:
        return {host: set(views[0][1].steps["step_name"].astype(str)) for host in run.host_names}
    return {label: set(view.steps["step_name"].astype(str)) for label, view in views[1:]}


def ledger_block(ledger: RunLedger) -> StepLedgerBlock:
    """The run's `step_ledger` block of summary.json."""
    n = ledger.step_count
    listed = ledger.steps[:MAX_STEPS_LISTED]
    return StepLedgerBlock(
        steps=n,
        inferred_from=ledger.inferred_from,
        has_device=ledger.has_device,
        precedence=tuple(LEDGER_KEYS),
        labels=dict(LEDGER_LABELS),
        step_time_ms=ledger.step_ms,
        average_ms={k: ledger.average_ms(k) for k in LEDGER_KEYS},
        percent={k: ledger.percent(k) for k in LEDGER_KEYS},
        top={k: tuple(LedgerEvent(name=name, events=count, ms_per_step=ms) for name, count, ms in ledger.top(k))
             for k in LEDGER_KEYS if ledger.top(k)},
        per_step=tuple(LedgerStep(host=host, step=s.name, begin_ps=s.begin_ps, duration_ms=s.duration_ps / 1e9,
                                  ms={k: s.ps[k] / 1e9 for k in LEDGER_KEYS}) for host, s in listed),
        per_step_left_out=max(0, n - len(listed)),
        steps_not_analysed=ledger.not_analysed,
        gpu_private_threads=ledger.gpu_private_threads,
        python_generator=ledger.python_generator,
        distributed_iterator=ledger.distributed_iterator,
        tf_data_threads_busy=ledger.producer_threads_busy,
        input_python_percent=ledger.input_python_percent,
        # The steps above, start-up left out: their spread (steps.variance reads it).
        steady=LedgerSteady(**ledger.steady_stats()),
        # A host's first step set aside as start-up: its time once, by cause, and the one-off events in it.
        startup=tuple(LedgerStartup(host=h.host, step=s.name, begin_ps=s.begin_ps, duration_ms=s.duration_ps / 1e9,
                                    ms={k: s.ps[k] / 1e9 for k in LEDGER_KEYS},
                                    one_off=tuple(LedgerOneOff(name=name, ms=ps / 1e9) for name, ps in h.one_off))
                      for h, s in ledger.startup),
    )


class StepLedgerSection(Section):
    slug = "step_ledger"
    # 2: a dispatch's wait for the device is synchronisation, a compiling dispatch is compilation, PJRT's H2D
    # copies are input, and the start-up step outlasts every later one.
    part_version = 2
    title = "Where the step goes"
    listed = False

    def host_part(self, host: HostContext) -> HostLedger:
        steps = step_windows(host.op_stats.step_db)
        inferred = ""
        if not steps:
            steps, inferred = inferred_steps(host.events)
        return host_ledger(host.host, host.events, steps, inferred)

    def combine(self, run: RunContext, parts: dict[str, HostLedger]) -> RunLedger | None:
        hosts = [parts[h] for h in run.host_names if h in parts]
        if not hosts:
            return None
        ledger = run_ledger(hosts, _kept_steps(run))
        return ledger if ledger.step_count else None

    def summary(self, data: RunLedger | None) -> StepLedgerBlock | None:
        return ledger_block(data) if data is not None else None

    def render(self, data: RunLedger | None, page) -> None:
        if data is None:
            return
        rows = [{"Host": host, "Step": s.name, "Begin (ps)": s.begin_ps, "Step time (ms)": s.duration_ps / 1e9,
                 **{f"{LEDGER_LABELS[k]} (ms)": s.ps[k] / 1e9 for k in LEDGER_KEYS}} for host, s in data.steps]
        page.write_csv(CSV_PATH, pd.DataFrame(rows))


__all__ = ["CSV_PATH", "StepLedgerSection", "ledger_block"]
