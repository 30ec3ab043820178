"""A build stopped by a signal cleans up after itself: its temporary site, its worker processes.

`stop_on_signals()` turns SIGTERM and SIGHUP (and SIGINT, as Python does) into a `BuildStopped` exception
raised in the main thread, so that the build unwinds like any failure: the temporary site is removed, the
worker processes are ended (`runners.run_pool`), the previous site is left as it was. A build killed
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


class BuildStopped(KeyboardInterrupt):
    """The build was asked to stop by a signal (a KeyboardInterrupt, so that it unwinds as Ctrl-C does)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise BuildStopped in the main thread (elsewhere: no change)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, _frame):
        raise BuildStopped(signum)

    wanted = [s for s in (getattr(signal, "SIGTERM", None), getattr(signal, "SIGHUP", None)) if s is not None]
    previous = {s: signal.signal(s, stop) for s in wanted}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


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
