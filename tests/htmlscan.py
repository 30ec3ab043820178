"""Reading built pages back in tests: links, ids, scripts, attributes, visible text."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class Scan:
    links: list[tuple[str, str, str]] = field(default_factory=list)  # (tag, attribute, value)
    ids: list[str] = field(default_factory=list)
    scripts: list[tuple[dict, str]] = field(default_factory=list)  # (attributes, content)
    attributes: list[tuple[str, str, str | None]] = field(default_factory=list)  # every (tag, name, value)
    text: list[str] = field(default_factory=list)  # text outside scripts and styles


class _Scanner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.scan = Scan()
        self._script: tuple[dict, list[str]] | None = None
        self._style = False

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            self.scan.attributes.append((tag, name, value))
            if name == "id" and value is not None:
                self.scan.ids.append(value)
            if name in ("href", "src") and value is not None:
                self.scan.links.append((tag, name, value))
        if tag == "script":
            self._script = (dict(attrs), [])
        elif tag == "style":
            self._style = True

    def handle_endtag(self, tag):
        if tag == "script" and self._script is not None:
            self.scan.scripts.append((self._script[0], "".join(self._script[1])))
            self._script = None
        elif tag == "style":
            self._style = False

    def handle_data(self, data):
        if self._script is not None:
            self._script[1].append(data)
        elif not self._style:
            self.scan.text.append(data)


def scan_html(text: str) -> Scan:
    scanner = _Scanner()
    scanner.feed(text)
    scanner.close()
    return scanner.scan
