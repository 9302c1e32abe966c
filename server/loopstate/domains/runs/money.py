"""Cost as fixed-point decimal strings, never binary floats.

Cost limits and usage are written as canonical decimal strings with at most
six fractional digits. Parsing goes through ``decimal.Decimal`` on the string,
so ``"0.1"`` + ``"0.2"`` is exactly ``"0.3"``; exponents, signs, leading zeros,
more than six fractional digits and non-strings are refused, because a second
spelling of the same amount would make two equal budgets compare unequal.
"""

from __future__ import annotations

import re
from decimal import Decimal

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError

MONEY = re.compile(r"^(0|[1-9][0-9]*)(?:\.[0-9]{1,6})?$")
QUANTUM = Decimal("0.000001")


def parse_money(value: object, field: str) -> Decimal:
    """The Decimal a canonical money string names; refuses every other spelling."""
    if not isinstance(value, str) or not MONEY.match(value):
        raise LoopstateError(
            ErrorCode.VALIDATION_FAILED,
            f"{field}: {value!r} is not a fixed-point decimal string with at most six fractional digits "
            "(write e.g. \"0.25\"; exponents, signs and numbers are refused)",
            field=field,
            rule="money",
        )
    return Decimal(value)


def format_money(amount: Decimal) -> str:
    """The canonical string: no exponent, no trailing zeros, at most six places."""
    if amount < 0:
        raise ValueError("money is never negative")
    text = format(amount.quantize(QUANTUM), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def add_money(a: str | None, b: str, field: str) -> str:
    """``a + b`` as canonical money; ``None`` (no spending recorded yet) counts as zero."""
    base = Decimal(0) if a is None else parse_money(a, field)
    return format_money(base + parse_money(b, field))
