"""The building process's long-lived objects, kept out of Python's full garbage collections.

A build keeps every host's result (its frames and tables, a few hundred objects per host) until its run's
pages are written, and each run's combined tables until then too. Python's cyclic collector runs a full
collection whenever the objects that survived the younger collections have grown by a quarter since the
last one, and a full collection walks every object the collector tracks. So the more hosts a build
keeps, the longer each full collection, and they keep coming as the results accumulate: at 10,000 tiny
hosts, 18 full collections took 14.8 s of the build's 152 s (up to 2 s each, landing in whichever stage
was running), and at 3,000 hosts the eleven full collections freed 0-217 objects each.

`LongLived` moves what the build keeps into the collector's permanent generation (`gc.freeze`), which
collections skip: after a young collection (so that reference cycles that are garbage at that moment are
collected, not kept), once every `EVERY` hosts and after each run's combine. `release` at the end of
the build (the end of its `with` block) gives them back to the collector (`gc.unfreeze`), so that a
program calling the build keeps a normal collector afterwards.
"""

from __future__ import annotations

import gc

# Hosts between two freezes: a young collection costs ≈ 1-3 ms, a host's result ≈ 15 ms of work.
EVERY = 64


class LongLived:
    """Freezes the building process's heap as results accumulate (see the module notes)."""

    def __init__(self, every: int = EVERY) -> None:
        self.every = every
        self._kept = 0
        self._frozen = False

    def __enter__(self) -> LongLived:
        return self

    def __exit__(self, *_exc) -> None:
        self.release()

    def kept(self) -> None:
        """One more host's result is kept: every `every` of them, freeze what is alive."""
        self._kept += 1
        if self._kept % self.every == 0:
            self.freeze()

    def freeze(self) -> None:
        """Collect the young generations' garbage, then move every live object out of later collections."""
        if not gc.isenabled():  # a caller that manages the collector itself
            return
        gc.collect(1)
        gc.freeze()
        self._frozen = True

    def release(self) -> None:
        """Hand the frozen objects back to the collector (at the end of the build, whatever its outcome)."""
        if self._frozen:
            gc.unfreeze()
            self._frozen = False
