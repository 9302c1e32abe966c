"""The runs domain is pure: the service imports it, never the other way round."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import loopstate.domains.runs as runs_pkg
from loopstate.service.engine import Service
from loopstate.service.runs_effects import EFFECTS


def test_runs_domain_modules_never_import_the_service_cli_or_rpc():
    offenders = []
    for path in sorted(Path(runs_pkg.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                [node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            offenders += [f"{path.name}: {n}" for n in names if n.startswith(("loopstate.service", "loopstate.rpc", "loopstate.cli"))]
    assert offenders == []


def test_using_the_runs_domain_loads_no_service_module():
    code = (
        "import sys\n"
        "from loopstate.domains.runs import DOMAIN\n"
        "DOMAIN.initial('runs.00000000-0000-4000-8000-000000000001')\n"
        "print(sorted(m for m in sys.modules if m.startswith('loopstate.service')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_service_binds_the_runs_effects(tmp_path):
    service = Service(data_dir=tmp_path)
    assert service.effects_of(service.domains["runs"]) is EFFECTS
