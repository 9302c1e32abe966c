"""The verifier's one-encode hash check is exactly the two-encode check it replaced.

``chain.HashCut`` takes the hash-less bytes out of the checked canonical line
instead of encoding the event a second time. Rules checked, on events built to
trip it (nested objects and strings holding the hash field's name, its value
and the whole member, quotes, backslashes, escapes, unicode; the hash field
first, last or alone among the keys; several hash field names):

- wherever it answers, the line with the span cut out is byte for byte the
  canonical encoding of the event without its hash field;
- it answers whenever the member occurs once in the line (so the fast path is
  the one taken on ordinary events);
- a stream scan (``Stream.read_new``) and a worker's span check
  (``parallel_verify.check_span``) accept exactly the lines ``check_line``
  accepts, and the scan fails with the same error (code, offset, sequence,
  reason) at the same place, with the same events before it (keys in the
  same order: callers serialize them as they are);
- the running prefix digest, fed from a thread on long scans, is the SHA-256
  of exactly the verified bytes, also when the scan stops at an error.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from corekit import write_stream
from loopstate.core import canonical, parallel_verify, stream as stream_module
from loopstate.core.chain import BATCH, ChainLayout, HashCut, Position, check_line, seal
from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project
from loopstate.core.stream import Stream

HEX = "0123456789abcdef"
hex64 = st.text(alphabet=HEX, min_size=64, max_size=64)
# Hash field names: the layouts' own, one that sorts first, one that sorts last,
# and names whose encoding holds quotes, backslashes, escapes and structure.
field_names = st.sampled_from(["event_hash", "event_digest", "a", "~~", "\uffff", 'h"x', "\\", ":", ":x", "}", ",", "", "é€", "\n"])


def _classify(value: Any) -> str:
    if value == 1 and type(value) is int:
        return "ok"
    return "future" if type(value) is int and value > 1 else "invalid"


def _values(field: str, claimed: str) -> st.SearchStrategy[Any]:
    """JSON values that hold the field's name, its value and the member in every form."""
    member = f'"{field}":"{claimed}"'
    strings = st.sampled_from([
        claimed, field, member, "," + member, "{" + member + "}", f'\\"{field}', '"', "\\", '\\"', "é€𝄞", "\x00\n\t\u2028",
    ]) | st.text(max_size=12)
    keys = st.sampled_from([field, field + '"', '"' + field, "x" + field, field + "x", "", "~", "\uffff", "{", ",", '"', member]) | st.text(max_size=6)
    scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False, allow_infinity=False) | strings
    nested = st.recursive(
        scalars,
        lambda inner: st.lists(inner, max_size=4)
        | st.dictionaries(keys, inner, max_size=4)
        | st.builds(lambda d: {**d, field: claimed}, st.dictionaries(keys, inner, max_size=3)),  # the member, nested
        max_leaves=16,
    )
    return st.dictionaries(keys, nested, max_size=6)


@pytest.mark.slow
@settings(max_examples=600, deadline=None)
@given(field=field_names, claimed=hex64 | st.text(max_size=70), data=st.data())
def test_the_cut_line_is_the_canonical_encoding_without_the_hash_field(field, claimed, data):
    event = data.draw(_values(field, claimed))
    event[field] = claimed
    line = canonical.encode(event)
    span = HashCut(field).span(line, claimed)
    without = {k: v for k, v in event.items() if k != field}
    is_hex = len(claimed) == 64 and set(claimed) <= set(HEX)
    if span is not None:
        start, stop = span
        assert 0 < start < stop < len(line)
        if is_hex:  # the only values a hex digest can equal; for others the comparison fails anyway
            assert line[:start] + line[stop:] == canonical.encode(without)
    member = canonical.encode(field) + b":" + canonical.encode(claimed)
    if line.find(member) == line.rfind(member):
        assert span is not None


C = "c" * 64


@pytest.mark.parametrize("field, event", [
    (":", {",": ":", ":": C}),  # '":":' right after the comma that ends the key ","
    ("event_hash", {"a": {"event_hash": C}, "event_hash": C}),  # the member, nested, first
    ("event_hash", {"a": {"b": 1, "event_hash": C}, "event_hash": C}),  # the same after a comma
    ("event_hash", {"a": [{"x": 1}, {"event_hash": C}], "event_hash": C, "z": {"event_hash": C}}),
    ("event_hash", {'a"event_hash': C, "event_hash": C}),  # a key ending in an escaped quote and the name
    ("event_hash", {"a": ',"event_hash":"' + C + '"', "event_hash": C}),  # the member inside a string
    ("event_hash", {"event_hash": C}),  # alone
    ("event_hash", {"event_hash": C, "z": 1}),  # first
    ("event_hash", {"a": 1, "event_hash": C}),  # last
])
def test_lookalikes_of_the_hash_member_are_never_cut_instead_of_it(field, event):
    line = canonical.encode(event)
    span = HashCut(field).span(line, C)
    assert span is not None or line.count(canonical.encode({field: C})[1:-1]) > 1
    if span is not None:
        assert line[:span[0]] + line[span[1]:] == canonical.encode({k: v for k, v in event.items() if k != field})


def _layout(field: str) -> ChainLayout:
    return ChainLayout(sequence_field="seq", prev_field="prev", hash_field=field, schema_field="schema_version", classify_schema=_classify)


def _tamper(line: bytes, layout: ChainLayout, kind: str, data: st.DataObject) -> bytes:
    """One line changed so that check_line must judge it: some still verify, most do not."""
    hash_f = layout.hash_field
    event = canonical.decode(line)
    claimed = event[hash_f]
    member = canonical.encode(hash_f) + b":" + canonical.encode(claimed)
    if kind == "other hash":
        event[hash_f] = data.draw(hex64 | st.text(max_size=70))
        return canonical.encode(event)
    if kind == "nested member":  # the exact member again inside, hash not recomputed
        event[data.draw(st.sampled_from(["", "a", "~", "\uffff", hash_f + "x"]))] = {hash_f: claimed}
        return canonical.encode(event)
    if kind == "member in a string":
        event["~"] = data.draw(st.sampled_from(["", ","])) + member.decode()
        return canonical.encode(event)
    if kind == "resealed with member inside":  # verifies: a nested copy of the member with a stale value
        del event[hash_f]
        event[data.draw(st.sampled_from(["", "a", "~"]))] = {hash_f: claimed}
        return seal(event, layout, Position(0, event[layout.sequence_field] - 1, event[layout.prev_field]))[1][:-1]
    if kind == "member moved":  # same bytes, member out of its sorted place
        rest = line.replace(b"," + member, b"", 1) if line.find(member) > 1 else line.replace(member + b",", b"", 1)
        return rest[:-1] + b"," + member + b"}" if data.draw(st.booleans()) else b"{" + member + b"," + rest[1:]
    if kind == "duplicate key":
        return b"{" + canonical.encode(hash_f) + b":" + canonical.encode(data.draw(hex64)) + b"," + line[1:]
    if kind == "escaped":
        i = line.find(b'"' + claimed[:1].encode())
        assume(i >= 0 and claimed)
        return line[:i + 1] + b"\\u%04x" % ord(claimed[0]) + line[i + 2:]
    if kind == "space":
        i = data.draw(st.integers(1, len(line) - 1))
        return line[:i] + b" " + line[i:]
    at = data.draw(st.integers(0, len(line) - 1))  # "byte"
    return line[:at] + bytes([data.draw(st.integers(0, 255))]) + line[at + 1:]


def _reference(lines: list[bytes], layout: ChainLayout) -> tuple[list[dict[str, Any]], Any, int]:
    """check_line alone, line after line: the events, the first error, the verified bytes."""
    at, events = Position(), []
    for line in lines:
        try:
            event = check_line(line, layout, at, "core")
        except LoopstateError as exc:
            return events, _error(exc), at.offset
        events.append(event)
        at = Position(at.offset + len(line) + 1, event[layout.sequence_field], event[layout.hash_field])
    return events, None, at.offset


def _error(exc: LoopstateError) -> tuple:
    return exc.code, exc.details.get("offset"), exc.details.get("sequence"), getattr(exc, "reason", None), exc.message


def _scan(project: Project, layout: ChainLayout, threaded: bool) -> tuple[list[dict[str, Any]], Any, int, str | None]:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(stream_module, "DIGEST_THREAD_MIN_BYTES", 0 if threaded else 1 << 62)
        stream = Stream(project.dir, "core", layout)
        events, error = [], None
        try:
            for record in stream.read_new():
                events.append(record.event)
        except LoopstateError as exc:
            error = _error(exc)
        return events, error, stream.position.offset, stream.prefix_digest()


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    field=st.sampled_from(["event_hash", "event_digest", "a", "~~", 'h"x', "\\"]),
    kind=st.sampled_from(["none", "other hash", "nested member", "member in a string", "resealed with member inside",
                          "member moved", "duplicate key", "escaped", "space", "byte"]),
    data=st.data(),
)
def test_the_scan_and_the_workers_accept_exactly_what_check_line_accepts(field, kind, data):
    layout = _layout(field)
    claimed_like = "0" * 64
    bodies = data.draw(st.lists(_values(field, claimed_like), min_size=1, max_size=5))
    lines, at = [], Position()
    for body in bodies:
        # Not the batch marker either: the scan judges it (a batch's rules), check_line does not.
        body = {k: v for k, v in body.items() if k not in {"seq", "prev", field, BATCH}}
        event, line = seal({**body, "schema_version": 1}, layout, at)
        at = Position(at.offset + len(line), event["seq"], event[field])
        lines.append(line[:-1])
    if kind != "none":
        k = data.draw(st.integers(0, len(lines) - 1))
        lines[k] = _tamper(lines[k], layout, kind, data)
        assume(b"\n" not in lines[k])
    ref_events, ref_error, ref_offset = _reference(lines, layout)
    blob = b"".join(line + b"\n" for line in lines)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "ws").mkdir()
        project = Project(str(Path(tmp) / "ws"), data_dir=Path(tmp) / "data", lock_timeout=5)
        path = write_stream(project, "core", blob)
        for threaded in (False, True):
            events, error, offset, digest = _scan(project, layout, threaded)
            assert (events, error, offset) == (ref_events, ref_error, ref_offset)
            assert [list(e) for e in events] == [list(e) for e in ref_events]  # the keys in the same order too
            assert digest == hashlib.sha256(blob[:offset]).hexdigest()
        # A worker vouches for a span exactly when check_line takes every line of it
        # (the first line's link and the schema are the caller's to judge).
        info = os.stat(path)
        span = parallel_verify.check_span(os.fspath(path), (info.st_dev, info.st_ino), 0, len(blob), layout_fields(layout))
        assert (span is not None) == _span_clean(lines, layout)


def layout_fields(layout: ChainLayout) -> tuple[str, str, str, str]:
    return layout.sequence_field, layout.prev_field, layout.hash_field, layout.schema_field


def _span_clean(lines: list[bytes], layout: ChainLayout) -> bool:
    """check_line over the lines, linked from the first line's own sequence and previous hash,
    with every schema value taken (a worker leaves schemas to the caller)."""
    layout = ChainLayout(layout.sequence_field, layout.prev_field, layout.hash_field, layout.schema_field, lambda _: "ok")
    try:
        first = canonical.decode(lines[0])
    except Exception:
        return False
    if type(first) is not dict or type(first.get(layout.sequence_field)) is not int:
        return False
    at = Position(0, first[layout.sequence_field] - 1, first.get(layout.prev_field))
    for line in lines:
        try:
            event = check_line(line, layout, at, "core")
        except LoopstateError:
            return False
        at = Position(at.offset + len(line) + 1, event[layout.sequence_field], event[layout.hash_field])
    return True


def test_a_long_scan_stopped_early_or_at_an_error_keeps_a_digest_of_exactly_the_verified_bytes(core_project, monkeypatch):
    """The digest thread is fed once per chunk; stopping the scan anywhere must still finish it."""
    monkeypatch.setattr(stream_module, "DIGEST_THREAD_MIN_BYTES", 0)
    monkeypatch.setattr(stream_module, "CHUNK", 4096)  # many chunks, so many hand-offs to the thread
    layout = _layout("event_hash")
    lines, at = [], Position()
    for i in range(400):
        event, line = seal({"schema_version": 1, "n": i, "text": "x" * (i % 97)}, layout, at)
        at = Position(at.offset + len(line), event["seq"], event["event_hash"])
        lines.append(line)
    bad = 301
    blob = b"".join(lines[:bad]) + lines[bad].replace(b'"n":', b'"n": ', 1) + b"".join(lines[bad + 1:])
    write_stream(core_project, "core", blob)

    stream = Stream(core_project.dir, "core", layout)
    reader = stream.read_new()
    for _ in range(150):
        next(reader)
    reader.close()  # a caller that stops reading half way
    assert stream.position.sequence == 150
    assert stream.prefix_digest() == hashlib.sha256(blob[:stream.position.offset]).hexdigest()

    stream = Stream(core_project.dir, "core", layout)
    with pytest.raises(LoopstateError) as caught:
        for _ in stream.read_new():
            pass
    assert caught.value.details["sequence"] == bad + 1 and stream.position.sequence == bad
    assert stream.prefix_digest() == hashlib.sha256(blob[:stream.position.offset]).hexdigest()
