"""ARCHITECTURE.md's import rules, read from its package table and checked over every chain of imports.

The "may import" column of the table is read by machine; each cell is a list of clauses separated by `;`:

- the package's rule: `—` (nothing outside the package), `everything`, `everything above it` (every row
  above this one), or the names it may import;
- `` `a.py` also NAMES ``: what that module of the package may import besides; `` `a.py` only NAMES ``: what it
  may import instead; `` `a.py` and `b.py` stand alone ``: they import no other module of reportgen;
- `` never NAMES `` (or `` `a.py` never NAMES ``): what no chain of imports from the package (or that module)
  may reach, through any package: the contract that keeps a light module light;
- `` nothing imports it but NAMES ``: no module outside the package imports it, but those named.

A name is backticked: `core/` (a package and everything in it), `core/hlo/model.py` (one module), `names.py`
(a module directly in reportgen/), or, in a `never` clause, a third-party module (`numba`, `google.protobuf`).
Text in parentheses is for the reader and is skipped; any other word is an error, so the cell stays readable
by both.

What counts as an import: every `import` statement of a module, at its top level (run when it is imported),
inside a function (run later: still a dependency, so the layering counts it) or under `if TYPE_CHECKING:`
(never run: it names a type of that layer, which is a dependency too). Importing a module also runs its
packages' `__init__` modules, so those are imported too, and allowed wherever the module is.

The rules are transitive: a package may reach what it may import and, in turn, whatever those may import.
A chain of imports from a package's module that leaves that set is reported from the package's side, with
the whole chain (`core.events.table → capture → loaders.wire`): one stray import thus shows in every package
it leaks into, and a `never` contract holds through rows that are allowed to each other.
"""

from __future__ import annotations

import ast
import re
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

ROOT = "reportgen"
RUNS = None  # `Import.deferred` of an import that runs when its module is imported


@dataclass(frozen=True)
class Import:
    target: str  # a dotted module name, reportgen's or another's
    line: int
    deferred: str | None = RUNS  # "in a function" or "type checking" when it does not run on import


@dataclass
class Rule:
    """One row of the table, or one module's own clause of it."""

    may: set[str] = field(default_factory=set)  # modules (reportgen's) this may import
    never: set[str] = field(default_factory=set)  # modules (reportgen's) no chain from here may reach
    never_outside: set[str] = field(default_factory=set)  # third-party module names no chain may reach
    alone: bool = False  # imports no other module of reportgen, its own package's neither


@dataclass
class Rules:
    rows: list[str]  # the packages in table order: "reportgen" first, then "reportgen.loaders", ...
    row_of: dict[str, str]  # module → its row
    package: dict[str, Rule]  # row → its rule
    module: dict[str, Rule]  # module → its own rule, where a clause names it
    importers: dict[str, set[str]]  # row → the only modules outside it that may import it (`nothing imports it`)


class TableError(ValueError):
    """The table cannot be read as rules: a word the grammar lacks, a name that names no module."""


# --- reading the code ---------------------------------------------------------------------------------------

def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def module_imports(source: str, name: str, is_package: bool, known: Iterable[str]) -> list[Import]:
    """Every import statement of a module (`name`), resolved to module names; `known` tells a submodule
    imported with `from package import submodule` from a name."""
    known = set(known)
    package = name if is_package else name.rpartition(".")[0]
    found: list[Import] = []

    def targets(node: ast.Import | ast.ImportFrom) -> list[str]:
        if isinstance(node, ast.Import):
            return [alias.name for alias in node.names]
        base = node.module or ""
        if node.level:  # relative: from the package, up level - 1
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join(parts + ([base] if base else []))
        # The submodules first: a breach is named by the module the statement is after, not its package.
        return [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known] + [base]

    def visit(node: ast.AST, deferred: str | None) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.extend(Import(t, node.lineno, deferred) for t in targets(node))
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            deferred = deferred or "in a function"
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.body:
                visit(child, "type checking")
            for child in node.orelse:
                visit(child, deferred)
            return
        for child in ast.iter_child_nodes(node):
            visit(child, deferred)

    visit(ast.parse(source), RUNS)
    return found


def with_packages(name: str, imports: list[Import]) -> list[Import]:
    """A module's imports with the `__init__` modules Python runs for them: each target's packages, and the
    module's own (line 0: no statement of its own)."""
    out, seen = [], set()
    implied = [Import(p, 0) for p in _parents(name)]
    for imp in [*implied, *imports]:
        for target in [imp.target, *reversed(_parents(imp.target))]:
            key = (target, imp.deferred)
            if target != name and key not in seen:
                seen.add(key)
                out.append(Import(target, imp.line, imp.deferred))
    return out


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def read_imports(root: Path, package: str = ROOT) -> dict[str, list[Import]]:
    """Every module of `package` (under `root`) and its imports, the packages' `__init__` modules included."""
    paths = {module_name(p, root): p for p in sorted((root / package).rglob("*.py")) if "__pycache__" not in p.parts}
    return {name: with_packages(name, module_imports(path.read_text(), name, path.name == "__init__.py", paths))
            for name, path in paths.items()}


# --- reading the table --------------------------------------------------------------------------------------

_NAME = re.compile(r"`([^`]+)`")
_WORDS = {"also", "only", "never", "stand", "stands", "alone", "and", "nothing", "imports", "it", "but",
          "everything", "above", "—"}


def package_table(markdown: str, heading: str = "## The packages") -> list[tuple[str, str]]:
    """(package cell, may-import cell) per row of the table under `heading`."""
    section = markdown.split(heading, 1)[1]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells[0] == "package":
            continue
        rows.append((cells[0], cells[-1]))
    if not rows:
        raise TableError(f"no package table under {heading!r}")
    return rows


def _strip_notes(text: str) -> str:
    """The cell without its parenthesised remarks (nested ones included)."""
    out, depth = [], 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(depth - 1, 0)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def _resolve(name: str, modules: set[str], where: str) -> set[str]:
    """The modules a backticked name stands for."""
    if name.endswith("/"):
        dotted = ".".join([ROOT, *name.strip("/").split("/")]) if name != f"{ROOT}/" else ROOT
        found = {m for m in modules if m == dotted or m.startswith(dotted + ".")}
    elif name.endswith(".py"):
        found = {".".join([ROOT, *name.removesuffix(".py").split("/")])} & modules
    else:
        raise TableError(f"{where}: `{name}` is neither a package (`x/`) nor a module (`x.py`)")
    if not found:
        raise TableError(f"{where}: `{name}` names no module of {ROOT}")
    return found


def _own(name: str, row: str, members: set[str], where: str) -> set[str]:
    """The modules of a row a clause's subject names: `registry.py` in the row of `sections/` is
    `reportgen.sections.registry`."""
    prefix = row.removeprefix(ROOT).strip(".").replace(".", "/")
    return _resolve(f"{prefix}/{name}" if prefix else name, members, where)


def read_rules(markdown: str, modules: Iterable[str]) -> Rules:
    modules = set(modules)
    table = package_table(markdown)
    rows = []
    for cell, _ in table:
        names = _NAME.findall(cell)
        if len(names) != 1 or not names[0].endswith("/"):
            raise TableError(f"package cell {cell!r}: one backticked package (`x/`) expected")
        rows.append(ROOT if names[0] == f"{ROOT}/" else ".".join([ROOT, *names[0].strip("/").split("/")]))
    # A module belongs to the row of its longest package; reportgen's own modules to the first row.
    row_of = {m: max((r for r in rows if m == r or m.startswith(r + ".")), key=len, default=ROOT) for m in modules}
    members = {r: {m for m, row in row_of.items() if row == r} for r in rows}
    rules = Rules(rows, row_of, {}, {}, {})
    for index, ((cell, may), row) in enumerate(zip(table, rows)):
        where = f"the row of {cell}"
        clauses = [c.strip() for c in _strip_notes(may).split(";") if c.strip()]
        rule = Rule()
        for number, clause in enumerate(clauses):
            names = _NAME.findall(clause)
            words = [w for w in re.split(r"[\s,.:]+", _NAME.sub(" ", clause)) if w]
            if unknown := [w for w in words if w not in _WORDS]:
                raise TableError(f"{where}: {clause!r}: the rules' grammar has no {' '.join(unknown)!r}")
            text = " ".join(words)
            if text.startswith("nothing imports it"):
                rules.importers[row] = set().union(*(_resolve(n, modules, where) for n in names))
                continue
            split = next((k for k in ("also", "only", "never") if k in words), None)
            if split is None and text in ("stand alone", "and stand alone", "stands alone"):
                for n in names:
                    for m in _own(n, row, members[row], where):
                        rules.module[m] = Rule(alone=True)
                continue
            if split is None:
                if number:
                    raise TableError(f"{where}: {clause!r}: only the first clause is the package's rule")
                if text == "everything":
                    rule.may = set(modules)
                elif text == "everything above it":
                    rule.may = set().union(*(members[r] for r in rows[:index]))
                elif text == "—" and not names:
                    rule.may = set()
                elif not text.replace("and", "").strip():
                    rule.may = set().union(*(_resolve(n, modules, where) for n in names))
                else:
                    raise TableError(f"{where}: {clause!r} cannot be read")
                continue
            # `a.py` also / only / never NAMES: the names before the keyword are the package's modules (the
            # keyword is found outside the backticks, where a name could hold it).
            masked = _NAME.sub(lambda m: "`" + "_" * (len(m.group(0)) - 2) + "`", clause)
            at = re.search(rf"\b{split}\b", masked)
            assert at is not None  # `split` is one of the clause's words
            subjects, objects = _NAME.findall(clause[:at.start()]), _NAME.findall(clause[at.end():])
            if split == "never":
                local = {n for n in objects if n.endswith(("/", ".py"))}
                outside = set(objects) - local
                forbidden = set().union(*(_resolve(n, modules, where) for n in local)) if local else set()
                targets = [rule] if not subjects else [
                    rules.module.setdefault(m, Rule(set(rule.may))) for n in subjects
                    for m in _own(n, row, members[row], where)]
                for target in targets:
                    target.never |= forbidden
                    target.never_outside |= outside
                continue
            if not subjects or not objects:
                raise TableError(f"{where}: {clause!r}: `module` {split} `names` expected")
            extra = set().union(*(_resolve(n, modules, where) for n in objects))
            for n in subjects:
                for m in _own(n, row, members[row], where):
                    own = rules.module.setdefault(m, Rule(set(rule.may)))
                    own.may = own.may | extra if split == "also" else extra
        rules.package[row] = rule
    return rules


# --- checking -----------------------------------------------------------------------------------------------

def _short(name: str) -> str:
    return name.removeprefix(ROOT + ".") if name != ROOT else ROOT


def _key(rules: Rules, module: str) -> str:
    """The rule a module follows: its own clause's, or its row's."""
    return module if module in rules.module else rules.row_of[module]


def _direct(rules: Rules, module: str, own_clause: bool = True) -> set[str]:
    """What `module` may import itself: its row's modules, its rule's (its own clause's, unless `own_clause` is
    false), and the packages Python runs for them."""
    row = rules.row_of[module]
    rule = rules.module.get(module, rules.package[row]) if own_clause else rules.package[row]
    if rule.alone:
        return {ROOT, *_parents(module)}
    allowed = {m for m, r in rules.row_of.items() if r == row} | rule.may
    return allowed | {p for m in allowed for p in _parents(m)} | {ROOT}


def _reachable(rules: Rules) -> dict[str, set[str]]:
    """Per rule (`_key`): what its modules may reach. That is what they may import, and in turn what the
    packages of those may import, by their packages' rules: a module's own clause (`registry.py also ...`)
    is its own, and does not pass to what reaches it."""
    direct: dict[str, set[str]] = {}
    for module in rules.row_of:
        direct.setdefault(_key(rules, module), _direct(rules, module))
        direct.setdefault(rules.row_of[module], _direct(rules, module, own_clause=False))
    closed: dict[str, set[str]] = {}
    for start in direct:
        rows, allowed, queue = {start}, set(direct[start]), [start]
        while queue:
            for module in direct[queue.pop()]:
                if (row := rules.row_of[module]) not in rows:
                    rows.add(row)
                    allowed |= direct[row]
                    queue.append(row)
        closed[start] = allowed
    return closed


def _chain(parent: Mapping[str, tuple[str, Import]], here: str, end: str, last: Import) -> str:
    """`start → … → here → end`, from the breadth-first walk's `parent` links (the start has none); an import
    that does not run on import says so."""
    links = [(end, last)]
    node = here
    while node in parent:
        before, imp = parent[node]
        links.append((node, imp))
        node = before
    text = _short(node)
    for name, imp in reversed(links):
        text += f" →{f' ({imp.deferred})' if imp.deferred else ''} {_short(name)}"
    return text


def check(rules: Rules, graph: Mapping[str, list[Import]]) -> list[str]:
    """Every breach of the rules, one line each, naming the chain of imports that makes it: per package and
    module it wrongly reaches, the chain from the first of the package's modules (by name) that does."""
    reach = _reachable(rules)
    found: dict[tuple[str, str], str] = {}
    statements: set[tuple[str, str, int]] = set()  # (row, module, line): one breach reported per statement
    for start in sorted(graph):
        row = rules.row_of[start]
        rule, whole = rules.module.get(start, rules.package[row]), rules.package[row]
        never, never_outside = rule.never | whole.never, rule.never_outside | whole.never_outside
        allowed = reach[_key(rules, start)]
        # Breadth first: each module is reached by a shortest chain, and a chain stops where it breaks a rule
        # (what lies beyond is the breach's consequence, reported from the breaching module's own side).
        parent: dict[str, tuple[str, Import]] = {}
        seen, queue = {start}, deque([start])
        while queue:
            here = queue.popleft()
            for imp in graph.get(here, ()):
                there = imp.target
                if there not in graph:  # another package's module: only `never` clauses speak of those
                    hit = next((n for n in never_outside if there == n or there.startswith(n + ".")), None)
                    if hit is not None and (row, here, imp.line) not in statements:
                        statements.add((row, here, imp.line))
                        # A module's own `never` clause speaks for the module, a package's for the package.
                        who = f"{_short(row)}/" if hit in whole.never_outside else _short(start)
                        found.setdefault((who, hit), f"{who} never reaches `{hit}`, but "
                                                     f"{_chain(parent, here, there, imp)}")
                    continue
                if there in seen:
                    continue
                seen.add(there)
                if there in never or there not in allowed:
                    if (row, here, imp.line) not in statements:
                        statements.add((row, here, imp.line))
                        what = "never reaches" if there in never else "may not reach"
                        found.setdefault((row, there), f"{_short(row)}/ {what} {_short(there)}, but "
                                                       f"{_chain(parent, here, there, imp)}")
                    continue
                parent[there] = (here, imp)
                queue.append(there)
    out = set(found.values())
    for row, allowed_importers in rules.importers.items():
        for name in sorted(graph):
            if rules.row_of[name] == row or name in allowed_importers:
                continue
            for imp in graph[name]:
                if imp.target in graph and rules.row_of[imp.target] == row:
                    out.add(f"nothing imports {_short(row)}/ but {', '.join(sorted(map(_short, allowed_importers)))},"
                            f" but {_short(name)} → {_short(imp.target)} (line {imp.line})")
                    break  # one line per importer
    return sorted(out)


def loaded_on_import(graph: Mapping[str, list[Import]], module: str) -> set[str]:
    """The modules of the graph that importing `module` runs: its imports that run on import, and theirs."""
    seen, queue = {module}, deque([module])
    while queue:
        for imp in graph.get(queue.popleft(), ()):
            if imp.deferred is RUNS and imp.target in graph and imp.target not in seen:
                seen.add(imp.target)
                queue.append(imp.target)
    return seen
