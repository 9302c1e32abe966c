"""The PostgreSQL store beside the eventsourcing library's PostgreSQL recorder, on one server.

    .venv/bin/python tests/bench/bench_postgres.py [--appends 1600] [--writers 8] [--rounds 3] [--notify 1000]

Starts its own PostgreSQL cluster (tests/pg/pg_cluster.py: initdb + pg_ctl in a temp dir,
Unix socket only, the server's defaults: fsync on, synchronous_commit on), and runs
``--rounds`` rounds, each on fresh databases of that one server, with ~730-byte claim
events (bench_core.body). Each round prints the load average and its own verdicts; the
end says in how many rounds each target was met. Loopstate and the reference run
interleaved wherever they can, so a change of the machine's load falls on both:

* serial appends/s, one process, one append per transaction, the three writers taking
  turns in blocks of 50: loopstate's ledger mutation (the service's path: lock and
  catch-up, request-id check, append, commit), loopstate's ``Store.append`` of sealed lines
  (one statement), and eventsourcing's ``PostgresApplicationRecorder.insert_events`` (one
  event per call);
* the same with ``--writers`` processes released at once, in two alternating halves:
  loopstate with one stream each and all on one stream (taking turns on its lock),
  eventsourcing with one aggregate each (its recorder serialises every insert with a
  table lock, for its notification order);
* notification latency, ``--notify`` samples of each, in alternating blocks: a writer
  appends one event at a time; a subscriber on another connection (loopstate: the store's
  change feed, then a ledger catch-up; eventsourcing: ``recorder.subscribe``) holds the
  event. Measured from the start of the append call (the commit is inside it) and, for
  loopstate, from the row's insert by the server's clock, to the subscriber holding it;
* the ordering lock, the choice behind ``loopstate.append``: a per-stream advisory
  transaction lock beside a row lock on a heads table, each as a one-statement append.

After each loopstate run the streams are read back and their chains verified, counts exact.
eventsourcing is the reference: without it (pip install 'eventsourcing[postgres]', or the
bench extra) its rows are skipped with a line saying so. Targets: loopstate's appends at
least eventsourcing's throughput, notification p99 under 50 ms.
Not part of the test run (the file is not named test_*.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import psycopg  # noqa: E402
from bench_core import LAYOUT, body  # noqa: E402

from loopstate.core import canonical  # noqa: E402
from loopstate.core.backend import HeadConflict, seal_batch, verify_chain  # noqa: E402
from loopstate.core.project import Project  # noqa: E402
from loopstate.core.stores import open_store  # noqa: E402
from tests.pg.pg_cluster import Cluster, skip_reason  # noqa: E402

try:
    from eventsourcing.persistence import StoredEvent as EsStoredEvent
    from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
except ImportError as exc:  # the reference is optional
    ES_MISSING: str | None = f"eventsourcing's PostgreSQL recorder is not installed ({exc}); " \
        "pip install 'eventsourcing[postgres]' (or loopstate's bench extra) to run the reference"
else:
    ES_MISSING = None

FP = "f" * 64


# -- the two subjects, as one writer makes them ---------------------------------------------------


def project_for(base: Path, name: str) -> Project:
    root = base / name
    root.mkdir(parents=True, exist_ok=True)
    return Project(str(root), data_dir=base / "data", lock_timeout=120)


class LoopstateWriter:
    """One writer's appends to ``stream``, one per transaction: ``how`` is "mutation" (the service's
    path: lock and catch-up, request-id check, append, commit) or "store" (``Store.append`` of
    sealed lines, retried after a HeadConflict)."""

    def __init__(self, url: str, base: Path, name: str, stream: str, how: str) -> None:
        self.store = open_store(project_for(base, "project"), url)
        self.name, self.stream, self.how, self.k = name, stream, how, 0
        if how == "mutation":
            self.ledger = self.store.open_ledger(stream, LAYOUT, announce_history=False)
            self.ledger.catch_up(collect=False)
        else:
            self.head = self.store.head(stream, LAYOUT)

    def append(self) -> float:
        """One durable append; its latency in seconds."""
        k, rid = self.k, f"{self.name}-{self.k}"
        self.k += 1
        t = time.perf_counter()
        if self.how == "mutation":
            with self.ledger.mutation() as tx:
                if tx.earlier(rid, FP) is None:
                    tx.append([body(k)], request_id=rid, fp=FP)
        else:
            while True:
                lines = seal_batch([body(k)], LAYOUT, self.head, extra={"request_id": rid, "request_fingerprint": FP})
                try:
                    self.head = self.store.append(self.stream, LAYOUT, lines, expected=self.head)
                    break
                except HeadConflict as exc:
                    self.head = exc.actual
        return time.perf_counter() - t

    def close(self) -> None:
        self.store.close()


class EsWriter:
    """eventsourcing's ``insert_events`` of one event per call, to an aggregate of its own."""

    def __init__(self, parts: dict[str, str]) -> None:
        self.datastore = es_datastore(parts)
        self.recorder = PostgresApplicationRecorder(self.datastore)
        self.aggregate = uuid.uuid4()
        self.k = 0

    def append(self) -> float:
        state = canonical.encode(body(self.k))
        self.k += 1
        t = time.perf_counter()
        self.recorder.insert_events([EsStoredEvent(originator_id=self.aggregate, originator_version=self.k,
                                                   topic="bench:ClaimAdded", state=state)])
        return time.perf_counter() - t

    def close(self) -> None:
        self.datastore.close()


def es_datastore(url_parts: dict[str, str], pool_size: int = 1) -> PostgresDatastore:
    return PostgresDatastore(dbname=url_parts["dbname"], host=url_parts["host"], port=5432, user=url_parts["user"],
                             password="", pool_size=pool_size)


def writer_run(writer: LoopstateWriter | EsWriter, appends: int) -> dict[str, Any]:
    """A child's run: ready, released, ``appends`` appends; each one's latency, and when the last
    one ended on the system's monotonic clock (one clock for every process, the parent's too),
    so the throughput counts the appends only, not the child's close and exit."""
    go()
    latencies = [writer.append() for _ in range(appends)]
    ended = time.monotonic()
    writer.close()
    return {"ended": ended, "latencies": latencies}


def serial_interleaved(writers: dict[str, LoopstateWriter | EsWriter], appends: int,
                       block: int = 50) -> dict[str, tuple[float, list[float]]]:
    """``appends`` appends by each writer, in alternating blocks in this one process, so a change of
    the machine's load falls on all alike: per writer (seconds spent appending, latencies)."""
    spent = {label: 0.0 for label in writers}
    latencies: dict[str, list[float]] = {label: [] for label in writers}
    done = 0
    while done < appends:
        n = min(block, appends - done)
        for label, writer in writers.items():
            t = time.perf_counter()
            latencies[label] += [writer.append() for _ in range(n)]
            spent[label] += time.perf_counter() - t
        done += n
    for writer in writers.values():
        writer.close()
    return {label: (spent[label], latencies[label]) for label in writers}


def go() -> None:
    """A child says it is ready and waits for the go line."""
    print("ready", flush=True)
    sys.stdin.readline()


def child(argv: list[str]) -> None:
    kind, *rest = argv
    if kind == "loopstate":
        url, base, name, stream, appends, how = rest
        latencies = writer_run(LoopstateWriter(url, Path(base), name, stream, how), int(appends))
    else:
        latencies = writer_run(EsWriter(json.loads(rest[0])), int(rest[1]))
    print(json.dumps(latencies), flush=True)


# -- runs -----------------------------------------------------------------------------------------


def in_processes(commands: list[list[str]]) -> tuple[float, list[float]]:
    """Start the children, release them together once all are ready; (seconds from the release
    to the last append, latencies). An earlier version took the seconds to the children's exits,
    which with 50 appends a child were mostly the exits of 8 Python processes: the same for
    both subjects, so the ratio was near 1 whatever the appends cost."""
    children = [subprocess.Popen([sys.executable, __file__, "--child", *c], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True) for c in commands]
    for c in children:
        line = c.stdout.readline()
        if line.strip() != "ready":
            raise RuntimeError(f"a writer failed before it was ready: {line!r}")
    start = time.monotonic()
    for c in children:
        c.stdin.write("go\n")
        c.stdin.flush()
    latencies: list[float] = []
    last = start
    for c in children:
        out, _ = c.communicate(timeout=900)
        if c.returncode != 0:
            raise RuntimeError("a writer failed")
        run = json.loads(out.strip().splitlines()[-1])
        latencies += run["latencies"]
        last = max(last, run["ended"])
    return last - start, latencies


def check_loopstate(url: str, base: Path, streams: list[str], expected: int) -> None:
    store = open_store(project_for(base, "project"), url)
    total = 0
    for stream in streams:
        events = list(store.read(stream, LAYOUT))
        verify_chain(events, LAYOUT, stream)
        ids = [canonical.decode(e.line)["request_id"] for e in events]
        assert len(ids) == len(set(ids)), f"a request id twice in {stream}"
        total += len(events)
    store.close()
    assert total == expected, f"{total} events, expected {expected}"


def check_es(url: str, expected: int) -> None:
    with psycopg.connect(url) as conn:
        found = conn.execute("SELECT count(*) FROM stored_events").fetchone()[0]
    assert found == expected, f"eventsourcing: {found} events, expected {expected}"


def url_parts(cluster: Cluster, url: str) -> dict[str, str]:
    from urllib.parse import urlsplit

    return {"dbname": urlsplit(url).path.lstrip("/"), "host": str(cluster.socket_dir), "user": cluster.superuser}


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


# -- notification latency -------------------------------------------------------------------------


class LoopstateNotify:
    """A writer appending one event at a time and a subscriber on another store instance (its own
    connections: the change feed's LISTEN, then a ledger catch-up on another) holding each one."""

    def __init__(self, url: str, base: Path) -> None:
        self.url = url
        self.writer = open_store(project_for(base, "project"), url)
        self.reader = open_store(project_for(base, "project"), url)
        self.ledger = self.reader.open_ledger("intent", LAYOUT)
        self.writer_ledger = self.writer.open_ledger("intent", LAYOUT, announce_history=False)
        self.held = threading.Event()
        self.seen: dict[int, float] = {}
        self.seen_wall: dict[int, float] = {}
        self.latencies: list[float] = []
        self.feed = self.reader.changes(["intent"], on_change=self.on_change)
        self.k = 0

    def on_change(self, _stream: str | None) -> None:
        for record in self.ledger.catch_up().records:  # the subscriber pulls after its last sequence
            self.seen[record.event["sequence"]] = time.perf_counter()
            self.seen_wall[record.event["sequence"]] = time.time()
        self.held.set()

    def sample(self) -> None:
        self.held.clear()
        t = time.perf_counter()
        with self.writer_ledger.mutation() as tx:
            sequence = tx.append([body(self.k)], request_id=f"n-{self.k}", fp=FP)[0].event["sequence"]
        self.k += 1
        deadline = t + 5
        while sequence not in self.seen and time.perf_counter() < deadline:
            self.held.wait(0.5)
            self.held.clear()
        if sequence not in self.seen:
            raise RuntimeError(f"the subscriber never got sequence {sequence}")
        self.latencies.append(self.seen[sequence] - t)

    def finish(self) -> tuple[list[float], list[float]]:
        """(from the append call's start, from the row's insert) to the subscriber holding the event."""
        self.feed.close()
        self.writer.close()
        self.reader.close()
        # The row's committed_at is the server's clock_timestamp() at the insert, inside the
        # transaction, just before its COMMIT (and WAL flush): the same machine's wall clock.
        with psycopg.connect(self.url) as conn:
            inserted = dict(conn.execute("SELECT sequence, extract(epoch FROM committed_at)::float8 "
                                         "FROM loopstate.events WHERE stream = 'intent'").fetchall())
        return self.latencies, [self.seen_wall[s] - inserted[s] for s in sorted(self.seen_wall) if s in inserted]


class EsNotify:
    """The same with eventsourcing's recorder: ``insert_events`` and ``subscribe`` on another datastore."""

    def __init__(self, parts: dict[str, str]) -> None:
        self.writer_store = es_datastore(parts)
        self.reader_store = es_datastore(parts, pool_size=3)
        self.writer = PostgresApplicationRecorder(self.writer_store)
        self.writer.create_table()
        reader = PostgresApplicationRecorder(self.reader_store)
        self.seen: dict[int, float] = {}
        self.got = threading.Event()
        self.subscription = reader.subscribe(gt=reader.max_notification_id() or 0)
        threading.Thread(target=self.follow, daemon=True).start()
        self.aggregate = uuid.uuid4()
        self.latencies: list[float] = []
        self.k = 0

    def follow(self) -> None:
        try:
            for notification in self.subscription:
                self.seen[notification.id] = time.perf_counter()
                self.got.set()
        except Exception:  # stop() on Python < 3.13 (Queue.shutdown) ends the iteration with an error
            pass

    def sample(self) -> None:
        t = time.perf_counter()
        ids = self.writer.insert_events([EsStoredEvent(originator_id=self.aggregate, originator_version=self.k + 1,
                                                       topic="bench:ClaimAdded", state=canonical.encode(body(self.k)))])
        self.k += 1
        last = ids[-1]
        deadline = t + 5
        while last not in self.seen and time.perf_counter() < deadline:
            self.got.wait(0.5)
            self.got.clear()
        if last not in self.seen:
            raise RuntimeError(f"eventsourcing's subscriber never got notification {last}")
        self.latencies.append(self.seen[last] - t)

    def finish(self) -> list[float]:
        try:
            self.subscription.stop()
        except Exception:
            pass
        self.writer_store.close()
        self.reader_store.close()
        return self.latencies


def interleaved(subjects: list, samples: int, block: int = 50) -> None:
    """``samples`` samples of each subject, taken in alternating blocks, so a change of the machine's
    load during the run falls on both alike."""
    done = 0
    while done < samples:
        n = min(block, samples - done)
        for subject in subjects:
            for _ in range(n):
                subject.sample()
                time.sleep(0.002)
        done += n


# -- the ordering lock ----------------------------------------------------------------------------

LOCKS_DDL = """
CREATE TABLE ev (project text, stream text, sequence bigint, event_hash text, line bytea,
                 PRIMARY KEY (project, stream, sequence));
CREATE TABLE heads (project text, stream text, sequence bigint NOT NULL, PRIMARY KEY (project, stream));
CREATE FUNCTION app_advisory(p text, s text, exp bigint, h text, l bytea) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE cur bigint;
BEGIN
  PERFORM pg_advisory_xact_lock(hashtextextended(p || '/' || s, 0));
  SELECT coalesce(max(sequence), 0) INTO cur FROM ev WHERE project = p AND stream = s;
  IF cur <> exp THEN RETURN cur; END IF;
  INSERT INTO ev VALUES (p, s, exp + 1, h, l);
  PERFORM pg_notify('bench', s || ' ' || (exp + 1));
  RETURN exp + 1;
END $$;
CREATE FUNCTION app_row(p text, s text, exp bigint, h text, l bytea) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE cur bigint;
BEGIN
  INSERT INTO heads VALUES (p, s, 0) ON CONFLICT DO NOTHING;
  SELECT sequence INTO cur FROM heads WHERE project = p AND stream = s FOR UPDATE;
  IF cur <> exp THEN RETURN cur; END IF;
  INSERT INTO ev VALUES (p, s, exp + 1, h, l);
  UPDATE heads SET sequence = exp + 1 WHERE project = p AND stream = s;
  PERFORM pg_notify('bench', s || ' ' || (exp + 1));
  RETURN exp + 1;
END $$;
"""


def lock_writer(url: str, function: str, stream: str, appends: int) -> None:
    line = canonical.encode(body(0))
    with psycopg.connect(url, autocommit=True) as conn:
        head, done = 0, 0
        while done < appends:
            found = conn.execute(f"SELECT {function}(%s, %s, %s, %s, %s)", (function, stream, head, "h" * 64, line)).fetchone()[0]
            done, head = (done + 1, found) if found == head + 1 else (done, found)


def lock_run(url: str, function: str, writers: int, appends: int, one_stream: bool) -> float:
    threads = [threading.Thread(target=lock_writer, args=(url, function, "s" if one_stream else f"s{i}", appends))
               for i in range(writers)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return writers * appends / (time.perf_counter() - start)


# -- main -----------------------------------------------------------------------------------------


def fresh_es(cluster: Cluster) -> tuple[str, dict[str, str]]:
    url = cluster.new_database("bench")
    parts = url_parts(cluster, url)
    datastore = es_datastore(parts)
    PostgresApplicationRecorder(datastore).create_table()
    datastore.close()
    return url, parts


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def one_round(cluster: Cluster, args: argparse.Namespace, per_writer: int) -> dict[str, float]:
    """One round's rows, printed; its figures for the verdicts."""
    n = args.writers
    rows: list[tuple[str, float, list[float]]] = []
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="lsbench-") as tmp:
        base = Path(tmp)
        mutation_url, store_url = cluster.new_database("bench"), cluster.new_database("bench")
        writers: dict[str, LoopstateWriter | EsWriter] = {
            "loopstate ledger mutation, serial": LoopstateWriter(mutation_url, base, "serial", "intent", "mutation"),
            "loopstate Store.append, serial": LoopstateWriter(store_url, base, "serial", "intent", "store"),
        }
        if not ES_MISSING:
            es_url, parts = fresh_es(cluster)
            writers["eventsourcing insert_events, serial"] = EsWriter(parts)
        for label, (took, lat) in serial_interleaved(writers, args.appends).items():
            rows.append((label, args.appends / took, lat))
        check_loopstate(mutation_url, base, ["intent"], args.appends)
        check_loopstate(store_url, base, ["intent"], args.appends)
        if not ES_MISSING:
            check_es(es_url, args.appends)
        # The process runs in two alternating halves (loopstate's, the reference's, again each),
        # so a change of load during the round falls on both.
        own_url, one_url = cluster.new_database("bench"), cluster.new_database("bench")
        es_url, parts = fresh_es(cluster) if not ES_MISSING else ("", {})
        half = [per_writer // 2, per_writer - per_writer // 2]
        spent = {"own": 0.0, "one": 0.0, "es": 0.0}
        lats: dict[str, list[float]] = {"own": [], "one": [], "es": []}
        for part, appends in enumerate(half):
            for kind in ("own", "one", "es"):
                if kind == "es" and ES_MISSING:
                    continue
                if kind == "es":
                    commands = [["es", json.dumps(parts), str(appends)] for _ in range(n)]
                else:
                    url = own_url if kind == "own" else one_url
                    commands = [["loopstate", url, str(base), f"w{i}h{part}", f"runs.w{i}" if kind == "own" else "intent",
                                 str(appends), "mutation"] for i in range(n)]
                took, lat = in_processes(commands)
                spent[kind] += took
                lats[kind] += lat
        check_loopstate(own_url, base, [f"runs.w{i}" for i in range(n)], n * per_writer)
        check_loopstate(one_url, base, ["intent"], n * per_writer)
        rows.append((f"loopstate ledger mutation, {n} processes, a stream each", n * per_writer / spent["own"], lats["own"]))
        rows.append((f"loopstate ledger mutation, {n} processes, one stream", n * per_writer / spent["one"], lats["one"]))
        if not ES_MISSING:
            check_es(es_url, n * per_writer)
            rows.append((f"eventsourcing insert_events, {n} processes, an aggregate each", n * per_writer / spent["es"],
                         lats["es"]))
        print(f"  {'appends':<62} {'events/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
        for label, rate, lat in rows:
            print(f"  {label:<62} {rate:9.0f} {pct(lat, 0.5) * 1e3:8.2f} {pct(lat, 0.99) * 1e3:8.2f}")
        by = {label: rate for label, rate, _ in rows}
        if not ES_MISSING:
            figures["serial"] = by["loopstate ledger mutation, serial"] / by["eventsourcing insert_events, serial"]
            figures["store_serial"] = by["loopstate Store.append, serial"] / by["eventsourcing insert_events, serial"]
            figures["processes"] = (by[f"loopstate ledger mutation, {n} processes, a stream each"]
                                    / by[f"eventsourcing insert_events, {n} processes, an aggregate each"])
        print(f"  load average {load()}; notification: {args.notify} samples each, in alternating blocks")
        ours = LoopstateNotify(cluster.new_database("bench"), base)
        theirs = None if ES_MISSING else EsNotify(url_parts(cluster, cluster.new_database("bench")))
        interleaved([ours] if theirs is None else [ours, theirs], args.notify)
        mine, from_insert = ours.finish()
        print(f"  {'notification to the subscriber holding the event, from':<62} {'p50 ms':>9} {'p99 ms':>8}")
        print(f"  {'loopstate, the append call: change feed (LISTEN) + catch-up':<62} {pct(mine, 0.5) * 1e3:9.2f} {pct(mine, 0.99) * 1e3:8.2f}")
        print(f"  {'loopstate, the insert (server clock, before COMMIT)':<62} {pct(from_insert, 0.5) * 1e3:9.2f} {pct(from_insert, 0.99) * 1e3:8.2f}")
        if theirs is not None:
            es_lat = theirs.finish()
            print(f"  {'eventsourcing, the insert_events call: subscribe (LISTEN + select)':<62} {pct(es_lat, 0.5) * 1e3:9.2f} {pct(es_lat, 0.99) * 1e3:8.2f}")
        figures["p99_call"] = pct(mine, 0.99) * 1e3
        figures["p99_insert"] = pct(from_insert, 0.99) * 1e3
        url = cluster.new_database("bench")
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(LOCKS_DDL)
        print(f"  {'ordering lock (one-statement append)':<40} {'serial':>9} {f'{n} own':>9} {f'{n} one':>9}  events/s")
        for function, label in (("app_advisory", "advisory transaction lock"), ("app_row", "heads table row lock")):
            lock_figures = [lock_run(url, function, 1, args.appends, True),
                            lock_run(url, function, n, per_writer, False),
                            lock_run(url, function, n, per_writer, True)]
            print(f"  {label:<40} " + " ".join(f"{f:9.0f}" for f in lock_figures))
    return figures


def verdicts(figures: dict[str, float], n: int) -> list[tuple[str, bool, str]]:
    """(target, met, figure) for one round."""
    out = []
    if "serial" in figures:
        out.append(("serial ledger mutations/s at least eventsourcing's", figures["serial"] >= 1, f"{figures['serial']:.2f}x"))
        out.append(("serial Store.append/s (one statement, like insert_events) at least eventsourcing's",
                    figures["store_serial"] >= 1, f"{figures['store_serial']:.2f}x"))
        out.append((f"{n} processes' appends/s at least eventsourcing's", figures["processes"] >= 1,
                    f"{figures['processes']:.2f}x"))
    out.append(("notification p99 under 50 ms, from the append call", figures["p99_call"] < 50, f"{figures['p99_call']:.1f} ms"))
    out.append(("notification p99 under 50 ms, from the insert", figures["p99_insert"] < 50, f"{figures['p99_insert']:.1f} ms"))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=1600,
                        help="appends of the serial writer (each of N writers: this / N x 2, in two halves)")
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--notify", type=int, default=1000, help="samples of notification latency, per subject")
    args = parser.parse_args()
    reason = skip_reason()
    if reason:
        print(f"skipped: {reason}")
        return
    if ES_MISSING:
        print(f"reference skipped: {ES_MISSING}")
    cluster = Cluster()
    per_writer = max(1, args.appends * 2 // args.writers)
    every: list[list[tuple[str, bool, str]]] = []
    try:
        with psycopg.connect(cluster.dsn(), autocommit=True) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]
            settings = {name: conn.execute(f"SHOW {name}").fetchone()[0] for name in ("fsync", "synchronous_commit", "wal_sync_method")}
        print(f"PostgreSQL {version} ({', '.join(f'{k}={v}' for k, v in settings.items())}), psycopg {psycopg.__version__}, "
              f"{args.appends} serial appends, {args.writers} writers x {per_writer}, {args.notify} notification samples")
        for round_no in range(1, args.rounds + 1):
            print(f"\nround {round_no} (load average {load()}, {time.strftime('%H:%M:%S', time.gmtime())} UTC)")
            round_verdicts = verdicts(one_round(cluster, args, per_writer), args.writers)
            every.append(round_verdicts)
            for target, met, figure in round_verdicts:
                print(f"  verdict: {target}: {figure} ({'met' if met else 'NOT met'})")
    finally:
        cluster.stop()
    print(f"\nover {len(every)} rounds (load average now {load()}):")
    for i, (target, _, _) in enumerate(every[0] if every else []):
        met = sum(1 for r in every if r[i][1])
        figures = ", ".join(r[i][2] for r in every)
        print(f"  {target}: met in {met} of {len(every)} rounds ({figures})"
              f"{'' if met == len(every) else ': NOT met in every round'}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2:])
    else:
        main()
