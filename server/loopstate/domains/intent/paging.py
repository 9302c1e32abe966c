"""Pages of the intent listings that grow with the ledger's age (the audit, the task list, the snapshot).

The audit and the task list are in ledger order, and the ledger only appends,
so the claims (or tasks) a page showed keep their places while new ones join
at the end: a cursor is the number of items already shown, with the listing
and its scope it was made for and the id of the last item shown. A cursor from
another listing, another task, or a listing that is no longer what the cursor
saw (a purge re-chained the ledger, which removes items) is refused, never
guessed at: the caller starts again from the first page.

The snapshot is in handoff order, where a new claim may sort before claims
already shown: its cursor has the same form, but the next page starts after
the last claim shown by that claim's place in the order (a keyset: the key of
handoff.py), so a walk lists every claim active throughout it exactly once.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence, TypeVar

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

T = TypeVar("T")

MAX_LIMIT = 1000
PREFIX = "intent-page-1"


def check_limit(limit: Any) -> int:
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED, f"limit: {limit!r} is out of range; give 1-{MAX_LIMIT}", field="limit",
        )
    return limit


def bad_cursor(cursor: str, why: str) -> LoopstateError:
    """The refusal of a cursor, saying why and what to pass instead."""
    return LoopstateError(
        ErrorCode.VALIDATION_FAILED,
        f"cursor: {cursor[:80]!r} {why}; pass the next_cursor of the page before, or no cursor for the first page",
        field="cursor",
    )


def make_cursor(listing: str, scope: str, offset: int, last_id: str) -> str:
    return f"{PREFIX}:{listing}:{scope}:{offset}:{last_id}"


def page(
    items: Sequence[T], ident: Callable[[T], str], *, listing: str, scope: str, limit: int, cursor: str | None,
) -> tuple[list[T], int, str | None]:
    """The items of one page, how many items follow it, and the cursor of the next page (None on the last)."""
    check_limit(limit)
    start = 0
    if cursor is not None:
        start = _offset(cursor, items, ident, listing, scope)
    chosen = list(items[start:start + limit])
    end = start + len(chosen)
    remaining = len(items) - end
    following = make_cursor(listing, scope, end, ident(chosen[-1])) if remaining and chosen else None
    return chosen, remaining, following


def _offset(cursor: Any, items: Sequence[T], ident: Callable[[T], str], listing: str, scope: str) -> int:
    offset, last_id = parse_cursor(cursor, listing=listing, scope=scope)
    if not 1 <= offset <= len(items) or ident(items[offset - 1]) != last_id:
        raise bad_cursor(cursor, "no longer matches the listing (a purge removed what it pointed at)")
    return offset


def parse_cursor(cursor: Any, *, listing: str, scope: str) -> tuple[int, str]:
    """How many items the pages before showed and the id of the last one, from a cursor of this listing and scope."""
    if not isinstance(cursor, str):
        raise bad_cursor(repr(cursor), "is not a cursor")
    parts = cursor.split(":")
    if len(parts) != 5 or parts[0] != PREFIX or not parts[3].isdigit() or not parts[4]:
        raise bad_cursor(cursor, "is not a cursor of a loopstate intent listing")
    _, made_for, made_scope, offset_text, last_id = parts
    if made_for != listing:
        raise bad_cursor(cursor, f"is a cursor of intent.{made_for}, not of intent.{listing}")
    if made_scope != scope:
        raise bad_cursor(cursor, f"was made for {made_scope}, not for {scope}")
    return int(offset_text), last_id
