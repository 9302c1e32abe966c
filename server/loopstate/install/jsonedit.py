"""Edits of a JSON text that leave every other byte where it was.

A user's ``settings.json`` carries their own layout (indentation, key order,
blank lines). Parsing and re-serializing it would rewrite all of it; here the
text is walked once to find each value's span, and an edit splices only the
bytes it adds or removes: one member or element, with its separating comma.
Strings and numbers are read by the standard library's decoder, so the walker
accepts exactly the JSON ``json.loads`` does (plus it refuses a key given twice).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class JsonEditError(ValueError):
    """The text is not JSON this module can edit (the message says where)."""


@dataclass
class Node:
    start: int
    end: int
    value: Any = None
    members: list[tuple[str, int, "Node"]] = field(default_factory=list)  # objects: (key, key start, value)
    items: list["Node"] = field(default_factory=list)  # arrays

    def member(self, key: str) -> "Node | None":
        return next((node for name, _, node in self.members if name == key), None)


def _skip(text: str, at: int) -> int:
    match = _SPACE.match(text, at)  # matches everywhere (possibly empty)
    return at if match is None else match.end()


def _where(text: str, at: int) -> str:
    line = text.count("\n", 0, at) + 1
    return f"line {line} column {at - (text.rfind(chr(10), 0, at) + 1) + 1}"


def _node(text: str, at: int) -> Node:
    if at >= len(text):
        raise JsonEditError(f"the text ends where a value was expected ({_where(text, at)})")
    char = text[at]
    if char == "{":
        node, at = Node(at, 0, {}), _skip(text, at + 1)
        if text.startswith("}", at):
            node.end = at + 1
            return node
        while True:
            if not text.startswith('"', at):
                raise JsonEditError(f"expected a quoted key at {_where(text, at)}")
            key, key_end = _DECODER.raw_decode(text, at)
            colon = _skip(text, key_end)
            if not text.startswith(":", colon):
                raise JsonEditError(f"expected ':' at {_where(text, colon)}")
            if key in node.value:
                raise JsonEditError(f"the key {key!r} appears twice in one object ({_where(text, at)})")
            child = _node(text, _skip(text, colon + 1))
            node.members.append((key, at, child))
            node.value[key] = child.value
            at = _skip(text, child.end)
            if text.startswith("}", at):
                node.end = at + 1
                return node
            if not text.startswith(",", at):
                raise JsonEditError(f"expected ',' or '}}' at {_where(text, at)}")
            at = _skip(text, at + 1)
    if char == "[":
        node, at = Node(at, 0, []), _skip(text, at + 1)
        if text.startswith("]", at):
            node.end = at + 1
            return node
        while True:
            child = _node(text, at)
            node.items.append(child)
            node.value.append(child.value)
            at = _skip(text, child.end)
            if text.startswith("]", at):
                node.end = at + 1
                return node
            if not text.startswith(",", at):
                raise JsonEditError(f"expected ',' or ']' at {_where(text, at)}")
            at = _skip(text, at + 1)
    try:
        value, end = _DECODER.raw_decode(text, at)
    except json.JSONDecodeError as exc:
        raise JsonEditError(f"{exc.msg} at {_where(text, at)}") from None
    if isinstance(value, float) and (value != value or abs(value) == float("inf")):
        raise JsonEditError(f"NaN and Infinity are not JSON ({_where(text, at)})")
    return Node(at, end, value)


def parse(text: str) -> Node:
    """The span tree of one JSON document (nothing but whitespace around it)."""
    start = _skip(text, 0)
    root = _node(text, start)
    if _skip(text, root.end) != len(text):
        raise JsonEditError(f"unexpected text after the JSON value at {_where(text, _skip(text, root.end))}")
    return root


@dataclass(frozen=True)
class Style:
    """The document's layout: an indent unit, or None for a one-line document."""

    indent: str | None
    newline: str

    @staticmethod
    def of(text: str) -> "Style":
        newline = "\r\n" if "\r\n" in text else "\n"
        match = re.search(r"[{\[][ \t]*\r?\n([ \t]+)\S", text)
        if match is None:
            return Style(None, newline)
        return Style(match.group(1), newline)

    def within(self, text: str, container: Node) -> "Style":
        """A non-empty container written on one line gets its new entry on that line too."""
        one_line = (container.members or container.items) and "\n" not in text[container.start:container.end]
        return Style(None, self.newline) if one_line else self

    def render(self, value: Any, depth: int) -> str:
        """``value`` as it would sit at nesting ``depth`` in this layout."""
        if self.indent is None:
            return json.dumps(value, ensure_ascii=False)
        text = json.dumps(value, ensure_ascii=False, indent=self.indent)
        return text.replace("\n", self.newline + self.indent * depth)

    def gap(self, depth: int) -> str:
        return " " if self.indent is None else self.newline + self.indent * depth


def insert_member(text: str, obj: Node, key: str, value: Any, depth: int) -> str:
    """Add ``"key": value`` as the last member of ``obj`` (at nesting ``depth``)."""
    style = Style.of(text).within(text, obj)
    member = json.dumps(key, ensure_ascii=False) + ": " + style.render(value, depth + 1)
    if not obj.members:
        inner = member if style.indent is None else style.gap(depth + 1) + member + style.gap(depth)
        return text[:obj.start + 1] + inner + text[obj.end - 1:]
    last = obj.members[-1][2]
    return text[:last.end] + "," + style.gap(depth + 1) + member + text[last.end:]


def append_item(text: str, arr: Node, value: Any, depth: int) -> str:
    """Add ``value`` as the last element of ``arr`` (at nesting ``depth``)."""
    style = Style.of(text).within(text, arr)
    item = style.render(value, depth + 1)
    if not arr.items:
        inner = item if style.indent is None else style.gap(depth + 1) + item + style.gap(depth)
        return text[:arr.start + 1] + inner + text[arr.end - 1:]
    last = arr.items[-1]
    return text[:last.end] + "," + style.gap(depth + 1) + item + text[last.end:]


def _cut(text: str, container: Node, starts: list[int], ends: list[int], index: int) -> str:
    if len(starts) == 1:  # the only one: the container becomes empty
        return text[:container.start + 1] + text[container.end - 1:]
    if index + 1 < len(starts):  # up to the next one, taking the comma after it
        return text[:starts[index]] + text[starts[index + 1]:]
    return text[:ends[index - 1]] + text[ends[index]:]  # the last: from the previous one's end


def remove_member(text: str, obj: Node, key: str) -> str:
    index = next(i for i, (name, _, _) in enumerate(obj.members) if name == key)
    return _cut(text, obj, [start for _, start, _ in obj.members], [node.end for _, _, node in obj.members], index)


def remove_item(text: str, arr: Node, index: int) -> str:
    return _cut(text, arr, [node.start for node in arr.items], [node.end for node in arr.items], index)
