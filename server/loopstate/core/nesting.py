"""How deep client data may nest, measured without recursion.

Commands carry free-form JSON (an intent graph, run evidence and scopes, a goals
payload), and the code that handles them recurses: msgspec's encoder and
converter, the intent fingerprint's credential redaction, the goals privacy
check, the runs timestamp check. Past a few hundred levels Python's recursion
limit turns such a value into a RecursionError, an internal error instead of a
refusal. ``check_command`` measures a command before any of that runs and
refuses data deeper than MAX_DEPTH levels with VALIDATION_FAILED, naming the
field and the limit; below it every recursive walk has room to spare.

It also refuses text that is not valid Unicode (a lone surrogate, which is
what Python makes of a non-UTF-8 command-line argument) naming the field, and
bounds integers: every integer a command carries, in a typed field or
inside free-form data (budgets, completion data), must lie within
+-MAX_SAFE_INTEGER (2^53-1), what a JSON client reading numbers as doubles
(the VS Code extension) holds exactly. A budget of 10^26 would otherwise be
stored and then shown rounded; it is refused naming the field.
"""

from __future__ import annotations

import re
from typing import Any, Callable

import msgspec

from loopstate_protocol.base import MAX_SAFE_INTEGER
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


# Sixteen digits in a row: the shortest run that can spell an integer past 2^53-1 (16 digits).
# A command whose JSON has none is certainly in bounds; one that has some (in a string, say)
# is walked exactly.
_LONG_DIGITS = re.compile(rb"[0-9]{16}")


def _encoded(command: Any) -> bytes | None:
    try:
        return msgspec.json.encode(command)
    except UnicodeEncodeError:
        raise _not_unicode(command) from None
    except (RecursionError, ValueError, TypeError, OverflowError, msgspec.EncodeError):
        return None  # not encodable as it is (too deep, too large): walk it; the domain refuses the rest


def _not_unicode(command: Any) -> LoopstateError:
    """Text that is not valid Unicode: a lone surrogate, as Python makes of a non-UTF-8 argument or file name."""
    tag = command.__struct_config__.tag or type(command).__name__
    field = next((name for name in command.__struct_fields__ if not _encodes(getattr(command, name))), None)
    where = f"{field} is" if field else "a text field is"
    return LoopstateError(
        ErrorCode.INVALID_PARAMS,
        f"{tag}: {where} not valid Unicode (it holds a lone surrogate, as non-UTF-8 input such as an argument "
        "typed in another encoding gives); send UTF-8 text",
        **({"field": field} if field else {}),
    )


def _encodes(value: Any) -> bool:
    try:
        msgspec.json.encode(value)
    except UnicodeEncodeError:
        return False
    except Exception:
        return True  # some other trouble: not this one
    return True


def unsafe_integer(value: Any, path: str) -> str | None:
    """The path of the first integer in ``value`` outside +-MAX_SAFE_INTEGER, else None (iterative)."""
    stack = [(path, value)]
    while stack:
        where, item = stack.pop()
        if type(item) is int:
            if not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                return where
        elif isinstance(item, dict):
            stack.extend((f"{where}.{key}", child) for key, child in item.items())
        elif isinstance(item, msgspec.Struct):
            stack.extend((f"{where}.{name}", getattr(item, name)) for name in item.__struct_fields__)
        elif isinstance(item, (list, tuple)):
            stack.extend((f"{where}[{index}]", child) for index, child in enumerate(item))
    return None


def check_command(command: msgspec.Struct) -> None:
    """Refuse a command one of whose fields nests deeper than MAX_DEPTH levels or holds an integer
    past +-MAX_SAFE_INTEGER."""
    encoded = _encoded(command)
    tag = command.__struct_config__.tag or type(command).__name__
    if encoded is None or encoded.count(b"[") + encoded.count(b"{") > MAX_DEPTH:
        for name in command.__struct_fields__:
            if deeper_than(getattr(command, name), MAX_DEPTH):
                raise LoopstateError(
                    ErrorCode.VALIDATION_FAILED,
                    f"{tag}: {name} nests deeper than {MAX_DEPTH} levels of arrays and objects, "
                    f"the most a command's data may; flatten it",
                    field=name, limit=MAX_DEPTH,
                )
    if encoded is None or _LONG_DIGITS.search(encoded):
        for name in command.__struct_fields__:
            where = unsafe_integer(getattr(command, name), name)
            if where is not None:
                raise LoopstateError(
                    ErrorCode.VALIDATION_FAILED,
                    f"{tag}: {where} is out of range: integers lie within +-{MAX_SAFE_INTEGER} (2^53-1), the "
                    "largest every client of loopstate holds exactly; give a smaller number",
                    field=where, limit=MAX_SAFE_INTEGER,
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
