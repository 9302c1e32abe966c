"""Front doors reach the service through its public face: never through its *_effects modules.

The CLI, the sidecar (rpc/) and every later front door get the project root,
config, kill switches and Markdown status from loopstate.service (front.py);
the effects modules are the service's private glue.
"""

from __future__ import annotations

import ast
from pathlib import Path

import loopstate

PACKAGE = Path(loopstate.__file__).parent
FRONT_DOORS = ("cli", "rpc", "hooks")


def imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
            if node.module == "loopstate.service":  # from loopstate.service import runs_effects
                names += [f"loopstate.service.{a.name}" for a in node.names if a.name.endswith("_effects")]
    return names


def test_front_doors_never_import_the_service_effects_modules() -> None:
    offenders = []
    for door in FRONT_DOORS:
        for path in sorted((PACKAGE / door).rglob("*.py")):
            offenders += [f"{door}/{path.name}: {name}" for name in imported_modules(path)
                          if name.startswith("loopstate.service.") and name.endswith("_effects")]
    assert offenders == []


def test_the_public_face_exports_what_front_doors_need() -> None:
    import loopstate.service as service

    for name in ("Service", "resolve_root", "project_config", "kill_switch_paths", "probe_kill_switch",
                 "create_kill_switch", "markdown_status", "goal_state", "stream_layout"):
        assert name in service.__all__ and callable(getattr(service, name)), name
