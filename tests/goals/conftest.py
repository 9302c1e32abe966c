"""Fixtures of the goals tests."""

from __future__ import annotations

import pytest
from goalkit import Harness


@pytest.fixture
def h(data_dir, root) -> Harness:
    return Harness(data_dir, root)
