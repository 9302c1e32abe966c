"""Every package keeps its layer's import contract (tests/meta/import_contracts.py holds the rules,
docs/architecture.md explains them); the checker itself is shown to catch each kind of break."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.meta.import_contracts import imports_in, violations


def every_import():
    return [*imports_in(REPO / "server", "loopstate"), *imports_in(REPO / "protocol", "loopstate_protocol")]


def test_every_package_keeps_its_layers_import_contract() -> None:
    """No exception: every front door reaches the domains through the service."""
    assert violations(every_import()) == []


def test_the_checker_reads_every_package() -> None:
    importers = {i.importer.split(".")[:2][-1] for i in every_import()}
    for package in ("core", "domains", "service", "cli", "rpc", "hooks", "mcpserver", "install", "loopstate_protocol"):
        assert package in importers, package


def plant(tmp_path: Path, files: dict[str, str]) -> list[str]:
    """Write a small tree of loopstate and loopstate_protocol modules and check it."""
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(tmp_path).parents:
            if parent != Path("."):
                (tmp_path / parent / "__init__.py").touch()
        path.write_text(textwrap.dedent(text))
    found = [*imports_in(tmp_path, "loopstate")]
    if (tmp_path / "loopstate_protocol").exists():
        found += imports_in(tmp_path, "loopstate_protocol")
    return violations(found)


@pytest.mark.parametrize(("files", "expected"), [
    ({"loopstate/core/ledger.py": "def f():\n    from loopstate.service.engine import Service\n",
      "loopstate/service/engine.py": ""},
     "loopstate/core/ledger.py:2: loopstate.core.ledger imports loopstate.service.engine (core may import only core, protocol)"),
    ({"loopstate/domains/goals/decide.py": "from loopstate.domains.runs import records\n",
      "loopstate/domains/runs/records.py": ""},
     "loopstate.domains.goals.decide imports loopstate.domains.runs.records (a domain imports no other domain"),
    ({"loopstate/domains/intent/state.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                           "    from loopstate.service import engine\n",
      "loopstate/service/engine.py": ""},
     "loopstate/domains/intent/state.py:3: loopstate.domains.intent.state imports loopstate.service.engine (domains may import"),
    ({"loopstate_protocol/base.py": "import loopstate.core.canonical\n", "loopstate/core/canonical.py": ""},
     "loopstate_protocol.base imports loopstate.core.canonical (protocol may import only protocol)"),
    ({"loopstate_protocol/base.py": "import pydantic\n"},
     "loopstate_protocol.base imports pydantic (protocol may use only msgspec beside the standard library)"),
    ({"loopstate/service/watch.py": "import pygls.server\n"},
     "loopstate.service.watch imports pygls.server (service may use only cryptography, msgspec, watchdog"),
    ({"loopstate/rpc/server.py": "from loopstate.service import runs_effects\n",
      "loopstate/service/runs_effects.py": ""},
     "loopstate.rpc.server imports loopstate.service.runs_effects (front doors never import the service's *_effects"),
    ({"loopstate/hooks/verb.py": "from ..domains.intent import projections\n",
      "loopstate/domains/intent/projections.py": ""},
     "loopstate.hooks.verb imports loopstate.domains.intent.projections (front doors reach a domain only through"),
    ({"loopstate/mcpserver/server.py": "import loopstate.rpc.server\n", "loopstate/rpc/server.py": ""},
     "loopstate.mcpserver.server imports loopstate.rpc.server (mcpserver may import only"),
])
def test_a_planted_violation_is_reported_with_its_file_line_and_rule(tmp_path: Path, files, expected) -> None:
    found = plant(tmp_path, files)
    assert len(found) == 1 and expected in found[0], found


def test_what_the_contract_allows_is_not_reported(tmp_path: Path) -> None:
    assert plant(tmp_path, {
        "loopstate/cli/main.py": "from loopstate.rpc import server\nfrom loopstate.service import Service\n",
        "loopstate/rpc/server.py": "import pygls\nfrom loopstate.service.engine import Service\nfrom loopstate.core import errors\n",
        "loopstate/service/engine.py": "import msgspec\nfrom loopstate.domains.base import Context\n",
        "loopstate/domains/base.py": "from loopstate.core.chain import ChainLayout\n",
        "loopstate/domains/runs/decide.py": "from loopstate.domains import base\nfrom loopstate.domains.runs import records\n",
        "loopstate/domains/runs/records.py": "", "loopstate/core/chain.py": "", "loopstate/core/errors.py": "",
    }) == []


def test_the_service_public_face_exports_what_front_doors_need() -> None:
    import loopstate.service as service

    for name in ("Service", "resolve_root", "project_config", "kill_switch_paths", "probe_kill_switch",
                 "create_kill_switch", "markdown_status", "goal_state", "stream_layout"):
        assert name in service.__all__ and callable(getattr(service, name)), name
