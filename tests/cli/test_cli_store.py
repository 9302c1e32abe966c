"""`loopstate verify`, `recover` and `log` as a user runs them: real processes on real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from loopstate.core.clock import FixedClock
from loopstate.core.ids import SequentialIds
from loopstate.core.project import Project
from loopstate.service import Service
from loopstate_protocol import intent as p


def cli(*args: str, data_dir: Path, check: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    return subprocess.run(
        [sys.executable, "-m", "loopstate.cli.main", *args], env=env, capture_output=True, text=True, check=check, timeout=60
    )


@pytest.fixture
def filled(data_dir: Path, root: Path) -> Path:
    """A project whose intent ledger holds a task and three claims."""
    svc = Service(data_dir=data_dir, clock=FixedClock("2026-01-01T00:00:00Z"), new_id=SequentialIds())
    started = svc.execute(str(root), p.IntentTaskStart(label="demo"), "r1")
    task = started.events[0]["task_id"]
    for n, text in enumerate(["Keep the public API stable", "Tests must pass", "Ship by Friday"], start=2):
        claim = p.ClaimInput(statement=text, role="user", epistemic_status="explicit", facets=["hard_constraint"])
        svc.execute(str(root), p.IntentClaimAdd(task_id=task, actor="user", claim=claim), f"r{n}")
    return Project(root, data_dir=data_dir).dir / "streams" / "intent.jsonl"


def test_verify_exits_zero_and_reports_heads_when_every_chain_holds(filled: Path, data_dir: Path, root: Path) -> None:
    result = cli("verify", "--root", str(root), "--json", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["ok"] is True
    [stream] = report["streams"]
    assert stream["stream"] == "intent" and stream["events"] == stream["sequence"] == 4
    human = cli("verify", "--root", str(root), data_dir=data_dir)
    assert human.returncode == 0 and "ok      intent: 4 events" in human.stdout


def test_verify_names_first_bad_offset_sequence_and_reason(filled: Path, data_dir: Path, root: Path) -> None:
    lines = filled.read_bytes().splitlines(keepends=True)
    offset = len(lines[0]) + len(lines[1])
    lines[2] = lines[2].replace(b"Tests must pass", b"Tests must fail")
    filled.write_bytes(b"".join(lines))
    result = cli("verify", "--root", str(root), "--json", data_dir=data_dir)
    assert result.returncode == 1
    error = json.loads(result.stdout)["streams"][0]["error"]
    assert error["offset"] == offset and error["sequence"] == 3
    assert "does not match" in error["reason"]
    human = cli("verify", "--root", str(root), data_dir=data_dir)
    assert human.returncode == 1 and f"CORRUPT intent: byte {offset}, sequence 3" in human.stdout


def test_verify_on_a_project_never_written_creates_nothing(data_dir: Path, root: Path) -> None:
    result = cli("verify", "--root", str(root), data_dir=data_dir)
    assert result.returncode == 0 and "no streams yet" in result.stdout
    assert not data_dir.exists()


def test_verify_refuses_a_root_with_dotdot(data_dir: Path, root: Path) -> None:
    result = cli("verify", "--root", f"{root}/../{root.name}", data_dir=data_dir)
    assert result.returncode == 1 and "INVALID_ROOT" in result.stderr and "'..'" in result.stderr


def test_recover_keeps_the_verified_prefix_and_moves_the_damaged_suffix(filled: Path, data_dir: Path, root: Path) -> None:
    original = filled.read_bytes()
    lines = original.splitlines(keepends=True)
    damaged = lines[0] + lines[1] + b'{"not": "a chained event"}\n' + lines[3]
    filled.write_bytes(damaged)
    result = cli("recover", "--root", str(root), "--json", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    [report] = json.loads(result.stdout)["streams"]
    assert report["action"] == "recovered" and report["events"] == 2
    assert filled.read_bytes() == lines[0] + lines[1]
    moved = Path(report["quarantined_to"])
    assert moved.read_bytes() == damaged[len(lines[0]) + len(lines[1]):]
    assert oct(moved.stat().st_mode & 0o777) == "0o600"
    assert cli("verify", "--root", str(root), data_dir=data_dir).returncode == 0
    # Nothing was invented: the log holds exactly the two verified events.
    log = json.loads(cli("log", "--root", str(root), "--json", data_dir=data_dir).stdout)
    assert [e["sequence"] for e in log["streams"][0]["events"]] == [1, 2]


def test_recover_exports_the_prefix_when_asked(filled: Path, data_dir: Path, root: Path, tmp_path: Path) -> None:
    lines = filled.read_bytes().splitlines(keepends=True)
    filled.write_bytes(lines[0] + lines[1][:-5] + b"X\n")
    out = tmp_path / "export"
    result = cli("recover", "--root", str(root), "--export", str(out), data_dir=data_dir)
    assert result.returncode == 0 and "recovered intent: kept 1 verified events" in result.stdout
    assert (out / "intent.verified.jsonl").read_bytes() == lines[0]


def test_recover_cuts_a_torn_tail_keeping_only_its_length_and_hash(filled: Path, data_dir: Path, root: Path) -> None:
    secret_fragment = b'{"schema_version":1,"statement":"sk-live-partial'
    with open(filled, "ab") as fh:
        fh.write(secret_fragment)
    verify = json.loads(cli("verify", "--root", str(root), "--json", data_dir=data_dir).stdout)
    assert verify["ok"] is True and verify["streams"][0]["torn_tail"]["length"] == len(secret_fragment)
    result = cli("recover", "--root", str(root), data_dir=data_dir)
    assert result.returncode == 0 and "cut a partial final line" in result.stdout
    assert not filled.read_bytes().endswith(secret_fragment)
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert b"sk-live-partial" not in path.read_bytes(), path


def test_log_prints_events_in_order_and_refuses_an_unknown_stream(filled: Path, data_dir: Path, root: Path) -> None:
    human = cli("log", "--root", str(root), data_dir=data_dir)
    assert human.returncode == 0
    rows = [line.split() for line in human.stdout.splitlines() if line and not line.startswith("==")]
    assert [int(r[0]) for r in rows] == [1, 2, 3, 4]
    assert rows[0][2] == "task_started" and rows[1][2] == "claim_added"
    missing = cli("log", "--root", str(root), "--stream", "goals.nope", data_dir=data_dir)
    assert missing.returncode == 1 and "NOT_FOUND" in missing.stderr


def test_every_command_has_version_and_help(data_dir: Path) -> None:
    assert cli("--version", data_dir=data_dir).stdout.startswith("loopstate ")
    for verb in ("verify", "recover", "log", "serve", "run", "goals"):
        result = cli(verb, "--help", data_dir=data_dir)
        assert result.returncode == 0 and "usage: loopstate" in result.stdout, verb


def tree(folder: Path) -> dict[str, tuple[bytes, int]]:
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_recover_dry_run_says_what_it_would_do_and_writes_nothing(filled: Path, data_dir: Path, root: Path) -> None:
    lines = filled.read_bytes().splitlines(keepends=True)
    filled.write_bytes(lines[0] + lines[1] + b'{"not": "a chained event"}\n' + lines[3])
    before = tree(data_dir)
    human = cli("recover", "--dry-run", "--root", str(root), data_dir=data_dir)
    assert human.returncode == 0, human.stderr
    offset = len(lines[0]) + len(lines[1])
    suffix = len(b'{"not": "a chained event"}\n' + lines[3])
    assert f"would recover intent: keep 2 verified events; quarantine {suffix} bytes from byte {offset}" in human.stdout
    assert "dry run: nothing was written" in human.stdout
    plan = json.loads(cli("recover", "--dry-run", "--json", "--root", str(root), data_dir=data_dir).stdout)
    assert tree(data_dir) == before
    [stream] = plan["streams"]
    assert plan["dry_run"] is True
    assert (stream["action"], stream["events"], stream["offset"], stream["suffix_bytes"]) == ("recovered", 2, offset, suffix)
    # The plan is what recover then does.
    [done] = json.loads(cli("recover", "--json", "--root", str(root), data_dir=data_dir).stdout)["streams"]
    assert (done["action"], done["events"], done["offset"], done["suffix_bytes"]) == ("recovered", 2, offset, suffix)


def test_recover_dry_run_on_a_torn_tail_and_on_a_sound_stream(filled: Path, data_dir: Path, root: Path) -> None:
    sound = cli("recover", "--dry-run", "--root", str(root), data_dir=data_dir)
    assert "ok            intent: chain holds (4 events); nothing to do" in sound.stdout
    size = filled.stat().st_size
    with open(filled, "ab") as fh:
        fh.write(b'{"partial')
    torn = cli("recover", "--dry-run", "--root", str(root), data_dir=data_dir)
    assert f"would repair  intent: cut a partial final line of 9 bytes at byte {size}" in torn.stdout
    assert filled.stat().st_size == size + 9


def damage_first_record(filled: Path) -> bytes:
    lines = filled.read_bytes().splitlines(keepends=True)
    damaged = lines[0].replace(b'"task_started"', b'"task_startet"') + b"".join(lines[1:])
    filled.write_bytes(damaged)
    return damaged


def test_recover_that_would_keep_nothing_refuses_without_a_terminal(filled: Path, data_dir: Path, root: Path) -> None:
    damaged = damage_first_record(filled)
    plan = json.loads(cli("recover", "--dry-run", "--json", "--root", str(root), data_dir=data_dir).stdout)
    assert plan["streams"][0]["events"] == 0
    refused = cli("recover", "--root", str(root), data_dir=data_dir)
    assert refused.returncode == 1
    assert "recover would keep 0 events of intent" in refused.stderr and "--yes" in refused.stderr
    assert filled.read_bytes() == damaged
    assert not (Project(root, data_dir=data_dir).dir / "quarantine").exists()
    cut = cli("recover", "--yes", "--root", str(root), "--json", data_dir=data_dir)
    assert cut.returncode == 0, cut.stderr
    assert json.loads(cut.stdout)["streams"][0]["events"] == 0
    assert filled.read_bytes() == b""


@pytest.mark.parametrize(("answer", "cut"), [(b"y\n", True), (b"n\n", False)])
def test_recover_that_would_keep_nothing_asks_on_a_terminal(filled: Path, data_dir: Path, root: Path,
                                                            answer: bytes, cut: bool) -> None:
    import pty

    damaged = damage_first_record(filled)
    leader, follower = pty.openpty()
    env = {**os.environ, "LOOPSTATE_DATA_DIR": str(data_dir)}
    child = subprocess.Popen([sys.executable, "-m", "loopstate.cli.main", "recover", "--root", str(root)],
                             stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    os.close(follower)
    os.write(leader, answer)
    out, err = child.communicate(timeout=60)
    os.close(leader)
    assert b"Cut intent to 0 events? [y/N]" in err
    if cut:
        assert child.returncode == 0 and filled.read_bytes() == b"" and b"kept 0 verified events" in out
    else:
        assert child.returncode == 1 and filled.read_bytes() == damaged and b"not confirmed" in err


def test_log_limit_prints_the_last_events_of_each_stream_oldest_first(tmp_path) -> None:
    from clirun import cli

    root, data_dir = tmp_path / "proj", tmp_path / "data"
    root.mkdir()
    for title in ("one", "two", "three"):
        assert cli("goals", "add", "g", title, cwd=root, data_dir=data_dir).returncode == 0
    text = cli("log", "--limit", "2", cwd=root, data_dir=data_dir).stdout
    assert "the last 2 of 3 events" in text
    assert [line.split()[0] for line in text.splitlines() if not line.startswith("==")] == ["2", "3"]
    import json

    streams = json.loads(cli("log", "--limit", "1", "--json", cwd=root, data_dir=data_dir).stdout)["streams"]
    assert [(s["event_count"], len(s["events"])) for s in streams] == [(3, 1)]
    refused = cli("log", "--limit", "0", cwd=root, data_dir=data_dir)
    assert refused.returncode == 2 and "1 or more" in refused.stderr
