"""The layout ARCHITECTURE.md describes, kept true: packages by role, data flowing one way, no import circles."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from tests.conftest import REPO
from tests.import_rules import (
    Import,
    Rules,
    TableError,
    check,
    loaded_on_import,
    read_imports,
    read_rules,
    with_packages,
)

PACKAGE = REPO / "reportgen"
TOP_LEVEL_LIMIT = 8  # modules directly in reportgen/ besides __init__ and __main__

GRAPH = read_imports(REPO)  # every module of reportgen and its imports (the packages' __init__ included)
GENERATED = {name for name in GRAPH if name.endswith("_pb2")}
# reportgen's own modules each module names in an import statement (the __init__ modules Python runs besides
# are left out: a docstring's module imports nothing, so no circle closes through them).
IMPORTS = {name: {i.target for i in imports if i.line and i.target in GRAPH}
           for name, imports in GRAPH.items() if name not in GENERATED}


@pytest.fixture(scope="module")
def rules() -> Rules:
    """ARCHITECTURE.md's table of packages, read as rules (a table the grammar cannot read fails each test)."""
    return read_rules((REPO / "ARCHITECTURE.md").read_text(), GRAPH)


def test_few_modules_sit_directly_in_the_package():
    top = [p.name for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert len(top) <= TOP_LEVEL_LIMIT, top


def test_every_package_says_what_it_owns():
    for init in PACKAGE.rglob("__init__.py"):
        if "__pycache__" in init.parts or init.parent.name == "proto":
            continue
        doc = ast.get_docstring(ast.parse(init.read_text()))
        assert doc and len(doc) > 80 and "TODO" not in doc, f"{init.relative_to(REPO)} has no docstring of its own"


def test_imports_keep_to_the_table_of_packages(rules):
    """ARCHITECTURE.md's "may import" column, read as rules (tests/import_rules.py), over every chain of imports."""
    breaches = check(rules, GRAPH)
    assert breaches == [], "imports against ARCHITECTURE.md's table:\n" + "\n".join(breaches)


def test_the_table_rules_out_the_data_model_loading_the_decoder(rules):
    """The breach the table was written against, planted back: `capture.py` taking its constants from the
    decoder, which every package that reads a capture would then load."""
    graph = {**GRAPH, "reportgen.capture": [*GRAPH["reportgen.capture"], Import("reportgen.loaders.wire", 23)]}
    breaches = check(rules, graph)
    assert "reportgen/ may not reach loaders.wire, but capture → loaders.wire" in breaches
    # Every package that reads a capture, and may not load the decoder, is told so, with its chain.
    leaks = sorted(b.split("/ ", 1)[0] for b in breaches if b.endswith(" → capture → loaders.wire"))
    assert leaks == ["core", "export", "sections"], breaches
    assert "sections/ may not reach loaders.wire, but sections.base → core.host → capture → loaders.wire" in breaches


def test_rows_run_bottom_up(rules):
    """Each row's rule names rows above it only, but compare/'s PR summary reading ci/'s sticky-comment marker
    (the table's other exceptions are one module's own clause: `__main__.py`, `sections/registry.py`)."""
    order = {row: i for i, row in enumerate(rules.rows)}
    below = {(row, rules.row_of[m]) for row in rules.rows for m in rules.package[row].may
             if order[rules.row_of[m]] > order[row]}
    assert sorted(below) == [("reportgen.compare", "reportgen.ci")]


def test_every_package_has_its_row(rules):
    packages = {f"reportgen.{p.parent.name}" for p in PACKAGE.glob("*/__init__.py")}
    assert sorted(packages - set(rules.rows)) == []


# Modules whose imports load little (a subprocess each): the data model, the single file, a host's analyses,
# discovery and the command line's dispatch.
@pytest.mark.parametrize("module", ["reportgen.capture", "reportgen.output.single_file", "reportgen.core.host",
                                    "reportgen.loaders.logdir", "reportgen.cli.main"])
def test_the_import_graph_is_what_python_loads(module, rules):
    """The checker's graph is Python's: importing a module loads exactly the modules of reportgen its imports that
    run on import reach, and none of the packages its `never` clauses rule out."""
    code = (f"import json, sys, {module}; print(json.dumps(sorted(sys.modules)))")
    loaded = set(json.loads(subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True,
                                           text=True).stdout))
    assert {m for m in loaded if m == "reportgen" or m.startswith("reportgen.")} == loaded_on_import(GRAPH, module)
    rule = rules.module.get(module, rules.package[rules.row_of[module]])
    never = rule.never_outside | rules.package[rules.row_of[module]].never_outside
    assert sorted(m for m in loaded if m.split(".")[0] in never or m in never) == []


# A made-up package, to see the checker fail: `low/` at the bottom, `mid/` on it, `top/` on both.
PLANTED_TABLE = """## The packages

| package | owns | may import |
|---|---|---|
| `pkg/` | `base.py` (the data), `light.py`, `heavy.py` | — (`heavy.py` reads `base.py`); `light.py` never `numba` |
| `low/` | the bottom | `base.py`, `heavy.py` |
| `mid/` | the middle | `low/`; `extra.py` also `top/api.py` (its one exception) |
| `top/` | the top | everything above it; nothing imports it but `mid/extra.py` |
"""
PLANTED_MODULES = ["pkg", "pkg.base", "pkg.light", "pkg.heavy", "pkg.low", "pkg.low.a", "pkg.mid", "pkg.mid.b",
                   "pkg.mid.extra", "pkg.top", "pkg.top.api", "pkg.top.c"]


@pytest.fixture
def planted(monkeypatch):
    """The checker over PLANTED_TABLE and a module map of `pkg` given as {module: [what it imports]}."""
    import tests.import_rules

    monkeypatch.setattr(tests.import_rules, "ROOT", "pkg")

    def breaches(edges: dict[str, list[str]]) -> list[str]:
        graph = {m: with_packages(m, [Import(t, 1) for t in edges.get(m, [])]) for m in PLANTED_MODULES}
        return check(read_rules(PLANTED_TABLE, graph), graph)
    return breaches


def test_the_checker_passes_imports_that_keep_to_the_table(planted):
    assert planted({"pkg.heavy": ["pkg.base", "numba"], "pkg.low.a": ["pkg.heavy"], "pkg.mid.b": ["pkg.low.a"],
                    "pkg.mid.extra": ["pkg.top.api"], "pkg.top.c": ["pkg.mid.b", "pkg.base"]}) == []


def test_the_checker_names_each_chain_that_breaks_the_table(planted):
    assert planted({
        "pkg.low.a": ["pkg.mid.b"],  # backward: low may not import mid
        "pkg.mid.b": ["pkg.top.c"],  # only mid/extra.py may import top/, and top/api.py alone
        "pkg.light": ["pkg.heavy"],  # allowed in its row, but heavy loads numba
        "pkg.heavy": ["numba"],
    }) == [
        "light never reaches `numba`, but light → heavy → numba",
        "low/ may not reach mid.b, but low.a → mid.b",
        "mid/ may not reach top.c, but mid.b → top.c",
        "nothing imports top/ but mid.extra, but mid.b → top.c (line 1)",
    ]


def test_a_breach_shows_in_every_package_it_leaks_into(planted):
    """The data model importing upwards: a row that may import it reaches, through it, what that row may not."""
    assert planted({"pkg.base": ["pkg.mid.b"], "pkg.low.a": ["pkg.base"]}) == [
        "low/ may not reach mid.b, but low.a → base → mid.b",
        "pkg/ may not reach mid.b, but base → mid.b",
    ]


def test_a_cell_the_rules_cannot_read_is_an_error(planted):
    with pytest.raises(TableError, match="grammar has no 'mostly'"):
        read_rules(PLANTED_TABLE.replace("everything above it", "mostly `low/`"), PLANTED_MODULES)
    with pytest.raises(TableError, match="`gone.py` names no module"):
        read_rules(PLANTED_TABLE.replace("`base.py`, `heavy.py`", "`base.py`, `gone.py`"), PLANTED_MODULES)


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
