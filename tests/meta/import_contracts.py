"""The import contract of loopstate's layers, and a checker for it (docs/architecture.md, *Layers*).

Every ``import`` and ``from ... import`` statement of every module counts, wherever it
stands: at the top, inside a function (the lazy imports that keep hooks fast), or under
``if TYPE_CHECKING:``. A module's layer is the package below ``loopstate`` it lives in
(``loopstate_protocol`` is the protocol layer). ``check`` returns one line per broken
rule, naming the file, the line and the rule, so a failure says what to move where.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

FRONT_DOORS = ("cli", "rpc", "hooks", "mcpserver", "install")

# Which layers each layer may import (itself included). A layer not listed imports
# nothing of loopstate's. "top" is the loopstate package itself (its __version__) and
# its __main__ (which starts the CLI).
MAY_IMPORT: dict[str, frozenset[str]] = {
    "protocol": frozenset({"protocol"}),
    "core": frozenset({"core", "protocol"}),
    "domains": frozenset({"domains", "core", "protocol"}),
    "service": frozenset({"service", "domains", "core", "protocol"}),
    # Front doors translate and call the service; none imports another, except the CLI,
    # the launcher of every other one (`loopstate serve`, `mcp`, `hook`, `setup`).
    **{door: frozenset({door, "service", "core", "protocol", "top"}) for door in FRONT_DOORS if door != "cli"},
    "cli": frozenset({*FRONT_DOORS, "service", "core", "protocol", "top"}),
    "top": frozenset({"top", "cli"}),
}

# Third-party packages the inner layers may use: the protocol depends on msgspec alone,
# and so do the domains. Core adds portalocker (the lock of platforms without flock),
# cryptography (the Ed25519 signature of checkpoints, core/signed_note.py), watchdog (the
# JSONL store's change feed, core/jsonl_store.py) and psycopg (the PostgreSQL store); the service
# adds cryptography (the checkpoint key) and watchdog (the store watcher, service/watch.py).
# Each is imported only on the path that needs it. Front doors bring their own (pygls,
# mcp, tomlkit, shtab).
MAY_USE: dict[str, frozenset[str]] = {
    "protocol": frozenset({"msgspec"}),
    "core": frozenset({"msgspec", "portalocker", "cryptography", "watchdog", "psycopg"}),
    "domains": frozenset({"msgspec"}),
    "service": frozenset({"msgspec", "cryptography", "watchdog"}),
}

# Domain modules every domain shares; any other domain module belongs to one domain only.
SHARED_DOMAIN_MODULES = frozenset({"base", "harness"})


@dataclass(frozen=True)
class Import:
    importer: str  # dotted module name
    imported: str  # dotted module name, resolved to the module when ``from X import module``
    path: Path
    line: int


def layer_of(module: str) -> str | None:
    """The layer of a loopstate module; None for anything else (stdlib, third-party)."""
    parts = module.split(".")
    if parts[0] == "loopstate_protocol":
        return "protocol"
    if parts[0] != "loopstate":
        return None
    if len(parts) == 1 or parts[1] == "__main__":
        return "top"
    return parts[1] if parts[1] in MAY_IMPORT else "top"


def module_name(path: Path, source_root: Path) -> str:
    parts = list(path.relative_to(source_root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_in(source_root: Path, package: str) -> Iterator[Import]:
    """Every import statement of every module of ``package`` (found below ``source_root``)."""
    base = source_root / package
    for path in sorted(base.rglob("*.py")):
        importer = module_name(path, source_root)
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield Import(importer, alias.name, path, node.lineno)
            elif isinstance(node, ast.ImportFrom):
                target = _absolute(node, importer, is_package)
                for alias in node.names:
                    candidate = f"{target}.{alias.name}"
                    as_module = _is_module(source_root, candidate)
                    yield Import(importer, candidate if as_module else target, path, node.lineno)


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    package = importer.split(".") if is_package else importer.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _is_module(source_root: Path, dotted: str) -> bool:
    path = source_root.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _domain_package(module: str) -> str | None:
    parts = module.split(".")
    if len(parts) >= 3 and parts[:2] == ["loopstate", "domains"] and parts[2] not in SHARED_DOMAIN_MODULES:
        return parts[2]
    return None


def violations(found: Iterator[Import] | list[Import], allowed: frozenset[tuple[str, str]] = frozenset()) -> list[str]:
    """Each import that breaks a rule, as ``path:line: importer imports imported (rule)``;
    ``allowed`` holds (importer, imported) pairs excused by name (KNOWN_REACH_AROUNDS)."""
    out: list[str] = []
    for item in found:
        if (item.importer, item.imported) in allowed:
            continue
        rule = broken_rule(item)
        line = f"{item.path}:{item.line}: {item.importer} imports {item.imported} ({rule})"
        if rule is not None and line not in out:
            out.append(line)
    return out


def broken_rule(item: Import) -> str | None:
    source = layer_of(item.importer)
    target = layer_of(item.imported)
    if source is None:
        return None
    if target is None:
        top = item.imported.split(".")[0]
        if top in sys.stdlib_module_names or top == "__future__" or source not in MAY_USE:
            return None
        if top not in MAY_USE[source]:
            return f"{source} may use only {', '.join(sorted(MAY_USE[source]))} beside the standard library"
        return None
    if source in FRONT_DOORS and target == "domains":
        return "front doors reach a domain only through the service (loopstate.service)"
    if target not in MAY_IMPORT[source]:
        return f"{source} may import only {', '.join(sorted(MAY_IMPORT[source]))}"
    mine, theirs = _domain_package(item.importer), _domain_package(item.imported)
    if source == "domains" and mine is not None and theirs is not None and mine != theirs:
        return "a domain imports no other domain: what two domains share lives in core or domains/base.py"
    if source in FRONT_DOORS and item.imported.startswith("loopstate.service.") and item.imported.endswith("_effects"):
        return "front doors never import the service's *_effects modules, its private glue"
    return None
