"""Power loss, not only SIGKILL: every state a power cut may leave after real CLI commands.

SIGKILL keeps the page cache, so a missing fsync never shows in a kill test.
Here each command runs under strace; ``crashfs`` replays its file system calls
on a model that knows what was fsynced, and builds, for every prefix of the
calls, the states a power cut may leave (only fsynced names and bytes; all of
them; names without their unsynced bytes; bytes without their unsynced names;
unsynced writes cut in half). On each distinct state, materialized on disk:

- every stream, read by a fresh verifier, holds exactly the events it held
  before the command or exactly those after it (a command is all or nothing,
  a short batch is a torn tail), and those after it once the command had
  written its answer (every acknowledged event is there);
- `loopstate verify` passes (a torn tail is reported, not an error);
- the next mutation works, and afterwards the stream verifies with no torn tail;
- a stream with events has its lock file and the project its project.json;
- scenario checks: `run stop`'s switch once acknowledged; a torn tail cut only
  after its quarantine summary; no checkpoint of the old file beside a
  replaced stream.

The store lives in a data dir whose ancestors the first command creates
(``$HOME/.local/state/loopstate/v1``, with no ``.local`` yet), so the first
mutation must make all of them durable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

import crashfs
from loopstate.service.front import stream_layout
from loopstate.core.chain import ChainError
from loopstate.core.stream import Stream
from tests.conftest import prerequisite

pytestmark = prerequisite(
    crashfs.strace_path() is not None,
    "strace is not installed (Debian: apt-get install -y strace); the power-loss states are built from its traces",
)

CLI = [sys.executable, "-m", "loopstate.cli.main"]
RUN_ARGS = ["--objective", "ship it", "--done-gate", "tests pass", "--asset", "repo"]


@dataclass
class Box:
    """One scenario's folder: ``home`` (the data dir below it) and ``workspace`` (the project root)."""

    base: Path
    env: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        (self.base / "home").mkdir(parents=True)
        (self.base / "workspace").mkdir()
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("LOOPSTATE_DATA_DIR", "CODEX_HOME", "PLUGIN_DATA", "XDG_STATE_HOME")}
        self.env.update(HOME=str(self.base / "home"), PYTHONDONTWRITEBYTECODE="1")

    @property
    def root(self) -> str:
        return str(self.base / "workspace")

    @property
    def data(self) -> Path:
        return self.base / "home" / ".local" / "state" / "loopstate" / "v1"

    def project(self) -> Path | None:
        projects = self.data / "projects"
        found = list(projects.iterdir()) if projects.is_dir() else []
        return found[0] if found else None

    def args(self, *args: str) -> list[str]:
        return [*CLI, *args, "--root", self.root, "--json"]

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(self.args(*args), env=self.env, capture_output=True, text=True, timeout=60)

    def ok(self, *args: str) -> dict:
        result = self.run(*args)
        assert result.returncode == 0, (args, result.returncode, result.stdout, result.stderr)
        return json.loads(result.stdout)


def streams(box: Box) -> dict[str, tuple[tuple[str, ...], bool, int]]:
    """Each stream's verified events (their hashes), whether the scan stopped at a
    corrupt record, and the length of a torn tail (0 for none), read by a fresh verifier."""
    project = box.project()
    out = {}
    folder = project / "streams" if project is not None else None
    for path in sorted(folder.glob("*.jsonl")) if folder is not None and folder.is_dir() else []:
        name = path.name[: -len(".jsonl")]
        layout = stream_layout(name)
        stream = Stream(project, name, layout)
        hashes, corrupt = [], False
        try:
            for record in stream.read_new():
                hashes.append(record.event[layout.hash_field])
        except ChainError:
            corrupt = True  # the hashes are the verified prefix, as recover keeps it
        out[name] = (tuple(hashes), corrupt, stream.torn.length if stream.torn else 0)
    return out


@dataclass
class Scenario:
    name: str
    prepare: Callable[[Box], dict]  # untraced; returns what the command needs
    command: Callable[[dict], list[str]]
    next_mutation: Callable[[Box, dict], list[list[str]]]  # what must work in every state, in order
    check: Callable[[Box, dict, crashfs.CrashState], None] | None = None
    verify_first: bool = True  # `loopstate verify` must pass before the next mutation


def _task(box: Box) -> dict:
    return {"task": box.ok("intent", "start", "--label", "demo", "--request-id", "s0")["events"][0]["task_id"]}


def _task_with_claims(box: Box) -> dict:
    given = _task(box)
    given["doomed"] = box.ok("intent", "add", given["task"], "The launch codename is Bluebird",
                             "--request-id", "a0")["events"][0]["payload"]["claim"]["claim_id"]
    box.ok("intent", "add", given["task"], "Release on Monday", "--request-id", "a1")
    return given


def _torn(box: Box) -> dict:
    given = _task_with_claims(box)
    path = box.project() / "streams" / "intent.jsonl"
    with open(path, "ab") as fh:
        fh.write(TORN)  # a crash mid-append, long ago
    return given


TORN = b'{"actor":"user","event_hash":"0123'


def _checkpointed(box: Box) -> dict:
    """A task with a doomed claim and over 1 MiB of others, so the stream has a checkpoint."""
    from loopstate.service import Service
    from loopstate_protocol import intent as p

    given = _task_with_claims(box)
    service = Service(data_dir=box.data)
    padding = "Keep the public API stable for every caller " * 10
    n = 0
    while not (box.project() / "checkpoints" / "intent.json").exists():
        claim = p.ClaimInput(statement=f"{padding}{n}", role="user", epistemic_status="explicit", facets=["outcome"])
        service.execute(box.root, p.IntentClaimAdd(task_id=given["task"], claim=claim), f"pad-{n}")
        n += 1
    given["stream"] = (box.project() / "streams" / "intent.jsonl").read_bytes()
    given["checkpoint"] = (box.project() / "checkpoints" / "intent.json").read_bytes()
    return given


def _checkpointed_corrupt(box: Box) -> dict:
    given = _checkpointed(box)
    path = box.project() / "streams" / "intent.jsonl"
    data = given["stream"]
    at = len(data) - 200  # inside the last record, past the checkpoint
    given["stream"] = data[:at] + bytes([data[at] ^ 1]) + data[at + 1:]
    path.write_bytes(given["stream"])
    given["export"] = str(box.base / "export" / "verified")  # made by the export, with its parent
    return given


def _run(box: Box) -> dict:
    return {"run": box.ok("run", "create", *RUN_ARGS, "--request-id", "rc0")["run_id"]}


def _intent_next(box: Box, given: dict) -> list[list[str]]:
    return [["intent", "add", given["task"], "After the crash", "--request-id", "n1"]]


def _first_next(box: Box, given: dict) -> list[list[str]]:
    return [["intent", "start", "--label", "next", "--request-id", "n1"]]


def _run_create_next(box: Box, given: dict) -> list[list[str]]:
    return [["run", "create", *RUN_ARGS, "--request-id", "n1"]]


def _stop_next(box: Box, given: dict) -> list[list[str]]:
    return [["run", "stop", "--cancel", given["run"], "--reason", "after the crash", "--request-id", "n1"]]


def _purge_next(box: Box, given: dict) -> list[list[str]]:
    return [["intent", "purge", "claim", given["doomed"], "--yes", "--request-id", "p1"], *_intent_next(box, given)]


def _recover_next(box: Box, given: dict) -> list[list[str]]:
    return [["recover"], *_intent_next(box, given)]


def _check_stop(box: Box, given: dict, state: crashfs.CrashState) -> None:
    if state.acknowledged:
        assert (box.base / "workspace" / ".loopstate" / "STOP").exists(), "`run stop` said the switch is set; it is gone"


def _check_torn_cut(box: Box, given: dict, state: crashfs.CrashState) -> None:
    if TORN not in (box.project() / "streams" / "intent.jsonl").read_bytes():
        quarantined = box.project() / "quarantine" / "intent.jsonl"
        assert quarantined.exists() and b"partial final line" in quarantined.read_bytes(), \
            "the torn tail was cut before its quarantine summary was durable"


def _check_no_stale_checkpoint(box: Box, given: dict, state: crashfs.CrashState) -> None:
    saved = box.project() / "checkpoints" / "intent.json"
    if (box.project() / "streams" / "intent.jsonl").read_bytes() != given["stream"] and saved.exists():
        assert saved.read_bytes() != given["checkpoint"], "a checkpoint of the old file lies beside the replaced stream"


def _check_recovered(box: Box, given: dict, state: crashfs.CrashState) -> None:
    _check_no_stale_checkpoint(box, given, state)
    if state.acknowledged:
        exported = Path(given["export"]) / "intent.verified.jsonl"
        assert exported.exists() and given["stream"].startswith(exported.read_bytes()), "the acknowledged export is gone"


SCENARIOS = [
    Scenario("first_mutation", lambda box: {}, lambda g: ["intent", "start", "--label", "demo", "--request-id", "s1"], _first_next),
    Scenario("append", _task, lambda g: ["intent", "add", g["task"], "Release on Monday", "--request-id", "a1"], _intent_next),
    Scenario("multi_event", _task, lambda g: ["run", "create", *RUN_ARGS, "--request-id", "rc1"], _run_create_next),
    Scenario("run_stop", _run, lambda g: ["run", "stop", g["run"], "--request-id", "st1"], _stop_next, _check_stop),
    Scenario("torn_tail_repair", _torn, lambda g: ["intent", "add", g["task"], "After the tear", "--request-id", "a2"],
             _intent_next, _check_torn_cut),
    Scenario("purge", _checkpointed, lambda g: ["intent", "purge", "claim", g["doomed"], "--yes", "--request-id", "p1"],
             _purge_next, _check_no_stale_checkpoint),
    Scenario("recover", _checkpointed_corrupt, lambda g: ["recover", "--export", g["export"]], _recover_next, _check_recovered,
             verify_first=False),
]


def _describe(calls: list[crashfs.Call], state: crashfs.CrashState, base: Path) -> str:
    last = calls[state.after - 1] if state.after else None
    if last is None:
        return f"power cut before the first call, {state.variant} variant"
    shown = [os.fsdecode(crashfs.arg_text(arg)).replace(os.fspath(base), "")[:80] for arg in last.args[:2]]
    return f"power cut after call {state.after} of {len(calls)} [{last.name}({', '.join(shown)}) = {last.result}], {state.variant} variant"


def check_state(scenario: Scenario, box: Box, given: dict, state: crashfs.CrashState, before: dict, after: dict, where: str,
                verified: set) -> None:
    now = streams(box)
    for name in sorted(set(before) | set(after) | set(now)):
        got, corrupt, _ = now.get(name, ((), False, 0))
        old, new = before.get(name, ((), False, 0))[0], after.get(name, ((), False, 0))[0]
        if state.acknowledged:
            assert got == new, f"{where}: {name} lost acknowledged events ({len(got)} of {len(new)} there)"
        else:
            assert got in (old, new), f"{where}: {name} holds part of the command ({len(got)} events; {len(old)} before, {len(new)} after)"
        assert not corrupt or (scenario.name == "recover" and got == old), f"{where}: {name} is corrupt"
        if got:
            assert (box.project() / "locks" / f"{name}.lock").exists(), f"{where}: {name} has events but no lock file"
    if any(events for events, _, _ in now.values()):
        assert json.loads((box.project() / "project.json").read_bytes())["root"] == box.root, f"{where}: project.json"
    # `loopstate verify` reads only the streams and their checkpoints: once per distinct content of those.
    seen = tuple(item for item in state.files if "/streams/" in item[0] or "/checkpoints/" in item[0])
    if scenario.verify_first and seen not in verified:
        result = box.run("verify")
        assert result.returncode == 0, f"{where}: verify failed: {result.stdout} {result.stderr}"
        verified.add(seen)
    if scenario.check is not None:
        try:
            scenario.check(box, given, state)
        except AssertionError as exc:
            raise AssertionError(f"{where}: {exc}") from None
    for command in scenario.next_mutation(box, given):
        result = box.run(*command)
        assert result.returncode == 0, f"{where}: the next mutation {command[:2]} failed: {result.stdout} {result.stderr}"
    final = streams(box)
    for name, (events, corrupt, torn) in final.items():
        assert not corrupt, f"{where}: {name} is corrupt after the next mutation"
        if events != now.get(name, ((), False, 0))[0]:
            assert not torn, f"{where}: {name} was mutated but kept its torn tail"


def run_scenario(scenario: Scenario, tmp: Path, variants: tuple[str, ...] = crashfs.VARIANTS) -> int:
    box = Box(tmp / "fs")
    given = scenario.prepare(box)
    os.sync()  # the model starts from a durable tree
    before = streams(box)
    model = crashfs.Model(box.base)
    log = tmp / "calls.strace"
    traced = crashfs.trace(box.args(*scenario.command(given)), box.env, log)
    assert traced.returncode == 0, (traced.stdout, traced.stderr)
    after = streams(box)
    calls = crashfs.parse(log)
    assert any(call.name == "fsync" for call in calls), "the trace holds no fsync: strace recorded nothing"
    states = list(crashfs.crash_states(model, calls, variants))
    assert any(state.acknowledged for state in states), "the command's answer was not seen in the trace"
    verified: set = set()
    for state in states:
        crashfs.materialize(box.base, state)
        check_state(scenario, box, given, state, before, after, f"{scenario.name}: {_describe(calls, state, box.base)}", verified)
    return len(states)


# The bracketing states: what was fsynced, everything, and writes cut short. The mixed
# ones (names without their unsynced bytes, bytes without their unsynced names) add
# about half again as many states; they run with the slow tests.
QUICK = ("synced", "cached", "torn")


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_every_state_a_power_cut_may_leave_verifies_keeps_acknowledged_events_and_takes_the_next_mutation(scenario, tmp_path):
    assert run_scenario(scenario, tmp_path, QUICK) > 1


@pytest.mark.slow
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_the_mixed_states_too(scenario, tmp_path):
    """Names that reached the disk without their unsynced bytes, and bytes without their unsynced names."""
    assert run_scenario(scenario, tmp_path, ("names", "bytes")) > 1
