"""The layout ARCHITECTURE.md describes, kept true: packages by role, data flowing one way, no import circles."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = REPO / "reportgen"
TOP_LEVEL_LIMIT = 8  # modules directly in reportgen/ besides __init__ and __main__


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}
GENERATED = {name for name in MODULES if name.endswith("_pb2")}


def _imports(name: str) -> set[str]:
    """Every module (of any package) that `name` imports, at module level or inside functions."""
    tree = ast.parse(MODULES[name].read_text())
    package = name if MODULES[name].name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package, up level - 1
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES)
    return found


IMPORTS = {name: _imports(name) for name in MODULES if name not in GENERATED}


def _importers(prefix: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(f"{name} imports {target}" for name, targets in IMPORTS.items() if name.startswith(prefix)
                  for target in targets if target.startswith(forbidden) or target.endswith("_pb2"))


def test_few_modules_sit_directly_in_the_package():
    top = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(top) <= TOP_LEVEL_LIMIT, top


def test_every_package_says_what_it_owns():
    for init in PACKAGE.rglob("__init__.py"):
        if "__pycache__" in init.parts or init.parent.name == "proto":
            continue
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 80 and "TODO" not in doc, f"{init.relative_to(REPO)} has no docstring of its own"


def test_core_takes_plain_data():
    """Nothing under core/ reads bytes, protobuf or the loaders, or reaches for pages and outputs."""
    forbidden = ("google.protobuf", "reportgen.loaders", "reportgen.sections", "reportgen.output",
                 "reportgen.pipeline", "reportgen.cli", "reportgen.legacy", "reportgen.compare", "reportgen.export")
    assert _importers("reportgen.core", forbidden) == []


def test_sections_draw_from_core_only():
    assert _importers("reportgen.sections", ("reportgen.loaders", "google.protobuf", "reportgen.pipeline",
                                             "reportgen.cli")) == []


def test_loaders_know_nothing_of_pages_or_builds():
    found = _importers("reportgen.loaders", ("reportgen.sections", "reportgen.output", "reportgen.pipeline",
                                             "reportgen.cli", "reportgen.compare", "reportgen.export"))
    assert [f for f in found if not f.endswith("_pb2") and ".loaders.proto." not in f] == []


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), over reportgen's own modules."""
    graph = {name: sorted(t for t in targets if t in IMPORTS and t != name) for name, targets in IMPORTS.items()}
    index, low, on_stack, stack, out = {}, {}, set(), [], []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for name in graph:
        if name not in index:
            visit(name)
    return out


def test_no_import_circles():
    # Package __init__ modules that only hold a docstring import nothing, so a module importing its
    # package's sibling never closes a circle through them.
    assert _cycles() == []


@pytest.mark.parametrize("path", ["ARCHITECTURE.md"])
def test_the_architecture_page_names_every_package(path):
    text = (REPO / path).read_text()
    packages = sorted({p.parent.relative_to(REPO).as_posix() for p in PACKAGE.rglob("__init__.py")
                       if "__pycache__" not in p.parts and p.parent.name != "proto"})
    missing = [p for p in packages if f"{p.removeprefix('reportgen/')}/" not in text and f"{p}/" not in text]
    assert missing == [], f"{path} does not mention {missing}"
