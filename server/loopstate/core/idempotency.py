"""Request fingerprints: the same request id must mean the same request.

The fingerprint is SHA-256 over the operation name and the canonical, normalized
parameters; the raw parameter body is never stored. An exact retry returns the
first result without appending; a retry whose parameters differ is refused with
REQUEST_ID_REUSED.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from loopstate_protocol.errors import ErrorCode

from loopstate.core import canonical
from loopstate.core.errors import LoopstateError

MAX_REQUEST_ID = 200


def check_request_id(request_id: Any) -> str:
    if not isinstance(request_id, str) or not 1 <= len(request_id) <= MAX_REQUEST_ID or not request_id.isprintable():
        raise LoopstateError(
            ErrorCode.INVALID_PARAMS,
            f"request_id must be 1-{MAX_REQUEST_ID} printable characters; send a fresh unique id per mutation",
            field="request_id",
        )
    return request_id


def fingerprint(operation: str, params: Any) -> str:
    return canonical.digest({"operation": operation, "params": params})


@dataclass(frozen=True)
class Applied:
    """Where the events of one request sit in its stream."""

    fingerprint: str
    first_sequence: int
    last_sequence: int
    start: int
    end: int


class RequestIndex:
    """request_id -> where its events are, built while folding a stream's events.

    Entries are plain tuples (fingerprint, first sequence, last sequence, start,
    end), not ``Applied`` objects: a service folds one per request when it opens
    a stream, and a tuple costs a fraction of a dataclass in time and memory.
    """

    def __init__(self) -> None:
        self._applied: dict[str, tuple[str, int, int, int, int]] = {}

    def note(self, request_id: str, fp: str, sequence: int, start: int, end: int) -> None:
        known = self._applied.get(request_id)
        if known is None:
            self._applied[request_id] = (fp, sequence, sequence, start, end)
        elif known[0] == fp and known[2] == sequence - 1:
            self._applied[request_id] = (fp, known[1], sequence, known[3], end)

    def lookup(self, request_id: str, fp: str) -> Applied | None:
        """The earlier application of this exact request, None if new; raises on reuse."""
        known = self._applied.get(request_id)
        if known is None:
            return None
        if known[0] != fp:
            raise LoopstateError(
                ErrorCode.REQUEST_ID_REUSED,
                f"request id {request_id!r} was already used for a different request; use a new request id",
                request_id=request_id,
                first_sequence=known[1],
            )
        return Applied(*known)

    def clear(self) -> None:
        self._applied.clear()

    def __len__(self) -> int:
        return len(self._applied)
