"""The goals domain is pure: the dependency points service -> domain, never back."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import loopstate.domains.goals as goals_pkg
from loopstate.domains.goals import DOMAIN
from loopstate.service.engine import Service
from loopstate.service.goals_effects import EFFECTS

PACKAGE = Path(goals_pkg.__file__).parent


def test_no_module_of_the_goals_domain_imports_the_service() -> None:
    offenders = []
    for path in sorted(PACKAGE.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n == "loopstate.service" or n.startswith("loopstate.service.")]
    assert offenders == []


def test_importing_and_using_the_goals_domain_loads_no_service_module() -> None:
    probe = (
        "import sys\n"
        "from loopstate.domains.goals import DOMAIN\n"
        "from loopstate_protocol import goals as g\n"
        "from loopstate.domains.base import Context\n"
        "import datetime as dt\n"
        "ctx = Context(now=dt.datetime(2026, 3, 2, tzinfo=dt.timezone.utc), new_id=lambda: 'x', project_id='p',"
        " project_root='/nonexistent', request_id='r1', extra={})\n"
        "state = DOMAIN.initial('goals.g')\n"
        "for e in DOMAIN.decide(state, g.AddTodo(goal_id='g', title='t'), ctx):\n"
        "    e['append_sequence'] = 1\n"
        "    state = DOMAIN.evolve(state, e)\n"
        "DOMAIN.query(state, g.GetBoard(goal_id='g'), ctx)\n"
        "print(sorted(m for m in sys.modules if m.startswith('loopstate.service')))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_service_binds_the_goals_effects_from_its_registry() -> None:
    assert not hasattr(DOMAIN, "effects")
    assert Service(domains=[DOMAIN]).effects_of(DOMAIN) is EFFECTS
