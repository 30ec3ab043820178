"""Publish a built site to Google Cloud Storage, to be served as a static web site.

The site is built locally first (a complete folder); this module uploads it
file by file from disk, so memory stays bounded by the files in flight:

- every object gets its Content-Type and Cache-Control (see `web_types`);
- uploads run in parallel through gcsfs's public API (`put_file`: one request
  for a small file, a resumable upload streamed from disk for a large one);
  every request is retried on transient failures by gcsfs's own policy
  (exponential backoff, six attempts): there is no second retry loop here;
- files go out in phases (assets and data, tool pages, run index pages, the
  site index, summary.json), each phase complete before the next starts, so
  a reader who enters by an index page never follows a link to an object
  that is not there yet;
- objects left under the prefix by an earlier publish and absent from this
  site are deleted last, the way a local build replaces its output folder.
  A prefix holding anything but a reportgen site is never touched.

Credentials come from Google's Application Default Credentials
(`gcloud auth application-default login`, GOOGLE_APPLICATION_CREDENTIALS, the
service account of a Google Cloud machine). With STORAGE_EMULATOR_HOST set
(a local emulator), no credentials are used and requests go there.
"""

from __future__ import annotations

import json
import logging
import os
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reportgen.output.transaction import MARKER
from reportgen.output.web_types import cache_control, content_type, publish_phase

if TYPE_CHECKING:
    from gcsfs.core import GCSFileSystem

GCS_SCHEMES = ("gs://", "gcs://")
EMULATOR_ENV = "STORAGE_EMULATOR_HOST"
READ_WRITE_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"
# Files gcsfs does not send in one request stream from disk in resumable
# chunks of this size (a multiple of 256 KiB, as GCS requires).
RESUMABLE_CHUNK = 8 * 2**20
DEFAULT_JOBS = 16

NO_CREDENTIALS_HELP = (
    "no Google Cloud credentials found. Sign in with "
    "`gcloud auth application-default login`, or set GOOGLE_APPLICATION_CREDENTIALS to a "
    "service account key file (on Google Cloud, the machine's service account is used). "
    "For a local emulator, set STORAGE_EMULATOR_HOST=host:port."
)


class PublishError(Exception):
    """Publishing cannot start or did not complete; the message says why."""


class CredentialsNotFoundError(PublishError):
    """No Google credentials in any of the usual places."""


def is_gcs_url(text: str) -> bool:
    return text.startswith(GCS_SCHEMES)


@dataclass(frozen=True)
class Destination:
    """`gs://bucket/prefix`: where the site's root goes."""

    bucket: str
    prefix: str  # "" (bucket root) or "a/b", without slashes at either end

    @property
    def url(self) -> str:
        return f"gs://{self.bucket}/{self.prefix}".rstrip("/")

    def key(self, relative: str) -> str:
        """Object name of a site file."""
        return f"{self.prefix}/{relative}" if self.prefix else relative

    def path(self, relative: str = "") -> str:
        """The fsspec path (`bucket/key`) of a site file, or of the root."""
        return f"{self.bucket}/{self.key(relative)}" if relative else f"{self.bucket}/{self.prefix}".rstrip("/")


def parse_destination(url: str) -> Destination:
    if not is_gcs_url(url):
        raise PublishError(f"{url}: not a GCS location (expected gs://BUCKET/PREFIX)")
    rest = url.split("://", 1)[1].strip("/")
    bucket, _, prefix = rest.partition("/")
    parts = [p for p in prefix.split("/") if p]
    if not bucket or any(p in (".", "..") for p in parts):
        raise PublishError(f"{url}: expected gs://BUCKET/PREFIX")
    return Destination(bucket=bucket, prefix="/".join(parts))


def emulator_endpoint() -> str | None:
    """The emulator's URL from STORAGE_EMULATOR_HOST (as gcsfs reads it), or None."""
    host = os.environ.get(EMULATOR_ENV, "")
    if host in ("", "default"):
        return None
    return host if host.startswith(("http://", "https://")) else f"http://{host}"


def google_credentials() -> tuple[Any, str | None]:
    """Application Default Credentials and their project; a clear error when none."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        with warnings.catch_warnings():
            # "end user credentials without a quota project": irrelevant for storage.
            warnings.simplefilter("ignore")
            return google.auth.default(scopes=[READ_WRITE_SCOPE])
    except DefaultCredentialsError as exc:
        detail = str(exc).split(" To set up", 1)[0]
        raise CredentialsNotFoundError(f"{NO_CREDENTIALS_HELP} ({detail})") from exc


def gcs_filesystem(endpoint: str | None = None) -> GCSFileSystem:
    """A gcsfs filesystem for the real service, or for an emulator at `endpoint`.

    The plain `gcsfs.core.GCSFileSystem` is used on purpose: gcsfs' default
    class probes every bucket over gRPC first (for zonal buckets), which a
    static site does not need and an emulator does not answer.
    """
    try:
        from gcsfs.core import GCSFileSystem
    except ImportError as exc:
        raise PublishError("publishing to GCS needs gcsfs: pip install 'reportgen[gcs]'") from exc

    # gcsfs logs each request that runs out of retries with its traceback (through logging's last-resort
    # handler when the program configures none); the failure reaches the caller as an exception anyway,
    # which says it in one line.
    quiet = logging.getLogger("gcsfs")
    if not any(isinstance(h, logging.NullHandler) for h in quiet.handlers):
        quiet.addHandler(logging.NullHandler())
        quiet.propagate = False
    endpoint = endpoint or emulator_endpoint()
    if endpoint:
        return GCSFileSystem(endpoint_url=endpoint, token="anon")
    credentials, project = google_credentials()
    return GCSFileSystem(token=credentials, project=project)


@dataclass
class PublishReport:
    url: str
    objects: int
    bytes: int
    deleted: int
    seconds: float
    order: list[str] = field(default_factory=list)  # files in the order their upload completed


def site_files(site_dir: Path) -> list[str]:
    """Every file of the site, as paths relative to its root, in a stable order (the local folder's marker,
    which says that reportgen may replace it, is not part of the published site)."""
    files = []
    for folder, dirs, names in os.walk(site_dir):
        dirs.sort()
        rel_folder = Path(folder).relative_to(site_dir).as_posix()
        for name in sorted(names):
            files.append(name if rel_folder == "." else f"{rel_folder}/{name}")
    return [f for f in files if f != MARKER]


def _is_reportgen_summary(raw: bytes) -> bool:
    try:
        summary = json.loads(raw)
    except (ValueError, RecursionError):  # RecursionError: arrays nested past the parser's depth
        return False
    return isinstance(summary, dict) and str(summary.get("generator", "")).startswith("reportgen")


def check_site(site_dir: Path) -> None:
    try:
        raw = (site_dir / "summary.json").read_bytes()
    except OSError:
        raw = b""
    if not _is_reportgen_summary(raw):
        raise PublishError(f"{site_dir}: not a site built by reportgen (no reportgen summary.json)")


def _check_destination(fs: GCSFileSystem, dest: Destination) -> None:
    """Refuse a prefix that holds objects but no reportgen site: publishing deletes stale objects."""
    fs.invalidate_cache(dest.path())
    try:
        raw = fs.cat_file(dest.path("summary.json"))
    except FileNotFoundError:
        raw = None
    if raw is not None:
        if _is_reportgen_summary(raw):
            return
    else:
        try:
            listing = fs.ls(dest.path(), detail=False)
        except FileNotFoundError:
            listing = []
        if not listing:
            return
    raise PublishError(
        f"{dest.url}: holds objects that are not a reportgen site (no reportgen summary.json); "
        "choose an empty or new prefix"
    )


def upload_file(fs: GCSFileSystem, dest: Destination, site_dir: Path, relative: str) -> int:
    """Upload one site file with its content type and cache policy; returns its size.

    gcsfs sends the content type as the upload's media type; servers may keep only its main type
    (the emulator drops `; charset=utf-8`), so a type with parameters is also stated on the object
    itself, before the file counts as published.
    """
    local = site_dir / relative
    media_type = content_type(relative)
    path = dest.path(relative)
    fs.put_file(str(local), path, content_type=media_type,
                fixed_key_metadata={"cache_control": cache_control(relative)}, chunksize=RESUMABLE_CHUNK)
    if ";" in media_type:
        fs.setxattrs(path, content_type=media_type)
    return local.stat().st_size


def _publish(fs: GCSFileSystem, dest: Destination, site_dir: Path, files: list[str], jobs: int,
             on_done: Callable[[str], None]) -> tuple[int, int]:
    checked_destination(fs, dest)
    total = 0

    def one(relative: str) -> int:
        try:
            return upload_file(fs, dest, site_dir, relative)
        except FileNotFoundError as exc:
            raise PublishError(f"{dest.url}: bucket {dest.bucket} not found") from exc
        except Exception as exc:
            raise PublishError(f"{dest.url}: uploading {relative} failed: {_one_line(exc)}") from exc

    phases: dict[int, list[str]] = {}
    for relative in files:
        phases.setdefault(publish_phase(relative), []).append(relative)
    # gcsfs's calls are thread-safe (they run on its event loop): threads keep `jobs` uploads in flight.
    with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="reportgen-publish") as pool:
        for phase in sorted(phases):
            # Every upload of a phase finishes (or fails) before anything of the
            # next starts; a failure stops before the index pages go out.
            futures = {pool.submit(one, relative): relative for relative in phases[phase]}
            failure = None
            for future in as_completed(futures):
                relative = futures[future]
                try:
                    total += future.result()
                except PublishError as exc:
                    failure = failure or exc
                    continue
                on_done(relative)
            if failure is not None:
                raise failure
    try:
        return total, _delete_stale(fs, dest, set(files))
    except Exception as exc:
        raise PublishError(f"{dest.url}: the site is published, but deleting the objects of an earlier publish "
                           f"failed: {_one_line(exc)}") from exc


def _delete_stale(fs: GCSFileSystem, dest: Destination, keep: set[str]) -> int:
    fs.invalidate_cache(dest.path())
    root = dest.path()
    try:
        existing = fs.find(root)
    except FileNotFoundError:
        existing = []
    offset = len(root) + 1 if dest.prefix else len(dest.bucket) + 1
    stale = [path for path in existing if path[offset:] not in keep]
    if stale:
        fs.rm(stale)
    return len(stale)


def publish_site(
    site_dir: Path | str,
    url: str,
    *,
    fs: GCSFileSystem | None = None,
    jobs: int = DEFAULT_JOBS,
    on_done: Callable[[str], None] | None = None,
) -> PublishReport:
    """Upload a built site to `url` (gs://BUCKET/PREFIX). Raises PublishError."""
    started = time.perf_counter()
    site_dir = Path(site_dir)
    check_site(site_dir)
    dest = parse_destination(url)
    fs = fs or gcs_filesystem()
    files = site_files(site_dir)
    order: list[str] = []

    def done(relative: str) -> None:
        order.append(relative)
        if on_done is not None:
            on_done(relative)

    total, deleted = _publish(fs, dest, site_dir, files, jobs, done)
    return PublishReport(
        url=dest.url, objects=len(files), bytes=total, deleted=deleted,
        seconds=time.perf_counter() - started, order=order,
    )


def checked_destination(fs: GCSFileSystem, dest: Destination) -> None:
    """`_check_destination`, its failures (no such bucket, an endpoint that does not answer) as PublishError."""
    try:
        _check_destination(fs, dest)
    except PublishError:
        raise
    except FileNotFoundError as exc:
        raise PublishError(f"{dest.url}: bucket {dest.bucket} not found") from exc
    except Exception as exc:
        raise PublishError(f"{dest.url}: cannot be read: {_one_line(exc)}") from exc


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def open_destination(url: str) -> GCSFileSystem:
    """Connect and check `url` before a long build: bad URL, no credentials, foreign prefix."""
    dest = parse_destination(url)
    fs = gcs_filesystem()
    checked_destination(fs, dest)
    return fs


__all__ = [
    "CredentialsNotFoundError", "Destination", "PublishError", "PublishReport", "gcs_filesystem",
    "is_gcs_url", "open_destination", "parse_destination", "publish_site",
]
