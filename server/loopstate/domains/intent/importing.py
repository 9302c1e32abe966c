"""Export of a project's claim graph, and validated import of one.

An import is checked for bounded size, UTC timestamps, unique ids, reference
integrity, acyclic and time-ordered supersession and legal role/status/
confidence combinations before anything is written. Every task, claim and
candidate gets a fresh id; the original source identity survives only inside a
provenance hash, and every imported claim's source becomes ``explicit_import``,
which is never a direct user event. Imported tasks are marked
``history_incomplete``: the events that built the graph are not imported.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from loopstate_protocol.intent import SCOPES, SOURCE_KINDS

from loopstate.core import canonical
from loopstate.core.clock import format_time
from loopstate.core.errors import LoopstateError
from loopstate.domains.base import Context
from loopstate.domains.intent import rules
from loopstate.domains.intent.state import IntentState

FORMAT = "loopstate-intent-graph"
VERSION = 1
MAX_BYTES = 4 << 20
MAX_TASKS = 500
MAX_CLAIMS = 5000
MAX_CANDIDATES = 5000
LIFECYCLE_STATES = ("active", "superseded", "invalidated")


def export_graph(state: IntentState, project_id: str, task_id: str | None, now: dt.datetime) -> dict[str, Any]:
    """The graph of the project (or one task): tasks, claims with lifecycle and edges, candidates."""
    tasks = [t for t in state.tasks.values() if task_id is None or t.task_id == task_id]
    wanted = {t.task_id for t in tasks}
    every = {c.claim_id: c for task in tasks for c in state.task_claims(task.task_id)}
    # Where each exported claim's superseder lives (the edges say), so it is found without a search.
    superseder_task = {e[3]: e[2] for task in tasks for e in state.edges_touching(task.task_id)}
    claims = []
    for c in sorted(every.values(), key=lambda c: c.position):
        item: dict[str, Any] = {
            "claim_id": c.claim_id, "task_id": c.task_id, "statement": c.statement, "role": c.role,
            "epistemic_status": c.epistemic_status, "source_ref": c.source_ref, "scope": c.scope,
            "valid_from": c.valid_from, "last_confirmed": c.last_confirmed,
            "supersedes": [s for s in c.supersedes if s in every],
            "facets": list(c.facets), "direct_user": c.direct_user,
            "lifecycle": _lifecycle(c, state, superseder_task.get(c.claim_id), wanted),
        }
        if c.confidence is not None:
            item["confidence"] = c.confidence
        claims.append(item)
    candidates = [
        {
            "candidate_id": c.candidate_id, "task_id": c.task_id, "signal_key": c.signal_key, "statement": c.statement,
            "facets": list(c.facets), "source_ref": c.source_ref, "promoted": c.promoted,
        }
        for c in state.candidates.values() if c.task_id in wanted
    ]
    return {
        "format": FORMAT, "version": VERSION, "project_id": project_id, "exported_at": format_time(now),
        "sequence": state.sequence,
        "tasks": [
            {"task_id": t.task_id, "label": t.label, "mode": t.mode, "started_at": t.started_at,
             "history_incomplete": t.history_incomplete}
            for t in tasks
        ],
        "claims": claims,
        "candidates": candidates,
    }


def _lifecycle(claim, state: IntentState, superseder_task: str | None, wanted: set[str]) -> dict[str, Any]:
    """A claim's lifecycle as the graph can carry it.

    A claim superseded by a claim of a task outside this export would name a
    claim the graph does not hold (and the import would refuse it); it is
    exported as inactive instead: invalidated when its superseder became
    valid, with a reason that says so.
    """
    superseder = state.find_claim(claim.superseded_by, superseder_task) if claim.superseded_by else None
    if claim.state == "superseded" and superseder is not None and superseder.task_id not in wanted:
        return {
            "state": "invalidated", "invalidated_at": superseder.valid_from,
            "reason": "superseded by a claim of a task outside this export",
        }
    life: dict[str, Any] = {"state": claim.state}
    if claim.superseded_by:
        life["superseded_by"] = claim.superseded_by
    if claim.invalidated_at:
        life["invalidated_at"] = claim.invalidated_at
    if claim.invalidation_reason:
        life["reason"] = claim.invalidation_reason
    return life


def _bad(message: str, field: str) -> Exception:
    return rules.refuse(f"import: {message}", field=field)


def _list(graph: dict[str, Any], key: str, limit: int) -> list[dict[str, Any]]:
    value = graph.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise _bad(f"{key} must be a list of objects", key)
    if len(value) > limit:
        raise _bad(f"{len(value)} {key}, at most {limit} per import", key)
    return value


def _unique(items: list[dict[str, Any]], key: str, seen: set[str], field: str) -> None:
    for item in items:
        value = rules.check_uuid(item.get(key), f"{field}.{key}")
        if value in seen:
            raise _bad(f"{field}.{key} {value} appears more than once", field)
        seen.add(value)


def _provenance(original: Any, field: str) -> dict[str, Any]:
    """explicit_import, with the original source identity kept only inside a hash."""
    if not isinstance(original, dict) or original.get("kind") not in SOURCE_KINDS:
        raise _bad(f"{field}.source_ref needs a kind of {', '.join(SOURCE_KINDS)}", field)
    identity = {k: original[k] for k in ("kind", "event_id", "sha256") if original.get(k) is not None}
    if "event_id" not in identity and "sha256" not in identity:
        raise _bad(f"{field}.source_ref needs an event_id or a sha256", field)
    try:
        if "event_id" in identity:
            rules.opaque_id(identity["event_id"], "source_ref.event_id")
    except LoopstateError as exc:
        raise _bad(f"{field}: {exc.message}", field) from None
    sha = identity.get("sha256")
    if sha is not None and not (isinstance(sha, str) and len(sha) == 64 and all(c in "0123456789abcdef" for c in sha)):
        raise _bad(f"{field}.source_ref.sha256 must be 64 lower-case hex digits (a SHA-256)", field)
    return {"kind": "explicit_import", "sha256": canonical.sha256_hex(b"intent-import-v1\0" + canonical.encode(identity))}


def import_event(graph: Any, ctx: Context) -> tuple[str, dict[str, Any]]:
    """Validate ``graph`` and return (envelope task id, graph_imported payload)."""
    if not isinstance(graph, dict):
        raise _bad("the graph must be a JSON object (the output of intent export)", "graph")
    size = len(canonical.encode(graph))
    if size > MAX_BYTES:
        raise _bad(f"the graph is {size} bytes, at most {MAX_BYTES}", "graph")
    version = graph.get("version")
    if graph.get("format") != FORMAT or type(version) is not int or version != VERSION:
        raise _bad(f"format must be {FORMAT!r} version {VERSION} (the output of intent export)", "format")
    if graph.get("exported_at") is not None:
        rules.utc(graph["exported_at"], "exported_at")
    tasks = _list(graph, "tasks", MAX_TASKS)
    claims = _list(graph, "claims", MAX_CLAIMS)
    candidates = _list(graph, "candidates", MAX_CANDIDATES)
    if not tasks:
        raise _bad("the graph has no task", "tasks")
    seen: set[str] = set()
    _unique(tasks, "task_id", seen, "tasks")
    _unique(claims, "claim_id", seen, "claims")
    _unique(candidates, "candidate_id", seen, "candidates")

    task_ids = {t["task_id"]: ctx.new_id() for t in tasks}
    claim_ids = {c["claim_id"]: ctx.new_id() for c in claims}
    new_tasks = []
    for t in tasks:
        mode = t.get("mode", "on")
        if mode not in ("on", "off"):
            raise _bad(f"task {t['task_id']} has mode {mode!r}; only on and off tasks are imported", "tasks.mode")
        try:
            new_tasks.append({
                "task_id": task_ids[t["task_id"]], "mode": mode, "label": rules.label(t.get("label")),
                "started_at": rules.utc(t.get("started_at"), "tasks.started_at"),
            })
        except LoopstateError as exc:
            raise _bad(f"task {t['task_id']}: {exc.message}", exc.details.get("field", "tasks")) from None

    by_id = {c["claim_id"]: c for c in claims}
    new_claims = []
    for c in claims:
        try:
            new_claims.append(_import_claim(c, by_id, task_ids, claim_ids))
        except LoopstateError as exc:
            if exc.message.startswith("import:"):
                raise
            # A field rule's refusal, said for the claim that broke it.
            raise _bad(f"claim {c['claim_id']}: {exc.message}", exc.details.get("field", "claims")) from None
    _check_supersession(claims, by_id)

    new_candidates = []
    from loopstate.domains.intent.decide import signal_key

    for c in candidates:
        if c.get("task_id") not in task_ids:
            raise _bad(f"candidate {c['candidate_id']} names a task that is not in the graph", "candidates.task_id")
        try:
            text = rules.statement(c.get("statement"), "candidates.statement")
            facets = rules.facets(c.get("facets"))
        except LoopstateError as exc:
            raise _bad(f"candidate {c['candidate_id']}: {exc.message}", exc.details.get("field", "candidates")) from None
        new_candidates.append({
            "candidate_id": ctx.new_id(), "task_id": task_ids[c["task_id"]], "signal_key": signal_key(text),
            "statement": text, "facets": facets,
            "source_ref": _provenance(c.get("source_ref"), "candidates"), "promoted": bool(c.get("promoted")),
        })
    payload = {
        "import_id": ctx.new_id(),
        "history_incomplete": True,
        "tasks": new_tasks,
        "claims": new_claims,
        "candidates": new_candidates,
        "counts": {"tasks": len(new_tasks), "claims": len(new_claims), "candidates": len(new_candidates)},
    }
    return new_tasks[0]["task_id"], payload


def _import_claim(c: dict[str, Any], by_id: dict, task_ids: dict, claim_ids: dict) -> dict[str, Any]:
    cid = c["claim_id"]
    field = f"claims[{cid}]"
    if c.get("task_id") not in task_ids:
        raise _bad(f"{field} names a task that is not in the graph", "claims.task_id")
    role, status = c.get("role"), c.get("epistemic_status")
    original = c.get("source_ref")
    try:
        # The original source kind counts too: a tool result is only ever evidence, even in an import.
        rules.status_for_role(role, status, original.get("kind") if isinstance(original, dict) else None)
    except LoopstateError as exc:
        raise _bad(f"{field}: {exc.message}", "claims.epistemic_status") from None
    confidence = rules.confidence_for(status, c.get("confidence"))
    scope = c.get("scope", "task")
    if scope not in SCOPES:
        raise _bad(f"{field}.scope {scope!r} is not one of {', '.join(SCOPES)}", "claims.scope")
    supersedes = c.get("supersedes") or []
    if not isinstance(supersedes, list) or cid in supersedes or len(set(supersedes)) != len(supersedes):
        raise _bad(f"{field}.supersedes must list other claims, each once", "claims.supersedes")
    for old in supersedes:
        if old not in by_id:
            raise _bad(f"{field} supersedes {old}, which is not in the graph", "claims.supersedes")
    life = c.get("lifecycle") or {"state": "active"}
    if not isinstance(life, dict) or life.get("state") not in LIFECYCLE_STATES:
        raise _bad(f"{field}.lifecycle.state must be one of {', '.join(LIFECYCLE_STATES)}", "claims.lifecycle")
    lifecycle: dict[str, Any] = {"state": life["state"]}
    if life["state"] == "invalidated":
        lifecycle["invalidated_at"] = rules.utc(life.get("invalidated_at"), "claims.lifecycle.invalidated_at")
        if life.get("reason") is not None:
            lifecycle["reason"] = rules.statement(life["reason"], "claims.lifecycle.reason")
    out: dict[str, Any] = {
        "claim_id": claim_ids[cid], "task_id": task_ids[c["task_id"]],
        "statement": rules.statement(c.get("statement"), "claims.statement"), "role": role,
        "epistemic_status": status, "source_ref": _provenance(c.get("source_ref"), field), "scope": scope,
        "valid_from": rules.utc(c.get("valid_from"), "claims.valid_from"),
        "last_confirmed": rules.utc(c["last_confirmed"], "claims.last_confirmed") if c.get("last_confirmed") is not None else None,
        "supersedes": [claim_ids[s] for s in supersedes],
        "facets": rules.facets(c.get("facets")),
        "lifecycle": lifecycle,
    }
    if confidence is not None:
        out["confidence"] = confidence
    return out


def _check_supersession(claims: list[dict[str, Any]], by_id: dict[str, dict[str, Any]]) -> None:
    """Each claim superseded at most once, by a claim not older than it, with no cycle; lifecycles agree."""
    superseded_by: dict[str, str] = {}
    for c in claims:
        for old in c.get("supersedes") or []:
            if old in superseded_by:
                raise _bad(f"claim {old} is superseded by two claims", "claims.supersedes")
            superseded_by[old] = c["claim_id"]
            older = rules.instant(rules.utc(by_id[old].get("valid_from"), "claims.valid_from"))
            if older > rules.instant(rules.utc(c.get("valid_from"), "claims.valid_from")):
                raise _bad(f"claim {c['claim_id']} supersedes the later claim {old}; supersession must follow time", "claims.supersedes")
    for c in claims:
        life = c.get("lifecycle") or {"state": "active"}
        state = life.get("state")
        if (state == "superseded") != (c["claim_id"] in superseded_by):
            raise _bad(
                f"claim {c['claim_id']} has lifecycle {state!r} but is "
                + ("" if c["claim_id"] in superseded_by else "not ") + "superseded by a claim in the graph",
                "claims.lifecycle",
            )
        named = life.get("superseded_by")
        if named is not None and named != superseded_by.get(c["claim_id"]):
            raise _bad(
                f"claim {c['claim_id']} has lifecycle.superseded_by {named} but the graph's supersedes lists say "
                f"{superseded_by.get(c['claim_id'])}; fix one of them",
                "claims.lifecycle",
            )
    for start in superseded_by:
        walked = set()
        current = start
        while current in superseded_by:
            if current in walked:
                raise _bad(f"supersession cycle through claim {current}", "claims.supersedes")
            walked.add(current)
            current = superseded_by[current]
