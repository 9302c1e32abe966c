"""IntentState: everything folded from one project's intent ledger, indexed by what its reads select.

Every read names a task (``hook_context``, ``show --task``, ``compact``, the
task's audit) or pages through the project, so the state is kept the way
those reads select, and ``evolve`` keeps every index as it folds:

- ``tasks``, ``candidates``, ``project_ids``: project-wide and small;
- one ``Section`` per task: the task's active claims (handoff.py: kept in
  handoff order, with what the hook context counts beside each), its retired
  (superseded or invalidated) claims, and the supersession edges that touch
  them. A retired claim, which only the audit views, exports and error
  messages read, is one fixed-size entry (retired.py: where the records that
  added and retired it sit in the stream, and their digests), and the edge
  its superseder implies lives in that entry: what a section holds of its
  history does not grow with what the claims said. Reading retired claims
  back goes through ``reader`` (a verified read of one record by its place,
  attached by the service's effects); a claim folded from memory (a private
  task's) has no place, and is kept as its msgpack bytes instead;
- ``wide``: the active project-wide and long-term claims of every task (each
  task's view shows them), the same objects as in their sections;
- ``active_counts``: how many active claims each task has.

A task's view is its section's active claims plus ``wide`` (``view``), merged
in handoff order: a page of it, or the hook context, costs what it shows,
whatever the project holds.

Projection snapshots (core/snapshot.py) hold each section as its own msgpack
bytes (``SnapshotForm.sections``: msgpack ``bin``, decoded as a memoryview of
the snapshot's buffer, so the decoder steps over a section without parsing it
and copies nothing). A restored state keeps a section encoded until a read or
an event that retires one of its claims first touches it (a claim an event
adds waits beside it, in ``_added``), so a cold read of one task decodes that
task's section's lists (its active claims stay encoded until a read shows
them; its retired entries are bytes as they are) and the project-wide part,
whatever the tail it folds added to other tasks. The
encoded bytes of a section stay with the state while the section is clean: the
next snapshot re-encodes only the sections an event changed since the last one.

The state is owned by the one ledger reader that folds it and is updated in
place; a read never changes what it shows (decoding a section only fills a cache).
"""

from __future__ import annotations

from typing import Any, Final, Iterator, Literal

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.domains.intent import retired
from loopstate.domains.intent.handoff import TEXT, ActiveClaims, View
from loopstate.domains.intent.records import Candidate, Claim, Task

# (ordinal, new claim id, its task, old claim id, its task or "" when the ledger had no such claim)
EdgeRow = tuple[int, str, str, str, str]


class SectionRecord(msgspec.Struct, array_like=True, gc=False):
    """One task's section as a snapshot holds it: its active claims in handoff order (handoff.py: their keys,
    the claims, decoded when a read shows them, their flag bytes and line widths), its retired claims as the
    packed entries of retired.py, the retired claims that have no place
    in the stream as their bytes, the edges no entry implies (null for a task id that is the
    section's own) and the lifecycle of claims retired a second time."""

    keys: list[str]
    active: list[msgspec.Raw]
    flags: bytes
    widths: bytes
    retired: bytes
    kept_ids: list[str]
    kept: list[msgspec.Raw]
    edges: list[tuple[int, str, str | None, str, str | None]]
    later: list[tuple[int, dict[str, Any]]]


class SnapshotForm(msgspec.Struct, array_like=True):
    """The intent state in a projection snapshot: the project-wide part decoded at once, sections left encoded."""

    layout: Literal["intent-sections-3"]
    sequence: int
    head: str | None
    tasks: list[Task]
    candidates: list[Candidate]
    project_ids: list[str]
    edge_count: int
    active_counts: dict[str, int]
    wide: list[Claim]
    sections: dict[str, memoryview]
    # (task id, reason, sequence) of the last current_task_set; last, with a default, so a snapshot
    # written before tasks were current (which had no such event to fold) still decodes.
    current: tuple[str, str, int] | None = None


LAYOUT: Final = "intent-sections-3"
_SECTION = msgspec.msgpack.Decoder(SectionRecord)
_CLAIM = msgspec.msgpack.Decoder(Claim)
_ENCODER = msgspec.msgpack.Encoder()


class Section:
    """One task's claims: the active ones in handoff order (handoff.py), the retired ones as fixed-size
    entries (retired.py), and the edges that touch them that no entry implies."""

    __slots__ = ("active", "retired", "kept", "edges", "later")

    def __init__(self) -> None:
        self.active = ActiveClaims()
        self.retired = retired.Entries()
        # Retired claims with no place in a stream (folded from memory: a private task's), as their bytes.
        self.kept: dict[str, msgspec.Raw] = {}
        self.edges: list[EdgeRow] = []
        # slot -> lifecycle fields of a claim retired again (a ledger ``decide`` never writes; imports by hand)
        self.later: dict[int, dict[str, Any]] = {}

    def __len__(self) -> int:
        return len(self.active) + len(self.kept) + len(self.retired)

    def record(self, task_id: str) -> SectionRecord:
        keys, active, flags, widths = self.active.parts()
        return SectionRecord(
            keys=keys, active=active, flags=flags, widths=widths, retired=bytes(self.retired), kept_ids=list(self.kept), kept=list(self.kept.values()),
            edges=[(n, new, None if t == task_id else t, old, None if u == task_id else u) for n, new, t, old, u in self.edges],
            later=sorted(self.later.items()),
        )


def _only(section: Section, slot: int) -> Section:
    """A section of one retired entry of ``section`` (to read that one claim back)."""
    one = Section()
    one.retired = retired.Entries.of(section.retired.data()[slot * retired.SIZE:(slot + 1) * retired.SIZE])
    if slot in section.later:
        one.later = {0: section.later[slot]}
    return one


class _Reads:
    """The stream records one read resolves retired claims from, each read (and verified) once."""

    def __init__(self, read: retired.ReadFn | None) -> None:
        self._read = read
        self._seen: dict[int, dict[str, Any]] = {}

    def at(self, offset: int, digest: bytes) -> dict[str, Any]:
        found = self._seen.get(offset)
        if found is None:
            if self._read is None:
                raise LoopstateError(
                    ErrorCode.INTERNAL_ERROR,
                    "a retired intent claim was asked for, but no reader of the intent stream is attached to the state",
                )
            found = self._seen[offset] = self._read(offset, digest)
        return found


class IntentState:
    """Everything folded from one project's intent ledger (see the module docstring for its indexes).

    ``private`` is not folded from the ledger: it is the serving process's
    in-memory store of private tasks, attached by the service's intent effects
    (see service/intent_effects.py) and never written to disk. Likewise
    ``private_controls`` / ``controls_unreadable`` mirror the control files, so
    that the hook context of a task private in another process injects nothing.
    ``reader`` reads one verified record of the stream back by its place (the
    effects attach it): retired claims are resolved through it.
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
        # The project's current task as the last current_task_set made it: (task id, reason, sequence).
        self.current: tuple[str, str, int] | None = None
        self._sections: dict[str, Section] = {}
        self._encoded: dict[str, memoryview] = {}  # the snapshot bytes of every clean section
        # Active claims an event added to a section that is still encoded: kept aside until the section is
        # decoded, so a cold read folding a tail of another task's claims never decodes that task's section.
        self._added: dict[str, list[Claim]] = {}
        # Set on a view restricted to one project: edges whose other end is a claim of another project are left out.
        self._edge_tasks: frozenset[str] | None = None
        self.private: Any = None
        # Task ids that have a private-session control beside the ledger, and whether
        # a control could not be read; attached by the service's effects on each read.
        self.private_controls: frozenset[str] = frozenset()
        self.controls_unreadable = False
        self.reader: retired.ReadFn | None = None

    def _content(self) -> tuple:
        """What the state holds, without its caches (which sections are decoded, which bytes are kept)."""
        sections = {}
        for task_id in self.section_ids():
            section = self.section(task_id)
            assert section is not None
            sections[task_id] = (
                sorted(section.active.items()), bytes(section.retired), section.kept, section.edges, section.later,
            )
        return (
            self.sequence, self.head, self.tasks, self.candidates, self.project_ids, self.wide,
            {k: n for k, n in self.active_counts.items() if n}, self.edge_count, sections, self._edge_tasks,
            self.current, self.private, self.private_controls, self.controls_unreadable,
        )

    def __eq__(self, other: object) -> bool:
        """Equal content: a state restored from a snapshot (sections still encoded) equals the one folded in memory."""
        if not isinstance(other, IntentState):
            return NotImplemented
        return self._content() == other._content()

    # Equal by content, so not hashable (Python's rule for a class that defines __eq__); mypy's
    # object stubs type __hash__ as a method.
    __hash__ = None  # type: ignore[assignment]

    # --- sections -------------------------------------------------------------------

    def _listed(self, task_id: str) -> Section:
        """The section of a task ``section_ids`` lists (each has one)."""
        section = self.section(task_id)
        assert section is not None
        return section

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
        # The wide index and the section must hold the same objects: an event retires a claim through either.
        section.active = ActiveClaims.restore(record.keys, record.active, record.flags, record.widths, self.wide)
        section.retired = retired.Entries.of(record.retired)
        section.kept = dict(zip(record.kept_ids, record.kept))
        section.edges = [
            (n, new, task_id if t is None else t, old, task_id if u is None else u) for n, new, t, old, u in record.edges
        ]
        section.later = dict(record.later)
        added = self._added.pop(task_id, ())
        for claim in added:
            section.active.add(claim)
        if added:
            del self._encoded[task_id]  # stale from now on
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

    # --- retired claims, read back ------------------------------------------------------

    def _resolved(self, task_id: str, section: Section, reads: _Reads) -> tuple[list[Claim], list[EdgeRow]]:
        """The task's claims in ledger order (retired ones read back from the stream) and its edges in ledger order."""
        claims = list(section.active.values())
        claims += [_CLAIM.decode(raw) for raw in section.kept.values()]
        edges = list(section.edges)
        for slot, entry in enumerate(retired.entries(section.retired.data())):
            added = reads.at(entry.offset, entry.digest)
            retiring = reads.at(entry.r_offset, entry.r_digest)
            claim = retired.rebuild(entry, task_id, added, retiring)
            if retired.id_hash(claim.claim_id) != entry.id_hash:
                raise LoopstateError(
                    ErrorCode.CORRUPT_LEDGER,
                    f"the intent stream's record at byte {entry.offset} does not hold the retired claim folded from it; "
                    "run `loopstate verify` and restore the stream from a backup",
                    stream="intent", offset=entry.offset,
                )
            if entry.flags & retired.HAS_EDGE:
                superseder = claim.superseded_by
                assert superseder is not None  # an entry with an edge was superseded, by this claim
                edges.append((entry.ordinal, superseder, retired.superseder_task(entry, retiring), claim.claim_id, task_id))
            for name, value in section.later.get(slot, {}).items():
                setattr(claim, name, value)
            claims.append(claim)
        claims.sort(key=lambda c: c.position)
        edges.sort(key=lambda e: e[0])
        return claims, edges

    def _near_first(self, near: str | None) -> Iterator[str]:
        """Every section's task id, ``near`` first (the others are listed only if it does not hold what is sought)."""
        if near is not None:
            yield near
        for task_id in self.section_ids():
            if task_id != near:
                yield task_id

    def _locate(self, claim_id: str, near: str | None) -> tuple[str, Section, Any] | None:
        """Where the claim is: (its task, its section, the claim or the slot of its retired entry)."""
        wanted: bytes | None = None
        for task_id in self._near_first(near):
            section = self.section(task_id)
            if section is None:
                continue
            found = section.active.get(claim_id)
            if found is not None:
                return task_id, section, found
            raw = section.kept.get(claim_id)
            if raw is not None:
                return task_id, section, _CLAIM.decode(raw)
            if section.retired:
                wanted = wanted or retired.id_hash(claim_id)
                slot = retired.find(section.retired.data(), wanted)
                if slot is not None:
                    return task_id, section, slot
        return None

    # --- claims ---------------------------------------------------------------------

    def find_claim(self, claim_id: str, near: str | None = None) -> Claim | None:
        """The claim with this id: among the project-wide active claims, then in task ``near``
        (the acting task), then in every section (a claim no task's view shows: rare, and O(project)).
        A retired claim is read back from the stream."""
        claim = self.wide.get(claim_id)
        if claim is not None:
            return claim
        found = self._locate(claim_id, near)
        if found is None:
            return None
        task_id, section, what = found
        if not isinstance(what, int):
            return what
        claims, _ = self._resolved(task_id, _only(section, what), _Reads(self.reader))
        return claims[0]

    def add_claim(self, claim: Claim) -> None:
        task_id = claim.task_id
        if not claim.active:
            self._changing(task_id).kept[claim.claim_id] = msgspec.Raw(_ENCODER.encode(claim))
            return
        if task_id in self._encoded and task_id not in self._sections:
            self._added.setdefault(task_id, []).append(claim)  # applied when the section is decoded
        else:
            self._changing(task_id).active.add(claim)
        self.active_counts[task_id] = self.active_counts.get(task_id, 0) + 1
        if claim.project_wide:
            self.wide[claim.claim_id] = claim

    def retire_id(
        self, claim_id: str, near: str, lifecycle: str, retiring: retired.Place | None, r_index: int,
        *, edge: tuple[str, str] | None = None, **fields: Any,
    ) -> bool:
        """Retire the claim with this id (see ``retire``); False when the project has no such claim."""
        found = self._locate(claim_id, near)
        if found is None:
            return False
        task_id, section, what = found
        if isinstance(what, int) or not what.active:
            # A claim retired a second time (a ledger ``decide`` never writes: a hand-made import):
            # its entry keeps the first retirement and the edge it implies, the later one is kept beside it.
            changing = self._changing(task_id)
            if isinstance(what, int):
                changing.later[what] = {"state": lifecycle, **fields}
            else:
                self.retire(what, lifecycle, **fields)  # bytes again, with the new lifecycle
            if edge is not None:
                self._edge(edge[0], edge[1], claim_id, task_id)
            return True
        self.retire(what, lifecycle, retiring, r_index, edge=edge, **fields)
        return True

    def retire(
        self, claim: Claim, lifecycle: str, retiring: retired.Place | None = None, r_index: int = 0,
        *, edge: tuple[str, str] | None = None, **fields: Any,
    ) -> None:
        """Make ``claim`` superseded or invalidated (``fields``: the lifecycle's own fields) by the record at
        ``retiring``; ``edge``: (new claim id, its task) when a claim supersedes it. A claim and a retiring
        record that both have a place in the stream become an entry (retired.py); else the claim's bytes."""
        section = self._changing(claim.task_id)
        if claim.active:
            section.active.pop(claim.claim_id)
            self.active_counts[claim.task_id] -= 1
            self.wide.pop(claim.claim_id, None)
        else:
            section.kept.pop(claim.claim_id, None)
        claim.state = lifecycle
        for name, value in fields.items():
            setattr(claim, name, value)
        if claim.place is None or retiring is None:
            section.kept[claim.claim_id] = msgspec.Raw(_ENCODER.encode(claim))
            if edge is not None:
                self._edge(edge[0], edge[1], claim.claim_id, claim.task_id)
            return
        ordinal = None
        if edge is not None:
            ordinal = self.edge_count
            self.edge_count += 1
            if edge[1] != claim.task_id:
                self._changing(edge[1]).edges.append((ordinal, edge[0], edge[1], claim.claim_id, claim.task_id))
        retired.pack(
            section.retired, claim.claim_id, claim.place, claim.added_index, retiring, r_index,
            invalidated=lifecycle == "invalidated", ordinal=ordinal,
        )

    def add_missing_edge(self, new_id: str, new_task: str, old_id: str) -> None:
        """Record that ``new_id`` supersedes ``old_id``, a claim the ledger does not have."""
        row = (self.edge_count, new_id, new_task, old_id, "")
        self.edge_count += 1
        self._changing(new_task).edges.append(row)

    def _edge(self, new_id: str, new_task: str, old_id: str, old_task: str) -> None:
        """An edge no entry implies, in the sections of both ends' tasks."""
        row = (self.edge_count, new_id, new_task, old_id, old_task)
        self.edge_count += 1
        self._changing(new_task).edges.append(row)
        if old_task != new_task:
            self._changing(old_task).edges.append(row)

    def forget(self, removed: set[str]) -> None:
        """Drop claims and candidates (by id) and every edge that names one (a purge of a private task's memory,
        whose claims are folded from memory: none is a retired entry)."""
        for task_id in self.section_ids():
            section = self.section(task_id)
            assert section is not None
            hit = removed & (section.active.ids() | section.kept.keys())
            if hit or any(edge[1] in removed or edge[3] in removed for edge in section.edges):
                section = self._changing(task_id)
                for claim_id in hit:
                    section.kept.pop(claim_id, None)
                    if section.active.pop(claim_id) is not None:
                        self.active_counts[task_id] -= 1
                        self.wide.pop(claim_id, None)
                section.edges = [e for e in section.edges if e[1] not in removed and e[3] not in removed]
        for candidate_id in removed & self.candidates.keys():
            del self.candidates[candidate_id]

    # --- what reads select ----------------------------------------------------------

    def task_claims(self, task_id: str) -> list[Claim]:
        """Every claim of the task, in ledger order (its retired claims read back from the stream)."""
        section = self.section(task_id)
        return [] if section is None else self._resolved(task_id, section, _Reads(self.reader))[0]

    def task_view(self, task_id: str) -> tuple[list[Claim], list[EdgeRow]]:
        """Every claim of the task in ledger order and the edges that touch them, each record read once."""
        section = self.section(task_id)
        if section is None:
            return [], []
        claims, edges = self._resolved(task_id, section, _Reads(self.reader))
        return claims, self._allowed(edges)

    def view(self, task_id: str | None) -> View:
        """The active claims a task's view shows, in handoff order: its own and every task's project-wide ones
        (every active claim of the project for None). The other tasks' project-wide claims are few; they are
        ordered here, the task's own are in order in its section."""
        if task_id is None:
            return View([self._listed(t).active for t in self.section_ids()])
        section = self.section(task_id)
        others = ActiveClaims.of(c for c in self.wide.values() if c.task_id != task_id)
        return View([others] if section is None else [section.active, others])

    def all_claims(self) -> list[Claim]:
        """Every claim of the project, in ledger order (reads back every retired claim: exports and project-wide audits)."""
        reads = _Reads(self.reader)
        claims = [c for t in self.section_ids() for c in self._resolved(t, self._listed(t), reads)[0]]
        claims.sort(key=lambda c: c.position)
        return claims

    def edges_touching(self, task_id: str | None) -> list[EdgeRow]:
        """The supersession edges that touch the task's claims (every edge for None), in ledger order."""
        if task_id is not None:
            return self.task_view(task_id)[1]
        reads = _Reads(self.reader)
        rows = {e[0]: e for t in self.section_ids() for e in self._resolved(t, self._listed(t), reads)[1]}
        return self._allowed([rows[k] for k in sorted(rows)])

    def _allowed(self, edges: list[EdgeRow]) -> list[EdgeRow]:
        allowed = self._edge_tasks
        if allowed is not None:
            edges = [e for e in edges if e[2] in allowed and e[4] in allowed]
        return edges

    def active_count(self, task_id: str) -> int:
        return self.active_counts.get(task_id, 0)

    def current_task(self) -> tuple[str | None, str | None, int]:
        """The project's current task as (task id, reason, sequence of the event that made it current).

        A store written before tasks were current has no current_task_set: its
        current task is the newest task with the user's own claims, reported as
        ``pending_migration`` (sequence 0) until the first write records that
        pick (decide.migration), so every front door agrees on it before and after.
        """
        if self.current is not None:
            task_id, reason, sequence = self.current
            return (task_id, reason, sequence) if task_id in self.tasks else (None, None, 0)
        picked = self.newest_with_user_claims()
        return (picked, "pending_migration", 0) if picked is not None else (None, None, 0)

    def newest_with_user_claims(self) -> str | None:
        """The newest task (by the sequence of its start) with an active claim the hook context shows as
        text (the user's own explicit words): what a store written before tasks were current makes current.
        Only tasks with active claims are looked at, so a store of empty session tasks decodes nothing."""
        for task in sorted(self.tasks.values(), key=lambda t: t.sequence, reverse=True):
            if not self.active_count(task.task_id) or task.mode == "private":
                continue
            section = self.section(task.task_id)
            if section is not None and section.active.count(TEXT):
                return task.task_id
        return None

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
        view._added = {k: list(c) for k, c in self._added.items() if k in task_ids}
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
            # By id, the private task's claim over a durable one with the same id (as a merge of two dicts).
            by_id = {c.claim_id: c for c in (mine.active.values() if mine else ())}
            by_id.update((c.claim_id, c) for c in theirs.active.values())
            merged.active = ActiveClaims.of(by_id.values())
            merged.kept = {**(mine.kept if mine else {}), **theirs.kept}
            # A private task's claims are folded from memory: its own section has no retired entries.
            merged.retired = mine.retired if mine else retired.Entries()
            merged.later = mine.later if mine else {}
            merged.edges = [*(mine.edges if mine else ()), *theirs.edges]
            view._sections[task_id] = merged
            view._encoded.pop(task_id, None)
            view._added.pop(task_id, None)
            view.active_counts[task_id] = self.active_count(task_id) + other.active_count(task_id)
        return view

    def _copy(self) -> IntentState:
        view = IntentState()
        view.sequence, view.head = self.sequence, self.head
        view.tasks, view.candidates, view.project_ids = self.tasks, self.candidates, self.project_ids
        view.wide, view.active_counts, view.edge_count = self.wide, dict(self.active_counts), self.edge_count
        view.current = self.current
        view._sections, view._encoded, view._edge_tasks = dict(self._sections), dict(self._encoded), self._edge_tasks
        view._added = {k: list(c) for k, c in self._added.items()}
        view.private, view.private_controls, view.controls_unreadable = self.private, self.private_controls, self.controls_unreadable
        view.reader = self.reader
        return view

    # --- projection snapshots -------------------------------------------------------

    def snapshot(self) -> SnapshotForm:
        """The folded state as a snapshot holds it; only the sections changed since the last call are encoded."""
        for task_id in list(self._added):
            self.section(task_id)  # its added claims join it: its bytes are stale
        encoded = self._encoded
        for task_id, section in self._sections.items():
            if task_id not in encoded:
                encoded[task_id] = memoryview(_ENCODER.encode(section.record(task_id)))
        return SnapshotForm(
            layout=LAYOUT, sequence=self.sequence, head=self.head, tasks=list(self.tasks.values()),
            candidates=list(self.candidates.values()), project_ids=sorted(self.project_ids),
            edge_count=self.edge_count, active_counts=dict(self.active_counts), wide=list(self.wide.values()),
            sections=dict(encoded), current=self.current,
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
        state.current = form.current
        return state
