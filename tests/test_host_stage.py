"""The host stage runs the sections that read the capture alone on a thread beside the others when the
capture is large, in sequence when it is small, and its outcome is the one the sections give in sequence:
parts in section order, the first error."""

from __future__ import annotations

import threading

import pytest

from reportgen.errors import CaptureError
from reportgen.loaders.logdir import HostFile
from reportgen.pipeline import host_stage
from reportgen.pipeline.host_stage import HostTask, process_host
from reportgen.sections.base import Section
from reportgen.sections.registry import SECTIONS
from tests.logdirs import FAST

# A guard against a deadlock only: a section that waits on a gate nobody opens (the stage ran the sections
# in an order the test rules out) gives up after this long, and the test fails on what it then saw.
GATE_GUARD_S = 30.0


class Beside(Section):
    """Reads the capture only; records the thread it ran on and whether it has finished. With a `gate`,
    it first waits for another section to open it (the order of the two is then set by events)."""

    slug = "beside"
    capture_only = True

    def __init__(self, fail: bool = False, gate: threading.Event | None = None):
        self.fail, self.gate = fail, gate
        self.thread: str | None = None
        self.released: bool | None = None
        self.finished = threading.Event()

    def host_part(self, host):
        self.thread = threading.current_thread().name
        if self.gate is not None:
            self.released = self.gate.wait(GATE_GUARD_S)
        self.finished.set()
        if self.fail:
            raise CaptureError(host.capture.path, "the capture-only section failed")
        return {"events": host.capture.event_count}


class InLine(Section):
    """Runs on the building thread; records whether it ran, and whether `watch` (a capture-only
    section) had finished when it did; opens `opens` (a gate `watch` waits on) on its way out."""

    slug = "inline"

    def __init__(self, fail: bool = False, slug: str = "inline", opens: threading.Event | None = None,
                 watch: Beside | None = None):
        self.fail, self.slug, self.opens, self.watch = fail, slug, opens, watch
        self.thread: str | None = None
        self.ran = False
        self.watched_finished: bool | None = None

    def host_part(self, host):
        self.thread = threading.current_thread().name
        self.ran = True
        if self.watch is not None:
            self.watched_finished = self.watch.finished.is_set()
        if self.opens is not None:
            self.opens.set()
        if self.fail:
            name = "in-line" if self.slug == "inline" else self.slug
            raise CaptureError(host.capture.path, f"the {name} section failed")
        return {"hosts": 1}


def _run(monkeypatch, tmp_path, sections, min_events: int = 0):
    """The host stage of the sample's host (7,041 events) with `sections`; a capture-only section gets
    the thread when the capture has at least `min_events` events."""
    monkeypatch.setattr(host_stage, "SECTIONS", sections)
    monkeypatch.setattr(host_stage._CaptureOnly, "MIN_EVENTS", min_events)
    task = HostTask(index=0, run="run", host=HostFile(host="vm", path=str(FAST), size=FAST.stat().st_size))
    return process_host(task, str(tmp_path / "out"))


def test_the_capture_only_section_runs_on_its_own_thread_and_its_part_keeps_its_place(monkeypatch, tmp_path):
    beside, inline = Beside(), InLine()
    outcome = _run(monkeypatch, tmp_path, [inline, beside, InLine()])
    assert outcome.error is None
    assert list(outcome.parts) == ["inline", "beside"]
    assert outcome.parts["beside"]["events"] > 1000
    assert beside.thread != threading.current_thread().name and inline.thread == threading.current_thread().name
    assert "host.beside" in outcome.timings and "host.beside (waited for)" in outcome.timings


def test_its_error_is_the_hosts_error(monkeypatch, tmp_path):
    outcome = _run(monkeypatch, tmp_path, [InLine(), Beside(fail=True)])
    assert outcome.error == "run/vm.xplane.pb: the capture-only section failed"
    assert "beside" not in outcome.parts


def test_an_earlier_sections_error_wins_and_the_thread_is_waited_for(monkeypatch, tmp_path):
    # The thread's section is held until the stage starts waiting for the thread (`close`): it is
    # certainly still running then, and must have finished when the stage returns.
    gate = threading.Event()
    close = host_stage._CaptureOnly.close

    def close_after_opening(self, stopped: bool = False) -> None:
        gate.set()
        close(self, stopped)

    monkeypatch.setattr(host_stage._CaptureOnly, "close", close_after_opening)
    beside = Beside(fail=True, gate=gate)
    outcome = _run(monkeypatch, tmp_path, [InLine(fail=True), beside])
    finished_on_return = beside.finished.is_set()
    assert outcome.error == "run/vm.xplane.pb: the in-line section failed"
    assert beside.released and finished_on_return


def test_the_sections_after_the_threads_run_while_it_does(monkeypatch, tmp_path):
    # The thread's section waits for the one after it to open its gate: that happens only if the
    # findings (the sections after the trace export) do not wait for the export.
    gate = threading.Event()
    beside = Beside(gate=gate)
    after = InLine(slug="after", opens=gate, watch=beside)
    outcome = _run(monkeypatch, tmp_path, [InLine(), beside, after])
    assert outcome.error is None and list(outcome.parts) == ["inline", "beside", "after"]
    assert after.watched_finished is False and beside.released


def test_the_threads_error_wins_over_a_later_sections(monkeypatch, tmp_path):
    # The later section fails first (it opens the thread's section's gate on its way out), and the
    # outcome is still the thread's section's error, as in sequence.
    gate = threading.Event()
    beside = Beside(fail=True, gate=gate)
    outcome = _run(monkeypatch, tmp_path, [InLine(), beside, InLine(fail=True, slug="after", opens=gate)])
    assert outcome.error == "run/vm.xplane.pb: the capture-only section failed"
    assert list(outcome.parts) == ["inline"]  # as in sequence: the parts before the error
    assert beside.released
    first = InLine(fail=True, slug="first")
    later = InLine(slug="later")
    outcome = _run(monkeypatch, tmp_path, [first, Beside(), later])
    assert outcome.error == "run/vm.xplane.pb: the first section failed"
    assert not later.ran  # nothing after the first error runs


def test_a_small_capture_runs_them_in_sequence_with_the_same_outcome(monkeypatch, tmp_path):
    beside, inline = Beside(), InLine()
    outcome = _run(monkeypatch, tmp_path, [inline, beside, InLine()], min_events=10**9)
    assert outcome.error is None and list(outcome.parts) == ["inline", "beside"]
    assert beside.thread == inline.thread == threading.current_thread().name
    assert "host.beside" in outcome.timings and "host.beside (waited for)" not in outcome.timings
    failed = _run(monkeypatch, tmp_path, [InLine(), Beside(fail=True)], min_events=10**9)
    assert failed.error == "run/vm.xplane.pb: the capture-only section failed"


@pytest.mark.parametrize("slug", ["trace"])
def test_the_trace_export_is_the_capture_only_section(slug):
    assert [s.slug for s in SECTIONS if s.capture_only] == [slug]
