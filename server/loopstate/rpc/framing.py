"""LSP base framing: ``Content-Length`` headers, a blank line, then the JSON body.

pygls's reader silently skips a header block it cannot parse and waits forever
on a malformed one; this reader reports each bad frame (so it can be answered
with a PARSE_ERROR) and carries on with the next header block. Header names are
case-insensitive, as in HTTP; a bare ``\\n`` line ending is accepted.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

MAX_BODY = 64 << 20  # a larger frame is refused (and skipped), not buffered
OVERLONG = b"\0overlong"  # stands for a header line longer than the reader's limit


@dataclass(frozen=True)
class BadFrame:
    """A header block that cannot be read; ``reason`` says why."""

    reason: str


def encode_frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class FrameReader:
    """Reads frames from an asyncio StreamReader: body bytes, a BadFrame, or None at EOF."""

    def __init__(self, stream: asyncio.StreamReader, line_limit: int) -> None:
        self.stream = stream
        self.line_limit = line_limit  # the StreamReader's limit: longer lines cannot be read whole

    async def _line(self) -> bytes | None:
        """One header line without its ending; None at EOF. Overlong lines are cut to a marker."""
        try:
            return (await self.stream.readuntil(b"\n")).rstrip(b"\r\n")
        except asyncio.IncompleteReadError:
            return None
        except asyncio.LimitOverrunError as exc:
            await self.stream.readexactly(exc.consumed)
            while True:  # discard the rest of the overlong line
                try:
                    await self.stream.readuntil(b"\n")
                    return OVERLONG
                except asyncio.LimitOverrunError as more:
                    await self.stream.readexactly(more.consumed)
                except asyncio.IncompleteReadError:
                    return None

    async def read(self) -> bytes | BadFrame | None:
        length: int | None = None
        problem: str | None = None
        seen_header = False
        while True:
            line = await self._line()
            if line is None:
                return None
            if not line:
                if not seen_header:
                    continue  # stray blank line between frames
                break
            seen_header = True
            issue = None
            name, sep, value = line.partition(b":")
            if line == OVERLONG:
                issue = f"a header line is longer than {self.line_limit} bytes"
            elif not sep:
                issue = f"header line {line[:60]!r} is not 'Name: value'"
            elif name.strip().lower() == b"content-length":
                text = value.strip()
                if text.isdigit():
                    length = int(text)
                else:
                    issue = f"Content-Length {text[:40]!r} is not a number of bytes"
            problem = problem or issue  # the first problem is reported; the length is kept to resync
        if problem is None and length is None:
            problem = "the header block has no Content-Length"
        if problem is not None:
            if length is not None and length <= MAX_BODY and not await self._skip(length):
                return None  # the length was readable: skip the body to stay in step
            return BadFrame(problem + "; frame each message as 'Content-Length: N\\r\\n\\r\\n' + N bytes of JSON")
        assert length is not None
        if length > MAX_BODY:
            if not await self._skip(length):
                return None
            return BadFrame(f"a {length}-byte message is larger than the {MAX_BODY}-byte limit")
        try:
            return await self.stream.readexactly(length)
        except asyncio.IncompleteReadError:
            return None

    async def _skip(self, length: int) -> bool:
        while length:
            chunk = await self.stream.read(min(length, 1 << 16))
            if not chunk:
                return False
            length -= len(chunk)
        return True
