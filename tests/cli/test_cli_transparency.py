"""Signed checkpoints and proofs through the real CLI: made, checked offline, and held against tampering.

The tampering cases that matter are the ones the hash chain cannot see: an
attacker with loopstate's own code re-seals the stream after changing it, and
deletes the store's verification caches, so `loopstate verify` is clean again.
Only a checkpoint kept from before tells the truth.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loopstate.core import canonical
from loopstate.core.chain import Position, seal
from loopstate.core.project import Project
from loopstate.service.front import stream_layout


def cli(*args: str, cwd: Path, data_dir: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    return subprocess.run([sys.executable, "-m", "loopstate.cli.main", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, input=stdin)


def ok(*args: str, cwd: Path, data_dir: Path, stdin: str | None = None) -> str:
    done = cli(*args, cwd=cwd, data_dir=data_dir, stdin=stdin)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout


def start(root: Path, data_dir: Path, claim: str = "outcome:Ship the proof") -> None:
    ok("intent", "start", "--claim", claim, cwd=root, data_dir=data_dir)


def add(root: Path, data_dir: Path, statement: str) -> None:
    """One claim on the current task: one event."""
    task = json.loads(ok("intent", "tasks", "--json", cwd=root, data_dir=data_dir))["current_task_id"]
    ok("intent", "add", task, statement, cwd=root, data_dir=data_dir)


@pytest.fixture
def project(data_dir: Path, root: Path) -> Path:
    """A project whose intent stream holds a task and four claims (five single-event commands)."""
    start(root, data_dir)
    for n in range(4):
        add(root, data_dir, f"Constraint {n}")
    return root


def stream_file(root: Path, data_dir: Path) -> Path:
    return Project(root, data_dir=data_dir).dir / "streams" / "intent.jsonl"


def reseal(path: Path, events: list[dict]) -> None:
    """What an attacker with loopstate's code does: chain the changed events afresh, drop the caches."""
    layout = stream_layout("intent")
    at, out = Position(), b""
    for event in events:
        sealed, line = seal(event, layout, at)
        at = Position(at.offset + len(line), sealed[layout.sequence_field], sealed[layout.hash_field])
        out += line
    path.write_bytes(out)
    shutil.rmtree(path.parent.parent / "checkpoints", ignore_errors=True)


def events_of(path: Path) -> list[dict]:
    return [canonical.decode(line) for line in path.read_bytes().splitlines()]


def test_a_checkpoint_and_both_proofs_check_offline_with_only_the_public_key(project: Path, data_dir: Path,
                                                                             tmp_path: Path) -> None:
    key = ok("checkpoint", "--public-key", cwd=project, data_dir=data_dir).strip()
    old = ok("checkpoint", "intent", cwd=project, data_dir=data_dir)
    assert old.splitlines()[1] == "5"
    (tmp_path / "old.checkpoint").write_text(old)
    add(project, data_dir, "Later")

    inclusion = ok("prove", "intent:2", cwd=project, data_dir=data_dir)
    assert inclusion.startswith("c2sp.org/tlog-proof@v1\nextra ")
    consistency = ok("prove", "--from", str(tmp_path / "old.checkpoint"), cwd=project, data_dir=data_dir)
    (tmp_path / "inc.proof").write_text(inclusion)
    (tmp_path / "con.proof").write_text(consistency)

    # The checker needs no store: a fresh data dir, another folder.
    elsewhere, empty = tmp_path / "elsewhere", tmp_path / "empty-data"
    elsewhere.mkdir()
    said = ok("check-proof", str(tmp_path / "inc.proof"), "--key", key, "--json", cwd=elsewhere, data_dir=empty)
    assert json.loads(said) == {"ok": True, "kind": "inclusion", "origin": json.loads(said)["origin"],
                                "index": 1, "tree_size": 6}
    said = ok("check-proof", str(tmp_path / "con.proof"), "--old", str(tmp_path / "old.checkpoint"), "--key", key,
              cwd=elsewhere, data_dir=empty)
    assert "at 6 events still begins with the 5 events" in said
    assert not empty.exists()

    # The event id names the same event as its sequence.
    event_id = events_of(stream_file(project, data_dir))[1]["event_id"]
    by_id = ok("prove", event_id, cwd=project, data_dir=data_dir)
    assert by_id.split("\n\n")[0] == inclusion.split("\n\n")[0]


def test_an_altered_proof_or_event_or_a_wrong_key_is_refused(project: Path, data_dir: Path, tmp_path: Path) -> None:
    key = ok("checkpoint", "--public-key", cwd=project, data_dir=data_dir).strip()
    proof = ok("prove", "intent:3", cwd=project, data_dir=data_dir)
    lines = proof.split("\n")
    assert lines[2] == "index 2"
    swapped = "\n".join([lines[0], lines[1], "index 3", *lines[3:]])  # claim it is another event
    other_key = key.split("+")[0] + "+" + "0" * 8 + "+" + key.split("+", 2)[2]
    for bad, reason in ((swapped, "proof or event altered"), (proof.replace("\nindex 2\n", "\nindex x\n"), "index"),
                        ("garbage", "not a c2sp.org/tlog-proof@v1 proof")):
        (tmp_path / "bad").write_text(bad)
        done = cli("check-proof", str(tmp_path / "bad"), "--key", key, cwd=project, data_dir=data_dir)
        assert done.returncode == 1 and reason in done.stderr, done.stderr
    (tmp_path / "good").write_text(proof)
    done = cli("check-proof", str(tmp_path / "good"), "--key", other_key, cwd=project, data_dir=data_dir)
    assert done.returncode == 1 and "altered" in done.stderr


@pytest.mark.parametrize("tamper", ["edit", "drop", "reorder", "truncate_and_reappend", "replace"])
def test_every_rewrite_the_chain_cannot_see_is_caught_by_a_kept_checkpoint(tamper: str, project: Path,
                                                                           data_dir: Path, tmp_path: Path) -> None:
    kept = tmp_path / "kept.checkpoint"
    kept.write_text(ok("checkpoint", "intent", cwd=project, data_dir=data_dir))
    path = stream_file(project, data_dir)
    events = events_of(path)
    if tamper == "edit":
        events[2]["payload"]["claim"]["statement"] = "Constraint lifted"
        reseal(path, events)
    elif tamper == "drop":
        reseal(path, events[:2] + events[3:])
        add(project, data_dir, "Filler")
    elif tamper == "reorder":
        reseal(path, [events[0], events[2], events[1], *events[3:]])
    elif tamper == "truncate_and_reappend":
        reseal(path, events[:3])
        for n in range(3):
            add(project, data_dir, f"Other {n}")
    else:  # replace the whole history with one made from scratch
        path.unlink()
        shutil.rmtree(path.parent.parent / "checkpoints", ignore_errors=True)
        start(project, data_dir, "outcome:New")
        for n in range(5):
            add(project, data_dir, f"New {n}")
    # The chain alone sees nothing wrong...
    assert json.loads(ok("verify", "--json", cwd=project, data_dir=data_dir))["ok"] is True
    # ...the kept checkpoint does, and no consistency proof can be made to it.
    done = cli("verify", "--against", str(kept), cwd=project, data_dir=data_dir)
    assert done.returncode == 1 and "CORRUPT_LEDGER" in done.stderr, done.stderr
    assert "history was" in done.stderr
    done = cli("prove", "--from", str(kept), cwd=project, data_dir=data_dir)
    assert done.returncode == 1 and done.stdout == ""


def test_an_honest_store_verifies_against_every_checkpoint_it_ever_signed(project: Path, data_dir: Path,
                                                                          tmp_path: Path) -> None:
    kept = []
    for n in range(3):
        note = tmp_path / f"{n}.checkpoint"
        note.write_text(ok("checkpoint", "intent", cwd=project, data_dir=data_dir))
        kept.append(note)
        add(project, data_dir, f"More {n}")
    for note in kept:
        said = json.loads(ok("verify", "--against", str(note), "--json", cwd=project, data_dir=data_dir))
        assert said["ok"] is True and said["events"] == 8


def test_the_key_is_made_once_private_and_shared_by_racing_processes(project: Path, data_dir: Path) -> None:
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    procs = [subprocess.Popen([sys.executable, "-m", "loopstate.cli.main", "checkpoint", "--public-key"], cwd=project,
                              env=env, stdout=subprocess.PIPE, text=True) for _ in range(4)]
    keys = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(keys) == 1 and all(p.returncode == 0 for p in procs)
    key_file = data_dir / "keys" / "checkpoint-ed25519.pem"
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in key_file.parent.iterdir()] == ["checkpoint-ed25519.pem"]  # no temp left behind
    key_file.chmod(0o644)
    done = cli("checkpoint", cwd=project, data_dir=data_dir)
    assert done.returncode == 1 and "chmod 600" in done.stderr


def test_publish_writes_one_file_per_stream_and_bad_input_says_what_to_do(project: Path, data_dir: Path,
                                                                          tmp_path: Path) -> None:
    ok("checkpoint", "--publish", str(tmp_path / "pub"), cwd=project, data_dir=data_dir)
    assert sorted(p.name for p in (tmp_path / "pub").iterdir()) == ["intent.checkpoint"]
    for args, reason in ((["prove"], "one of the two"), (["prove", "intent:99"], "there is no event number 99"),
                         (["prove", "intent:0"], "sequences start at 1"), (["prove", "nope"], "no event 'nope'"),
                         (["checkpoint", "runs.x"], "no stream 'runs.x'"),
                         (["verify", "--against", str(tmp_path / "missing")], "cannot read the checkpoint")):
        done = cli(*args, cwd=project, data_dir=data_dir)
        assert done.returncode == 1 and reason in done.stderr, (args, done.stderr)
    # A checkpoint of another project is not this project's.
    other = tmp_path / "other"
    other.mkdir()
    start(other, data_dir, "outcome:Else")
    (tmp_path / "other.checkpoint").write_text(ok("checkpoint", "intent", cwd=other, data_dir=data_dir))
    done = cli("verify", "--against", str(tmp_path / "other.checkpoint"), cwd=project, data_dir=data_dir)
    assert done.returncode == 1 and "not a checkpoint of this project" in done.stderr
    assert json.loads(ok("verify", "--json", cwd=project, data_dir=data_dir))["ok"] is True
