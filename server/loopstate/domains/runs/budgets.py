"""Frozen budgets, monotonic usage, reservations, duration proof and exhaustion markers.

Duration is kept as integer microseconds internally and written as a JSON
number with microsecond precision, so sub-second intervals are never rounded
away and repeated additions never drift. Cost is a decimal string (see money).

Exhaustion means a limit is *reached*: usage >= limit on a budget that has been
consumed (a limit of 0, or a null cost limit, forbids use instead: the
reservation that would exceed it is refused, fail closed). The marker order is
one stable order: duration, stage attempts in canonical stage order,
mutations, external actions, cost. The first exhausted key gives the run's
primary reason ``budget_reached:<field>``.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.runs.money import add_money, format_money, parse_money
from loopstate.domains.runs.records import STAGES

MICRO = 1_000_000


def empty_usage() -> dict[str, Any]:
    return {
        "duration_seconds": 0,
        "stage_attempts": {stage: 0 for stage in STAGES},
        "mutations": 0,
        "external_actions": 0,
        "cost_usd": None,
    }


def duration_micros(usage: dict[str, Any]) -> int:
    return round(usage["duration_seconds"] * MICRO)


def micros_to_number(micros: int) -> int | float:
    return micros // MICRO if micros % MICRO == 0 else micros / MICRO


def add_duration(usage: dict[str, Any], start: dt.datetime, end: dt.datetime) -> None:
    """Add the proven interval [start, end) to usage, to the microsecond."""
    if end > start:
        delta = end - start
        micros = (delta.days * 86400 + delta.seconds) * MICRO + delta.microseconds
        usage["duration_seconds"] = micros_to_number(duration_micros(usage) + micros)


def exhausted_keys(budgets: dict[str, Any], usage: dict[str, Any]) -> list[tuple[str, str | None]]:
    """Every reached (budget, stage) key, in the stable marker order."""
    keys: list[tuple[str, str | None]] = []
    if duration_micros(usage) >= budgets["max_duration_seconds"] * MICRO:
        keys.append(("max_duration_seconds", None))
    for stage in STAGES:
        if usage["stage_attempts"][stage] >= budgets["max_stage_attempts"]:
            keys.append(("max_stage_attempts", stage))
    if usage["mutations"] > 0 and usage["mutations"] >= budgets["max_mutations"]:
        keys.append(("max_mutations", None))
    if usage["external_actions"] > 0 and usage["external_actions"] >= budgets["max_external_actions"]:
        keys.append(("max_external_actions", None))
    limit = budgets["max_cost_usd"]
    if limit is not None and usage["cost_usd"] is not None:
        spent = parse_money(usage["cost_usd"], "usage.cost_usd")
        if spent > 0 and spent >= parse_money(limit, "budgets.max_cost_usd"):
            keys.append(("max_cost_usd", None))
    return keys


def marker_data(budgets: dict[str, Any], usage: dict[str, Any], key: tuple[str, str | None]) -> dict[str, Any]:
    """One budget_reached payload: the frozen limit, the observed usage, the stage if any."""
    budget, stage = key
    if budget == "max_duration_seconds":
        observed: Any = usage["duration_seconds"]
    elif budget == "max_stage_attempts":
        observed = usage["stage_attempts"][stage]
    elif budget == "max_mutations":
        observed = usage["mutations"]
    elif budget == "max_external_actions":
        observed = usage["external_actions"]
    else:
        observed = usage["cost_usd"]
    return {"budget": budget, "stage": stage, "limit": budgets[budget], "observed": observed}


def reservation_for(usage: dict[str, Any], stage: str | None, *, external: bool, cost: str,
                    stage_attempt: str | None) -> dict[str, Any]:
    """The exact reservation an intent holds, with what a rollback must restore."""
    parse_money(cost, "cost_usd")
    return {
        "mutations": 1,
        "external_actions": 1 if external else 0,
        "cost_usd": cost,
        "stage_attempt": stage_attempt,
        "prior_cost_usd": usage["cost_usd"],
        "prior_stage": stage,
    }


def check_reservation(budgets: dict[str, Any], usage: dict[str, Any], reservation: dict[str, Any]) -> None:
    """Refuse (fail closed) a reservation that would go past any frozen limit."""
    def over(field: str, message: str) -> LoopstateError:
        return LoopstateError(ErrorCode.BUDGET_EXHAUSTED, message, budget=field)

    if usage["mutations"] + reservation["mutations"] > budgets["max_mutations"]:
        raise over("max_mutations", f"the mutation budget ({budgets['max_mutations']}) has no room for another mutation")
    if usage["external_actions"] + reservation["external_actions"] > budgets["max_external_actions"]:
        raise over(
            "max_external_actions",
            f"the external-action budget ({budgets['max_external_actions']}) has no room: an outward action needs an "
            "explicit budget (only local_write to repository is local)",
        )
    stage = reservation["stage_attempt"]
    if stage is not None and usage["stage_attempts"][stage] + 1 > budgets["max_stage_attempts"]:
        raise over("max_stage_attempts", f"stage {stage} has used all {budgets['max_stage_attempts']} attempts")
    cost = parse_money(reservation["cost_usd"], "cost_usd")
    if cost > 0:
        limit = budgets["max_cost_usd"]
        if limit is None:
            raise over("max_cost_usd", "max_cost_usd is null: the run has no spending authority (null is not unlimited)")
        spent = Decimal(0) if usage["cost_usd"] is None else parse_money(usage["cost_usd"], "usage.cost_usd")
        if spent + cost > parse_money(limit, "budgets.max_cost_usd"):
            raise over("max_cost_usd", f"cost {format_money(spent + cost)} would pass max_cost_usd {limit}")


def apply_reservation(run: dict[str, Any], reservation: dict[str, Any]) -> None:
    usage = run["usage"]
    usage["mutations"] += reservation["mutations"]
    usage["external_actions"] += reservation["external_actions"]
    if parse_money(reservation["cost_usd"], "cost_usd") > 0 or usage["cost_usd"] is not None:
        usage["cost_usd"] = add_money(usage["cost_usd"], reservation["cost_usd"], "cost_usd")
    if reservation["stage_attempt"] is not None:
        usage["stage_attempts"][reservation["stage_attempt"]] += 1
        run["stage"] = reservation["stage_attempt"]


def roll_back(run: dict[str, Any], reservation: dict[str, Any]) -> None:
    """Undo exactly one reservation (known_not_started): counters, prior cost and prior stage."""
    usage = run["usage"]
    usage["mutations"] -= reservation["mutations"]
    usage["external_actions"] -= reservation["external_actions"]
    usage["cost_usd"] = reservation["prior_cost_usd"]
    if reservation["stage_attempt"] is not None:
        usage["stage_attempts"][reservation["stage_attempt"]] -= 1
    run["stage"] = reservation["prior_stage"]


def usage_monotonic(before: dict[str, Any], after: dict[str, Any]) -> bool:
    if duration_micros(after) < duration_micros(before):
        return False
    if after["mutations"] < before["mutations"] or after["external_actions"] < before["external_actions"]:
        return False
    if any(after["stage_attempts"][s] < before["stage_attempts"][s] for s in STAGES):
        return False
    b = Decimal(0) if before["cost_usd"] is None else Decimal(before["cost_usd"])
    a = Decimal(0) if after["cost_usd"] is None else Decimal(after["cost_usd"])
    return a >= b
