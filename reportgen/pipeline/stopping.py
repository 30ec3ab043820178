"""A build stopped by a signal cleans up after itself: its temporary site, its worker processes.

`stop_on_signals()` turns SIGTERM, SIGHUP and SIGINT into a `BuildStopped` exception raised in the main
thread, so that the build unwinds like any failure: the temporary site is removed, the worker processes are
ended (`runners.run_pool`), the previous site is left as it was. Inside `stops_held()` (a host's analyses
while its trace export runs on a second thread) the exception waits for the next `stop_point()`: raised in
the middle of a call into compiled code, it could leave one of numba's process-wide locks held, and the
other thread would wait for that lock forever. A build killed
outright (SIGKILL) cannot clean up: its worker processes end with it (`end_with`, the first thing each
worker does), and the next build into the same folder removes its temporary folders
(`reportgen.output.transaction`).

A worker's parent is multiprocessing's fork server, not the build, and each worker holds the fork server's
"build alive" pipe open (so that it could start processes of its own): when the build dies the fork server
lives on and a worker blocked on sending its result to the dead build waits forever. Hence each worker
watches the build itself (a pidfd on Linux, else its pid once a second) and exits when it ends.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

# The first stop signal received while stops are held (`stops_held`), and how deep those blocks are nested.
_held: int | None = None
_hold_depth = 0


class BuildStopped(KeyboardInterrupt):
    """The build was asked to stop by a signal (a KeyboardInterrupt, so that it unwinds as Ctrl-C does)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM, SIGHUP and SIGINT raise BuildStopped in the main thread (elsewhere: no change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        global _held
        if _hold_depth:
            _held = _held or signum
            return
        raise BuildStopped(signum)

    wanted = [s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None), signal.SIGINT)
              if s is not None]
    previous = {s: signal.signal(s, stop) for s in wanted}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextmanager
def stops_held() -> Iterator[None]:
    """Within the block, a stop signal is kept for the next `stop_point()` instead of raised where the main
    thread happens to be; the block's end is a stop point too."""
    global _hold_depth
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _hold_depth += 1
    try:
        yield
    finally:
        _hold_depth -= 1
    stop_point()


def stop_point() -> None:
    """Raise BuildStopped for a stop signal kept by `stops_held` (a place where unwinding leaves no lock held)."""
    global _held
    if _held is not None and threading.current_thread() is threading.main_thread():
        signum, _held = _held, None
        raise BuildStopped(signum)


def end_with(pid: int) -> None:
    """In a worker process: exit as soon as process `pid` (the build) has ended, however it ended."""
    try:
        handle = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(1)
    except (AttributeError, OSError):  # no pidfd (not Linux 5.3+): look once a second
        handle = None

    def watch() -> None:
        if handle is not None:
            select.select([handle], [], [])  # readable once the process has ended
        else:
            while True:
                time.sleep(1)
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                except PermissionError:
                    pass
        os._exit(1)

    threading.Thread(target=watch, name="reportgen-build-watch", daemon=True).start()
