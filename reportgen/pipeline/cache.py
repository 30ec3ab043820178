"""The rebuild cache: per-host results of earlier builds, reused when nothing changed.

A host's result (its summary, every section's per-host part and the files
the host stage wrote) depends only on the host file's bytes, on reportgen's
code and on a few names (run, host, file name). The cache keeps each result
under a key made of exactly those:

    <cache>/hosts/<prefix>/<content>/outcome.arrow, manifest.json
                                    /files/<site-relative path>…
    <cache>/runs/<key>/run.arrow    a run's summary block and index row
                      /files/…      the run's folder of the site, as built
    <cache>/fingerprints.json       stat → content hash memo (local files, by path hash)

(The compiled kernels and page templates, the same for every build of a version, are kept in the
user cache folder instead: `reportgen.user_cache`.)

* `prefix` hashes the cache format, reportgen's version, the schema of the
  per-host result (`result.outcome_schema()`: every section's declared part
  type, field by field, and its `part_version`), the run name, the host
  name, the file name and the host-stage settings: a new release, a part
  whose fields or meaning changed, or a renamed run starts afresh. (A host's
  result is declared data, as XProf's cache holds its OpStats: the key
  follows the schema, not the source text.)
* `content` is the file's content hash: sha256 of its bytes for local files
  (and for remote stores that give no checksum); for remote files the
  store's own checksum (GCS md5/crc32c, S3 ETag, as the logdir listing gives
  it) plus the size, so a rebuild never downloads an unchanged pod. Local
  hashes are remembered by (size, mtime in ns, inode) so an unchanged file
  is not read again.
* A host with no entry under its prefix cannot hit: it is not hashed up
  front; the worker hashes the bytes it reads anyway, on a second thread.
* A run whose hosts all came from the cache, and whose key (the site's code,
  templates and assets, the run name, its hosts and their content keys) is
  the one of an earlier build, is not rendered again either: its folder is
  copied from the cache (pages are the rendering code's output, not declared
  data: their key keeps the code's hash). Adding a run to a logdir thus renders that run and
  the site index only.

By default the cache lives beside the site, in `.<site name>.reportgen-cache/`
next to the output folder (so the site folder holds the site only: nothing to
skip when publishing, serving or zipping it), and each successful build
prunes the entries it did not use: it holds exactly the last build's hosts
and runs. `--cache-dir DIR` keeps it elsewhere, shared by builds and never
pruned (delete it at will). Files are copied between the site and the
cache, never hard-linked: editing a site file in place must not edit the
cache (the copy costs little: on Linux the kernel copies, or clones on
file systems that can).

Trust: entries are data only (`result.py`: Arrow tables read against the
declared types, never a pickle), so a crafted entry cannot run code. The folder must be the
user's own: created private (0700), made private again when it is ours with
looser permissions, not used (one warning line) when another user owns it.
Each entry's `manifest.json` records the size and sha256 of every file of it
and is signed (HMAC-SHA256) with a key of the user's that lives outside the
cache (`user_cache.secret_key`); the fingerprint memo is signed too. Nothing is
read from an entry whose manifest does not verify, only the files it lists
are copied into the site, and each copy is hashed again once it is there:
a truncated, altered, planted or moved file is a miss, named in the `-v`
output, and the host is rebuilt (the cache never fails a build). Without
the key nobody can make an entry this user's builds accept; with it (this
user, root) anything can be put on the pages.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec

from reportgen import __version__
from reportgen.loaders.logdir import HostFile, file_name, store_checksum
from reportgen.pipeline import result
from reportgen.pipeline.host_stage import (
    CONTENT_HASH,
    HostOutcome,
    HostTask,
    list_files,
    outcome_from_bytes,
    site_fingerprint,
)
from reportgen.sections.base import HostSummary
from reportgen.user_cache import secret_key, writable_dir

CACHE_FORMAT = 4  # 2: data files instead of pickles; 3: signed manifests; 4: declared results (Arrow)
CACHE_SUFFIX = ".reportgen-cache"  # `.<site name><suffix>`, beside the site
OUTCOME_FILE = "outcome.arrow"
RUN_FILE = "run.arrow"
FILES_FOLDER = "files"
MEMO_FILE = "fingerprints.json"
MANIFEST = "manifest.json"
KEY_NAME = "rebuild-cache.key"
STALE_WRITE_S = 3600  # a half-written entry this old in a shared cache folder is a dead build's


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _memo_key(path: str) -> str:
    # The build machine's folders stay out of the site folder, cache included.
    return hashlib.sha256(os.path.abspath(path).encode()).hexdigest()[:32]


def is_local(path: str) -> bool:
    return "://" not in path


def hash_file(path: str) -> str:
    digest = hashlib.new(CONTENT_HASH)
    with fsspec.open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return f"{CONTENT_HASH}:{digest.hexdigest()}"


def remote_checksum(host: HostFile) -> str | None:
    """The object store's checksum of a remote file (with its size), when it gives one."""
    if host.checksum:
        return host.checksum  # from the listing: no request
    fs, stripped = fsspec.core.url_to_fs(host.path)
    return store_checksum(fs, fs.info(stripped))


def legacy_fingerprint(host: HostFile) -> str:
    """An older profiler's host is several per-tool files: the key covers each one's name and content."""
    digest = hashlib.new(CONTENT_HASH)
    for path in host.legacy:
        digest.update(file_name(path).encode() + b"\0" + hash_file(path).encode() + b"\0")
    return f"legacy-{CONTENT_HASH}:{digest.hexdigest()}"


def copy_file(source: Path, target: Path) -> None:
    """A copy of its own (never a hard link: the site and the cache must not share a file)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists() or target.is_symlink():
        target.unlink()
    shutil.copyfile(source, target)


@dataclass
class StoredRun:
    """A run's entry: its summary.json block, its row of the site index (its hosts apart: they are
    declared data, the rest is plain JSON) and the files of its folder."""

    block: dict
    row: dict
    hosts: list[HostSummary]
    files: list[str]


class EntryError(ValueError):
    """A cache entry that must not be used: unsigned, signed for another key or place, or not what it lists."""


def file_digest(path: Path) -> tuple[int, str]:
    """(size, sha256) of a file's bytes."""
    digest = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            size += len(chunk)
            digest.update(chunk)
    return size, digest.hexdigest()


def _relative(rel: Any) -> str:
    """A path inside an entry, as the manifest lists it; never one that leaves the folder."""
    if not isinstance(rel, str) or not rel or rel.startswith("/") or any(
            part in ("", ".", "..") for part in rel.split("/")) or "\x00" in rel:
        raise EntryError(f"lists a path that is not inside it: {rel!r}")
    return rel


def make_private_dir(path: Path) -> None:
    """Create `path` (and missing parents) readable and writable by this user only."""
    missing = []
    folder = path
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    for created in missing:  # mkdir's mode is filtered by the umask; these folders are ours
        os.chmod(created, 0o700)


def default_cache_dir(site: Path) -> Path:
    site = site.resolve()
    return site.with_name(f".{site.name}{CACHE_SUFFIX}")


class HostCache:
    """Lookups and stores of one build in the cache folder `root`."""

    def __init__(self, root: Path, settings: dict | None = None, log: Callable[[str], None] | None = None):
        self.root = root
        self.settings = dict(settings or {})
        self.warnings: list[str] = []  # the cache cannot be used as it should: always printed
        self.notes: list[str] = []  # entries ignored and rebuilt: printed with -v
        self._log = log
        self._schema = (__version__, result.outcome_schema(HostOutcome))
        self._key: bytes | None = None  # signs manifests and the memo; None: the cache is not used
        self._memo: dict[str, list] = {}
        self._fingerprints: dict[int, str] = {}  # task index → content key, once known
        self._used: set[Path] = set()  # entries this build read or wrote
        self._memo_used: set[str] = set()

    def note(self, text: str) -> None:
        self.notes.append(text)
        if self._log is not None:
            self._log(text)

    def open(self, exclusive: bool = False) -> None:
        """Create the cache folder, private to this user, when it does not exist yet, and remove the
        half-written entries of builds that were killed: all of them when this build is the folder's only
        user (`exclusive`: the cache beside a site, under the site's lock), else those over an hour old."""
        problem = writable_dir(self.root)
        if problem is not None:
            self.warnings.append(f"not using the rebuild cache ({problem})")
            return
        key, problem = secret_key(KEY_NAME)
        if key is None:
            self.warnings.append(f"not using the rebuild cache: its signing key cannot be kept ({problem})")
            return
        self._key = key
        self._memo = self._read_memo()
        cutoff = time.time() - (0 if exclusive else STALE_WRITE_S)
        for pattern in ("hosts/*/.*", "runs/.*", ".*.json.*"):
            for path in self.root.glob(pattern):
                try:
                    if path.lstat().st_mtime <= cutoff:
                        shutil.rmtree(path) if path.is_dir() else path.unlink()
                except OSError:
                    pass

    # keys -------------------------------------------------------------

    def prefix(self, task: HostTask) -> str:
        return _digest(CACHE_FORMAT, self._schema, task.run, task.host.host, task.shown_path, self.settings)[:40]

    def _entry_dir(self, task: HostTask, fingerprint: str) -> Path:
        name = hashlib.sha256(fingerprint.encode()).hexdigest()[:40]
        return self.root / "hosts" / self.prefix(task) / name

    def _may_hit(self, task: HostTask) -> bool:
        return self._key is not None and (self.root / "hosts" / self.prefix(task)).is_dir()

    # signatures -------------------------------------------------------

    def _mac(self, payload: Any) -> str:
        assert self._key is not None
        text = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
        return hmac.new(self._key, text, hashlib.sha256).hexdigest()

    def _signed(self, document: Any) -> Any:
        """The payload of a document `_sign` wrote with this user's key; EntryError otherwise."""
        if not (isinstance(document, dict) and set(document) == {"payload", "mac"}
                and isinstance(document["mac"], str)):
            raise EntryError("is not signed")
        if not hmac.compare_digest(document["mac"], self._mac(document["payload"])):
            raise EntryError("is not signed with this user's key (altered, or written by someone else)")
        return document["payload"]

    def _sign(self, payload: Any) -> dict:
        return {"payload": payload, "mac": self._mac(payload)}

    def _write_manifest(self, tmp: Path, entry: Path) -> None:
        files = {rel: list(file_digest(tmp / rel)) for rel in list_files(str(tmp))}
        payload = {"format": CACHE_FORMAT, "entry": entry.relative_to(self.root).as_posix(), "files": files}
        (tmp / MANIFEST).write_text(json.dumps(self._sign(payload)), encoding="utf-8")

    def _manifest(self, entry: Path, data_file: str) -> dict[str, list]:
        """The verified list of an entry's files ({path: [size, sha256]}), its data files checked against it."""
        try:
            document = json.loads((entry / MANIFEST).read_bytes())
        except FileNotFoundError:
            raise EntryError("has no manifest") from None
        except ValueError as exc:
            raise EntryError(f"has a manifest that is not JSON ({exc})") from exc
        payload = self._signed(document)
        if not (isinstance(payload, dict) and payload.get("format") == CACHE_FORMAT
                and payload.get("entry") == entry.relative_to(self.root).as_posix()
                and isinstance(payload.get("files"), dict)):
            raise EntryError("has a manifest for another entry or version")
        files = payload["files"]
        if data_file not in files:
            raise EntryError(f"holds {data_file}, which its manifest does not list")
        self._check(entry / data_file, files[data_file], data_file)
        return files

    @staticmethod
    def _check(path: Path, recorded: Any, rel: str) -> None:
        if file_digest(path) != tuple(recorded):
            raise EntryError(f"{rel} is not the file the manifest records (truncated or altered)")

    def _restore(self, entry: Path, files: dict[str, list], wanted: list[str], target: Path) -> None:
        """Copy the listed files of an entry into the site folder `target`, each copy hashed once there."""
        for rel in wanted:
            name = f"{FILES_FOLDER}/{_relative(rel)}"
            if name not in files:
                raise EntryError(f"{name} is not in its manifest")
            copy_file(entry / FILES_FOLDER / rel, target / rel)
            self._check(target / rel, files[name], name)  # the copy, not the source: nothing changes after

    def needs_worker_hash(self, task: HostTask) -> bool:
        """True when the content key is not known yet and is the hash of the bytes the worker reads."""
        return task.index not in self._fingerprints

    # fingerprints -----------------------------------------------------

    def _read_memo(self) -> dict[str, list]:
        # A forged memo could map a file to the content key of another of its versions: it is signed too.
        try:
            memo = self._signed(json.loads((self.root / MEMO_FILE).read_text(encoding="utf-8")))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self.note(f"ignoring the cache's fingerprint memo {self.root / MEMO_FILE}: {exc}")
            return {}
        if isinstance(memo, dict) and memo.get("format") == CACHE_FORMAT and isinstance(memo.get("files"), dict):
            return memo["files"]
        return {}

    @staticmethod
    def _stat_key(path: str) -> list | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev]

    def fingerprint(self, task: HostTask) -> str:
        """The content key of a host file, reading it only when nothing cheaper tells."""
        path = task.host.path
        if task.host.legacy:
            return legacy_fingerprint(task.host)
        if is_local(path):
            self._memo_used.add(_memo_key(path))
            stat = self._stat_key(path)
            memo = self._memo.get(_memo_key(path))
            if stat is not None and isinstance(memo, list) and len(memo) == 2 and memo[0] == stat:
                return str(memo[1])
            value = hash_file(path)
            if stat is not None and stat == self._stat_key(path):
                self._memo[_memo_key(path)] = [stat, value]
            return value
        return remote_checksum(task.host) or hash_file(path)

    def learn(self, task: HostTask, outcome: HostOutcome, stat_before: list | None) -> None:
        """Remember the content hash a worker computed (when the file did not change meanwhile)."""
        if outcome.content_hash is None:
            return
        self._fingerprints[task.index] = outcome.content_hash
        path = task.host.path
        if is_local(path) and stat_before is not None and stat_before == self._stat_key(path):
            self._memo[_memo_key(path)] = [stat_before, outcome.content_hash]
            self._memo_used.add(_memo_key(path))

    def save_memo(self) -> None:
        if self._key is None:
            return
        try:
            make_private_dir(self.root)
            tmp = self.root / f".{MEMO_FILE}.{uuid.uuid4().hex}"
            tmp.write_text(json.dumps(self._sign({"format": CACHE_FORMAT, "files": self._memo})), encoding="utf-8")
            os.replace(tmp, self.root / MEMO_FILE)
        except OSError as exc:
            self.warnings.append(f"cannot write the cache's fingerprint memo in {self.root}: {exc}")

    # entries ----------------------------------------------------------

    def lookup(self, task: HostTask, out_dir: Path) -> HostOutcome | None:
        """The cached result of `task`, its files copied into `out_dir`; None on a miss.

        Without any entry for this run/host/code, the file is not even hashed:
        the worker does it while decoding.
        """
        if not self._may_hit(task):
            # A store's checksum costs nothing: key by it now. A local file is
            # hashed by the worker, from the bytes it reads anyway; the small
            # per-tool files of an older profiler are hashed here (the worker
            # reads them with their own loaders).
            checksum = None if is_local(task.host.path) else task.host.checksum
            if task.host.legacy:
                try:
                    checksum = legacy_fingerprint(task.host)
                except OSError:
                    checksum = None
            if checksum is not None:
                self._fingerprints[task.index] = checksum
            return None
        try:
            fingerprint = self.fingerprint(task)
        except OSError as exc:
            self.warnings.append(f"{task.shown_path}: cannot fingerprint for the cache ({exc}); rebuilding it")
            return None
        self._fingerprints[task.index] = fingerprint
        entry = self._entry_dir(task, fingerprint)
        if not (entry / OUTCOME_FILE).is_file():
            return None
        loaded = self._load(entry, task)
        if loaded is None:
            return None
        outcome, files = loaded
        try:
            self._restore(entry, files, list(outcome.files), out_dir)
        except (OSError, EntryError) as exc:
            self.note(f"{task.shown_path}: ignoring an unreadable cache entry {entry} "
                      f"({type(exc).__name__}: {exc}); rebuilding this host")
            shutil.rmtree(out_dir, ignore_errors=True)
            return None
        self._used.add(entry)
        return outcome

    def _load(self, entry: Path, task: HostTask) -> tuple[HostOutcome, dict[str, list]] | None:
        try:
            files = self._manifest(entry, OUTCOME_FILE)
            outcome = outcome_from_bytes((entry / OUTCOME_FILE).read_bytes())
            if outcome.error is not None or (outcome.run, outcome.host, outcome.path) != (
                task.run, task.host.host, task.shown_path
            ):
                raise ValueError("is for another host")
            missing = [rel for rel in outcome.files if not (entry / FILES_FOLDER / rel).is_file()]
            if missing:
                raise FileNotFoundError(f"misses {len(missing)} of its files (first: {missing[0]})")
        except Exception as exc:  # noqa: BLE001 (any unreadable entry is ignored, never fatal)
            self.note(f"{task.shown_path}: ignoring an unreadable cache entry {entry} "
                      f"({type(exc).__name__}: {exc}); rebuilding this host")
            return None
        outcome.cached = True
        outcome.timings = {}
        outcome.peak_rss = 0
        return outcome, files

    def store(self, task: HostTask, outcome: HostOutcome, out_dir: Path) -> None:
        """Keep a freshly computed, successful result with its files (copies)."""
        fingerprint = self._fingerprints.get(task.index)
        if self._key is None or outcome.error is not None or outcome.file_errors or fingerprint is None:
            return  # a host with a bad file is built again (and its files named again) until fixed
        entry = self._entry_dir(task, fingerprint)
        kept = dataclasses.replace(outcome, timings={}, payload=None, code=None, cached=False,
                                   content_hash=None, peak_rss=0, local_error=None)

        def fill(tmp: Path) -> None:
            for rel in outcome.files:
                copy_file(out_dir / rel, tmp / FILES_FOLDER / rel)
            (tmp / OUTCOME_FILE).write_bytes(result.outcome_bytes(kept))

        self._write_entry(entry, fill, f"{task.shown_path}: cannot store in the cache")

    def _write_entry(self, entry: Path, fill, failure: str) -> None:
        """Write an entry in a temporary folder, then move it into place whole."""
        tmp = entry.with_name(f".{entry.name}.{uuid.uuid4().hex}")
        try:
            make_private_dir(tmp.parent)
            tmp.mkdir()
            fill(tmp)
            self._write_manifest(tmp, entry)
            if entry.exists():
                shutil.rmtree(entry)
            os.replace(tmp, entry)
            self._used.add(entry)
        except Exception as exc:  # noqa: BLE001 (a full disk or an unstorable part must not fail the build)
            shutil.rmtree(tmp, ignore_errors=True)
            self.warnings.append(f"{failure} {self.root} ({type(exc).__name__}: {exc})")

    # runs -------------------------------------------------------------

    def run_key(self, run: str, tasks: list[HostTask], outcomes: list[HostOutcome], assets: Any) -> str | None:
        """The key of a run's pages, or None when they must be rendered (a host failed or was not hashed)."""
        if not tasks or any(o.error is not None or o.file_errors for o in outcomes):
            return None
        prints = [self._fingerprints.get(t.index) for t in tasks]
        if any(p is None for p in prints):
            return None
        hosts = [(t.shown_path, t.host.host, p) for t, p in zip(tasks, prints)]
        return _digest(CACHE_FORMAT, site_fingerprint(), run, hosts, dict(assets), self.settings)[:40]

    def lookup_run(self, key: str, run_dir: Path) -> tuple[Any, Any] | None:
        """(summary block, index row) of a run rendered before, its folder copied into `run_dir`."""
        entry = self.root / "runs" / key
        if self._key is None or not (entry / RUN_FILE).is_file():
            return None
        try:
            manifest = self._manifest(entry, RUN_FILE)
            stored = result.loads((entry / RUN_FILE).read_bytes(), StoredRun)
            block, row, files = stored.block, {**stored.row, "hosts": stored.hosts}, stored.files
            missing = [rel for rel in files if not (entry / FILES_FOLDER / rel).is_file()]
            if missing:
                raise FileNotFoundError(f"misses {len(missing)} of its files (first: {missing[0]})")
        except Exception as exc:  # noqa: BLE001 (any unreadable entry is ignored, never fatal)
            self.note(f"ignoring an unreadable cache entry {entry} ({type(exc).__name__}: {exc}); "
                      "rendering this run again")
            return None
        # Restored beside the run's folder, which holds its hosts' files already: a bad entry leaves it as it was.
        restored = run_dir.with_name(f".{run_dir.name}.{uuid.uuid4().hex}")
        try:
            self._restore(entry, manifest, files, restored)
            shutil.rmtree(run_dir, ignore_errors=True)
            os.replace(restored, run_dir)
        except (OSError, EntryError) as exc:
            self.note(f"ignoring an unreadable cache entry {entry} ({type(exc).__name__}: {exc}); "
                      "rendering this run again")
            shutil.rmtree(restored, ignore_errors=True)
            return None
        self._used.add(entry)
        return block, row

    def store_run(self, key: str, run_dir: Path, block: Any, row: Any) -> None:
        if self._key is None:
            return

        def fill(tmp: Path) -> None:
            files = list_files(str(run_dir))
            for rel in files:
                copy_file(run_dir / rel, tmp / FILES_FOLDER / rel)
            rest = {k: v for k, v in row.items() if k != "hosts"}
            stored = StoredRun(block=block, row=rest, hosts=row["hosts"], files=files)
            (tmp / RUN_FILE).write_bytes(result.dumps(stored, StoredRun))

        self._write_entry(self.root / "runs" / key, fill, "cannot store a run's pages in the cache")

    # pruning ----------------------------------------------------------

    def prune(self) -> None:
        """Drop the entries this build did not use (the cache beside a site holds that site's build only)."""
        if self._key is None:
            return
        try:
            for kind, depth in (("hosts", 2), ("runs", 1)):
                folder = self.root / kind
                if not folder.is_dir():
                    continue
                entries = folder.glob("/".join(["*"] * depth))
                for entry in entries:
                    if entry.is_dir() and entry not in self._used:
                        shutil.rmtree(entry, ignore_errors=True)
                for prefix in folder.iterdir() if depth == 2 else ():
                    if prefix.is_dir() and not any(prefix.iterdir()):
                        prefix.rmdir()
            self._memo = {k: v for k, v in self._memo.items() if k in self._memo_used}
        except OSError as exc:
            self.warnings.append(f"cannot prune the cache {self.root} ({exc})")
