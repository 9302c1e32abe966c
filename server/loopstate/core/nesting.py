"""How deep client data may nest, measured without recursion.

Commands carry free-form JSON (an intent graph, run evidence and scopes, a goals
payload), and the code that handles them recurses: msgspec's encoder and
converter, the intent fingerprint's credential redaction, the goals privacy
check, the runs timestamp check. Past a few hundred levels Python's recursion
limit turns such a value into a RecursionError, an internal error instead of a
refusal. ``check_command`` measures a command before any of that runs and
refuses data deeper than MAX_DEPTH levels with VALIDATION_FAILED, naming the
field and the limit; below it every recursive walk has room to spare.
"""

from __future__ import annotations

from typing import Any, Callable

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

MAX_DEPTH = 64  # levels of lists and objects in one field of a command


def deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` nests more than ``limit`` levels of lists, tuples, dicts and Structs.

    A scalar is 0 levels, ``[]`` and ``[1]`` are 1, ``[[1]]`` is 2. Iterative, one
    level at a time (a level's children are gathered with C loops), and it stops
    at the first level past the limit.
    """
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        children: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                children.extend(item.values())
            elif isinstance(item, msgspec.Struct):
                children.extend([getattr(item, name) for name in item.__struct_fields__])
            else:
                children.extend(item)
        level = [child for child in children if isinstance(child, _CONTAINERS)]
    return False


_CONTAINERS = (dict, list, tuple, msgspec.Struct)


def _few_brackets(command: Any) -> bool:
    """A cheap sufficient test: JSON with at most MAX_DEPTH brackets cannot nest deeper."""
    try:
        encoded = msgspec.json.encode(command)
    except (RecursionError, ValueError, TypeError, msgspec.EncodeError):
        return False  # not encodable as it is (a lone surrogate...): walk it; the domain refuses the rest
    return encoded.count(b"[") + encoded.count(b"{") <= MAX_DEPTH


def check_command(command: msgspec.Struct) -> None:
    """Refuse a command one of whose fields nests deeper than MAX_DEPTH levels."""
    if _few_brackets(command):
        return
    for name in command.__struct_fields__:
        if deeper_than(getattr(command, name), MAX_DEPTH):
            tag = command.__struct_config__.tag or type(command).__name__
            raise LoopstateError(
                ErrorCode.VALIDATION_FAILED,
                f"{tag}: {name} nests deeper than {MAX_DEPTH} levels of arrays and objects, "
                f"the most a command's data may; flatten it",
                field=name, limit=MAX_DEPTH,
            )


def decoded_text(decode: Callable[[], Any], what: str) -> Any:
    """``decode()``, a recursive JSON decoder run over text a user gave (a file, an argument, stdin),
    refusing data deeper than MAX_DEPTH levels with VALIDATION_FAILED naming ``what``.

    The decoder itself raises RecursionError on JSON nested about a thousand
    levels deep, and what handles a shallower value may recurse past the limit
    too: both are refused here, before anything else sees the value.
    """
    try:
        value = decode()
    except RecursionError:
        value = None
        deep = True
    else:
        deep = deeper_than(value, MAX_DEPTH)
    if deep:
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED,
            f"{what} nests deeper than {MAX_DEPTH} levels of arrays and objects, the most loopstate reads; flatten it",
            field=what, limit=MAX_DEPTH,
        )
    return value
