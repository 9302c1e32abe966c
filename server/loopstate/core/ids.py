"""Injected id generation, so tests can pin every id a command creates."""

from __future__ import annotations

import uuid
from typing import Callable

IdFactory = Callable[[], str]


def random_uuid() -> str:
    return str(uuid.uuid4())


class SequentialIds:
    """Deterministic UUIDv4-shaped ids for tests: ...-4000-8000-000000000001, ..."""

    def __init__(self, prefix: int = 0) -> None:
        self.prefix = prefix
        self.count = 0

    def __call__(self) -> str:
        self.count += 1
        return str(uuid.UUID(int=(self.prefix << 96) | self.count, version=4))


def derived_uuid(namespace_text: str, name: str) -> str:
    """A UUIDv5 derived from two strings: the same inputs give the same id."""
    namespace = uuid.uuid5(uuid.NAMESPACE_URL, "loopstate:" + namespace_text)
    return str(uuid.uuid5(namespace, name))


def derived_uuid4(namespace_text: str, name: str) -> str:
    """A name-based id in UUIDv4 form, for records whose schema requires version 4.

    The 122 free bits are the UUIDv5 digest of (namespace, name); only the
    version and variant bits are set as a UUIDv4 has them. Same inputs, same id.
    """
    return str(uuid.UUID(bytes=uuid.UUID(derived_uuid(namespace_text, name)).bytes, version=4))
