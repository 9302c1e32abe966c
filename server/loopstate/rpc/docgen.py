"""docs/protocol.md, generated: the method reference from loopstate_protocol, and a
worked session recorded from a real server over real pipes.

    python -m loopstate.rpc.docgen --write    # regenerate docs/protocol.md

The session runs ``loopstate.rpc.stdio.serve`` in a thread with a pinned clock
and sequential ids on a fixed scratch project, so every byte (hashes included)
is reproducible; the test suite regenerates it and fails when the checked-in
copy is stale. Messages are shown per step in a fixed order (the response, then
the notifications it caused); on the wire a notification may come first.
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import logging
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import Any

import msgspec

from loopstate_protocol import PROTOCOL_VERSION, project
from loopstate_protocol.base import MAX_SAFE_INTEGER, ErrorData, Head
from loopstate_protocol.client import LoopstateClient, RpcError
from loopstate_protocol.errors import ErrorCode, jsonrpc_code
from loopstate_protocol.schema import METHODS, NOTIFICATIONS

from loopstate.core.errors import MESSAGE_LIMIT
from loopstate.core.nesting import MAX_DEPTH as DATA_DEPTH
from loopstate.rpc.envelope import MAX_DEPTH as MESSAGE_DEPTH
from loopstate.rpc.framing import LINE_LIMIT, MAX_BODY

DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"
SCRATCH = Path("/tmp/loopstate-protocol-demo")
ROOT = SCRATCH / "project"
T0 = "2026-01-15T09:30:00Z"

MEANINGS: dict[ErrorCode, str] = {
    ErrorCode.INVALID_PARAMS: "params (or a value in them) are not what the method takes; the message is msgspec's, with the path",
    ErrorCode.INVALID_REQUEST: "not a JSON-RPC 2.0 request object: no or wrong `jsonrpc`, bad `id`, no `method`, a batch, "
                               f"nested past {MESSAGE_DEPTH} levels",
    ErrorCode.PARSE_ERROR: "the frame's header block or its JSON could not be read (answered with `id: null`)",
    ErrorCode.METHOD_NOT_FOUND: "the method is not served; the message lists those that are",
    ErrorCode.SERVER_SHUTTING_DOWN: "a request after `shutdown`; send `exit` and start a new server",
    ErrorCode.SERVER_NOT_INITIALIZED: "a request before `initialize`",
    ErrorCode.INTERNAL_ERROR: "a fault in the server; nothing was acknowledged and the server keeps running",
    ErrorCode.UNKNOWN_SUBSCRIPTION: "no such subscription on this connection",
    ErrorCode.INVALID_ROOT: "the project root is not an absolute, existing, acceptable directory",
    ErrorCode.UNSAFE_PATH: "a store path is a link, FIFO or other unsafe file; loopstate refuses to follow it",
    ErrorCode.NOT_FOUND: "the named task, run, goal or record does not exist",
    ErrorCode.LOCK_TIMEOUT: "another process held the stream's lock too long; the message names the holder",
    ErrorCode.CORRUPT_LEDGER: "a stream's chain is broken; run `loopstate verify`, then `loopstate recover`",
    ErrorCode.FUTURE_SCHEMA: "the store was written by a newer loopstate; upgrade",
    ErrorCode.STORE_IO_ERROR: "the store could not be read or written (disk full, permissions)",
    ErrorCode.REQUEST_ID_REUSED: "the request id was used before for a different command",
    ErrorCode.EVENT_ID_CONFLICT: "the event id was used before with a different body",
    ErrorCode.RULE_VIOLATION: "the command breaks a rule of its domain",
    ErrorCode.VALIDATION_FAILED: f"a field's value is not acceptable (nested past {DATA_DEPTH} levels, for one); the message names the field",
    ErrorCode.CONFLICT: "the command conflicts with the current state",
    ErrorCode.LEASE_HELD: "another worker holds the run's lease",
    ErrorCode.LEASE_EXPIRED: "the lease expired; acquire or resume",
    ErrorCode.LEASE_MISMATCH: "the lease id or generation is not the current one",
    ErrorCode.CLOCK_REVERSED: "a timestamp goes backwards",
    ErrorCode.KILL_SWITCH: "a kill switch stands; it halts and never authorizes",
    ErrorCode.AUTHORITY_DENIED: "the authority grant does not cover the action",
    ErrorCode.BUDGET_EXHAUSTED: "a run budget is spent",
    ErrorCode.INVALID_TRANSITION: "the run or todo cannot move to that state from where it is",
    ErrorCode.PRIVACY_VIOLATION: "the content is not allowed at the record's privacy level",
}

TOPIC_NOTES: dict[str, str] = {
    "intent/snapshot": "`intent/snapshot[/<task_id>]`: the current claims view, of the project or one task",
    "intent/audit": "`intent/audit[/<task_id>]`: every claim with its lifecycle and supersession edges",
    "intent/tasks": "`intent/tasks`: the project's durable tasks",
    "runs/status": "`runs/status/<run_id>`: run, lease, pending operation, issues; a kill switch that appears halts the run at once",
    "goals/board": "`goals/board/<goal_id>`: the default board page of one goal (active todos, the newest "
                   "completed, gates, runs, quota), with `meta.last_append_sequence` and the `page` counts of what "
                   "it leaves out",
    "goals/public_board": "`goals/public_board/<goal_id>`: the same board with only public-safe content",
    "project/runs": "`project/runs`: the result of `project.runs` (every run, the kill switch); pushed when a run "
                    "stream changes, a run is created, or a kill switch is set or cleared",
    "project/goals": "`project/goals`: the result of `project.goals`; pushed when a goal stream changes or a goal "
                     "is created",
    "project/kill_switch": "`project/kill_switch`: the result of `project.kill_switch`; pushed when a switch file "
                           "appears or disappears (also by hand: `rm .loopstate/STOP`)",
}

PROJECT_INTRO = """\
Beside each domain's messages, a few concern the project as a whole: they read many streams
(or none) and have no stream of their own. An editor needs nothing else to show a project:
which project a folder belongs to, its runs and goals, the kill switch, a verification and
the audit log, and the two actions of a stop button. Their `kind` starts with `project.`.

A `project/...` topic delivers snapshots only (`since` and `deliver: "events"` are refused):
its snapshot is the result of the query of the same name, and its `head` is the topic's own
(`stream` is the topic, `sequence` counts the snapshots this subscription was given, 1 being
the subscribe result's, `hash` is the SHA-256 of the snapshot's JSON). A change is pushed
once per change, and only when the snapshot differs from the last one sent. When the
snapshot cannot be computed (a corrupt stream) the subscriber gets `loopstate/streamError`;
once the streams read cleanly again (after `loopstate recover`) it gets `loopstate/changed`
with `rewritten: true` and the fresh snapshot, and the subscription goes on. A domain
topic recovers the same way: after its `loopstate/streamError`, the rewritten stream's
projection comes as `rewritten: true` (`previous_sequence` 0), with no other change needed.
A failure is announced once per subscription: the server may wake on a broken stream many
times before it is recovered (each edit, each step of a recovery in another process), and
only the first failed read is pushed; the next notification is the recovered change, and a
stream that breaks again after a delivered change is announced again.

`project.stop` and `project.resume` answer an `ExecuteResult` with no events and a null
`head`; its `project` field says what was done (tagged by `kind`). A stop sets the switch
file first (durably), then records a halt on every run of this project and of every
loopstate project around it, each under a request id derived from the stop's, so an exact
retry replays (`replayed: true`) instead of writing again. A resume removes the standing
switch files inside the project's own `.loopstate` folder; any other standing switch
(`.the-loop/STOP`, a configured path elsewhere, an enclosing project's) is listed in
`kept` with the reason, never deleted. Halted runs stay halted: each is resumed with
`runs.resume` (`loopstate run resume RUN`), and `halted_runs` lists them. On the command line
the two are `loopstate run stop` and `loopstate run unstop`.
"""


# the reference -----------------------------------------------------------------------------

def _doc(cls: type) -> str:
    """The class docstring, each paragraph on one line."""
    text = inspect.cleandoc(cls.__doc__ or "")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in text.split("\n\n"))


UNIONS = {"command": "one command of any domain, tagged by `kind` (the schema's `x-commands`)",
          "query": "one query of any domain, tagged by `kind` (the schema's `x-queries`)"}


def _struct(cls: type) -> msgspec.inspect.StructType:
    """The field list of a documented message; every one is a msgspec Struct."""
    info = msgspec.inspect.type_info(cls)
    if not isinstance(info, msgspec.inspect.StructType):
        raise TypeError(f"{cls.__name__} is not a msgspec Struct")
    return info


def _tag(cls: type[msgspec.Struct]) -> str:
    """The ``kind`` of a command or query (every one is tagged with its name)."""
    tag = cls.__struct_config__.tag
    if not isinstance(tag, str):
        raise TypeError(f"{cls.__name__} has no string tag")
    return tag


def _fields(cls: type) -> list[str]:
    info = _struct(cls)
    rows = []
    for field in info.fields:
        kind = UNIONS.get(field.name) or _type_name(field.type)
        default = "" if field.required else f" (default `{msgspec.json.encode(field.default).decode()}`)" \
            if field.default is not msgspec.NODEFAULT else " (optional)"
        rows.append(f"| `{field.encode_name}` | {kind}{default} |")
    return rows


def _type_name(t: Any) -> str:
    if isinstance(t, msgspec.inspect.UnionType):
        names = [_type_name(x) for x in t.types]
        if len(names) > 4:
            return "a tagged union (see the schema)"
        return " or ".join(names)
    if isinstance(t, msgspec.inspect.StructType):
        return f"`{t.cls.__name__}`"
    if isinstance(t, msgspec.inspect.ListType):
        return f"list of {_type_name(t.item_type)}"
    if isinstance(t, msgspec.inspect.DictType):
        return "object"
    if isinstance(t, msgspec.inspect.LiteralType):
        return " or ".join(f"`{v!r}`".replace("'", '"') for v in t.values)
    return {"StrType": "string", "IntType": "integer", "BoolType": "boolean", "NoneType": "null", "AnyType": "any"}.get(
        type(t).__name__, type(t).__name__)


def project_reference() -> list[str]:
    """The ``project.*`` queries and commands, each with its result's fields."""
    from loopstate_protocol.schema import PROJECT_RESULTS

    out = ["## The project as a whole", "", PROJECT_INTRO, "| query | result |", "|---|---|"]
    out += [f"| `{_tag(q)}` | `{PROJECT_RESULTS[_tag(q)].__name__}` |" for q in project.QUERIES]
    out.append("")
    shown: set[type] = set()

    def fields_of(cls: type) -> None:
        if cls in shown:
            return
        shown.add(cls)
        out.extend([f"`{cls.__name__}`: {_doc(cls)}", "", "| field | type |", "|---|---|", *_fields(cls), ""])
        for field in _struct(cls).fields:
            for inner in _structs_in(field.type):
                fields_of(inner)

    for message in (*project.QUERIES, *project.COMMANDS):
        out += [f"### `{_tag(message)}`", "", _doc(message), ""]
        if _struct(message).fields:
            out += ["| field | type |", "|---|---|", *_fields(message), ""]
    out += ["### Results", ""]
    for result in (*project.RESULTS, project.StopOutcome, project.ResumeOutcome):
        fields_of(result)
    return out


PROOFS_INTRO = """\
Four more `project.*` queries hand a client what it needs to hold the store to its history
without trusting it (docs/verifying.md): the public key the checkpoints are signed with, the
newest signed checkpoint of a stream, an inclusion proof of one event and a consistency proof
from a checkpoint the client kept. Proofs and notes are the texts `loopstate prove` and
`loopstate checkpoint` print; `loopstate check-proof` checks them with the key alone.
"""


def proofs_reference() -> list[str]:
    """The proof queries and their results."""
    from loopstate_protocol import proofs
    from loopstate_protocol.schema import PROJECT_RESULTS

    out = ["## Checkpoints and proofs", "", PROOFS_INTRO, "| query | result |", "|---|---|"]
    out += [f"| `{_tag(q)}` | `{PROJECT_RESULTS[_tag(q)].__name__}` |" for q in proofs.QUERIES]
    out.append("")
    for query in proofs.QUERIES:
        out += [f"### `{_tag(query)}`", "", _doc(query), ""]
        if _struct(query).fields:
            out += ["| field | type |", "|---|---|", *_fields(query), ""]
    for result in proofs.RESULTS:
        out.extend([f"`{result.__name__}`: {_doc(result)}", "", "| field | type |", "|---|---|", *_fields(result), ""])
    return out


def _structs_in(t: Any) -> list[type]:
    if isinstance(t, msgspec.inspect.StructType):
        return [t.cls]
    if isinstance(t, msgspec.inspect.UnionType):
        return [c for x in t.types for c in _structs_in(x)]
    if isinstance(t, msgspec.inspect.ListType):
        return _structs_in(t.item_type)
    return []


def reference() -> list[str]:
    from loopstate.service.registry import all_domains

    out = ["## Methods", "", "| method | params | result |", "|---|---|---|"]
    for name, (params, result) in METHODS.items():
        out.append(f"| `{name}` | `{params.__name__}` | {f'`{result.__name__}`' if result else 'the query result'} |")
    out.append("")
    shown: set[type] = set()
    for name, (params, result) in METHODS.items():
        out += [f"### `{name}`", "", _doc(params), ""]
        for cls in (params, result):
            if cls is None or cls in shown:
                continue
            shown.add(cls)
            out += [f"`{cls.__name__}`:", "", "| field | type |", "|---|---|", *_fields(cls), ""]
    out += ["## Notifications (server to client)", ""]
    for name, cls in NOTIFICATIONS.items():
        out += [f"### `{name}`", "", _doc(cls), "", "| field | type |", "|---|---|", *_fields(cls), ""]
    out += ["## Shared shapes", ""]
    for cls in (Head, ErrorData):
        out += [f"`{cls.__name__}`: {_doc(cls)}", "", "| field | type |", "|---|---|", *_fields(cls), ""]
    out += ["## Topics", "", "A topic is `<domain>/<view>[/<key>]`:", ""]
    for domain in all_domains():
        for view in domain.views:
            topic = f"{domain.name}/{view}"
            if topic not in TOPIC_NOTES:
                raise KeyError(f"docs: describe topic {topic} in TOPIC_NOTES")
            out.append(f"- {TOPIC_NOTES[topic]}")
    for view in project.TOPICS:
        out.append(f"- {TOPIC_NOTES[f'project/{view}']}")
    out += ["", *project_reference(), *proofs_reference()]
    out += ["## Error codes", "",
            "Every error response carries `error.data.code`, one of these stable strings (clients branch on it), "
            "and `error.data.details` when there is more to say (offsets, holders, fields).", "",
            "| data.code | error.code | meaning |", "|---|---|---|"]
    for code in ErrorCode:
        out.append(f"| `{code.value}` | {jsonrpc_code(code)} | {MEANINGS[code]} |")
    return out + [""]


# the worked session ---------------------------------------------------------------------------

class Transcript:
    def __init__(self) -> None:
        self.frames: list[tuple[str, bytes]] = []
        self.lock = threading.Lock()

    def __call__(self, direction: str, body: bytes) -> None:
        with self.lock:
            self.frames.append((direction, body))

    def take(self) -> list[tuple[str, bytes]]:
        with self.lock:
            frames, self.frames = self.frames, []
        return frames


def _show(frames: list[tuple[str, bytes]]) -> list[str]:
    """The frames as recorded, except that notifications follow the step's last response."""
    def is_notification(frame: tuple[str, bytes]) -> bool:
        return frame[0] == "recv" and "id" not in msgspec.json.decode(frame[1])

    ordered = [f for f in frames if not is_notification(f)] + [f for f in frames if is_notification(f)]
    out = []
    for direction, body in ordered:
        arrow = "client → server" if direction == "send" else "server → client"
        pretty = msgspec.json.format(body, indent=2).decode()
        out += [f"{arrow} (`Content-Length: {len(body)}`)", "", "```json", pretty, "```", ""]
    return out


def session() -> list[str]:
    """The recorded session; one generator at a time uses the fixed scratch folder."""
    import fcntl

    with open(f"{SCRATCH}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _session()


def _session() -> list[str]:
    from loopstate.core.clock import FixedClock
    from loopstate.core.ids import SequentialIds
    from loopstate.rpc.stdio import serve
    from loopstate.service.engine import Service

    logging.getLogger("pygls").setLevel(logging.CRITICAL)  # it logs each refusal with a traceback
    shutil.rmtree(SCRATCH, ignore_errors=True)
    ROOT.mkdir(parents=True)
    data = SCRATCH / "data"
    service = Service(data_dir=data, clock=FixedClock(T0), new_id=SequentialIds(prefix=1))
    other = Service(data_dir=data, clock=FixedClock("2026-01-15T09:31:00Z"), new_id=SequentialIds(prefix=2))
    to_server_r, to_server_w = os.pipe()
    to_client_r, to_client_w = os.pipe()
    code: list[int] = []
    thread = threading.Thread(target=lambda: code.append(asyncio.run(serve(service, to_server_r, to_client_w))))
    thread.start()
    transcript = Transcript()
    client = LoopstateClient.over(os.fdopen(to_client_r, "rb"), os.fdopen(to_server_w, "wb"), trace=transcript)
    root = str(ROOT)
    out: list[str] = []

    def step(title: str, text: str = "") -> None:
        out.extend([f"### {title}", ""] + ([text, ""] if text else []))

    try:
        step("1. initialize", "The server advertises `capabilities.experimental.loopstate`.")
        client.request("initialize", {"processId": 4242, "clientInfo": {"name": "demo-editor"}, "capabilities": {}})
        client.notify("initialized", {})
        out += _show(transcript.take())

        step("2. subscribe", "An editor follows the project's task list; the result carries the current snapshot.")
        sub = client.subscribe(root, "intent/tasks")
        out += _show(transcript.take())

        step("3. execute", "A command, with the request id that makes it idempotent. Its event comes back, and the "
             "subscriber is told.")
        client.execute(root, {"kind": "intent.task_start", "label": "Ship the parser"}, "req-1")
        client.next_change(10)
        out += _show(transcript.take())

        step("4. a change by another process",
             "Another process (a CLI call, a hook, another editor's server) appends; the server's file watcher "
             "sees it, the server verifies the new tail and pushes it.")
        task_id = client.query(root, {"kind": "intent.tasks"})[0]["task_id"]
        transcript.take()
        from loopstate_protocol.intent import ClaimInput, IntentClaimAdd

        other.execute(root, IntentClaimAdd(task_id=task_id, claim=ClaimInput(
            statement="The parser must accept the old format", role="user", epistemic_status="explicit",
            facets=["hard_constraint"])), "req-from-elsewhere")
        client.next_change(10)
        out += _show(transcript.take())

        step("5. a refusal", "A command that does not decode: msgspec's message, with the path, and a stable code.")
        try:
            client.execute(root, {"kind": "intent.task_start", "labl": "typo"}, "req-2")
        except RpcError:
            pass
        out += _show(transcript.take())

        step("6. reconnect with since",
             "A client that saw sequence 1 subscribes again with `since: 1` and `deliver: \"events\"`: it gets exactly "
             "the events it missed.")
        client.unsubscribe(sub.subscription_id)
        transcript.take()
        client.subscribe(root, "intent/snapshot/" + task_id, since=1, deliver="events")
        out += _show(transcript.take())

        step("7. shutdown and exit", "`exit` after `shutdown` ends the process with status 0.")
        client.request("shutdown")
        client.notify("exit")
        thread.join(10)
        out += _show(transcript.take())
    finally:
        if thread.is_alive():
            client.notify("exit")
            thread.join(10)
        shutil.rmtree(SCRATCH, ignore_errors=True)
    assert code == [0], code
    return out


INTRO = f"""# The sidecar protocol

<!-- Generated by `python -m loopstate.rpc.docgen --write` from loopstate_protocol and a
recorded session; tests/rpc/test_rpc_docs.py fails when this file is stale. Do not edit. -->

`loopstate serve` speaks JSON-RPC 2.0 with LSP base framing (`Content-Length: N\\r\\n\\r\\n`
then N bytes of UTF-8 JSON) on stdin and stdout, like a language server: any LSP client
(vscode-languageclient, Neovim's `vim.lsp`) can start it, and so can
`loopstate_protocol.client.LoopstateClient` (standard library and msgspec only). The
protocol version is `{PROTOCOL_VERSION}`. The JSON Schema of every message is
`protocol/loopstate_protocol/loopstate.schema.json` (also printed by `loopstate schema`).

## Lifecycle

- `initialize` first (a request before it gets `SERVER_NOT_INITIALIZED`; a second one
  gets `INVALID_REQUEST`). The result advertises `capabilities.experimental.loopstate` =
  `{{protocolVersion, domains, topics, methods}}` and asks for no text document sync.
- `shutdown` waits for the requests in flight (they run to completion: a command may
  already be durable, so its real result is the only honest answer; `$/cancelRequest` is
  acknowledged by that result), stops pushing, and answers `null`. Every later request
  gets `SERVER_SHUTTING_DOWN`.
- `exit` ends the process: status 0 after `shutdown`, 1 without. The end of stdin (or a
  client that closes our stdout) ends it the same way, whatever stdin is: a pipe whose
  writer closed, a socket, a terminal that hung up, a regular file or a device such as
  `/dev/null` (read through a thread, since epoll refuses those).
- stdout carries frames only: the server points its file descriptor 1 at stderr, where
  it logs (`--log-level`).

## Every request is answered exactly once

Malformed JSON, an unreadable frame, a missing or wrong `jsonrpc`, a bad `id`, an
unknown method, params that do not decode, a command that breaks a rule, a corrupt
store and a fault in the server are each answered with a JSON-RPC error whose
`data.code` is below; the server keeps serving. A frame whose `id` cannot be known is
answered with `id: null`. Notifications are never answered (JSON-RPC), and unknown ones
are ignored; a loopstate method (or `initialize`, `shutdown`) sent as a notification is
ignored too, so a command is never applied without anyone learning its outcome.
Commands apply one at a time, in arrival order; a refused command writes nothing.
Requests already read when `exit` arrives or stdin ends are still answered.

## Framing

Each message is a header block (`Name: value` lines ending in CRLF, a bare LF accepted,
names case-insensitive), a blank line, then exactly `Content-Length` bytes of UTF-8
JSON. A block is usable when it carries exactly one `Content-Length`, a decimal count of
bytes of at most {MAX_BODY >> 20} MiB; other headers (`Content-Type`) are ignored, and blank lines
between frames are skipped. An unusable block (no `Content-Length`, a second one, one
that is signed, not a number or too large, a line that is not a header, a header line
over {LINE_LIMIT >> 10} KiB, input that ends inside a frame) is answered with `PARSE_ERROR` and
`id: null`, and the server resynchronises as LSP servers do: it skips input up to the
next `Content-Length:` header, searching from inside the offending line, so a frame
whose blank line is missing, or whose body ran into the next frame's header, costs that
frame and no other. The body of a refused block is not run, unless a `Content-Length`
header follows the bad line in the same block (that header starts a frame).

## Limits

- A message may nest at most {MESSAGE_DEPTH} levels of arrays and objects. A deeper one is not
  processed: it is answered with `INVALID_REQUEST`, naming the limit and the member
  (`id`, `params`) that nests too deep, by its `id` when the id can still be read
  (else with `id: null`; a deep notification is not answered). The server and its
  subscriptions carry on.
- The data in one field of a command (an intent graph, a run's evidence or scope, a
  goals payload) may nest at most {DATA_DEPTH} levels: deeper is `VALIDATION_FAILED`, with
  `details` `{{field, limit}}`. The CLI applies the same rule, and to the JSON text it is
  given (an `intent import` file, a `validate` record, a `goals append` payload) as a
  whole, before a decoder could fail on it (`core.nesting.decoded_text`).
- Every integer a command carries, in a typed field or inside free-form data (a run's
  budgets, completion data), lies within +-{MAX_SAFE_INTEGER} (2^53-1), the largest
  integer a JSON client reading numbers as doubles holds exactly. A larger one is
  `VALIDATION_FAILED` with `details` `{{field, limit}}`, the field named by its path
  (`budgets.max_mutations`), and nothing is written. The JSON Schema gives every
  integer this `minimum` and `maximum` (or a narrower bound the field has).
- An error quotes at most a few hundred characters of what was sent, and says how long
  it was: a message, and each string in `details`, is cut to {MESSAGE_LIMIT} characters, keeping
  its start and its end.

## Subscriptions and slow clients

`loopstate/subscribe` returns the topic's current head and projection; with `since`, also
every event after that sequence, so a client that reconnects misses nothing. Then each
change to the topic's stream, by this server or any other process (seen by the store
watcher, service/watch.py: inotify, FSEvents or ReadDirectoryChangesW; an idle server
uses no CPU), is pushed as `loopstate/changed`, in order, with
`previous_sequence` and the new `head`. Each notification starts where the previous one
ended, so a client can always tell whether it missed something. A stream that is
re-chained (an intent purge, `loopstate recover`) is announced with `rewritten: true`,
`previous_sequence: 0` and the new projection; one that cannot be read (another process
broke its chain, or changed bytes the server had already verified: an edit in place, a
truncate and rewrite, a replaced file; see storage.md, *Bytes that change under a
long-lived process*) is announced with `loopstate/streamError`, and from then on the
server refuses to execute commands on it or answer queries from it (CORRUPT_LEDGER),
never serving the state it had folded before. Where no native watcher is available,
the server refuses to poll instead: other processes' changes then reach subscribers at
the next request that reads the stream.

When the client reads slowly, the server stops writing at 256 KiB of unread output and
keeps one pending notification per subscription: a snapshot subscription's becomes the
latest projection; an events subscription keeps up to 256 events and past that gets the
latest projection instead (`events: null`, `snapshot` set; subscribe again with `since` to
fetch the skipped events). Requests are not read while the output is backed up, nor
while 64 requests are in flight. Memory stays bounded however slow the client.
"""


def render() -> str:
    lines = [INTRO, *reference(), "## A worked session", "",
             "Recorded from a real server (pinned clock and ids) by the generator.", "", *session()]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help=f"write {DOC} instead of printing")
    args = parser.parse_args(argv)
    text = render()
    if args.write:
        DOC.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
