"""Two rules of the core's shape, and a checker for each (docs/architecture.md, *The core*).

- No private names across core modules. A module's ``_name`` (a function, a class,
  a method, an attribute it sets) is for that module alone: another core module
  that reads ``thing._name`` or imports ``_name`` reaches into it. A name counts as
  private to the modules that define it (``def _name``, ``class _Name``,
  ``self._name = ...`` or ``cls._name = ...``, ``_name = ...``, a ``__slots__`` entry); ``x._name`` in a
  module that does not define ``_name`` while another core module does is a
  reach-in, whatever ``x`` is (``self`` and ``cls`` included: a subclass that reads
  its base's private state from another module reaches in too). Names no core
  module defines (the standard library's ``os._exit``, a named tuple's
  ``_replace``) are not the core's and not checked.
- No import circle inside the core. Every import counts, wherever it stands (the
  top of a module, inside a function, under ``if TYPE_CHECKING:``): a lazy import
  hides a circle from the interpreter, not from a reader.

``private_reaches`` and ``import_cycles`` return one line per break, naming the file
and line, so a failure says what to move where.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# Public by the language's own contract, though they start with an underscore.
NAMED_TUPLE_API = frozenset({"_replace", "_asdict", "_fields", "_make", "_field_defaults"})


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. loopstate.core.ledger
    path: Path
    tree: ast.Module


def core_modules(source_root: Path, package: str = "loopstate.core") -> list[Module]:
    """Every module of ``package`` below ``source_root`` (a folder holding ``loopstate/``)."""
    folder = source_root.joinpath(*package.split("."))
    out = []
    for path in sorted(folder.rglob("*.py")):
        parts = list(path.relative_to(source_root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append(Module(".".join(parts), path, ast.parse(path.read_text(encoding="utf-8"), str(path))))
    return out


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def defined_private_names(module: Module) -> set[str]:
    """The private names ``module`` defines: functions, classes, assignments, attributes it sets, slots."""
    found: set[str] = set()
    for node in ast.walk(module.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del))
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            found.add(node.attr)
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            for item in ast.walk(node.value):
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    found.add(item.value)
    return {name for name in found if _is_private(name)}


def private_reaches(modules: list[Module]) -> list[str]:
    """One line per read of another core module's private name, or import of one."""
    names = {m.name for m in modules}
    defined = {m.name: defined_private_names(m) for m in modules}
    owners: dict[str, set[str]] = {}
    for module, privates in defined.items():
        for private in privates:
            owners.setdefault(private, set()).add(module)
    out = []
    for module in modules:
        own = defined[module.name]
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Attribute) and _is_private(node.attr) and node.attr not in NAMED_TUPLE_API:
                elsewhere = owners.get(node.attr, set()) - {module.name}
                if node.attr not in own and elsewhere:
                    out.append(f"{module.path}:{node.lineno}: {module.name} reads {ast.unparse(node)}, "
                               f"private to {', '.join(sorted(elsewhere))}")
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                source = _resolve(module, node)
                for alias in node.names:
                    if _is_private(alias.name) and (source in names or f"{source}.{alias.name}" in names):
                        out.append(f"{module.path}:{node.lineno}: {module.name} imports {alias.name} from {source}, "
                                   "a private name of another module")
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in names and any(_is_private(part) for part in alias.name.split(".")):
                        out.append(f"{module.path}:{node.lineno}: {module.name} imports the private module {alias.name}")
    return out


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    """The absolute module a ``from ... import`` names (relative imports resolved)."""
    if not node.level:
        return node.module or ""
    package = module.name.split(".")
    if module.path.name != "__init__.py":
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def import_edges(modules: list[Module]) -> Iterator[tuple[str, str, int]]:
    """(importer, imported, line) for every import of one core module by another, wherever it stands."""
    names = {m.name for m in modules}
    for module in modules:
        for node in ast.walk(module.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in names:
                        yield module.name, alias.name, node.lineno
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(module, node)
                targets = [f"{source}.{alias.name}" for alias in node.names if f"{source}.{alias.name}" in names]
                if targets:
                    for target in targets:
                        yield module.name, target, node.lineno
                elif source in names:
                    yield module.name, source, node.lineno


def import_cycles(modules: list[Module]) -> list[str]:
    """One line per import circle (a strongly connected set of two or more modules, or a
    module importing itself), listing its modules and the imports that close it."""
    graph: dict[str, dict[str, int]] = {m.name: {} for m in modules}
    for importer, imported, line in import_edges(modules):
        graph[importer].setdefault(imported, line)
    out = []
    for component in _strongly_connected(graph):
        if len(component) > 1 or component[0] in graph[component[0]]:
            members = set(component)
            edges = sorted(f"{a} -> {b} (line {line})" for a in component for b, line in graph[a].items() if b in members)
            out.append(f"import circle among {', '.join(sorted(component))}: " + "; ".join(edges))
    return sorted(out)


def _strongly_connected(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative (no recursion limit on a long chain of imports)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                found.append(sorted(component))
    return found
