"""The sticky pull-request comment: one comment per pull request (and key), edited on
each push instead of a new one each time.

The body starts with a hidden marker line, `<!-- reportgen:sticky:KEY -->`;
the recipes' update step (GitHub: `gh api`, GitLab: the notes API) looks for
the comment whose body starts with that line and edits it, or posts one when
there is none. KEY tells apart the comments of several jobs on one pull
request (one per model, say). The step refuses a body without the marker,
which would add a comment on every push.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

MARKER_PREFIX = "<!-- reportgen:sticky:"
MARKER_SUFFIX = " -->"
KEY_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
# The longest comment body GitHub accepts, in characters (GitLab takes a million);
# the body is kept under it in UTF-8 bytes too, whichever way a server counts.
GITHUB_COMMENT_LIMIT = 65_536


class CommentError(Exception):
    """A marker key or link that cannot be used; the message says why."""


def marker(key: str) -> str:
    if not KEY_PATTERN.fullmatch(key):
        raise CommentError(f"sticky comment key {key!r}: use 1 to 64 letters, digits, '.', '_' or '-'")
    return f"{MARKER_PREFIX}{key}{MARKER_SUFFIX}"


def marker_key(body: str) -> str | None:
    """The key of the marker that opens `body`, or None when it opens with none."""
    first = body.split("\n", 1)[0]
    if first.startswith(MARKER_PREFIX) and first.endswith(MARKER_SUFFIX):
        key = first[len(MARKER_PREFIX):-len(MARKER_SUFFIX)]
        return key if KEY_PATTERN.fullmatch(key) else None
    return None


@dataclass(frozen=True)
class Link:
    text: str  # shown as text (escaped where it is written)
    url: str  # http(s), percent-encoded where Markdown would end the link


def link_url(url: str) -> str:
    """`url` safe inside a Markdown link target: only http(s), no spaces, brackets or quotes."""
    if urlsplit(url).scheme.lower() not in ("http", "https"):
        raise CommentError(f"link {url!r}: only http:// and https:// links")
    return quote(url, safe="/:?#&=%+@,;~!*$-._")


def parse_link(spec: str) -> Link:
    """`TEXT=URL` (the text may not hold '=')."""
    text, sep, url = spec.partition("=")
    if not sep or not text.strip() or not url.strip():
        raise CommentError(f"link {spec!r}: give TEXT=URL")
    return Link(text.strip(), link_url(url.strip()))


__all__ = ["GITHUB_COMMENT_LIMIT", "KEY_PATTERN", "MARKER_PREFIX", "CommentError", "Link", "link_url", "marker",
           "marker_key", "parse_link"]
