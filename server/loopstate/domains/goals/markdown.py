"""ACTIVE_GOAL_STATE.md as a projection: render it from the board, parse it back.

The rendered file opens with a header comment naming the projection's source
(the projection metadata) and the checksum of the body below it, so a reader can
tell a current projection from a stale one (the store moved on) or an edited
one (someone changed the text: that is not a state change). The parser reads
this format and the hand-written variant of it (check-box items under role
headings, indented ``key: value`` details), which is what backfill imports
and what the bridge compares.

Item grammar::

    - [m] P1 `T001` Title text          m: ' ' open, '~' claimed, '!' blocked,
      - claimed by: codex                   '-' deferred, 'x' completed
      - validation: ci#12               (list fields repeat their key)

Hand-written files may use '*' bullets, indent details by 2-4 spaces or a tab,
and leave out the priority (P2) or the id (backfill assigns one).
    - [ ] `G001` user: Approve the plan (gates; m: ' ' open, '-' deferred, 'x' resolved)
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from loopstate_protocol.goals import Board, GateView, TodoView

from loopstate.core import canonical

HEADER_MARK = "<!-- loopstate:goals-projection "
HEADER = re.compile(r"^<!-- loopstate:goals-projection (\{.*\}) -->$")
STATUS_MARK = {"open": " ", "claimed": "~", "blocked": "!", "deferred": "-", "completed": "x"}
MARK_STATUS = {" ": "open", "~": "claimed", "!": "blocked", "-": "deferred", "x": "completed", "X": "completed"}
GATE_MARK = {"open": " ", "deferred": "-", "approved": "x", "rejected": "x"}
TODO_ITEM = re.compile(
    r"^[-*] \[(?P<mark>[ xX~!-])\] (?:(?P<priority>P[0-4]) )?(?:`(?P<id>[^`\s]+)` )?(?P<title>\S.*)$"
)
GATE_ITEM = re.compile(
    r"^[-*] \[(?P<mark>[ xX-])\] (?:`(?P<id>[^`\s]+)` )?(?:(?P<kind>user|owner|operator|controller): )?(?P<title>\S.*)$"
)
DETAIL = re.compile(r"^(?: {2,4}|\t)[-*] (?P<key>[A-Za-z][A-Za-z0-9 ._-]*?):(?: (?P<value>.*))?$")
QUOTED = re.compile(r"^(?: {4,}|\t+)> ?(?P<text>.*)$")
DEFAULT_PRIORITY = "P2"

TODO_KEYS = {
    "order": "planner_order", "claimed by": "claimed_by", "lease until": "lease_expires_at",
    "blocked": "blocker_reason", "gate": "gate_ids", "deferred": "resume_when", "until": "resume_until",
    "done": "rationale", "validation": "validation_refs", "evidence": "evidence_ids", "role": "role",
    "source": "source", "pointer": "pointer", "details": "details",
}
GATE_KEYS = {"todo": "todo_id", "run": "run_id", "decision": "decision", "rationale": "rationale", "by": "resolved_by"}
LIST_FIELDS = {"gate_ids", "validation_refs", "evidence_ids"}


# Rendering -----------------------------------------------------------------------------------------


def _todo_lines(todo: TodoView, *, with_role: bool, compact: bool = False) -> list[str]:
    lines = [f"- [{STATUS_MARK[todo.status]}] {todo.priority} `{todo.todo_id}` {todo.title}"]

    def add(key: str, value: Any) -> None:
        if value is not None and value != "":
            lines.append(f"  - {key}: {value}")

    if with_role:
        add("role", todo.role)
    if compact:
        return lines
    add("order", todo.planner_order)
    add("claimed by", todo.claimed_by)
    add("lease until", todo.lease_expires_at)
    add("blocked", todo.blocker_reason)
    for gate_id in todo.gate_ids:
        add("gate", gate_id)
    add("deferred", todo.resume_when)
    add("until", todo.resume_until)
    add("done", todo.rationale)
    for ref in todo.validation_refs:
        add("validation", ref)
    for evidence_id in todo.evidence_ids:
        add("evidence", evidence_id)
    for key, value in sorted(todo.metadata.items()):
        add(f"meta.{key}", value)
    add("source", todo.source)
    add("pointer", todo.pointer)
    if todo.details:
        lines.append("  - details:")
        lines.extend(f"    > {line}" if line else "    >" for line in todo.details.split("\n"))
    return lines


def _gate_lines(gate: GateView) -> list[str]:
    lines = [f"- [{GATE_MARK[gate.status]}] `{gate.gate_id}` {gate.gate_kind}: {gate.title}"]
    for key, value in (("todo", gate.todo_id), ("run", gate.run_id), ("decision", gate.decision),
                       ("rationale", gate.rationale), ("by", gate.resolved_by)):
        if value:
            lines.append(f"  - {key}: {value}")
    return lines


def _cell(value: Any) -> str:
    return "" if value is None else str(value).replace("|", "\\|")


def render_body(board: Board) -> str:
    goal = board.meta.goal_id
    out = [
        "",
        f"> Workbench projection of the event stream `goals.{goal}`. Editing this file changes no state:",
        "> record changes with `loopstate goals ...`, or import a hand-written file with `loopstate goals backfill`.",
        "",
        f"_{board.meta.source_event_count} lifecycle events through append_sequence "
        f"{board.meta.last_append_sequence}; generated {board.meta.generated_at}; {board.meta.privacy}._",
        "",
        "## Todos",
        "",
    ]
    if not board.active:
        out += ["_No active todos._", ""]
    for group in board.active:
        out += [f"### {group.role}", ""]
        for todo in group.todos:
            out += _todo_lines(todo, with_role=False)
        out.append("")
    out += ["## Completed", ""]
    for todo in board.completed:
        out += _todo_lines(todo, with_role=True)
    out += [""] if board.completed else ["_None yet._", ""]
    if board.archive_candidates:
        out += ["## Archive candidates", ""]
        for todo in board.archive_candidates:
            out += _todo_lines(todo, with_role=True, compact=True)
        out.append("")
    out += ["## Gates", ""]
    for title, gates in (("User inbox", board.user_inbox), ("Controller inbox", board.controller_inbox),
                         ("Resolved", board.resolved_gates)):
        out += [f"### {title}", ""]
        for gate in gates:
            out += _gate_lines(gate)
        out += [""] if gates else ["_Empty._", ""]
    if board.runs:
        out += ["## Runs", "", f"{board.run_count} runs recorded; latest:", "",
                "| run | status | classification | delivery | todo | recorded |", "|---|---|---|---|---|---|"]
        for run in board.runs:
            out.append(f"| {_cell(run.run_id)} | {_cell(run.status)} | {_cell(run.classification)} | "
                       f"{_cell(run.delivery_outcome)} | {_cell(run.todo_id)} | {_cell(run.recorded_at)} |")
        out.append("")
    if board.refreshes:
        out += ["## Refresh timeline", ""]
        out += [f"- {r.recorded_at} {r.refresh_kind}: {r.summary}" for r in board.refreshes]
        out.append("")
    if board.quota:
        out += ["## Quota", "", "| unit | category | amount | entries |", "|---|---|---|---|"]
        out += [f"| {_cell(q.unit)} | {_cell(q.category)} | {amount_text(q.amount)} | {q.entries} |" for q in board.quota]
        out.append("")
    if board.evidence:
        out += ["## Evidence", ""]
        for e in board.evidence:
            out.append(f"- `{e.evidence_id}` {e.target_kind} {e.target_id}: {e.ref}" + (f" ({e.summary})" if e.summary else ""))
        out.append("")
    if board.omissions:
        out += ["## Omissions", ""]
        out += [f"- {note}" for note in board.omissions]
        out.append("")
    return "\n".join(out)


def amount_text(amount: float) -> str:
    """A quota amount as text that reads back as the same number (``:g`` would round to 6 digits)."""
    return repr(int(amount)) if amount.is_integer() and abs(amount) < 1e15 else repr(amount)


def header_fields(board: Board) -> dict[str, Any]:
    m = board.meta
    return {
        "schema_version": m.schema_version, "goal_id": m.goal_id, "generated_at": m.generated_at,
        "source_event_count": m.source_event_count, "last_event_id": m.last_event_id,
        "last_append_sequence": m.last_append_sequence, "projection_version": m.projection_version,
        "source_checksum": m.source_checksum, "privacy": m.privacy,
    }


def text_checksum(text: str) -> str:
    return "sha256:" + canonical.sha256_hex(text.encode("utf-8"))


def render(board: Board) -> str:
    """The whole file: title, header comment (metadata + body checksum), body."""
    body = render_body(board)
    fields = {**header_fields(board), "body_checksum": text_checksum(as_saved(body))}
    header = HEADER_MARK + canonical.encode(fields).decode() + " -->"
    return f"# Active goal state: {board.meta.goal_id}\n{header}\n{body}"


# Parsing ---------------------------------------------------------------------------------------------


class ParsedTodo(msgspec.Struct):
    line: int
    title: str
    priority: str
    status: str
    role: str = "agent"
    todo_id: str | None = None
    compact: bool = False
    planner_order: int | None = None
    claimed_by: str | None = None
    lease_expires_at: str | None = None
    blocker_reason: str | None = None
    gate_ids: list[str] = msgspec.field(default_factory=list)
    resume_when: str | None = None
    resume_until: str | None = None
    rationale: str | None = None
    validation_refs: list[str] = msgspec.field(default_factory=list)
    evidence_ids: list[str] = msgspec.field(default_factory=list)
    metadata: dict[str, str] = msgspec.field(default_factory=dict)
    source: str | None = None
    pointer: str | None = None
    details: str | None = None


class ParsedGate(msgspec.Struct):
    line: int
    title: str
    gate_kind: str
    status: str
    gate_id: str | None = None
    todo_id: str | None = None
    run_id: str | None = None
    decision: str | None = None
    rationale: str | None = None
    resolved_by: str | None = None


class ParsedRun(msgspec.Struct):
    line: int
    run_id: str
    status: str
    classification: str | None
    delivery_outcome: str | None
    todo_id: str | None
    recorded_at: str | None


class ParsedRefresh(msgspec.Struct):
    line: int
    recorded_at: str
    refresh_kind: str
    summary: str


class ParsedQuota(msgspec.Struct):
    line: int
    unit: str
    category: str
    amount: float


class ParsedEvidence(msgspec.Struct):
    line: int
    evidence_id: str
    target_kind: str
    target_id: str
    ref: str
    summary: str | None


class Parsed(msgspec.Struct):
    header: dict[str, Any] | None
    body_checksum_ok: bool | None
    todos: list[ParsedTodo]
    gates: list[ParsedGate]
    unparsed: list[tuple[int, str]]
    runs: list[ParsedRun] = msgspec.field(default_factory=list)
    refreshes: list[ParsedRefresh] = msgspec.field(default_factory=list)
    quota: list[ParsedQuota] = msgspec.field(default_factory=list)
    evidence: list[ParsedEvidence] = msgspec.field(default_factory=list)


def split_header(text: str) -> tuple[dict[str, Any] | None, str | None]:
    """The header fields and the body they describe (None when there is no header)."""
    first, _, rest = text.partition("\n")
    second, sep, body = rest.partition("\n")
    match = HEADER.match(second.rstrip()) if first.startswith("# ") and sep else None
    if match is None:
        return None, None
    try:
        fields = json.loads(match.group(1))
    except ValueError:
        return None, None
    return (fields, body) if isinstance(fields, dict) else (None, None)


def _section(heading: str) -> str:
    name = heading.strip().lower()
    if name in ("todos", "active todos", "todo", "active"):
        return "todos"
    if name in ("completed", "done", "completed todos"):
        return "completed"
    if name == "archive candidates":
        return "archive"
    if name in ("gates", "gate inbox", "gate inboxes"):
        return "gates"
    if name in ("runs", "run history"):
        return "runs"
    if name in ("refresh timeline", "refreshes"):
        return "refreshes"
    if name == "quota":
        return "quota"
    if name == "evidence":
        return "evidence"
    return "other"


RECORD_SECTIONS = ("runs", "refreshes", "quota", "evidence")
REFRESH_ITEM = re.compile(r"^[-*] (?P<at>\S+) (?P<kind>state_only|progress): (?P<summary>\S.*)$")
EVIDENCE_ITEM = re.compile(
    r"^[-*] `(?P<id>[^`\s]+)` (?P<kind>todo|gate|run) (?P<target>\S+): (?P<ref>.+?)(?: \((?P<summary>[^()]+)\))?$"
)
TABLE_SEPARATOR = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+$")


def _cells(line: str) -> list[str]:
    """The cells of a Markdown table row (``\\|`` is a literal bar inside a cell)."""
    inner = line.strip()[1:-1] if line.strip().endswith("|") else line.strip()[1:]
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", inner)]


def _record(parsed: "Parsed", section: str, number: int, line: str) -> bool:
    """Read one line of a runs, refresh, quota or evidence section; False when it is not one."""
    if section in ("runs", "quota"):
        if not line.startswith("|"):
            return False
        if TABLE_SEPARATOR.match(line.strip()):
            return True
        cells = _cells(line)
        if section == "runs" and len(cells) == 6:
            if cells[0] == "run":
                return True
            run_id, status, classification, delivery, todo_id, at = cells
            if not run_id or not status:
                return False
            parsed.runs.append(ParsedRun(number, run_id, status, classification or None, delivery or None,
                                         todo_id or None, at or None))
            return True
        if section == "quota" and len(cells) == 4:
            if cells[0] == "unit":
                return True
            try:
                amount = float(cells[2])
            except ValueError:
                return False
            parsed.quota.append(ParsedQuota(number, cells[0], cells[1], amount))
            return True
        return False
    if section == "refreshes":
        match = REFRESH_ITEM.match(line)
        if match is None:
            return False
        parsed.refreshes.append(ParsedRefresh(number, match.group("at"), match.group("kind"), match.group("summary")))
        return True
    match = EVIDENCE_ITEM.match(line)
    if match is None:
        return False
    parsed.evidence.append(ParsedEvidence(number, match.group("id"), match.group("kind"), match.group("target"),
                                          match.group("ref"), match.group("summary")))
    return True


def as_saved(text: str) -> str:
    """``text`` as loopstate writes it: LF line ends, no trailing spaces, one final newline.

    Opening a rendered file and saving it unchanged in an editor (CRLF line ends,
    trimmed or added trailing whitespace) changes none of this, so it is not an edit.
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).rstrip("\n") + "\n"


def body_matches(header: dict[str, Any], body: str | None) -> bool:
    """Does the body still carry the checksum its header was rendered with? The checksum
    covers the body as saved (``as_saved``), so an editor's re-save is not an edit."""
    return text_checksum(as_saved(body or "")) == header.get("body_checksum")


def parse(text: str) -> Parsed:
    text = text.replace("\r\n", "\n")
    header, body = split_header(text)
    ok = None if header is None else body_matches(header, body)
    todos: list[ParsedTodo] = []
    gates: list[ParsedGate] = []
    unparsed: list[tuple[int, str]] = []
    parsed = Parsed(header, ok, todos, gates, unparsed)
    section, role = "other", "agent"
    item: ParsedTodo | ParsedGate | None = None
    in_details = False
    for number, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        if line.startswith("## "):
            section, role, item = _section(line[3:]), "agent", None
            continue
        if line.startswith("### "):
            heading = line[4:].strip()
            role = heading[5:].strip() if heading.lower().startswith("role:") else heading
            item = None
            continue
        if section == "other" or not line.strip():
            continue
        if section in RECORD_SECTIONS:
            # Prose ("3 runs recorded; latest:") and notes are commentary; item and table lines must read.
            if line.startswith(("- ", "* ", "|")) and not _record(parsed, section, number, line):
                unparsed.append((number, line))
            continue
        if in_details and isinstance(item, ParsedTodo):
            quoted = QUOTED.match(line)
            if quoted:
                item.details = quoted.group("text") if item.details is None else item.details + "\n" + quoted.group("text")
                continue
            in_details = False
        if line.startswith(("- ", "* ")):
            item = _item(section, role, number, line)
            if item is None:
                unparsed.append((number, line))
            elif isinstance(item, ParsedTodo):
                todos.append(item)
            else:
                gates.append(item)
            continue
        detail = DETAIL.match(line)
        if detail and item is not None:
            known = _detail(item, detail.group("key").strip(), (detail.group("value") or "").strip())
            if known == "details":
                in_details = True
            elif not known:
                unparsed.append((number, line))
            continue
        if line.startswith(("_", ">", "|")):
            continue  # notes, quotes and tables are commentary
        unparsed.append((number, line))
    return parsed


def _item(section: str, role: str, number: int, line: str) -> ParsedTodo | ParsedGate | None:
    if section == "gates":
        match = GATE_ITEM.match(line)
        if match is None:
            return None
        mark = match.group("mark")
        status = {" ": "open", "-": "deferred"}.get(mark, "approved")
        return ParsedGate(line=number, title=match.group("title"), gate_kind=match.group("kind") or "user",
                          status=status, gate_id=match.group("id"))
    match = TODO_ITEM.match(line)
    if match is None:
        return None
    status = MARK_STATUS[match.group("mark")]
    if section in ("completed", "archive"):
        status = "completed"
    return ParsedTodo(line=number, title=match.group("title"), priority=match.group("priority") or DEFAULT_PRIORITY,
                      status=status,
                      role=role, todo_id=match.group("id"), compact=section == "archive")


def _detail(item: ParsedTodo | ParsedGate, key: str, value: str) -> str | bool:
    """Apply one ``key: value`` line; returns False for a key this item does not have."""
    if isinstance(item, ParsedGate):
        name = GATE_KEYS.get(key)
        if name is None:
            return False
        setattr(item, name, value)
        if name == "decision" and value == "reject":
            item.status = "rejected"
        return name
    if key.startswith("meta."):
        item.metadata[key[5:]] = value
        return "metadata"
    name = TODO_KEYS.get(key)
    if name is None:
        return False
    if name == "details":
        return "details"
    if name in LIST_FIELDS:
        getattr(item, name).append(value)
    elif name == "planner_order":
        if not value.isdigit():
            return False
        item.planner_order = int(value)
    else:
        setattr(item, name, value)
    return name
