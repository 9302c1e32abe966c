"""IntentState: everything folded from one project's intent ledger, indexed by what its reads select.

Every read names a task (``hook_context``, ``show --task``, ``compact``, the
task's audit) or pages through the project, so the state is kept the way
those reads select, and ``evolve`` keeps every index as it folds:

- ``tasks``, ``candidates``, ``project_ids``: project-wide and small;
- one ``Section`` per task: the task's claims in ledger order (every
  lifecycle), its active claims, and the supersession edges that touch them;
  a retired (superseded or invalidated) claim, which only the audit views and
  error messages read, is held as its msgpack bytes (about a third of the
  object's size) and decoded when one of them asks for it;
- ``wide``: the active project-wide and long-term claims of every task (each
  task's view shows them), the same objects as in their sections;
- ``active_counts``: how many active claims each task has.

A task's view is its section's active claims plus ``wide``: O(what it
returns), whatever the project holds.

Projection snapshots (core/snapshot.py) hold each section as its own msgpack
bytes (``SnapshotForm.sections``: msgpack ``bin``, decoded as a memoryview of
the snapshot's buffer, so the decoder steps over a section without parsing it
and copies nothing). A restored state keeps a section encoded until a read or
an event first touches it, so a cold read of one task decodes that task's
section (and in it, the active claims only) and the project-wide part. The
encoded bytes of a section stay with the state while the section is clean: the
next snapshot re-encodes only the sections an event changed since the last one.

The state is owned by the one ledger reader that folds it and is updated in
place; a read never changes what it shows (decoding a section only fills a cache).
"""

from __future__ import annotations

from typing import Any, Iterable, Literal

import msgspec

from loopstate.domains.intent.records import Candidate, Claim, Task

# (ordinal, new claim id, its task, old claim id, its task or "" when the ledger had no such claim)
EdgeRow = tuple[int, str, str, str, str]


class SectionRecord(msgspec.Struct, array_like=True, gc=False):
    """One task's section as a snapshot holds it: every claim's id and bytes, in ledger order,
    which of them are active (decoded when the section is; the others stay bytes), and the
    edges, with null for a task id that is the section's own (most edges: 70 bytes less each)."""

    ids: list[str]
    claims: list[msgspec.Raw]
    active: list[int]
    edges: list[tuple[int, str, str | None, str, str | None]]


class SnapshotForm(msgspec.Struct, array_like=True):
    """The intent state in a projection snapshot: the project-wide part decoded at once, sections left encoded."""

    layout: Literal["intent-sections-1"]
    sequence: int
    head: str | None
    tasks: list[Task]
    candidates: list[Candidate]
    project_ids: list[str]
    edge_count: int
    active_counts: dict[str, int]
    wide: list[Claim]
    sections: dict[str, memoryview]  # bytes when written


LAYOUT = "intent-sections-1"
_SECTION = msgspec.msgpack.Decoder(SectionRecord)
_CLAIM = msgspec.msgpack.Decoder(Claim)
_ENCODER = msgspec.msgpack.Encoder()


class Section:
    """One task's claims (ledger order: active ones as objects, retired ones as bytes), the active
    ones among them, and the edges that touch them."""

    __slots__ = ("claims", "active", "edges")

    def __init__(self) -> None:
        self.claims: dict[str, Claim | msgspec.Raw] = {}
        self.active: dict[str, Claim] = {}
        self.edges: list[EdgeRow] = []

    def get(self, claim_id: str) -> Claim | None:
        """The claim (a retired one decoded afresh: change it only through ``IntentState.retire``)."""
        value = self.claims.get(claim_id)
        return _CLAIM.decode(value) if isinstance(value, msgspec.Raw) else value

    def ordered(self) -> list[Claim]:
        return [_CLAIM.decode(v) if isinstance(v, msgspec.Raw) else v for v in self.claims.values()]

    def record(self, task_id: str) -> SectionRecord:
        values = list(self.claims.values())
        return SectionRecord(
            ids=list(self.claims),
            claims=[v if isinstance(v, msgspec.Raw) else msgspec.Raw(_ENCODER.encode(v)) for v in values],
            active=[i for i, v in enumerate(values) if not isinstance(v, msgspec.Raw)],
            edges=[(n, new, None if t == task_id else t, old, None if u == task_id else u) for n, new, t, old, u in self.edges],
        )


class IntentState:
    """Everything folded from one project's intent ledger (see the module docstring for its indexes).

    ``private`` is not folded from the ledger: it is the serving process's
    in-memory store of private tasks, attached by the service's intent effects
    (see service/intent_effects.py) and never written to disk. Likewise
    ``private_controls`` / ``controls_unreadable`` mirror the control files, so
    that the hook context of a task private in another process injects nothing.
    """

    def __init__(self) -> None:
        self.sequence = 0
        self.head: str | None = None
        self.tasks: dict[str, Task] = {}
        self.candidates: dict[str, Candidate] = {}
        self.project_ids: set[str] = set()  # every project id the ledger's tasks were recorded under
        self.wide: dict[str, Claim] = {}
        self.active_counts: dict[str, int] = {}
        self.edge_count = 0
        self._sections: dict[str, Section] = {}
        self._encoded: dict[str, bytes | memoryview] = {}  # the snapshot bytes of every clean section
        # Set on a view restricted to one project: edges whose other end is a claim of another project are left out.
        self._edge_tasks: frozenset[str] | None = None
        self.private: Any = None
        # Task ids that have a private-session control beside the ledger, and whether
        # a control could not be read; attached by the service's effects on each read.
        self.private_controls: frozenset[str] = frozenset()
        self.controls_unreadable = False

    def _content(self) -> tuple:
        """What the state holds, without its caches (which sections are decoded, which bytes are kept)."""
        sections = {}
        for task_id in self.section_ids():
            section = self.section(task_id)
            assert section is not None
            sections[task_id] = ([(c.claim_id, c) for c in section.ordered()], sorted(section.active), section.edges)
        return (
            self.sequence, self.head, self.tasks, self.candidates, self.project_ids, self.wide,
            {k: n for k, n in self.active_counts.items() if n}, self.edge_count, sections, self._edge_tasks,
            self.private, self.private_controls, self.controls_unreadable,
        )

    def __eq__(self, other: object) -> bool:
        """Equal content: a state restored from a snapshot (sections still encoded) equals the one folded in memory."""
        if not isinstance(other, IntentState):
            return NotImplemented
        return self._content() == other._content()

    __hash__ = None  # type: ignore[assignment]

    # --- sections -------------------------------------------------------------------

    def section(self, task_id: str) -> Section | None:
        """The task's section, decoded from its snapshot bytes on first use; None for a task without claims."""
        found = self._sections.get(task_id)
        if found is not None:
            return found
        raw = self._encoded.get(task_id)
        if raw is None:
            return None
        record = _SECTION.decode(raw)
        section = Section()
        section.claims = dict(zip(record.ids, record.claims))
        wide = self.wide
        for index in record.active:
            claim_id = record.ids[index]
            # The wide index and the section must hold the same object: an event retires it through either.
            claim = wide.get(claim_id) or _CLAIM.decode(record.claims[index])
            section.claims[claim_id] = section.active[claim_id] = claim
        section.edges = [
            (n, new, task_id if t is None else t, old, task_id if u is None else u) for n, new, t, old, u in record.edges
        ]
        self._sections[task_id] = section
        return section

    def section_ids(self) -> list[str]:
        return list({**dict.fromkeys(self._sections), **dict.fromkeys(self._encoded)})

    def _changing(self, task_id: str) -> Section:
        """The section an event is about to change: its snapshot bytes are stale from now on."""
        section = self.section(task_id)
        if section is None:
            section = self._sections[task_id] = Section()
        self._encoded.pop(task_id, None)
        return section

    # --- claims ---------------------------------------------------------------------

    def find_claim(self, claim_id: str, near: str | None = None) -> Claim | None:
        """The claim with this id: among the project-wide active claims, then in task ``near``
        (the acting task), then in every section (a claim no task's view shows: rare, and O(project))."""
        claim = self.wide.get(claim_id)
        if claim is not None:
            return claim
        if near is not None:
            section = self.section(near)
            if section is not None and claim_id in section.claims:
                return section.get(claim_id)
        for task_id in self.section_ids():
            section = self.section(task_id)
            if section is not None and claim_id in section.claims:
                return section.get(claim_id)
        return None

    def add_claim(self, claim: Claim) -> None:
        section = self._changing(claim.task_id)
        section.claims[claim.claim_id] = claim
        if claim.active:
            section.active[claim.claim_id] = claim
            self.active_counts[claim.task_id] = self.active_counts.get(claim.task_id, 0) + 1
            if claim.project_wide:
                self.wide[claim.claim_id] = claim

    def retire(self, claim: Claim, lifecycle: str, **fields: Any) -> None:
        """Make ``claim`` superseded or invalidated (``fields``: the lifecycle's own fields)."""
        section = self._changing(claim.task_id)
        if claim.active:
            del section.active[claim.claim_id]
            self.active_counts[claim.task_id] -= 1
            self.wide.pop(claim.claim_id, None)
        claim.state = lifecycle
        for name, value in fields.items():
            setattr(claim, name, value)
        section.claims[claim.claim_id] = msgspec.Raw(_ENCODER.encode(claim))

    def add_edge(self, new: Claim | None, new_id: str, old: Claim | None, old_id: str, task_id: str) -> None:
        """Record that ``new_id`` supersedes ``old_id``, in the sections of both ends' tasks."""
        new_task = new.task_id if new is not None else task_id
        old_task = old.task_id if old is not None else ""
        old_id = old.claim_id if old is not None else old_id  # the string the section already holds
        row = (self.edge_count, new_id, new_task, old_id, old_task)
        self.edge_count += 1
        self._changing(new_task).edges.append(row)
        if old_task and old_task != new_task:
            self._changing(old_task).edges.append(row)

    def forget(self, removed: set[str]) -> None:
        """Drop claims and candidates (by id) and every edge that names one (a purge of a private task's memory)."""
        for task_id in self.section_ids():
            section = self.section(task_id)
            assert section is not None
            hit = removed & section.claims.keys()
            if hit or any(edge[1] in removed or edge[3] in removed for edge in section.edges):
                section = self._changing(task_id)
                for claim_id in hit:
                    del section.claims[claim_id]
                    if section.active.pop(claim_id, None) is not None:
                        self.active_counts[task_id] -= 1
                        self.wide.pop(claim_id, None)
                section.edges = [e for e in section.edges if e[1] not in removed and e[3] not in removed]
        for candidate_id in removed & self.candidates.keys():
            del self.candidates[candidate_id]

    # --- what reads select ----------------------------------------------------------

    def task_claims(self, task_id: str) -> list[Claim]:
        """Every claim of the task, in ledger order."""
        section = self.section(task_id)
        return [] if section is None else section.ordered()

    def task_claim_ids(self, task_id: str) -> list[str]:
        section = self.section(task_id)
        return [] if section is None else list(section.claims)

    def claims_of(self, task_id: str, claim_ids: list[str]) -> list[Claim]:
        """Claims of the task by id (decoding only these)."""
        section = self.section(task_id)
        return [section.get(claim_id) for claim_id in claim_ids] if section is not None else []  # type: ignore[misc]

    def visible_active(self, task_id: str | None) -> Iterable[Claim]:
        """The active claims a task's view shows: its own and the project-wide ones (every active claim for None)."""
        if task_id is None:
            for other in self.section_ids():
                section = self.section(other)
                if section is not None:
                    yield from section.active.values()
            return
        section = self.section(task_id)
        own = {} if section is None else section.active
        yield from own.values()
        for claim_id, claim in self.wide.items():
            if claim_id not in own:
                yield claim

    def all_claims(self) -> list[Claim]:
        """Every claim of the project, in ledger order (decodes every section: exports and project-wide audits)."""
        claims = [c for task_id in self.section_ids() for c in self.task_claims(task_id)]
        claims.sort(key=lambda c: c.position)
        return claims

    def edges_touching(self, task_id: str | None) -> list[EdgeRow]:
        """The supersession edges that touch the task's claims (every edge for None), in ledger order."""
        if task_id is None:
            rows = {e[0]: e for t in self.section_ids() for e in (self.section(t).edges)}  # type: ignore[union-attr]
            edges = [rows[k] for k in sorted(rows)]
        else:
            section = self.section(task_id)
            edges = [] if section is None else section.edges
        allowed = self._edge_tasks
        if allowed is not None:
            edges = [e for e in edges if e[2] in allowed and e[4] in allowed]
        return edges

    def active_count(self, task_id: str) -> int:
        return self.active_counts.get(task_id, 0)

    # --- derived states -------------------------------------------------------------

    def restricted(self, task_ids: set[str], project_id: str) -> IntentState:
        """The state seen from one project: only ``task_ids`` (its tasks), their claims and candidates,
        and the edges whose both ends are claims of those tasks."""
        view = self._copy()
        view.tasks = {k: t for k, t in self.tasks.items() if k in task_ids}
        view.candidates = {k: c for k, c in self.candidates.items() if c.task_id in task_ids}
        view.wide = {k: c for k, c in self.wide.items() if c.task_id in task_ids}
        view._sections = {k: s for k, s in self._sections.items() if k in task_ids}
        view._encoded = {k: r for k, r in self._encoded.items() if k in task_ids}
        view.active_counts = {k: n for k, n in self.active_counts.items() if k in task_ids}
        view._edge_tasks = frozenset(task_ids)
        view.project_ids = {project_id}
        return view

    def overlay(self, other: IntentState) -> IntentState:
        """This state with ``other``'s (a private task's in-memory state) tasks, claims and edges beside its own;
        neither state changes."""
        view = self._copy()
        view.tasks = {**self.tasks, **other.tasks}
        view.candidates = {**self.candidates, **other.candidates}
        view.wide = {**self.wide, **other.wide}
        for task_id in other.section_ids():
            theirs = other.section(task_id)
            mine = self.section(task_id)
            assert theirs is not None
            merged = Section()
            merged.claims = {**(mine.claims if mine else {}), **theirs.claims}
            merged.active = {**(mine.active if mine else {}), **theirs.active}
            merged.edges = [*(mine.edges if mine else ()), *theirs.edges]
            view._sections[task_id] = merged
            view._encoded.pop(task_id, None)
            view.active_counts[task_id] = self.active_count(task_id) + other.active_count(task_id)
        return view

    def _copy(self) -> IntentState:
        view = IntentState()
        view.sequence, view.head = self.sequence, self.head
        view.tasks, view.candidates, view.project_ids = self.tasks, self.candidates, self.project_ids
        view.wide, view.active_counts, view.edge_count = self.wide, dict(self.active_counts), self.edge_count
        view._sections, view._encoded, view._edge_tasks = dict(self._sections), dict(self._encoded), self._edge_tasks
        view.private, view.private_controls, view.controls_unreadable = self.private, self.private_controls, self.controls_unreadable
        return view

    # --- projection snapshots -------------------------------------------------------

    def snapshot(self) -> SnapshotForm:
        """The folded state as a snapshot holds it; only the sections changed since the last call are encoded."""
        encoded = self._encoded
        for task_id, section in self._sections.items():
            if task_id not in encoded:
                encoded[task_id] = _ENCODER.encode(section.record(task_id))
        return SnapshotForm(
            layout=LAYOUT, sequence=self.sequence, head=self.head, tasks=list(self.tasks.values()),
            candidates=list(self.candidates.values()), project_ids=sorted(self.project_ids),
            edge_count=self.edge_count, active_counts=dict(self.active_counts), wide=list(self.wide.values()),
            sections=dict(encoded),
        )

    @classmethod
    def restore(cls, form: SnapshotForm) -> IntentState:
        state = cls()
        state.sequence, state.head, state.edge_count = form.sequence, form.head, form.edge_count
        state.tasks = {t.task_id: t for t in form.tasks}
        state.candidates = {c.candidate_id: c for c in form.candidates}
        state.project_ids = set(form.project_ids)
        state.active_counts = form.active_counts
        state.wide = {c.claim_id: c for c in form.wide}
        state._encoded = form.sections
        return state
