"""Projection snapshots (core/snapshot.py): for any history of any domain, a snapshot plus
the tail folds to exactly the full fold; a snapshot that does not match its stream is
never used (real files, the real CLI); the request index and the chain carry on after a
start from a snapshot; a snapshot never holds a private task."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corekit import cli, cli_ok as ok
from loopstate.core import canonical, snapshot, verified_mark
from loopstate.core.checkpoint import Checkpoint
from loopstate.core.clock import FixedClock, parse_time
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import SequentialIds
from loopstate.core.snapshot import SnapshotFile
from loopstate.core.stream import Stream
from loopstate.domains.base import Context
from loopstate.domains.goals import DOMAIN as GOALS
from loopstate.domains.goals.projection import build_board
from loopstate.domains.intent import DOMAIN as INTENT
from loopstate.domains.runs import DOMAIN as RUNS
from loopstate.service import Service
from loopstate_protocol import goals as g
from loopstate_protocol import intent as p
from loopstate_protocol.errors import ErrorCode
from tests.goals.test_goals_properties import _apply as goals_history
from tests.goals.test_goals_properties import commands as goal_commands
from tests.intent.intentkit import Intent, user_claim
from tests.runs.conftest import Harness
from tests.runs.test_runs_properties import TIGHT, WIDE, actions, play

BINDING = Checkpoint(dev=1, ino=2, line_start=0, offset=10, sequence=1, hash="h", prefix_sha256="p", first_hash="f")


def fold(domain, stream: str, events: list[dict], state=None):
    state = domain.initial(stream) if state is None else state
    for event in events:
        state = domain.evolve(state, event)
    return state


def through_snapshot(domain, stream: str, state):
    """``state`` written to snapshot bytes and read back, as a cold reader gets it."""
    box = [state]
    codec = snapshot.codec_for(domain, stream, lambda: box[0], lambda restored: box.__setitem__(0, restored))
    data = snapshot.encode(stream, BINDING, codec)
    box[0] = None
    binding, obj = snapshot.decode(data, stream, codec)
    assert binding == BINDING
    codec.restore(obj)
    return box[0]


def assert_every_cut_folds_to_the_full_fold(domain, stream: str, events: list[dict], views=None) -> None:
    """Equal states, and (``views``: the state's wire views as bytes) equal output: a view
    must not tell a state read back from bytes from one folded in memory."""
    full = fold(domain, stream, events)
    for cut in range(len(events) + 1):
        restored = fold(domain, stream, events[cut:], through_snapshot(domain, stream, fold(domain, stream, events[:cut])))
        assert restored == full, f"snapshot after event {cut} of {len(events)}"
        if views is not None:
            assert views(restored) == views(full), f"views after a snapshot at event {cut} of {len(events)}"


CTX = Context(now=parse_time("2026-01-02T00:00:00Z"), new_id=lambda: "", project_id="", project_root="", request_id="")


def intent_views(state) -> bytes:
    queries = (p.IntentAudit(), p.IntentSnapshot(), p.IntentTasks(), p.IntentExport())
    return b"\n".join(msgspec.json.encode(INTENT.query(state, query, CTX)) for query in queries)


def goal_views(state) -> bytes:
    return b"\n".join(msgspec.json.encode(build_board(state, generated_at="2026-01-02T00:00:00Z", public=public))
                      for public in (False, True))


def stream_events(project_dir: Path, name: str) -> list[dict]:
    """The stream's whole lines: a final line without its newline is a torn tail (a writer killed inside its
    append's write, which a kill can cut short at a page boundary), which readers skip and the next mutation cuts."""
    lines = (project_dir / "streams" / f"{name}.jsonl").read_bytes().split(b"\n")
    return [canonical.decode(line) for line in lines[:-1]]


# Any history, every cut -----------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(goal_commands, max_size=25))
def test_goals_snapshot_plus_tail_folds_to_the_full_fold(sequence_of_commands) -> None:
    _, log, _ = goals_history(sequence_of_commands)
    events = [canonical.decode(canonical.encode(event)) for event in log]  # as a reader decodes them
    assert_every_cut_folds_to_the_full_fold(GOALS, "goals.p", events, goal_views)


INTENT_OPS = st.lists(
    st.tuples(st.sampled_from(["add", "replace", "invalidate", "task", "private"]), st.integers(0, 50), st.integers(0, 50)),
    min_size=1, max_size=14,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=INTENT_OPS)
def test_intent_snapshot_plus_tail_folds_to_the_full_fold(ops) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "ws"
        root.mkdir()
        service = Service(data_dir=Path(tmp) / "data", clock=FixedClock("2026-01-01T00:00:00Z"),
                          new_id=SequentialIds(), domains=[INTENT])
        it = Intent(service, root)
        tasks, live = [it.start()], []
        for n, (op, pick, acting) in enumerate(ops):
            if op == "task":
                tasks.append(it.start(user_claim(f"initial {n}", scope="project")))
            elif op == "private":
                it.run(p.IntentTaskStart(mode="private", host_session_id=f"session-{n}",
                                         initial_claims=[user_claim(f"private {n}")]))
            elif op == "add" or not live:
                task = tasks[pick % len(tasks)]
                live.append(it.add(task, f"claim {n}", scope="project"))
            elif op == "replace":
                old = live.pop(pick % len(live))
                live.append(it.replace(tasks[acting % len(tasks)], [old], f"replacement {n}", scope="project"))
            else:
                old = live.pop(pick % len(live))
                it.run(p.IntentClaimInvalidate(task_id=tasks[acting % len(tasks)], claim_id=old))
        project = service.project(str(root))
        events = stream_events(project.dir, "intent")
        assert_every_cut_folds_to_the_full_fold(INTENT, "intent", events, intent_views)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(script=st.lists(actions, min_size=3, max_size=30))
def test_runs_snapshot_plus_tail_folds_to_the_full_fold(script) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ws").mkdir()
        h = Harness(Path(tmp) / "ws", Path(tmp) / "data")
        run_id = h.create(grant_id := h.grant(scope=WIDE), budgets=TIGHT)
        h.acquire(run_id)
        play(h, run_id, grant_id, script)
        project = h.service.project(h.root)
        for name in project.stream_names():
            if name.startswith("runs."):
                assert_every_cut_folds_to_the_full_fold(RUNS, name, stream_events(project.dir, name))


def test_an_intent_snapshot_holds_no_private_task(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    service = Service(data_dir=tmp_path / "data", domains=[INTENT])
    it = Intent(service, root)
    it.start(user_claim("a durable rule"))
    it.run(p.IntentTaskStart(mode="private", host_session_id="host-A",
                             initial_claims=[user_claim("the private plan zebra-7")]))
    state = service.refresh(service.project(str(root)), INTENT, "intent").state
    assert state.private is not None and state.private.states()  # the serving process holds it in memory
    ((head, written),) = service.compact(str(root))
    assert written and head.stream == "intent"
    store = service.project(str(root)).dir
    data = (store / "snapshots" / "intent.msgpack").read_bytes()
    assert b"zebra-7" not in data and b"a durable rule" in bytes(msgspec.msgpack.decode(data, type=SnapshotFile).state)
    assert not any(b"zebra-7" in path.read_bytes() for path in store.rglob("*") if path.is_file())


# Real stores: the snapshot is used exactly when it matches -----------------------------------------------


def store_dir(root: Path, data_dir: Path) -> Path:
    (project,) = (data_dir / "projects").iterdir()
    return project


def rewrite(path: Path, change) -> None:
    envelope = msgspec.msgpack.decode(path.read_bytes(), type=SnapshotFile)
    path.write_bytes(msgspec.msgpack.encode(change(envelope)))


def forged(envelope: SnapshotFile) -> SnapshotFile:
    """The same snapshot with a todo renamed and its checksum redone: what a reader
    shows when it uses this file, and only then."""
    state = bytes(envelope.state).replace(b"task 0", b"FORGED")
    return msgspec.structs.replace(envelope, state=msgspec.Raw(state), state_crc32=snapshot.checksum(state))


@pytest.fixture
def goal_store(data_dir: Path, root: Path) -> Path:
    for number in range(4):
        ok(root, "goals", "add", "g", f"task {number}")
    ok(root, "compact")
    ok(root, "goals", "add", "g", "after the snapshot")
    path = store_dir(root, data_dir) / "snapshots" / "goals.g.msgpack"
    assert path.stat().st_mode & 0o777 == 0o600
    return path


def board_titles(root: Path) -> list[str]:
    board = json.loads(ok(root, "goals", "board", "g", "--json"))
    return [todo["title"] for group in board["active"] for todo in group["todos"]]


def test_a_cold_cli_read_starts_from_a_matching_snapshot(goal_store: Path, root: Path) -> None:
    assert board_titles(root) == ["task 0", "task 1", "task 2", "task 3", "after the snapshot"]
    rewrite(goal_store, forged)
    # A consistent forgery of the cache is believed, as a consistent re-chain of the stream
    # would be: this is how the test sees that the CLI read the snapshot at all.
    assert "FORGED" in board_titles(root)
    assert "FORGED" not in json.dumps(json.loads(ok(root, "goals", "board", "g", "--json", "--no-snapshot")))


@pytest.mark.parametrize("mark", ["matching", "absent"])
@pytest.mark.parametrize("field, wrong", [
    ("hash", "0" * 64), ("prefix_sha256", "0" * 64), ("first_hash", "0" * 64), ("sequence", 3),
    ("offset", 10), ("line_start", 0), ("ino", 1), ("dev", 1),
])
def test_a_snapshot_whose_binding_does_not_match_is_never_used(
    goal_store: Path, data_dir: Path, root: Path, field: str, wrong, mark: str,
) -> None:
    """With the verified mark matching the file the prefix is vouched for by the mark and the
    head record's hash, and the prefix digest is not read (a wrong one is believed, as a
    consistent forgery is): every other field still has to match. Without the mark, every
    field does, the prefix digest included."""
    rewrite(goal_store, lambda env: msgspec.structs.replace(
        forged(env), binding=msgspec.structs.replace(env.binding, **{field: wrong})))
    if mark == "absent":
        (store_dir(root, data_dir) / "checkpoints" / "goals.g.mark").unlink()
    titles = board_titles(root)
    if field == "prefix_sha256" and mark == "matching":
        assert "FORGED" in titles
    else:
        assert titles == ["task 0", "task 1", "task 2", "task 3", "after the snapshot"]


@pytest.mark.parametrize("change", ["format", "stream", "domain", "checksum", "torn", "garbage", "empty"])
def test_a_snapshot_of_another_kind_or_torn_is_never_used(goal_store: Path, root: Path, change: str) -> None:
    if change in ("torn", "garbage", "empty"):
        rewrite(goal_store, forged)
        data = goal_store.read_bytes()
        goal_store.write_bytes({"torn": data[: len(data) // 2], "garbage": b"\x93not msgpack", "empty": b""}[change])
    else:
        rewrite(goal_store, lambda env: msgspec.structs.replace(forged(env), **{
            "format": {"format": snapshot.FORMAT + 1}, "stream": {"stream": "goals.h"}, "domain": {"domain": "runs"},
            "checksum": {"state_crc32": forged(env).state_crc32 ^ 1},
        }[change]))
    assert board_titles(root) == ["task 0", "task 1", "task 2", "task 3", "after the snapshot"]


def test_a_stream_byte_changed_before_the_snapshot_is_found_not_covered(goal_store: Path, data_dir: Path, root: Path) -> None:
    rewrite(goal_store, forged)
    stream = store_dir(root, data_dir) / "streams" / "goals.g.jsonl"
    data = stream.read_bytes()
    at = data.index(b'"title":"task 1"')
    with open(stream, "r+b") as out:  # same size, same inode: only the prefix digest tells
        out.seek(at)
        out.write(b'"title":"task 7"')
    refused = cli(root, "goals", "board", "g", "--json")
    assert refused.returncode == 1 and "FORGED" not in refused.stdout
    assert json.loads(refused.stdout)["error"]["code"] == "CORRUPT_LEDGER"


def test_a_replaced_stream_is_folded_from_its_first_byte(goal_store: Path, data_dir: Path, root: Path) -> None:
    rewrite(goal_store, forged)
    stream = store_dir(root, data_dir) / "streams" / "goals.g.jsonl"
    copy = stream.with_suffix(".copy")
    copy.write_bytes(stream.read_bytes())
    os.replace(copy, stream)  # the same bytes in another file (a new inode)
    assert board_titles(root) == ["task 0", "task 1", "task 2", "task 3", "after the snapshot"]


def test_a_cold_intent_read_starts_from_its_snapshot_only_while_it_matches(data_dir: Path, root: Path) -> None:
    task = json.loads(ok(root, "intent", "start", "--json"))["events"][0]["task_id"]
    ok(root, "intent", "add", task, "task 0 is the rule")
    ok(root, "compact", "intent")
    ok(root, "intent", "add", task, "a later rule")
    path = store_dir(root, data_dir) / "snapshots" / "intent.msgpack"
    before = ok(root, "intent", "show", "--task", task, "--json")
    assert "task 0 is the rule" in before and "a later rule" in before
    rewrite(path, forged)
    assert "FORGED is the rule" in ok(root, "intent", "show", "--task", task, "--json")
    rewrite(path, lambda env: msgspec.structs.replace(env, binding=msgspec.structs.replace(env.binding, hash="0" * 64)))
    assert ok(root, "intent", "show", "--task", task, "--json") == before


# The ledger after a start from a snapshot ------------------------------------------------------------------


def test_exact_retries_and_reused_ids_are_known_after_a_start_from_a_snapshot(data_dir: Path, root: Path) -> None:
    writer = Service(data_dir=data_dir, domains=[GOALS])
    first = writer.execute(str(root), g.AddTodo(goal_id="g", title="task 0"), "req-0")
    for number in range(1, 5):
        writer.execute(str(root), g.AddTodo(goal_id="g", title=f"task {number}"), f"req-{number}")
    writer.compact(str(root))
    cold = Service(data_dir=data_dir, domains=[GOALS])
    folded = cold.refresh(cold.project(str(root)), GOALS, "goals.g")
    assert folded.ledger.started_from == 5
    retry = cold.execute(str(root), g.AddTodo(goal_id="g", title="task 0"), "req-0")
    assert retry.replayed and retry.events == first.events and retry.head.sequence == 5
    with pytest.raises(LoopstateError) as reused:
        cold.execute(str(root), g.AddTodo(goal_id="g", title="not task 0"), "req-0")
    assert reused.value.code is ErrorCode.REQUEST_ID_REUSED


def test_a_ledger_started_from_a_snapshot_appends_verifies_and_snapshots_again(data_dir: Path, root: Path) -> None:
    writer = Service(data_dir=data_dir, domains=[GOALS])
    for number in range(5):
        writer.execute(str(root), g.AddTodo(goal_id="g", title=f"task {number}"), f"req-{number}")
    writer.compact(str(root))
    cold = Service(data_dir=data_dir, domains=[GOALS])
    cold.execute(str(root), g.AddTodo(goal_id="g", title="task 5"), "req-5")
    folded = cold.folded(cold.project(str(root)), GOALS, "goals.g")
    # The verified mark vouched for the prefix: no byte before the snapshot was hashed.
    assert folded.ledger.started_from == 5 and folded.ledger.stream.prefix_digest() is None
    ((head, written),) = cold.compact(str(root))  # a snapshot bound through the head hash and the mark
    assert written and head.sequence == 6
    third = Service(data_dir=data_dir, domains=[GOALS])
    state = third.refresh(third.project(str(root)), GOALS, "goals.g").state
    assert third.folded(third.project(str(root)), GOALS, "goals.g").ledger.started_from == 6
    assert state == fold(GOALS, "goals.g", stream_events(cold.project(str(root)).dir, "goals.g"))
    assert json.loads(ok(root, "verify", "--json"))["ok"]


def test_compact_names_what_it_cannot_compact(data_dir: Path, root: Path) -> None:
    missing = cli(root, "compact", "--json")
    assert missing.returncode == 1 and json.loads(missing.stdout)["error"]["code"] == "NOT_FOUND"
    ok(root, "goals", "add", "g", "task 0")
    unknown = cli(root, "compact", "goals.nope", "--json")
    assert unknown.returncode == 1 and "goals.g" in json.loads(unknown.stdout)["error"]["message"]


# SIGKILL while snapshots are written ------------------------------------------------------------------------

WRITER = """
import sys
from loopstate.domains.goals import DOMAIN
from loopstate.service import Service
from loopstate_protocol import goals as g
service, root, name = Service(domains=[DOMAIN]), sys.argv[1], sys.argv[2]
for n in range(100000):
    service.execute(root, g.AddTodo(goal_id="g", title=f"{name} {n} " + "x" * 200), f"{name}-{n}")
    print(n, flush=True)  # a snapshot write starts now
    service.compact(root)
"""
KILLS = 30
MAX_ROUNDS = 200  # past KILLS only until a kill has landed inside a write (timing under load varies)


@pytest.mark.slow
def test_sigkill_while_a_snapshot_is_written_leaves_a_whole_snapshot_or_none(data_dir: Path, root: Path) -> None:
    rng = __import__("random").Random(20261201)
    seed = Service(data_dir=data_dir, domains=[GOALS])
    for n in range(600):  # a state of some hundred KB: a kill often lands inside its write
        seed.execute(str(root), g.AddTodo(goal_id="g", title=f"seed {n} " + "y" * 200), f"seed-{n}")
    project = seed.project(str(root))
    target = project.dir / "snapshots" / "goals.g.msgpack"
    used = mid_write = round_ = 0
    while round_ < KILLS or (not mid_write and round_ < MAX_ROUNDS):
        round_ += 1
        child = subprocess.Popen([sys.executable, "-c", WRITER, str(root), f"w{round_}"], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=os.environ.copy())
        for _ in range(rng.randrange(1, 4)):
            child.stdout.readline()
        __import__("time").sleep(rng.uniform(0, 0.004))
        child.kill()
        child.communicate()
        # (The folder is made by the first snapshot write: a kill may land before it.)
        mid_write += target.parent.is_dir() and any(".loopstate-tmp-" in path.name for path in target.parent.iterdir())
        mark = verified_mark.load(Stream(project.dir, "goals.g", GOALS.layout))
        marked = mark is not None and mark.matches(os.stat(project.dir / "streams" / "goals.g.jsonl"))
        cold = Service(data_dir=data_dir, domains=[GOALS])
        folded = cold.refresh(cold.project(str(root)), GOALS, "goals.g")
        assert folded.state == fold(GOALS, "goals.g", stream_events(project.dir, "goals.g"))
        if target.exists():
            # Whole; and used when something vouches for its prefix: its digest, or the mark
            # (a kill between an append's fsync and its mark leaves the older one, which
            # matches nothing: then a snapshot written by a writer that never hashed the
            # prefix has nothing to stand on, and the read folds from byte 0).
            box = [None]
            codec = snapshot.codec_for(GOALS, "goals.g", lambda: box[0], lambda s: box.__setitem__(0, s))
            binding, _ = snapshot.decode(target.read_bytes(), "goals.g", codec)
            vouched = marked or binding.prefix_sha256 is not None
            assert folded.ledger.started_from == (binding.sequence if vouched else None)
            used += vouched
        else:
            assert folded.ledger.started_from is None
        # The next mutation sweeps what a kill left half-written beside the snapshot.
        cold.execute(str(root), g.AddTodo(goal_id="g", title=f"parent {round_}"), f"parent-{round_}")
        left = target.parent.iterdir() if target.parent.is_dir() else []
        assert [p.name for p in left if not p.name.endswith(".requests")] in ([target.name], [])
    assert used > round_ // 2 and mid_write, (round_, used, mid_write)  # kills did land inside snapshot writes
    assert json.loads(ok(root, "verify", "--json"))["ok"]


class _Sectioned(msgspec.Struct):
    """A state with lazily decoded sections, as a domain may give (intent's per-task ones)."""

    count: int
    sections: dict[str, msgspec.Raw]


def test_raw_sections_of_a_state_pass_through_the_snapshot_untouched() -> None:
    section = msgspec.msgpack.encode({"claims": ["a", "b"] * 50})
    box = [_Sectioned(2, {"t1": msgspec.Raw(section), "t2": msgspec.Raw(msgspec.msgpack.encode([1]))})]
    codec = snapshot.Codec(domain="test", state_type=_Sectioned, capture=lambda: box[0], restore=lambda _: None)
    data = snapshot.encode("test", BINDING, codec)
    assert section in data  # written as the very bytes the Raw held
    binding, state = snapshot.decode(data, "test", codec)
    assert binding == BINDING and state.count == 2
    restored = state.sections["t1"]
    assert isinstance(restored, msgspec.Raw) and bytes(restored) == section  # still undecoded
    assert msgspec.msgpack.decode(restored) == {"claims": ["a", "b"] * 50}
