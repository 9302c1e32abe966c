"""Verification of a large stream's lines in worker processes, ahead of the sequential scan.

Re-hashing an event (a canonical encode, the cut of the hash member and a
SHA-256, see ``chain.HashCut``) costs about as much as decoding it, and each
line's hash and canonical form depend on nothing but the line itself. So when a scan must re-hash many bytes (``loopstate verify``,
or a cold open with no checkpoint), the file is cut after a newline about
every few MiB and worker processes check each span's lines as the sequential
scan would: a JSON object whose line is its canonical encoding, whose hash is
the SHA-256 of that encoding without the hash field, numbered and linked to
the line before it inside the span. A worker answers, per span, nothing (not
clean) or the span's end, its first and last sequence and hash, and the
schema values it met.

The calling process stays the judge, in one of two ways:

- ``Voucher.stitched`` (verify, which needs no events): the spans are joined
  in order, each one's first line following the previous one's last, every
  schema value judged by the layout; the head moves to the end of the last
  span that joins;
- ``Voucher.vouched_at`` (a cold open, which folds every event): the
  opener still decodes every line and checks schema, sequence and links
  itself, from the start; the workers take the spans from the end backwards,
  so the two meet somewhere in between. Where the opener finds a span the
  workers already found clean, it skips only the hash and canonical-form
  checks of its lines; a span they have not answered yet it checks itself,
  and workers left with only spans behind the opener are stopped. The work
  so shares itself out by how much CPU each side gets, and at most one span
  per worker (where they meet) is checked twice.

Any span that is not clean or does not join (or that no worker could check:
another file at the path, a worker that died) the sequential scan checks
line by line itself, exactly as without workers, so the first bad offset,
sequence and reason it reports are the same.

Workers re-open the file by path (no following of links) and refuse to vouch
for another file than the scan's (device, inode); both read under the shared
lock the caller holds, and loopstate writers only append.
"""

from __future__ import annotations

import hashlib
import os
import sys
from bisect import bisect_right
from typing import TYPE_CHECKING, Any, Callable

import msgspec

from loopstate.core import canonical
from loopstate.core.chain import HashCut, Position

if TYPE_CHECKING:
    import subprocess

# Below this many bytes to re-hash, starting worker processes costs more than it saves.
PARALLEL_MIN_BYTES = 16 << 20
# The same for a cold open, where the opener keeps decoding every line itself and the
# workers compete with it (and its prefix-digest thread) for the CPUs: at 73 MB (100k
# events) one worker made the open slower on this 2-CPU VM; at 730 MB it paid.
FOLD_PARALLEL_MIN_BYTES = 128 << 20
SPAN = 4 << 20


class Span(msgspec.Struct, array_like=True):
    """What a worker found clean in one span: its chain ends, to be stitched in order."""

    end: int  # the offset just after the span's last complete line
    count: int
    first_sequence: Any
    first_prev: Any
    last_sequence: Any
    last_hash: Any
    schemas: list[Any]  # each distinct schema value met, for the caller to judge


def check_span(path: str, identity: tuple[int, int], start: int, end: int, fields: tuple[str, str, str, str]) -> Span | None:
    """Check every complete line in bytes [start, end) as the sequential scan would,
    except the schema (returned for the caller to judge) and the first line's link
    (returned to be stitched to the previous span). None on anything else than clean.

    ``start`` is a line start; a partial line at ``end`` (only at the file's end) is
    left to the scan. Runs in a worker process.
    """
    seq_f, prev_f, hash_f, schema_f = fields
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if (info.st_dev, info.st_ino) != identity:
            return None
        data = os.pread(fd, end - start, start)
    finally:
        os.close(fd)
    if len(data) != end - start:
        return None
    decode, encode_into = canonical.decode, canonical.encode_into
    cut_span = HashCut(hash_f).span
    buf = bytearray()  # the line re-encoded, then cut down to the hash-less bytes (as in Stream._scan)
    sha256 = hashlib.sha256
    lines = data.split(b"\n")
    tail = lines.pop()  # after the last newline: empty, or a partial line the scan reports
    schemas: dict[tuple[type, Any], Any] = {}
    first_sequence = first_prev = sequence = prev = None
    for line in lines:
        try:
            event = decode(line)
        except Exception:
            return None
        if type(event) is not dict:
            return None
        claimed, number, schema = event.get(hash_f), event.get(seq_f), event.get(schema_f)
        if type(claimed) is not str or type(number) is not int:
            return None
        if sequence is None:
            first_sequence, first_prev = number, event.get(prev_f)
        elif number != sequence + 1 or event.get(prev_f) != prev:
            return None
        try:
            schemas.setdefault((type(schema), schema), schema)
        except TypeError:  # an unhashable schema value: let the scan judge it
            return None
        encode_into(event, buf)
        if buf != line:
            return None
        cut = cut_span(line, claimed)
        if cut is not None:
            del buf[cut[0]:cut[1]]
        else:
            del event[hash_f]
            encode_into(event, buf)
        if sha256(buf).hexdigest() != claimed:
            return None
        sequence, prev = number, claimed
    return Span(end - len(tail), len(lines), first_sequence, first_prev, sequence, prev, list(schemas.values()))


def workers() -> int:
    return max(1, min(os.cpu_count() or 1, 4))


class Voucher:
    """Spans of one file being checked by worker processes.

    Workers are plain child interpreters (``python -m loopstate.core.parallel_verify``)
    fed span offsets on stdin and answering one line per span, in the order asked,
    on stdout, not a multiprocessing pool: that would re-import the caller's main
    module, and the caller may be any script, a threaded server or a test runner.

    ``from_end=False`` (``stitched``): span i goes to worker i % count, and the
    answers are read in file order. ``from_end=True`` (``vouched_at``): the spans
    are handed out from the last one backwards, to one worker fewer than the CPUs
    (the opener scanning from the front keeps one busy), and answers are read as
    they come, without waiting.
    """

    def __init__(
        self, fd: int, path: str, identity: tuple[int, int], start: int, size: int, fields: tuple[str, str, str, str],
        *, from_end: bool = False,
    ) -> None:
        self._spans = _spans(fd, start, size)
        self._starts = [a for a, _ in self._spans]
        self._procs: list[subprocess.Popen[bytes]] = []
        self._next = 0
        self._stopped = False
        order = list(range(len(self._spans)))
        if from_end:
            order.reverse()
        count = min(max(1, workers() - 1) if from_end else workers(), len(self._spans))
        # Per worker: the span indices asked of it, in order, and how many it answered.
        self._asked: list[list[int]] = [order[k::count] for k in range(count)]
        self._answered = [0] * count
        self._partial = [b""] * count
        self._clean: dict[int, int] = {}  # span index -> end, for spans a worker found clean
        import subprocess  # here: a read of a store below the parallel threshold never starts a worker

        try:
            for asked in self._asked:
                proc = subprocess.Popen(
                    [sys.executable, "-m", __name__, path, str(identity[0]), str(identity[1]), *fields],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
                )
                self._procs.append(proc)
                proc.stdin.write(b"".join(b"%d %d\n" % self._spans[i] for i in asked))  # type: ignore[union-attr]
                proc.stdin.close()  # type: ignore[union-attr]
                if from_end:
                    os.set_blocking(proc.stdout.fileno(), False)  # type: ignore[union-attr]
        except OSError:
            self.close()

    def next_span(self) -> Span | None:
        """The next span's result, in file order; None once one is not clean (or a worker died)."""
        if self._stopped or self._next >= len(self._spans):
            return None
        answer = self._procs[self._next % len(self._procs)].stdout.readline()  # type: ignore[union-attr]
        try:
            span = _decode_span(answer)
        except (msgspec.DecodeError, msgspec.ValidationError):
            span = None
        if span is None:
            self.close()
            return None
        self._next += 1
        return span

    def vouched_at(self, offset: int) -> int:
        """The end of the span holding ``offset`` when a worker found it clean, else 0:
        every line of it from ``offset`` on is then canonical and hashes right (the
        caller still checks schema, sequence and links itself). Never waits. Asked
        about a span no worker has answered, the caller checks that span itself:
        workers left with only spans before it are stopped."""
        if self._stopped:
            return 0
        j = bisect_right(self._starts, offset) - 1
        if j < 0:
            return 0
        self._collect()
        end = self._clean.get(j)
        if end is None:
            for k, proc in enumerate(self._procs):
                asked, answered = self._asked[k], self._answered[k]
                if answered < len(asked) and asked[answered] <= j and proc.poll() is None:
                    proc.kill()
        return end or 0

    def _collect(self) -> None:
        """Take in every answer the workers have written so far."""
        for k, proc in enumerate(self._procs):
            asked = self._asked[k]
            if self._answered[k] >= len(asked):
                continue
            try:
                data = os.read(proc.stdout.fileno(), 1 << 16)  # type: ignore[union-attr]
            except (BlockingIOError, InterruptedError):
                continue
            if not data:  # the worker ended (or was stopped): nothing more from it
                self._answered[k] = len(asked)
                continue
            lines = (self._partial[k] + data).split(b"\n")
            self._partial[k] = lines.pop()
            for answer in lines:
                try:
                    span = _decode_span(answer)
                except (msgspec.DecodeError, msgspec.ValidationError):
                    span = None
                i = asked[self._answered[k]]
                self._answered[k] += 1
                if span is not None:
                    self._clean[i] = span.end

    def stitched(self, at: Position, classify: Callable[[Any], str], progress: Any = None, size: int = 0) -> Position:
        """How far the spans are clean and chain on from ``at``, span after span:
        each span's first line follows the previous span's last, and every schema
        value in it is one the layout calls "ok". Stops before the first that is not."""
        judged: dict[tuple[type, Any], bool] = {}
        while True:
            span = self.next_span()
            if span is None or span.count == 0:
                break
            if span.first_sequence != at.sequence + 1 or span.first_prev != at.hash:
                break
            if not all(judged.setdefault((type(v), v), classify(v) == "ok") for v in span.schemas):
                break
            at = Position(span.end, span.last_sequence, span.last_hash)
            if progress is not None:
                progress(at.offset, size)
        self.close()
        return at

    def close(self) -> None:
        if not self._stopped:
            self._stopped = True
            for proc in self._procs:
                if proc.poll() is None:
                    proc.kill()
            for proc in self._procs:
                proc.wait()
                proc.stdout.close()  # type: ignore[union-attr]
                if proc.stdin is not None and not proc.stdin.closed:
                    proc.stdin.close()


def _spans(fd: int, start: int, size: int) -> list[tuple[int, int]]:
    """Cut [start, size) after a newline about every SPAN bytes."""
    spans = []
    at = start
    while size - at > SPAN:
        probe = at + SPAN
        cut = -1
        while cut < 0 and probe < size:
            window = os.pread(fd, min(1 << 16, size - probe), probe)
            if not window:
                break
            i = window.find(b"\n")
            if i >= 0:
                cut = probe + i + 1
            probe += len(window)
        if cut < 0 or cut >= size:
            break
        spans.append((at, cut))
        at = cut
    spans.append((at, size))
    return spans


def voucher_for(
    fd: int, path: str, identity: tuple[int, int], start: int, size: int, fields: tuple[str, str, str, str],
    *, from_end: bool = False,
) -> Voucher | None:
    """A Voucher when there is enough to re-hash to pay for workers, else None."""
    if size - start < (FOLD_PARALLEL_MIN_BYTES if from_end else PARALLEL_MIN_BYTES) or workers() < 2:
        return None
    return Voucher(fd, path, identity, start, size, fields, from_end=from_end)


_decode_span = msgspec.json.Decoder(Span | None).decode
_encode = msgspec.json.Encoder().encode


def _serve(argv: list[str]) -> None:
    """Worker: check the spans named on stdin, one answer line each, in order."""
    path, dev, ino, *fields = argv
    identity = (int(dev), int(ino))
    out = sys.stdout.buffer
    for request in sys.stdin.buffer:
        start, end = map(int, request.split())
        out.write(_encode(check_span(path, identity, start, end, tuple(fields))) + b"\n")  # type: ignore[arg-type]
        out.flush()


if __name__ == "__main__":
    _serve(sys.argv[1:])
