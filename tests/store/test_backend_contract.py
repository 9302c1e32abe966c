"""Collects the shared store suite (backend_contract.py) for every kind in conftest's STORE_KINDS."""

from backend_contract import *  # noqa: F401,F403
