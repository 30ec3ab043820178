"""Find runs and host files in a TensorBoard log directory.

Accepted inputs: a logdir (holding `plugins/profile/<run>/`), its
`plugins/profile` folder, one run folder, or one capture file
(`<host>.xplane.pb[.gz]`, a run of that one host named after its folder).
Paths go through fsspec, so local paths, `gs://…` (gcsfs) and `memory://…`
behave the same.

What is found but cannot be used is named, never skipped in silence: a
symbolic link is followed when it leads to a file or folder inside the
folder given (a logdir assembled from links), and refused when it leads
outside it (a logdir from elsewhere must not make the build read, and the
site show, files of this machine), nowhere, or to something other than a
file or folder; a FIFO, device or socket under a capture's name, a folder
named like a capture file, and a run folder that cannot be listed are
refused with their reason. Each becomes an input error of its run
(`RunSource.problems`): the rest builds.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field

import fsspec

from reportgen.errors import NoCapturesError
from reportgen.loaders.older_formats import TIMELINE_PATTERN, TOOL_SUFFIXES

HOST_SUFFIXES = (".xplane.pb", ".xplane.pb.gz")
PROFILE_SUBDIR = "plugins/profile"


@dataclass(frozen=True)
class HostFile:
    host: str
    path: str  # as fsspec understands it (protocol included for remote files)
    size: int
    # Per-tool files of an older profiler (best source per tool), when the
    # host has no XSpace; `path` is then the first of them.
    legacy: tuple[str, ...] = ()
    # The object store's own checksum from the listing (remote files; None when it gives none).
    checksum: str | None = None
    # A local file's inode when it was found: a file replaced since then is not the one found.
    inode: int | None = None


@dataclass
class RunSource:
    name: str
    path: str
    hosts: list[HostFile] = field(default_factory=list)
    from_file: bool = False  # made of a capture file given on its own
    # Inputs of the run that could not be used, as (path, why, detail): each is an input error of the run.
    # `why` is what the site shows; `detail` (the terminal only) may name this machine's folders.
    problems: list[tuple[str, str, str]] = field(default_factory=list)


def file_name(path: str) -> str:
    """The last part of a local path or URL: `gs://bucket/logs/run/vm.xplane.pb` → `vm.xplane.pb`."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def natural_key(text: str) -> list:
    """Sort key that orders `run_2` before `run_10`."""
    return [int(part) if part.isdigit() else part.lower() for part in re.split(r"(\d+)", text)]


def host_name(filename: str) -> str | None:
    for suffix in HOST_SUFFIXES:
        if filename.endswith(suffix) and len(filename) > len(suffix):
            return filename[: -len(suffix)]
    return None


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def _unstrip(fs: fsspec.AbstractFileSystem, path: str) -> str:
    """fsspec lists remote paths without their protocol; put it back."""
    return fs.unstrip_protocol(path) if _is_remote(fs) else path


def _is_remote(fs: fsspec.AbstractFileSystem) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
    return protocol not in ("file", "local")


def _is_local(fs: fsspec.AbstractFileSystem) -> bool:
    return not _is_remote(fs)


def _special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "neither a file nor a folder"


def _entries(fs: fsspec.AbstractFileSystem, folder: str, boundary: str | None) -> list[dict]:
    """`fs.ls(folder)`, each entry's `type` made "file", "directory" or "other" by what it is, links followed
    where allowed; an entry that cannot be used gets `problem` (why). `boundary`: the real path links must stay
    in (local folders only)."""
    infos = fs.ls(folder, detail=True)
    if boundary is None or not _is_local(fs):
        return infos
    out = []
    for info in infos:
        path = info["name"]
        if info.get("islink"):
            target = os.path.realpath(path)
            try:
                mode = os.stat(path).st_mode
            except OSError as exc:
                info = {**info, "type": "other", "problem": f"is a symbolic link that leads nowhere ({exc.strerror})",
                        "detail": f"it leads to {target}"}
                out.append(info)
                continue
            if os.path.commonpath([boundary, target]) != boundary:
                info = {**info, "type": "other", "problem": "is a symbolic link to a place outside the folder given; "
                        "links are followed only within it", "detail": f"it leads to {target}, outside {boundary}"}
            elif stat.S_ISREG(mode) or stat.S_ISDIR(mode):
                info = {**info, "type": "file" if stat.S_ISREG(mode) else "directory",
                        "size": os.stat(path).st_size}
            else:
                info = {**info, "type": "other", "problem": f"is a symbolic link to {_special_kind(mode)}, not a "
                        "capture file"}
        elif info.get("type") not in ("file", "directory"):
            try:
                kind = _special_kind(os.lstat(path).st_mode)
            except OSError:
                kind = "neither a file nor a folder"
            info = {**info, "type": "other", "problem": f"is {kind}, not a capture file"}
        out.append(info)
    return out


def _looks_like_input(name: str) -> bool:
    """A name reportgen would read: a host file, an older profiler's tool file or a timeline step."""
    if host_name(name) is not None or TIMELINE_PATTERN.match(name):
        return True
    return any(name.endswith(suffix) and len(name) > len(suffix) for suffixes in TOOL_SUFFIXES.values()
               for suffix in suffixes)


def _host_files(fs: fsspec.AbstractFileSystem, folder: str,
                boundary: str | None = None) -> tuple[list[HostFile], list[tuple[str, str, str]]]:
    """The host files of a run folder, and the problems of entries named like inputs that cannot be used."""
    hosts: dict[str, HostFile] = {}
    entries = _entries(fs, folder, boundary)
    problems = []
    for info in entries:
        name = file_name(info["name"])
        if info.get("type") == "file" or not _looks_like_input(name):
            continue
        why = info.get("problem") or ("is a folder, not a capture file" if info.get("type") == "directory"
                                      else "is not a capture file")
        problems.append((_unstrip(fs, info["name"]), why, info.get("detail", "")))
    infos = [info for info in entries if info.get("type") == "file"]
    for info in infos:
        name = file_name(info["name"])
        host = host_name(name)
        if host is None:
            continue
        # A host written both plain and gzipped: the plain file wins.
        if host in hosts and name.endswith(".gz"):
            continue
        hosts[host] = HostFile(host=host, path=_unstrip(fs, info["name"]), size=int(info.get("size") or 0),
                               checksum=store_checksum(fs, info) if _is_remote(fs) else None,
                               inode=_local_inode(fs, info))
    # An XSpace holds every tool: a host's older per-tool files are read only
    # when it has none.
    for legacy in _legacy_hosts(fs, infos):
        hosts.setdefault(legacy.host, legacy)
    return sorted(hosts.values(), key=lambda h: natural_key(h.host)), problems


def _legacy_hosts(fs: fsspec.AbstractFileSystem, infos: list[dict]) -> list[HostFile]:
    """Hosts written by older profilers: per-tool files, the richest source
    per tool, and a ProfilerHook `timeline-<step>.json` set as one host."""
    found: dict[str, dict[str, tuple[int, dict]]] = {}  # host → tool → (rank, info)
    timelines = []
    for info in infos:
        name = file_name(info["name"])
        if TIMELINE_PATTERN.match(name):
            timelines.append(info)
            continue
        for tool, suffixes in TOOL_SUFFIXES.items():
            for rank, suffix in enumerate(suffixes):
                if name.endswith(suffix) and len(name) > len(suffix):
                    tools = found.setdefault(name[: -len(suffix)], {})
                    if tool not in tools or rank < tools[tool][0]:
                        tools[tool] = (rank, info)
    hosts = []
    for host, tools in found.items():
        chosen = [info for _rank, info in tools.values()]
        paths = tuple(sorted(_unstrip(fs, i["name"]) for i in chosen))
        hosts.append(HostFile(host=host, path=paths[0], size=sum(int(i.get("size") or 0) for i in chosen),
                              legacy=paths))
    if timelines:
        paths = tuple(_unstrip(fs, i["name"]) for i in sorted(timelines, key=lambda i: natural_key(i["name"])))
        hosts.append(HostFile(host="timeline", path=paths[0], size=sum(int(i.get("size") or 0) for i in timelines),
                              legacy=paths))
    return hosts


# Content checksums object stores give in listings: GCS md5/crc32c, S3 ETag.
STORE_CHECKSUMS = ("md5Hash", "crc32c", "ETag", "etag", "md5", "checksum")


def store_checksum(fs: fsspec.AbstractFileSystem, info: dict) -> str | None:
    """`<protocol>-<field>:<value>:<size>`, or None when the listing has no checksum."""
    for key in STORE_CHECKSUMS:
        value = info.get(key)
        if value:
            protocol = fs.protocol if isinstance(fs.protocol, str) else fs.protocol[0]
            return f"{protocol}-{key}:{value}:{info.get('size')}"
    return None


def _subdirs(fs: fsspec.AbstractFileSystem, folder: str, boundary: str | None) -> tuple[list[str], list[dict]]:
    """Sub-folders (links within the boundary followed), and the entries that are links that cannot be."""
    entries = _entries(fs, folder, boundary)
    folders = [info["name"] for info in entries if info.get("type") == "directory"]
    return folders, [info for info in entries if info.get("problem") and info.get("islink")]


def problem_text(path: str, why: str, detail: str = "") -> str:
    """A problem of `RunSource.problems` as the terminal says it."""
    return f"{path}: {why}" + (f" ({detail})" if detail else "")


def _why_unreadable(exc: OSError) -> str:
    return f"cannot be read ({exc.strerror or exc})"


def discover(location: str, only_runs: set[str] | None = None) -> list[RunSource]:
    """Runs under `location`, each with its host files, in natural order.

    Raises NoCapturesError (saying where it looked) when nothing is found.
    """
    fs, root = fsspec.core.url_to_fs(location)
    if not fs.exists(root):
        raise NoCapturesError(f"{location}: no such file or directory")
    if not fs.isdir(root):
        return [_file_run(fs, root, location, only_runs)]
    boundary = os.path.realpath(root) if _is_local(fs) else None
    looked = []
    candidates: list[str]
    refused: list[dict] = []
    profile_dir = _join(root, PROFILE_SUBDIR)
    try:
        if fs.isdir(profile_dir):
            candidates, refused = _subdirs(fs, profile_dir, boundary)
            looked.append(profile_dir)
        elif any(_host_files(fs, root, boundary)):
            candidates = [root]
            looked.append(root)
        else:
            candidates, refused = _subdirs(fs, root, boundary)
            looked.append(root)
    except OSError as exc:
        raise NoCapturesError(f"{location}: {_why_unreadable(exc)}") from exc
    runs = []
    for folder in candidates:
        name = file_name(folder)
        if only_runs is not None and name not in only_runs:
            continue
        try:
            hosts, problems = _host_files(fs, folder, boundary)
        except OSError as exc:  # this run only: the others still build
            hosts, problems = [], [(_unstrip(fs, folder), f"this run folder {_why_unreadable(exc)}", "")]
        if hosts or problems:
            runs.append(RunSource(name=name, path=_unstrip(fs, folder), hosts=hosts, problems=problems))
    for info in refused:  # a run folder that is a link that cannot be followed
        name = file_name(info["name"])
        if only_runs is None or name in only_runs:
            runs.append(RunSource(name=name, path=_unstrip(fs, info["name"]), problems=[
                (_unstrip(fs, info["name"]), f"this run folder {info['problem']}", info.get("detail", ""))]))
    if not any(run.hosts for run in runs) and any(run.problems for run in runs):
        raise NoCapturesError("no capture could be used:\n  " + "\n  ".join(
            problem_text(path, why, detail) for run in runs for path, why, detail in run.problems))
    if not runs:
        where = ", ".join(_unstrip(fs, p) for p in looked)
        wanted = f" matching --runs {','.join(sorted(only_runs))}" if only_runs else ""
        raise NoCapturesError(
            f"no captures{wanted} found in {location} (looked for <run>/<host>.xplane.pb[.gz], older "
            f"per-tool files or timeline-<step>.json under {where})"
        )
    return sorted(runs, key=lambda r: natural_key(r.name))


def _file_run(fs: fsspec.AbstractFileSystem, path: str, location: str, only_runs: set[str] | None) -> RunSource:
    """One capture file given on its own: a run of that host, named after the file's folder."""
    name = file_name(path)
    host = host_name(name)
    if host is None:
        raise NoCapturesError(
            f"{location}: not a capture file (give a <host>.xplane.pb or .xplane.pb.gz file, a logdir, "
            "its plugins/profile folder or a run folder)"
        )
    folder = path.rstrip("/").rsplit("/", 1)[0] if "/" in path.rstrip("/") else "."
    run = file_name(folder) if folder not in (".", "/", "") else host
    if only_runs is not None and run not in only_runs:
        raise NoCapturesError(f"{location}: its run, {run}, is not among --runs {','.join(sorted(only_runs))}")
    info = fs.info(path)
    checksum = store_checksum(fs, info) if _is_remote(fs) else None
    hostfile = HostFile(host=host, path=_unstrip(fs, path), size=int(info.get("size") or 0), checksum=checksum,
                        inode=_local_inode(fs, info))
    return RunSource(name=run, path=_unstrip(fs, folder), hosts=[hostfile], from_file=True)


def merge_same_folder(runs: list[RunSource]) -> list[RunSource]:
    """Capture files given one by one from the same folder make one run, hosts in natural order
    (a folder given twice stays two runs, as two logdirs with a run of the same name do)."""
    merged: dict[str, RunSource] = {}
    out = []
    for run in runs:
        same = merged.get(run.path) if run.from_file else None
        if same is None:
            if run.from_file:
                merged[run.path] = run
            out.append(run)
            continue
        known = {h.path for h in same.hosts}
        same.hosts = sorted([*same.hosts, *(h for h in run.hosts if h.path not in known)],
                            key=lambda h: natural_key(h.host))
    return out


def _local_inode(fs, info: dict) -> int | None:
    ino = info.get("ino")
    return int(ino) if not _is_remote(fs) and isinstance(ino, int) and ino > 0 else None


def read_file(path: str) -> bytes:
    """Read one host file through fsspec."""
    with fsspec.open(path, "rb") as handle:
        return handle.read()


class FileChangedError(ValueError):
    """A host file that changed (size, time, identity) between its discovery and the end of its decode."""


@dataclass(frozen=True)
class Snapshot:
    """What a local file was when the build read it: compared again once it is decoded."""

    path: str
    size: int
    mtime_ns: int
    inode: tuple[int, int]

    @classmethod
    def of(cls, path: str, info: os.stat_result) -> Snapshot:
        return cls(path, info.st_size, info.st_mtime_ns, (info.st_dev, info.st_ino))

    def check(self) -> None:
        """FileChangedError when the file is not the one read any more (truncated, appended, replaced, deleted)."""
        try:
            now = Snapshot.of(self.path, os.stat(self.path))
        except FileNotFoundError:
            raise FileChangedError("was deleted while the build read it") from None
        except OSError as exc:
            raise FileChangedError(f"cannot be checked after reading ({exc.strerror or exc})") from exc
        if now.inode != self.inode:
            raise FileChangedError("was replaced by another file while the build read it")
        if (now.size, now.mtime_ns) != (self.size, self.mtime_ns):
            raise FileChangedError(f"changed while the build read it ({self.size} bytes read, {now.size} now)")


def read_host_file(path: str, read: Callable[[str], bytes] = read_file, expected_size: int | None = None,
                   expected_inode: int | None = None) -> tuple[bytes, Snapshot | None]:
    """A host file's bytes, with what a local file was when read (None for remote files).

    A local file is read with bounds, not memory-mapped: a mapped file truncated under the build (by
    the program still writing it, a sync, a cleanup) ends the process with SIGBUS, as the decoder
    touches a page past the new end, taking every other host and run with it. Read, a change is an
    input error of that host only: a size other than the one found (`expected_size`), another file
    (`expected_inode`), fewer bytes than the file held when opened, or (`Snapshot.check`, once
    decoded) a file that is no longer the one read. Remote and gzipped files are read by `read`.
    """
    local = path[len("file://"):] if path.startswith("file://") else path
    if "://" in local or path.endswith(".gz"):
        return read(path), None
    with open(local, "rb") as handle:
        snapshot = Snapshot.of(local, os.fstat(handle.fileno()))
        size = snapshot.size
        if expected_inode is not None and snapshot.inode[1] != expected_inode:
            raise FileChangedError("was replaced by another file after it was found")
        if expected_size is not None and size != expected_size:
            raise FileChangedError(f"changed after it was found ({expected_size} bytes then, {size} now)")
        # One bytes object of `size`, filled by as many reads as it takes (the buffered reader's loop): bytes
        # as gzipped and remote files give, whose slices the decoder may keep as keys.
        data = handle.read(size)
        if len(data) < size:
            raise FileChangedError(f"was truncated while the build read it ({len(data)} of {size} bytes)")
    return data, snapshot
