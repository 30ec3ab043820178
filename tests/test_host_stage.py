"""The host stage runs the sections that read the capture alone on a thread beside the others when the
capture is large, in sequence when it is small, and its outcome is the one the sections give in sequence:
parts in section order, the first error."""

from __future__ import annotations

import threading
import time

import pytest

from reportgen.errors import CaptureError
from reportgen.loaders.logdir import HostFile
from reportgen.pipeline import host_stage
from reportgen.pipeline.host_stage import HostTask, process_host
from reportgen.sections.base import Section
from reportgen.sections.registry import SECTIONS
from tests.logdirs import FAST


class Beside(Section):
    """Reads the capture only; records the thread it ran on, and when it finished."""

    slug = "beside"
    capture_only = True

    def __init__(self, fail: bool = False, seconds: float = 0.0):
        self.fail, self.seconds = fail, seconds
        self.thread: str | None = None
        self.finished: float | None = None

    def host_part(self, host):
        self.thread = threading.current_thread().name
        time.sleep(self.seconds)
        self.finished = time.perf_counter()
        if self.fail:
            raise CaptureError(host.capture.path, "the capture-only section failed")
        return {"events": host.capture.event_count}


class InLine(Section):
    slug = "inline"

    def __init__(self, fail: bool = False, slug: str = "inline"):
        self.fail, self.slug = fail, slug
        self.thread: str | None = None
        self.finished: float | None = None

    def host_part(self, host):
        self.thread = threading.current_thread().name
        self.finished = time.perf_counter()
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
    beside, inline = Beside(seconds=0.2), InLine()
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
    beside = Beside(fail=True, seconds=0.5)
    outcome = _run(monkeypatch, tmp_path, [InLine(fail=True), beside])
    returned = time.perf_counter()
    assert outcome.error == "run/vm.xplane.pb: the in-line section failed"
    assert beside.finished is not None and beside.finished <= returned


def test_the_sections_after_the_threads_run_while_it_does(monkeypatch, tmp_path):
    beside, after = Beside(seconds=0.5), InLine(slug="after")
    outcome = _run(monkeypatch, tmp_path, [InLine(), beside, after])
    assert outcome.error is None and list(outcome.parts) == ["inline", "beside", "after"]
    assert after.finished < beside.finished  # the findings do not wait for the trace export


def test_the_threads_error_wins_over_a_later_sections(monkeypatch, tmp_path):
    outcome = _run(monkeypatch, tmp_path, [InLine(), Beside(fail=True, seconds=0.2), InLine(fail=True, slug="after")])
    assert outcome.error == "run/vm.xplane.pb: the capture-only section failed"
    assert list(outcome.parts) == ["inline"]  # as in sequence: the parts before the error
    first = InLine(fail=True, slug="first")
    later = InLine(slug="later")
    outcome = _run(monkeypatch, tmp_path, [first, Beside(seconds=0.2), later])
    assert outcome.error == "run/vm.xplane.pb: the first section failed"
    assert later.finished is None  # nothing after the first error runs


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
