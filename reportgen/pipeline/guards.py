"""What a build keeps up around its stages, each as one context manager: `pipeline/build.py` composes them once.

- `site_swap`: the temporary site is removed, and the previous site left as it was, when the build fails or
  is stopped (`output/transaction.py` does the swap itself on `commit`).
- `Staging`: each host's own output folder inside the temporary site, moved into the site in host order
  (`place`); the rest is removed by a child process while the pages render, waited for before the commit
  (`finish`) or, when the build fails, before the temporary site goes.
- `kernel_warm_up`: on a machine's first build, the kernels compile ahead in child processes while hosts are
  looked up and decoded (`reportgen.kernels`); said once when it starts and, with the time it took, when it
  has ended.
- The heap kept out of full garbage collections is `heap.LongLived`, a context manager of its own.

Stop signals are turned into `stopping.BuildStopped` by `stopping.stop_on_signals`, which the `build` command
enters before it imports the build (a stop while it imports must be one line too): within the build they
unwind through these managers like any failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from reportgen.output.transaction import SiteTransaction
from reportgen.pipeline.progress import BuildProgress

# What compiling the kernels adds to every build when they cannot be cached (all compiled in the building
# process, measured on 2 cores: 18.5-19.3 s against 2.9-3.6 s). A first build's compile is measured as it
# runs instead (`kernels.compile_seconds`), and said when it ends.
IN_MEMORY_COMPILE_S = 16

STAGING_FOLDER = ".staging"  # inside the temporary site: each host's own output folder
# The staging folder's removal, in a child process of its own (`Staging.place`).
REMOVE_FOLDER = "import shutil, sys; shutil.rmtree(sys.argv[1], ignore_errors=True)"
# How long the commit waits for that child before ending it and removing the rest itself (a program
# that embeds Python may name itself as `sys.executable` and not run the command at all).
REMOVAL_WAIT_S = 30.0


@contextmanager
def site_swap(transaction: SiteTransaction) -> Iterator[Path]:
    """The temporary site's folder; removed (the previous site untouched) when the block raises."""
    try:
        yield transaction.tmp
    except BaseException:
        transaction.abort()
        raise


class Staging:
    """The hosts' own output folders inside the temporary site, and their removal once moved into it."""

    def __init__(self, site_dir: Path) -> None:
        self.site_dir = site_dir
        self.path = site_dir / STAGING_FOLDER
        self._remover: subprocess.Popen | None = None

    def __enter__(self) -> Staging:
        return self

    def __exit__(self, kind, _value, _tb) -> None:
        if kind is not None:  # the temporary site goes as a whole once the child is done
            _wait_or_end(self._remover)

    def out_dir(self, index: int) -> Path:
        """Host `index`'s output folder, laid out like the site."""
        return self.path / f"{index:06d}"

    def place(self, placed: list[int]) -> None:
        """Move the hosts' files (`placed`: their indexes, in host order) into the site, and start removing
        the rest in a child process.

        What is left are the hosts' emptied folders (six a host) and failed hosts' files: with a thousand
        hosts their removal took ≈ 0.9 s of the build, mostly waiting on the disk, which the pages'
        rendering now fills. A child process, not a thread: a thread needs the GIL between two folders,
        and the rendering holds it (measured: a thread removed almost nothing while the pages rendered)."""
        for index in placed:
            _move_tree(self.out_dir(index), self.site_dir)
        if sys.executable:  # None or "" in an embedding program that cannot start another Python
            try:
                self._remover = subprocess.Popen(
                    [sys.executable, "-I", "-S", "-c", REMOVE_FOLDER, str(self.path)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                return
            except (OSError, ValueError):
                pass
        shutil.rmtree(self.path, ignore_errors=True)

    def finish(self) -> None:
        """Wait for the staging folder's removal; what the child could not remove is removed here."""
        _wait_or_end(self._remover)
        self._remover = None
        shutil.rmtree(self.path, ignore_errors=True)


def _wait_or_end(remover: subprocess.Popen | None) -> None:
    if remover is None:
        return
    try:
        remover.wait(timeout=REMOVAL_WAIT_S)
    except subprocess.TimeoutExpired:
        remover.kill()
        remover.wait()


def _move_tree(source: Path, target: Path) -> None:
    """Merge the folder `source` into the folder `target`: an entry `target` lacks is moved whole
    (a host's own folders, one rename each instead of a folder made and one rename per file), a
    folder both have is merged, a file both have is replaced. With a thousand hosts, folder and file
    operations were a good part of the host stage's time on a slow disk."""
    with os.scandir(source) as entries:
        for entry in entries:
            there = target / entry.name
            if entry.is_dir(follow_symlinks=False) and there.is_dir():
                _move_tree(Path(entry.path), there)
            else:
                os.replace(entry.path, there)


class KernelWarmUp:
    """The kernels compiling ahead for this build: `children` (processes) count among its jobs while they run."""

    def __init__(self, children: list[subprocess.Popen], cold: bool) -> None:
        self.children = children
        self.cold = cold  # this build compiles them (a machine's first build, or no kernel cache)


@contextmanager
def kernel_warm_up(all_legacy: bool, trace_format: str, progress: BuildProgress) -> Iterator[KernelWarmUp]:
    """On a machine's first build: say that the kernels compile, once, and start compiling the analyses'
    kernels and the trace writer ahead in child processes (see `reportgen.kernels`). When the build has
    succeeded, wait for them and say how long they took; a failed build does not wait (what they compile
    is kept for the next build)."""
    from reportgen import kernels

    if kernels.CACHE_PROBLEM is not None:
        progress.note(f"reportgen: warning: compiled kernels cannot be kept ({kernels.CACHE_PROBLEM}): they are "
                      f"compiled in memory, about {IN_MEMORY_COMPILE_S} s on every build; set NUMBA_CACHE_DIR to a "
                      "writable folder to keep them")
        warm = KernelWarmUp([], True)
    elif all_legacy or not kernels.cold_modules():
        warm = KernelWarmUp(kernels.started_children(), False)
    else:
        # Unless `reportgen build` has started them already, before importing what builds (see cli/build.py).
        kernels.start_precompile(kernels.groups_for(trace_format))
        progress.note("reportgen: first build on this machine: compiling its kernels (capture decoder, analyses, "
                      f"trace writer), once (kept in {kernels.CACHE_DIR})")
        warm = KernelWarmUp(kernels.started_children(), True)
    if warm.cold:
        progress.doing("compiling kernels (once)")
    yield warm
    for child in warm.children:  # done by now, unless no host got as far as the analyses or the trace export
        child.wait()
    seconds = kernels.compile_seconds() if warm.cold else None
    if seconds is not None:
        progress.note(f"reportgen: kernels compiled in {seconds:.1f} s, once (kept in {kernels.CACHE_DIR})")
