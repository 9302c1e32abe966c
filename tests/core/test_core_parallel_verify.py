"""Verification shared with worker processes reports exactly what the sequential scan reports.

``loopstate verify`` and a cold open without a checkpoint hand big streams to
worker processes (``core/parallel_verify.py``). Here the size thresholds are
lowered so that streams of a few dozen events are cut into many spans, and
every corruption (a changed byte, a cut, a swapped, dropped or duplicated
line, a foreign schema, a partial tail) must give the same report, field for
field, as the sequential path: first bad offset, sequence, reason, events
verified, head and torn tail. The workers are real child processes.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from corekit import event, sealed_lines, write_stream
from loopstate.core import canonical, parallel_verify
from loopstate.core import stream as stream_module
from loopstate.core.errors import LoopstateError
from loopstate.core.ledger import Ledger
from loopstate.core.project import Project
from loopstate.core.recovery import verify_stream
from loopstate.core.stream import Stream

from corekit import TEST_LAYOUT

N = 40


def _lines() -> list[bytes]:
    _, lines = sealed_lines([event(i, note="é" * (i % 3), nested={"event_hash": i}) for i in range(N)], TEST_LAYOUT)
    return lines


def _corrupt(lines: list[bytes], kind: str, data: st.DataObject) -> bytes:
    lines = list(lines)
    if kind == "byte":
        blob = b"".join(lines)
        at = data.draw(st.integers(0, len(blob) - 1))
        return blob[:at] + bytes([data.draw(st.integers(0, 255))]) + blob[at + 1:]
    if kind == "cut":
        blob = b"".join(lines)
        return blob[:data.draw(st.integers(1, len(blob)))]
    i = data.draw(st.integers(0, len(lines) - 2))
    if kind == "swap":
        lines[i], lines[i + 1] = lines[i + 1], lines[i]
    elif kind == "drop":
        del lines[i]
    elif kind == "duplicate":
        lines.insert(i, lines[i])
    elif kind == "schema":
        ev = canonical.decode(lines[i][:-1])
        ev["schema_version"] = data.draw(st.sampled_from([2, "1", 1.0, None]))
        lines[i] = canonical.encode(ev) + b"\n"
    return b"".join(lines)


def _verify(project: Project, parallel: bool, monkeypatch: pytest.MonkeyPatch) -> dict:
    with monkeypatch.context() as m:
        m.setattr(parallel_verify, "PARALLEL_MIN_BYTES", 0 if parallel else 1 << 60)
        m.setattr(parallel_verify, "SPAN", 700)  # about three events per span
        m.setattr(parallel_verify, "workers", lambda: 2)  # even on a one-CPU machine
        return verify_stream(Stream(project.dir, "core", TEST_LAYOUT))


def _answered_first(vouched: list[int]):
    """A Voucher.vouched_at that first lets the workers answer every span (as if the
    scan were slow), and notes each offset it vouches to."""
    real = parallel_verify.Voucher.vouched_at

    def waiting(self, offset: int) -> int:
        deadline = time.monotonic() + 60  # a bound, not a timing assertion: fail rather than hang
        while any(n < len(asked) for n, asked in zip(self._answered, self._asked)) and time.monotonic() < deadline:
            self._collect()
            time.sleep(0.001)
        end = real(self, offset)
        if end:
            vouched.append(end)
        return end

    return waiting


def _cold_open(project: Project, parallel: bool, monkeypatch: pytest.MonkeyPatch, *, slow_scan: bool = False) -> tuple:
    with monkeypatch.context() as m:
        m.setattr(parallel_verify, "FOLD_PARALLEL_MIN_BYTES", 0 if parallel else 1 << 60)
        m.setattr(parallel_verify, "SPAN", 700)
        m.setattr(parallel_verify, "workers", lambda: 2)
        m.setattr(stream_module, "CHUNK", 256)  # the scan asks the workers every few lines
        if slow_scan:
            m.setattr(parallel_verify.Voucher, "vouched_at", _answered_first([]))
        folded: list[int] = []
        ledger = Ledger(project, "core", TEST_LAYOUT, on_record=lambda r: folded.append(r.start))
        try:
            ledger.refresh(collect=False)
            error = None
        except LoopstateError as exc:
            error = (exc.code, exc.message, exc.details)
        return error, folded, ledger.stream.position, ledger.stream.torn, ledger.stream.prefix_digest()


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["byte", "cut", "swap", "drop", "duplicate", "schema"]), data=st.data())
def test_workers_and_the_sequential_scan_report_the_same_first_error(kind, data, monkeypatch):
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ws").mkdir()
        project = Project(str(Path(tmp) / "ws"), data_dir=Path(tmp) / "data", lock_timeout=5)
        write_stream(project, "core", _corrupt(_lines(), kind, data))
        assert _verify(project, True, monkeypatch) == _verify(project, False, monkeypatch)
        sequential = _cold_open(project, False, monkeypatch)
        assert _cold_open(project, True, monkeypatch) == sequential
        assert _cold_open(project, True, monkeypatch, slow_scan=True) == sequential


def _count_spans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    spans_seen: list[int] = []
    real = parallel_verify.Voucher.next_span

    def counting(self):
        span = real(self)
        if span is not None:
            spans_seen.append(span.count)
        return span

    monkeypatch.setattr(parallel_verify.Voucher, "next_span", counting)
    return spans_seen


def test_a_clean_stream_is_verified_by_the_workers_to_its_end(core_project, monkeypatch):
    write_stream(core_project, "core", b"".join(_lines()) + b'{"partial')
    spans_seen = _count_spans(monkeypatch)
    report = _verify(core_project, True, monkeypatch)
    assert report["ok"] and report["events"] == N and report["torn_tail"]["length"] == len(b'{"partial')
    assert sum(spans_seen) == N and len(spans_seen) > 5  # the workers, not the fallback, checked them all


def test_a_slow_cold_open_takes_every_span_the_scan_reaches_from_the_workers(core_project, monkeypatch):
    write_stream(core_project, "core", b"".join(_lines()))
    vouched: list[int] = []
    with monkeypatch.context() as m:
        m.setattr(parallel_verify.Voucher, "vouched_at", _answered_first(vouched))
        error, folded, position, torn, digest = _cold_open(core_project, True, monkeypatch)
    assert error is None and len(folded) == N and position.sequence == N and torn is None and digest
    assert len(set(vouched)) > 5  # span after span, the scan skipped the re-hash the workers had done


def test_a_worker_left_with_only_spans_the_scan_reached_is_stopped(core_project, monkeypatch, tmp_path):
    write_stream(core_project, "core", b"".join(_lines()))
    silent = tmp_path / "silent-worker"  # a worker that never answers
    silent.write_text("#!/bin/sh\nexec sleep 600\n")
    silent.chmod(0o700)
    alive_at: list[tuple[int, bool]] = []
    real = parallel_verify.Voucher.vouched_at

    def noting(self, offset: int) -> int:
        end = real(self, offset)
        span = parallel_verify.bisect_right(self._starts, offset) - 1
        if span == len(self._starts) - 1:  # the first span the worker was asked: nothing left for it
            try:
                self._procs[0].wait(timeout=60)  # a bound: killed means it ends at once
            except subprocess.TimeoutExpired:
                pass
        alive_at.append((span, self._procs[0].poll() is None))
        return end

    with monkeypatch.context() as m:
        m.setattr(parallel_verify.sys, "executable", str(silent))
        m.setattr(parallel_verify.Voucher, "vouched_at", noting)
        error, folded, position, torn, digest = _cold_open(core_project, True, monkeypatch)
    assert error is None and len(folded) == N and position.sequence == N and digest
    last = max(span for span, _ in alive_at)
    assert last > 5 and all(alive for span, alive in alive_at if span < last)  # still useful before that
    assert not any(alive for span, alive in alive_at if span == last)


def test_a_read_below_the_workers_floor_never_imports_them():
    """stream.py imports parallel_verify only for a span that could be worth workers: its floor is
    parallel_verify's smallest threshold, and a small read in a fresh process leaves the module unloaded."""
    import sys

    from loopstate.core import stream

    assert stream.PARALLEL_FLOOR == min(parallel_verify.PARALLEL_MIN_BYTES, parallel_verify.FOLD_PARALLEL_MIN_BYTES)
    probe = ("import sys, tempfile, pathlib\n"
             "from loopstate.core.project import Project\n"
             "from loopstate.core.ledger import Ledger\n"
             "from tests.bench.bench_core import LAYOUT, body\n"
             "tmp = pathlib.Path(tempfile.mkdtemp()); (tmp / 'ws').mkdir()\n"
             "p = Project(str(tmp / 'ws'), data_dir=tmp / 'data'); p.ensure()\n"
             "ledger = Ledger(p, 'core', LAYOUT)\n"
             "with ledger.mutation() as tx: tx.append([body(1)], request_id='r1', fp='f' * 64)\n"
             "Ledger(p, 'core', LAYOUT).refresh(collect=False)\n"
             "print('loopstate.core.parallel_verify' in sys.modules, 'queue' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]
