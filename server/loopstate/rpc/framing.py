"""LSP base framing: header lines, a blank line, then exactly Content-Length bytes of JSON.

A header block is usable when every line in it is ``Name: value`` (a name of
HTTP token characters, case-insensitive; lines end in CRLF, a bare LF is
accepted) and it carries exactly one Content-Length, a decimal count of bytes
no larger than MAX_BODY. Other headers (Content-Type) are accepted and ignored;
blank lines between frames are skipped.

pygls's reader skips a header block it cannot parse and, once a frame's length
is wrong, never finds the start of a frame again. This reader reports each
unusable block (the caller answers it with PARSE_ERROR) and then
resynchronises as LSP servers do: it discards input up to the next
``Content-Length:`` header and reads a header block from there. The search
starts inside the offending line, so a frame whose blank line is missing, or
whose body ran into the next frame's header, costs that frame and no other. A
header block is never guessed at: a second Content-Length is refused (not
last-one-wins), and so is one that is signed, not a number, or too large to
have been meant. Input that ends inside a frame is reported once, then the end.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from loopstate.core.errors import quote

MAX_BODY = 64 << 20  # a larger frame is refused, not buffered
LINE_LIMIT = 1 << 16  # a longer header line is refused, not buffered
CHUNK = 1 << 16
HINT = "frame each message as 'Content-Length: N\\r\\n\\r\\n' + N bytes of JSON"

_TOKEN = re.compile(rb"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# The start of a frame when resynchronising: the header's name, not part of a longer name.
_HEADER = re.compile(rb"(?<![!#$%&'*+.^_`|~0-9A-Za-z-])content-length:", re.IGNORECASE)
_HEADER_LEN = len(b"content-length:")
_DIGITS = re.compile(rb"[0-9]{1,12}")  # more than 12 digits is past any MAX_BODY


@dataclass(frozen=True)
class BadFrame:
    """A header block that cannot be used; ``reason`` says why (and what to do)."""

    reason: str


def encode_frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class FrameReader:
    """Reads frames from an asyncio StreamReader: body bytes, a BadFrame, or None at the end."""

    def __init__(self, stream: asyncio.StreamReader, line_limit: int = LINE_LIMIT) -> None:
        self.stream = stream
        self.line_limit = line_limit
        self.buf = bytearray()
        self.at_eof = False
        self.seek_from: int | None = None  # set after a bad block: where the search for a header starts

    async def read(self) -> bytes | BadFrame | None:
        if self.seek_from is not None and not await self._seek():
            return None
        length: int | None = None
        started = False
        while True:
            end = await self._line_end()
            if end is None:
                return self._ended(started)
            if end < 0:
                return self._lost(f"a header line is longer than {self.line_limit} bytes", 1)
            line = bytes(self.buf[:end]).removesuffix(b"\r")
            if not line:
                del self.buf[:end + 1]
                if started:
                    break
                continue  # a blank line between frames
            started = True
            name, colon, value = line.partition(b":")
            if not colon or not _TOKEN.fullmatch(name):
                return self._lost(f"header line {quote(line.decode('utf-8', 'replace'), 60)} is not 'Name: value' "
                                  "(a body without its blank line, or a wrong Content-Length before it)", 1)
            if name.lower() == b"content-length":
                text = value.strip(b" \t")
                if length is not None:
                    return self._lost("the header block has a second Content-Length; send exactly one", 1)
                if not _DIGITS.fullmatch(text):
                    shown = quote(text.decode("utf-8", "replace"), 40)
                    if text.isdigit():
                        return self._lost(f"Content-Length {shown} is larger than the {MAX_BODY}-byte limit", 1)
                    return self._lost(f"Content-Length {shown} is not a whole number of bytes", 1)
                length = int(text)
                if length > MAX_BODY:
                    return self._lost(f"Content-Length {length} is larger than the {MAX_BODY}-byte limit", 1)
            del self.buf[:end + 1]
        if length is None:
            return self._lost("the header block has no Content-Length", 0)
        body = await self._exactly(length)
        if body is None:
            return BadFrame(f"the input ended inside a {length}-byte body")
        return body

    def _lost(self, problem: str, seek_from: int) -> BadFrame:
        """Report a bad block and resynchronise from ``seek_from`` bytes into the buffer."""
        self.seek_from = seek_from
        return BadFrame(f"{problem}; {HINT} (input up to the next Content-Length header is skipped)")

    def _ended(self, started: bool) -> BadFrame | None:
        """The end of input: a partial header block is reported once, then None."""
        if not started and not self.buf.strip():
            return None
        self.buf.clear()
        return BadFrame("the input ended inside a header block")

    async def _fill(self) -> bool:
        """Read more input into the buffer; False at the end of input."""
        if self.at_eof:
            return False
        chunk = await self.stream.read(CHUNK)
        if not chunk:
            self.at_eof = True
            return False
        self.buf += chunk
        return True

    async def _line_end(self) -> int | None:
        """The index of the next line's ``\\n`` in the buffer; -1 past the line limit; None at the end."""
        searched = 0
        while True:
            end = self.buf.find(b"\n", searched)
            if end >= 0:
                return end if end <= self.line_limit else -1
            if len(self.buf) > self.line_limit:
                return -1
            searched = len(self.buf)
            if not await self._fill():
                return None

    async def _seek(self) -> bool:
        """Discard input up to the next Content-Length header; False at the end of input."""
        start = self.seek_from or 0
        while True:
            found = _HEADER.search(self.buf, start)
            if found is not None:
                del self.buf[:found.start()]
                self.seek_from = None
                return True
            # Keep the bytes a header split across reads may start in, and the one before it
            # for the look-behind (a header starting at the first kept byte would have been found).
            drop = max(0, len(self.buf) - _HEADER_LEN)
            if drop:
                del self.buf[:drop]
                start = 0
            if not await self._fill():
                self.buf.clear()
                return False

    async def _exactly(self, length: int) -> bytes | None:
        while len(self.buf) < length:
            if not await self._fill():
                self.buf.clear()
                return None
        body = bytes(self.buf[:length])
        del self.buf[:length]
        return body
