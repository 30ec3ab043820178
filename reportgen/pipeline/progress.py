"""What a build says while it works.

On a terminal: one progress bar on stderr that goes through the build's stages
(the hosts, then the pages of each run), its clock ticking even while a long
step (a first compile, a large host) runs. Elsewhere, with `-v`: one line per
stage, for logs. One-off notes (the first compile on a machine) are printed
above the bar, or as a line.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable

TICK_S = 0.5  # how often the bar's clock is redrawn while nothing advances


class BuildProgress:
    def __init__(self, bar: bool = False, log: Callable[[str], None] | None = None,
                 notes: Callable[[str], None] | None = None):
        """`bar`: draw a bar on stderr; `log`: where stage lines go (-v); `notes`: where notes go."""
        self._bar = None
        self._log = log
        self._notes = notes
        self._stop = threading.Event()
        if bar:
            from tqdm import tqdm

            self._bar = tqdm(total=0, file=sys.stderr, leave=False, dynamic_ncols=True,
                             bar_format="{desc} {n_fmt}/{total_fmt} |{bar:30}| {elapsed}{postfix}")
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
        if self._bar is not None:
            self._bar.reset(total=total)
            self._bar.set_description_str(name, refresh=False)
            self._bar.unit = unit
            self._bar.refresh()
        if self._log is not None:
            self._log(f"{name}: {total} {unit}{'s' if total != 1 else ''}")

    def doing(self, label: str) -> None:
        """What the current stage is busy with, until the next step."""
        if self._bar is not None:
            self._bar.set_postfix_str(label)

    def step(self, label: str) -> None:
        """One step of the current stage is done; `label` says which."""
        if self._bar is not None:
            self._bar.set_postfix_str(label, refresh=False)
            self._bar.update(1)

    def close(self) -> None:
        self._stop.set()
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.close()
