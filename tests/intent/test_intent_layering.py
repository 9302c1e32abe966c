"""The intent domain is pure: the dependency points service -> domain, never back."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import loopstate.domains.intent as intent_pkg


def test_intent_domain_modules_never_import_the_service_layer() -> None:
    package = Path(intent_pkg.__file__).parent
    offenders = []
    for path in sorted(package.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.startswith(("loopstate.service", "loopstate.rpc", "loopstate.cli"))]
    assert offenders == []


def test_importing_and_using_the_intent_domain_loads_no_service_module() -> None:
    code = (
        "import sys\n"
        "from loopstate.domains.intent import DOMAIN\n"
        "DOMAIN.initial('intent')\n"
        "assert not hasattr(DOMAIN, 'effects'), 'effects are bound by the service registry'\n"
        "print(sorted(m for m in sys.modules if m.startswith('loopstate.service')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_service_registry_binds_the_intent_effects() -> None:
    from loopstate.service.engine import Service
    from loopstate.service.intent_effects import EFFECTS

    service = Service()
    assert service.effects_of(service.domains["intent"]) is EFFECTS
