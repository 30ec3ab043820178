"""What a build says while it works.

On a terminal: one progress bar on stderr that goes through the command's stages
(the hosts, then the pages of each run, then the single file's pages), naming
the work in progress (not the last one done), its clock counting from the
process's start and ticking even while a long step (a first compile, a large
host) runs. Elsewhere, with `-v`: one line per stage, for logs. One-off notes
(the first compile on a machine) are printed above the bar, or as a line.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from reportgen import STARTED_AT

TICK_S = 0.5  # how often the bar's clock is redrawn while nothing advances
SHOWN_IN_PROGRESS = 2  # work in progress named on the bar; more are counted ("+3 more")


# When this command began (reportgen's import, the entry point's first step): the imports and a first build's
# compile count in the command's time.
PROCESS_STARTED = STARTED_AT


def command_seconds() -> float:
    """Seconds since this process started: what a command took, start-up included."""
    return time.time() - PROCESS_STARTED


class BuildProgress:
    def __init__(self, bar: bool = False, log: Callable[[str], None] | None = None,
                 notes: Callable[[str], None] | None = None):
        """`bar`: draw a bar on stderr; `log`: where stage lines go (-v); `notes`: where notes go."""
        self._bar = None
        self._log = log
        self._notes = notes
        self._stop = threading.Event()
        # The work under way, in the order it started: hosts of a pool's workers end in any order.
        self._lock = threading.Lock()
        self._in_progress: list[str] = []
        if bar:
            from tqdm import tqdm

            # Drawn from the first stage on (`delay`: not as an empty bar with its own clock, before it).
            self._bar = tqdm(total=0, file=sys.stderr, leave=False, dynamic_ncols=True, delay=TICK_S,
                             bar_format="{desc} {n_fmt}/{total_fmt} |{bar:30}| {elapsed}{postfix}")
            self._bar.start_t = PROCESS_STARTED  # the clock counts the whole command, not the bar
            threading.Thread(target=self._tick, name="reportgen-progress", daemon=True).start()

    def _tick(self) -> None:
        while not self._stop.wait(TICK_S):
            bar = self._bar
            if bar is not None:
                bar.refresh()

    def note(self, line: str) -> None:
        """A line the user should read once (not a stage), above the bar when there is one."""
        if self._bar is not None:
            self._bar.write(line, file=sys.stderr)
        elif self._notes is not None:
            self._notes(line)

    def stage(self, name: str, total: int, unit: str) -> None:
        """Start a stage of `total` steps (`unit`s)."""
        with self._lock:
            self._in_progress.clear()
            if self._bar is not None:
                # Not tqdm's `reset`, which restarts the bar's clock (and draws it so): the command's goes on.
                self._bar.total, self._bar.n, self._bar.last_print_n = total, 0, 0
                self._bar.set_description_str(name, refresh=False)
                self._bar.unit = unit
                self._bar.set_postfix_str("", refresh=False)
                self._bar.refresh()
        if self._log is not None:
            self._log(f"{name}: {total} {unit}{'s' if total != 1 else ''}")

    def in_progress(self) -> list[str]:
        """The work under way, in the order it started."""
        with self._lock:
            return list(self._in_progress)

    def line(self) -> str:
        """The bar as drawn now ("" without one)."""
        return str(self._bar) if self._bar is not None else ""

    def _show(self, refresh: bool = True) -> None:
        if self._bar is None:
            return
        shown = self._in_progress[:SHOWN_IN_PROGRESS]
        more = len(self._in_progress) - len(shown)
        self._bar.set_postfix_str(", ".join(shown) + (f" +{more} more" if more else ""), refresh=refresh)

    def doing(self, label: str) -> None:
        """What the current stage is busy with besides its steps (a first compile), until a step starts."""
        with self._lock:
            if self._bar is not None and not self._in_progress:
                self._bar.set_postfix_str(label)

    def begin(self, label: str) -> None:
        """A step of the current stage starts (`label` says which); the bar names it until it is done.
        May be called from any thread."""
        with self._lock:
            self._in_progress.append(label)
            self._show()

    def step(self, label: str) -> None:
        """The step `label` of the current stage is done (begun or not)."""
        with self._lock:
            if label in self._in_progress:
                self._in_progress.remove(label)
            if self._bar is not None:
                self._show(refresh=False)
                self._bar.update(1)

    def close(self) -> None:
        self._stop.set()
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.close()
