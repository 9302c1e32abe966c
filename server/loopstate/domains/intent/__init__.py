"""The intent domain: the claims ledger as a pure Decider.

One stream per project, ``intent``, holds every task's events with one
envelope (prev_hash/event_hash chain, schema_version 1). The service's intent
effects (service/intent_effects.py, bound to this domain by the service
registry) add the impure parts: private-session control files, in-memory
private events and purge re-chaining. This package never imports the service:
the dependency points service -> domain.
"""

from __future__ import annotations

from typing import Any

from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode

from loopstate.core.chain import ChainLayout, SchemaVerdict
from loopstate.core.errors import LoopstateError
from loopstate.domains.base import Context, Domain
from loopstate.domains.intent import projections, rules
from loopstate.domains.intent.decide import check_task_start, decide, find_task
from loopstate.domains.intent.evolve import evolve
from loopstate.domains.intent.importing import export_graph
from loopstate.domains.intent.records import SCHEMA_VERSION, STREAM
from loopstate.domains.intent.state import IntentState, SnapshotForm


def classify_schema(value: Any) -> SchemaVerdict:
    if type(value) is int and value == SCHEMA_VERSION:
        return "ok"
    if type(value) is int and value > SCHEMA_VERSION:
        return "future"
    return "invalid"


LAYOUT = ChainLayout(
    sequence_field="sequence", prev_field="prev_hash", hash_field="event_hash",
    schema_field="schema_version", classify_schema=classify_schema,
)


def own_project(state: IntentState, project_id: str) -> IntentState:
    """The state without tasks recorded under another project (a ledger copied between projects).

    A read names the task and the project; a task of another project is refused
    (decide.find_task), and project-wide views and a task's project-wide claims
    never show another project's tasks, claims or candidates.
    """
    if state.project_ids <= {project_id}:
        return state
    return state.restricted({k for k, t in state.tasks.items() if t.project_id == project_id}, project_id)


def private_tasks(state: IntentState) -> dict[str, Any]:
    """The serving process's in-memory private tasks (task id -> its own IntentState)."""
    memory = state.private
    return {} if memory is None else memory.states()


class IntentDomain(Domain):
    name = "intent"
    stream_prefixes = ("intent",)
    layout = LAYOUT
    commands = p.COMMANDS
    queries = p.QUERIES
    views = ("snapshot", "audit", "tasks")

    def fingerprint_params(self, command: Any) -> Any:
        return rules.fingerprint_params(command)

    def stream_for(self, message: Any) -> str:
        return STREAM

    def stream_for_view(self, view: str, key: str | None) -> str:
        return STREAM

    def initial(self, stream: str) -> IntentState:
        return IntentState()

    def evolve(self, state: IntentState, event: dict[str, Any]) -> IntentState:
        return evolve(state, event)

    def evolve_record(self, state: IntentState, record: Any) -> IntentState:
        """Fold a verified record of the stream (core/stream.Record): its place in the file is kept for
        the claims it adds, which are held as that place once retired (retired.py)."""
        return evolve(state, record.event, record.start)

    # Projection snapshots (core/snapshot.py): the folded part of the state only, one
    # encoded section per task (state.py), decoded when a read or an event first needs it.
    def snapshot_type(self, stream: str) -> type:
        return SnapshotForm

    def snapshot_state(self, state: IntentState) -> SnapshotForm:
        """The state without what is not folded from the ledger: the serving process's
        private tasks and its mirror of the control files never reach a snapshot."""
        return state.snapshot()

    def restore_state(self, stream: str, form: SnapshotForm) -> IntentState:
        return IntentState.restore(form)

    def check(self, command: Any, request_id: str) -> None:
        """The refusals a command earns by its own fields and its request id (checked before the store is touched)."""
        if rules.contains_secret(request_id):
            # The request id is stored verbatim in every event; a credential must never be.
            raise rules.refuse(
                "request_id: contains a credential; send an opaque id (a fresh UUID) instead", field="request_id",
            )
        rules.check_command(command)
        if isinstance(command, p.IntentTaskStart):
            check_task_start(command)

    def decide(self, state: IntentState, command: Any, ctx: Context) -> list[dict[str, Any]]:
        return decide(state, command, ctx)

    def _task_state(self, state: IntentState, task_id: str | None, ctx: Context) -> IntentState:
        """The state that holds ``task_id``: the ledger's, or the ledger's seen through a private task.

        A private task's view shows its in-memory claims beside the durable
        ones (its own earlier claims, the project's project-wide and long-term
        claims); the private record of the task wins, so its mode is private.
        """
        if task_id is None:
            return own_project(state, ctx.project_id)
        private = private_tasks(state).get(task_id)
        if private is None:
            find_task(state, task_id, ctx)
            return own_project(state, ctx.project_id)
        return own_project(state, ctx.project_id).overlay(private)

    def query(self, state: IntentState, query: Any, ctx: Context) -> Any:
        now = ctx.now
        if isinstance(query, p.IntentSnapshot):
            return projections.current(
                self._task_state(state, query.task_id, ctx), ctx.project_id, query.task_id, now,
                limit=query.limit, cursor=query.cursor,
            )
        if isinstance(query, p.IntentAudit):
            return projections.audit(
                self._task_state(state, query.task_id, ctx), ctx.project_id, query.task_id, now,
                limit=query.limit, cursor=query.cursor,
            )
        if isinstance(query, p.IntentCompact):
            if not 1 <= query.max_records <= 500:
                raise LoopstateError(
                    ErrorCode.VALIDATION_FAILED, f"max_records: {query.max_records} is out of range; give 1-500", field="max_records",
                )
            if not 1 <= query.max_chars <= 100_000:
                raise LoopstateError(
                    ErrorCode.VALIDATION_FAILED, f"max_chars: {query.max_chars} is out of range; give 1-100000", field="max_chars",
                )
            source = self._task_state(state, query.task_id, ctx)
            return projections.compact(source, query.task_id, query.max_records, query.max_chars, now)
        if isinstance(query, p.IntentHookContext):
            if not 1 <= query.max_chars <= 100_000:
                raise LoopstateError(
                    ErrorCode.VALIDATION_FAILED, f"max_chars: {query.max_chars} is out of range; give 1-100000", field="max_chars",
                )
            task_id = rules.check_uuid(query.task_id, "task_id")
            if task_id not in private_tasks(state) and (state.controls_unreadable or task_id in state.private_controls):
                # Private in another process (or a control we cannot read): a hook injects nothing.
                return p.HookContext(task_id=task_id, text="", claim_ids=[], omitted={"task_private": 0}, open_disputes=0)
            source = self._task_state(state, query.task_id, ctx)
            return projections.hook_context(source, source.tasks[query.task_id], query.max_chars, now)
        if isinstance(query, p.IntentTasks):
            own = own_project(state, ctx.project_id)
            if query.task_id is not None:
                task = own.tasks.get(rules.check_uuid(query.task_id, "task_id"))
                return [] if task is None else [projections.task_view(own, task)]
            current_id = own.current_task()[0]
            return [projections.task_view(own, t, current_id) for t in own.tasks.values()]
        if isinstance(query, p.IntentCurrent):
            own = own_project(state, ctx.project_id)
            task_id, reason, sequence = own.current_task()
            task = None if task_id is None else projections.task_view(own, own.tasks[task_id], task_id)
            return p.CurrentTask(task_id=task_id, reason=reason, sequence=sequence, task=task)
        if isinstance(query, p.IntentCandidates):
            return projections.candidate_groups(own_project(state, ctx.project_id))
        if isinstance(query, p.IntentExport):
            if query.task_id is not None:
                find_task(state, query.task_id, ctx)
            return export_graph(own_project(state, ctx.project_id), ctx.project_id, query.task_id, now)
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"the intent domain has no query {type(query).__name__}")

    def view(self, state: IntentState, view: str, key: str | None, ctx: Context) -> Any:
        if view == "snapshot":
            return self.query(state, p.IntentSnapshot(task_id=key), ctx)
        if view == "audit":
            return self.query(state, p.IntentAudit(task_id=key), ctx)
        if view == "tasks":
            return self.query(state, p.IntentTasks(), ctx)
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"the intent domain has no view {view!r}; views are {', '.join(self.views)}")


DOMAIN = IntentDomain()
