"""The run projection writer (service/run_projections.py): only what changed is written, and the files
always end up equal to the log, whatever else touched them."""

from __future__ import annotations

import json
import os

from hypothesis import given, settings
from hypothesis import strategies as st

from loopstate_protocol import runs as proto

from loopstate.core import canonical
from loopstate.domains.runs.projections import issue_ledger
from loopstate.domains.runs.state import RECORD_FIELD, RunState
from loopstate.service import run_projections
from loopstate.service.run_projections import PROJECTIONS, _IssueLedger

from tests.runs.test_runs_event_types import EVIDENCE

RUN = {"created_at": "2026-08-16T08:00:00Z"}
TIMES = st.sampled_from(["2026-08-16T08:00:00Z", "2026-08-16T08:00:01Z", "2026-08-16T08:00:01.000000Z",
                         "2026-08-16T09:00:00Z", "2026-08-16T07:59:59Z", "2026-08-16T08:00:01.5Z"])
STEP = st.tuples(st.sampled_from(["open", "transition", "catch_up"]), st.integers(0, 7), TIMES, TIMES)


@settings(max_examples=300, deadline=None)
@given(st.lists(STEP, max_size=40))
def test_the_kept_issue_ledger_is_byte_for_byte_the_domains(steps):
    """Opened and transitioned issues, times out of order and tied, catch-ups of several events at once:
    the incremental bytes equal canonical.encode(issue_ledger(state)) after every step, and share their
    first ``same_until`` bytes with the bytes before them (where a patch of the spare file may start)."""
    ledger, issues, sequence = _IssueLedger(), {}, 0
    state = RunState(run_id="r1", sequence=0, run=RUN, issues=issues)
    previous = ledger.bytes_of(state)
    assert previous == canonical.encode(issue_ledger(state))
    for kind, n, created, updated in steps:
        issue_id = f"i{n}"
        if kind == "transition" and issue_id in issues:
            record = {**issues[issue_id], "updated_at": updated, "status": "fixed"}
        else:
            record = {"issue_id": issue_id, "created_at": created, "updated_at": updated, "status": "open"}
        issues = {**issues, issue_id: record}
        sequence += 3 if kind == "catch_up" else 1
        state = RunState(run_id="r1", sequence=sequence, run=RUN, issues=issues,
                         last={"type": "issue_opened", RECORD_FIELD: record})
        data = ledger.bytes_of(state)
        assert data == canonical.encode(issue_ledger(state))
        assert 0 < ledger.same_until <= min(len(data), len(previous))
        assert data[:ledger.same_until] == previous[:ledger.same_until]
        previous = data


def _files(h, run_id):
    folder = h.service.project(h.root).dir / "runs" / run_id
    return folder, {name: (folder / name).read_bytes() for name in ("run.json", "lease.json", "issues.json")}


def _expected(h, run_id):
    status = h.status(run_id)
    return {"run.json": canonical.encode(status.run), "lease.json": canonical.encode(status.lease)}


def test_a_heartbeat_writes_only_what_it_changed_and_the_files_equal_the_log(h):
    run_id, lease = h.leased()
    held = {"lease_id": lease["lease_id"], "generation": lease["generation"]}
    folder, _ = _files(h, run_id)
    for _ in range(3):
        h.run(proto.EvidenceAdd(run_id=run_id, evidence=EVIDENCE, **held))
        h.run(proto.IssueOpen(run_id=run_id, title="t", severity="low", blocking=False, **held))
    issues_before = os.stat(folder / "issues.json")
    evidence_before = {p.name: os.stat(p).st_ino for p in (folder / "evidence").iterdir()}
    h.clock.advance(200)
    assert h.types(proto.Heartbeat(run_id=run_id, **held)) == ["lease_renewed"]
    _, files = _files(h, run_id)
    for name, data in _expected(h, run_id).items():
        assert files[name] == data, name
    after = os.stat(folder / "issues.json")
    assert (after.st_ino, after.st_mtime_ns) == (issues_before.st_ino, issues_before.st_mtime_ns), "issues.json rewritten"
    assert {p.name: os.stat(p).st_ino for p in (folder / "evidence").iterdir()} == evidence_before
    assert json.loads(files["issues.json"])["issues"] == [json.loads(canonical.encode(i)) for i in h.status(run_id).issues]
    # What a live writer keeps: its spare of each small file it rewrote (the bytes it exchanged out), no other temp.
    kept = sorted(p.name.split(".loopstate-tmp-")[0] for p in folder.rglob("*") if ".loopstate-tmp-" in p.name)
    assert kept == ["lease.json", "run.json"], kept
    inodes = {name: os.stat(folder / name).st_ino for name in ("run.json", "lease.json")}
    spares = {p.name: p.stat().st_ino for p in folder.iterdir() if ".loopstate-tmp-" in p.name}
    h.clock.advance(200)
    assert h.types(proto.Heartbeat(run_id=run_id, **held)) == ["lease_renewed"]
    _, files = _files(h, run_id)
    assert files["lease.json"] == canonical.encode(h.status(run_id).lease)
    # The next heartbeat writes into the spare and exchanges it in: the two files take turns, none is made.
    assert {p.name: p.stat().st_ino for p in folder.iterdir() if ".loopstate-tmp-" in p.name}.keys() == spares.keys()
    assert os.stat(folder / "lease.json").st_ino == spares[next(n for n in spares if n.startswith("lease.json"))]
    assert os.stat(folder / "run.json").st_ino in (inodes["run.json"], spares[next(n for n in spares if n.startswith("run.json"))])
    PROJECTIONS.forget()  # as the process's end: its spares go (a cold writer also removes any left)
    assert not [p for p in folder.rglob("*") if ".loopstate-tmp-" in p.name], "a temp file was left"


def test_files_changed_behind_the_writers_back_are_put_right_at_the_next_command(h):
    """The process remembers what it wrote; an in-place edit, a replaced file, a removed evidence file or a
    removed lease are all noticed (the file's identity changed) and rewritten from the log."""
    run_id, lease = h.leased()
    held = {"lease_id": lease["lease_id"], "generation": lease["generation"]}
    evidence_id = h.run(proto.EvidenceAdd(run_id=run_id, evidence=EVIDENCE, **held)).events[0]["data"]["evidence_id"]
    folder, files = _files(h, run_id)
    good_run, good_issues = files["run.json"], files["issues.json"]
    with open(folder / "run.json", "r+b") as handle:  # same size, same inode: only ctime/mtime tell
        handle.write(b"X")
    (folder / "issues.json.new").write_bytes(good_issues.replace(b'"issues":[]', b'"issues":[1]'))
    os.replace(folder / "issues.json.new", folder / "issues.json")  # another inode
    (folder / "evidence" / f"{evidence_id}.json").unlink()
    (folder / "lease.json").unlink()
    h.run(proto.Sync(run_id=run_id))  # any command of the run: the boundary repairs before deciding
    _, files = _files(h, run_id)
    assert files["run.json"] == canonical.encode(h.status(run_id).run) and files["run.json"] != b"X" + good_run[1:]
    assert files["issues.json"] == good_issues
    assert files["lease.json"] == canonical.encode(h.status(run_id).lease)
    recorded = next(e for e in h.events(run_id) if e["type"] == "evidence_recorded")[RECORD_FIELD]
    assert (folder / "evidence" / f"{evidence_id}.json").read_bytes() == canonical.encode(recorded)


def test_a_cold_process_compares_the_files_and_removes_what_a_killed_writer_left(h):
    run_id, lease = h.leased()
    folder, files = _files(h, run_id)
    stale = folder / "run.json.loopstate-tmp-0123456789abcdef"
    stale.write_bytes(b'{"half":')
    (folder / "evidence").mkdir(exist_ok=True)
    stale_evidence = folder / "evidence" / "e.json.loopstate-tmp-0123456789abcdef"
    stale_evidence.write_bytes(b"{")
    PROJECTIONS.forget()  # as a fresh process
    h.clock.advance(200)
    h.run(proto.Heartbeat(run_id=run_id, lease_id=lease["lease_id"], generation=lease["generation"]))
    assert not stale.exists() and not stale_evidence.exists()
    _, files = _files(h, run_id)
    for name, data in _expected(h, run_id).items():
        assert files[name] == data, name


def test_the_plain_rename_is_used_where_there_is_no_exchange(h, monkeypatch):
    monkeypatch.setattr(run_projections, "_renameat2", False)
    monkeypatch.setattr(run_projections, "SPARE_FROM", 0)  # issues.json too: no spare without an exchange
    run_id, lease = h.leased()
    held = {"lease_id": lease["lease_id"], "generation": lease["generation"]}
    h.clock.advance(200)
    h.run(proto.Heartbeat(run_id=run_id, **held))
    for n in range(3):
        h.run(proto.IssueOpen(run_id=run_id, title=f"issue {n}", severity="low", blocking=False, **held))
    folder, files = _files(h, run_id)
    for name, data in _expected(h, run_id).items():
        assert files[name] == data, name
    assert json.loads(files["issues.json"])["issues"] == [json.loads(canonical.encode(i)) for i in h.status(run_id).issues]
    assert not [p for p in folder.rglob("*") if ".loopstate-tmp-" in p.name]


def _spares(folder):
    return [p for p in folder.iterdir() if p.name.startswith("issues.json.loopstate-tmp-")]


def test_a_big_issue_ledger_is_patched_into_its_spare_and_stays_equal_to_the_log(h, monkeypatch):
    """From SPARE_FROM bytes on, issues.json is not written whole: this process's spare file (the previous
    issues.json) is patched from the first byte that differs and exchanged into place. Opened issues,
    issues moved on (a change in the middle), a file replaced behind the writer's back and a tampered spare:
    after every command issues.json is byte for byte the domain's ledger, and a fresh process removes the spare."""
    monkeypatch.setattr(run_projections, "SPARE_FROM", 0)
    run_id, lease = h.leased()
    held = {"lease_id": lease["lease_id"], "generation": lease["generation"]}
    folder = h.service.project(h.root).dir / "runs" / run_id
    opened = []

    def check():
        status = h.status(run_id)
        expected = canonical.encode(issue_ledger(RunState(run_id=run_id, run=status.run,
                                                          issues={i["issue_id"]: i for i in status.issues})))
        assert (folder / "issues.json").read_bytes() == expected

    inodes, patches = set(), []
    real_pwrite = os.pwrite

    def pwrite(fd, data, offset):  # what each patch wrote, and where
        if os.readlink(f"/proc/self/fd/{fd}").rsplit("/", 1)[-1].startswith("issues.json"):
            patches.append((offset, len(data), os.fstat(fd).st_size))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(run_projections.os, "pwrite", pwrite)
    for n in range(12):
        h.clock.advance(1)
        opened.append(h.run(proto.IssueOpen(run_id=run_id, title=f"issue {n}", severity="low", blocking=False,
                                            **held)).events[0]["data"]["issue_id"])
        check()
        inodes.add(os.stat(folder / "issues.json").st_ino)
    assert len(_spares(folder)) == 1 and len(inodes) == 2, "the two files should take turns"
    # From the second patch on, only the tail is written: the new issue, the one before it's comma, the frame.
    assert patches[0][0] == 0 and all(offset > size // 2 for offset, _, size in patches[2:]), patches
    h.clock.advance(1)
    h.run(proto.IssueUpdate(run_id=run_id, issue_id=opened[3], status="acknowledged", **held))  # a middle issue
    check()
    spare = _spares(folder)[0]
    with open(spare, "r+b") as handle:  # the spare changed behind the writer's back: never patched blindly
        handle.write(b"X")
    h.clock.advance(1)
    h.run(proto.IssueOpen(run_id=run_id, title="after the tamper", severity="low", blocking=False, **held))
    check()
    good = (folder / "issues.json").read_bytes()
    (folder / "issues.json.new").write_bytes(good.replace(b'"issues":[', b'"issues":[1,'))
    os.replace(folder / "issues.json.new", folder / "issues.json")  # issues.json replaced: read and compared
    h.run(proto.Sync(run_id=run_id))
    assert (folder / "issues.json").read_bytes() == good
    h.clock.advance(1)
    h.run(proto.IssueUpdate(run_id=run_id, issue_id=opened[0], status="acknowledged", **held))
    check()
    assert len(_spares(folder)) <= 1
    PROJECTIONS.forget()  # as a fresh process: what it leaves behind is removed
    assert _spares(folder) == []
    (folder / "issues.json").write_bytes(b"{}")  # stale, as after a kill: the fresh process writes it whole
    h.run(proto.Sync(run_id=run_id))
    check()
    assert _spares(folder) == [], "a file this process has not written or read keeps no spare"
    h.clock.advance(1)
    h.run(proto.IssueOpen(run_id=run_id, title="warm again", severity="low", blocking=False, **held))
    check()
    assert len(_spares(folder)) == 1


def test_a_small_issue_ledger_is_written_whole_and_leaves_no_spare(h):
    run_id, lease = h.leased()
    held = {"lease_id": lease["lease_id"], "generation": lease["generation"]}
    folder = h.service.project(h.root).dir / "runs" / run_id
    for n in range(3):
        h.run(proto.IssueOpen(run_id=run_id, title=f"issue {n}", severity="low", blocking=False, **held))
    assert len((folder / "issues.json").read_bytes()) < run_projections.SPARE_FROM
    assert _spares(folder) == []


def test_the_grant_file_is_read_only_when_it_changed_and_put_right_when_it_did(h, monkeypatch):
    """Every run command passes its grant's file: untouched since this process wrote it, that is one lstat
    and no read; edited in place, replaced or removed, it is read, compared and rewritten from the log."""
    grant_id = h.grant()
    run_id, lease = h.leased(grant_id=grant_id)
    held = {"lease_id": lease["lease_id"], "generation": lease["generation"]}
    path = h.service.project(h.root).dir / "grants" / f"{grant_id}.json"
    good = path.read_bytes()
    assert json.loads(good)["grant_id"] == grant_id
    reads = []
    read_file = run_projections.safefs.read_file
    monkeypatch.setattr(run_projections.safefs, "read_file",
                        lambda p, base: reads.append(os.fspath(p)) or read_file(p, base))
    inode = os.stat(path).st_ino
    h.run(proto.EvidenceAdd(run_id=run_id, evidence=EVIDENCE, **held))
    assert os.fspath(path) not in reads and os.stat(path).st_ino == inode
    for damage in ("in place", "replaced", "removed"):
        if damage == "in place":
            with open(path, "r+b") as handle:  # same size, same inode: only the file times tell
                handle.write(b"X")
        elif damage == "replaced":
            (path.parent / "other").write_bytes(good.replace(b"bounded", b"ABOUNDED"))
            os.replace(path.parent / "other", path)
        else:
            path.unlink()
        h.run(proto.Sync(run_id=run_id))
        assert path.read_bytes() == good, damage
    assert reads.count(os.fspath(path)) == 2  # the in-place edit and the replaced file were read and compared
    PROJECTIONS.forget()  # a fresh process: reads and compares once, then trusts its own write again
    reads.clear()
    h.run(proto.Sync(run_id=run_id))
    h.run(proto.Sync(run_id=run_id))
    assert reads.count(os.fspath(path)) == 1 and path.read_bytes() == good
