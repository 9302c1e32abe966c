"""Fixtures: a pool of real `loopstate serve` processes on the test's data dir."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from rpckit import Servers

from loopstate_protocol.client import LoopstateClient


@pytest.fixture
def servers(data_dir: Path, tmp_path: Path) -> Iterator[Servers]:
    logs = tmp_path / "logs"
    logs.mkdir()
    pool = Servers(data_dir, logs)
    yield pool
    pool.close()


@pytest.fixture
def client(servers: Servers) -> LoopstateClient:
    return servers.start()
