"""How each file of a built site is served: media type, cache policy, publish order.

Shared by `publish` (object metadata on GCS) and `serve` (local HTTP), so a
site behaves the same wherever it is looked at.
"""

from __future__ import annotations

import mimetypes
import re

# Longest suffix first: `.json.gz` trace chunks are gzip files, not JSON.
_MEDIA_TYPES: tuple[tuple[str, str], ...] = (
    (".json.gz", "application/gzip"),
    (".html", "text/html; charset=utf-8"),
    (".htm", "text/html; charset=utf-8"),
    (".json", "application/json"),
    (".csv", "text/csv; charset=utf-8"),
    (".md", "text/markdown; charset=utf-8"),
    (".txt", "text/plain; charset=utf-8"),
    (".png", "image/png"),
    (".svg", "image/svg+xml"),
    (".js", "application/javascript"),
    (".css", "text/css"),
    (".gz", "application/gzip"),
    (".pftrace", "application/octet-stream"),
    (".pb", "application/octet-stream"),
)
OCTET_STREAM = "application/octet-stream"

# Assets carry a content hash in their name (see site.write_assets): a new
# build writes a new name, so a cached copy can never be stale.
IMMUTABLE = "public, max-age=31536000, immutable"
# Pages and data keep their names from build to build: short, so a new
# publish shows within a minute.
SHORT = "public, max-age=60"
# The entry points decide which version a reader sees: always revalidate.
REVALIDATE = "no-cache"

_HASHED_ASSET = re.compile(r"^assets/(?:.*/)?[^/]+-[0-9a-f]{12}\.[A-Za-z0-9.]+$")
ENTRY_POINTS = ("index.html", "summary.json")


def content_type(relative: str) -> str:
    """The Content-Type of a site file, from its name."""
    name = relative.lower()
    for suffix, media_type in _MEDIA_TYPES:
        if name.endswith(suffix):
            return media_type
    guessed, encoding = mimetypes.guess_type(name, strict=False)
    if guessed is None or encoding is not None:
        return OCTET_STREAM
    return guessed + ("; charset=utf-8" if guessed.startswith("text/") else "")


def cache_control(relative: str) -> str:
    """The Cache-Control of a site file (a path relative to the site root)."""
    if _HASHED_ASSET.match(relative):
        return IMMUTABLE
    if relative in ENTRY_POINTS:
        return REVALIDATE
    return SHORT


def publish_phase(relative: str) -> int:
    """The order in which files go out, so links never point at missing files.

    0: assets, data, trace chunks; 1: tool pages; 2: run index pages (they
    link to tool pages); 3: the site index (links to runs); 4: summary.json,
    last, so that a script polling it sees a complete site.
    """
    if relative == "summary.json":
        return 4
    if relative == "index.html":
        return 3
    if relative.endswith("/index.html"):
        return 2
    if relative.endswith((".html", ".htm")):
        return 1
    return 0
