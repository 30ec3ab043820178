"""Imported once by the fork server that starts a build's worker processes.

Workers are forked from that server, a fresh single-threaded interpreter,
never from the building process (which may run threads: the trace export,
fsspec's I/O loop, the progress bar), so they inherit no half-held lock. The
server imports the host stage and warms the compiled decoder here, once, so
each worker starts ready.

A worker the server forks while the build is ending its pool (stopped by a
signal, or failing) finds the pool's semaphores already removed and cannot
start: the fork server prints that through `sys.excepthook`, a traceback after
the build's own one-line message. It is not needed and exits quietly instead.

The server exits when the build has ended (its pipe from the build closes). A
normal interpreter exit there tears down numba, pandas and the rest module by
module: measured 2.1-2.7 s after each multi-process build, with the server and
multiprocessing's resource tracker (which waits for it) outliving the build.
It has nothing to flush or join (its workers are not its children in
multiprocessing's sense, and each ends with the build), so it ends at once.
"""

import atexit
import os
import sys
import traceback

from reportgen.pipeline.host_stage import warm_up


def _is_pool_gone(value: BaseException, tb) -> bool:
    """A worker's start failed on rebuilding one of the pool's semaphores, which the build has removed."""
    return isinstance(value, FileNotFoundError) and any(
        frame.f_code.co_name == "__setstate__" and frame.f_code.co_filename.endswith("synchronize.py")
        for frame, _ in traceback.walk_tb(tb))


def _quiet_when_the_pool_is_gone(kind, value, tb, report=sys.excepthook) -> None:
    if not _is_pool_gone(value, tb):
        report(kind, value, tb)


def _end_at_once(server: int = os.getpid()) -> None:
    # Registered last, so run first at exit; only in the server (a forked worker ends through os._exit anyway).
    if os.getpid() == server:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


sys.excepthook = _quiet_when_the_pool_is_gone
warm_up()
atexit.register(_end_at_once)
