"""The ``project/...`` topics: a project's runs, goals and kill switch, pushed when they change.

A domain topic follows one stream; these follow many (every run stream, every
goal stream, including those created later) and files that are not streams
(the kill switches), so they are not sequences of events. Their snapshot is
the result of the query of the same name (``project.runs``, ``project.goals``,
``project.kill_switch``), and their ``head`` is the topic's own: ``stream``
is the topic, ``sequence`` counts the distinct snapshots this subscription was
given (1: the subscribe result's), ``hash`` is the SHA-256 of the snapshot's
JSON. They deliver snapshots only (no ``since``, no ``events``).

What wakes one: the service's listener (any event folded of a run or goal
stream, by this process or caught up from another) and the store watcher (a
stream file created or written in the project's ``streams`` folder, a switch
file appearing or disappearing in its folder). Each wake recomputes the
snapshot once on the service thread (wakes during a computation coalesce into
one more) and pushes it only when it differs from the last one sent.
A snapshot that cannot be computed (a corrupt stream) is pushed as
``loopstate/streamError``; the next one that can is pushed with
``rewritten: true``, and the subscription goes on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from loopstate_protocol import project as proto
from loopstate_protocol.base import Head
from loopstate_protocol.errors import ErrorCode

from loopstate.core.errors import LoopstateError
from loopstate.core.project import Project

DOMAIN = "project"
# view -> the stream name prefix whose events change it (None: no stream does)
PREFIXES: dict[str, str | None] = {"runs": "runs.", "goals": "goals.", "kill_switch": None}
TOPICS = tuple(f"{DOMAIN}/{view}" for view in proto.TOPICS)


def is_project_topic(topic: str) -> bool:
    return topic.split("/", 1)[0] == DOMAIN


def parse(topic: str) -> str:
    """The view of a project topic; INVALID_PARAMS naming the topics for any other."""
    parts = topic.split("/")
    if len(parts) != 2 or parts[1] not in proto.TOPICS:
        raise LoopstateError(ErrorCode.INVALID_PARAMS,
                             f"unknown topic {topic!r}; the project topics are " + ", ".join(TOPICS), topic=topic)
    return parts[1]


def digest(snapshot: Any) -> str:
    return hashlib.sha256(msgspec.json.encode(snapshot)).hexdigest()


def switch_files(root: str, data_dir: Path | None) -> tuple[Path, ...]:
    """The switch files whose appearance or removal changes the project's runs and kill switch:
    its configured switches (an invalid config: the defaults) and each enclosing project's ``.loopstate/STOP``."""
    from loopstate.core.discovery import enclosing_projects
    from loopstate.core.killswitch import DEFAULT_KILL_SWITCH, DEFAULT_KILL_SWITCHES, switch_path
    from loopstate.service.front import kill_switch_paths

    try:
        own = kill_switch_paths(root)
    except LoopstateError:
        own = tuple(switch_path(root, configured) for configured in DEFAULT_KILL_SWITCHES)
    outer = tuple(Path(folder) / DEFAULT_KILL_SWITCH for folder in enclosing_projects(root, data_dir))
    return (*own, *outer)


@dataclass
class ProjectSubscription:
    """One ``project/<view>`` subscription and its delivery state (touched on the event loop)."""

    id: str
    topic: str
    root: str
    project: Project
    view: str
    switches: tuple[Path, ...]
    sequence: int  # snapshots delivered, the subscribe result's counted
    last_hash: str
    released: bool = False
    wanted: bool = False  # a wake came: compute again
    computing: bool = False
    errored: bool = False  # the last computation failed: the next good one is sent as rewritten
    pending: tuple[Any, str, bool] | None = None  # (snapshot, hash, rewritten) to send
    error: LoopstateError | None = None
    folders: set[Path] = field(default_factory=set)

    @property
    def prefix(self) -> str | None:
        return PREFIXES[self.view]

    @property
    def streams_folder(self) -> Path:
        return self.project.dir / "streams"

    def watched_folders(self) -> set[Path]:
        folders = {switch.parent for switch in self.switches} if self.view != "goals" else set()
        if self.prefix is not None:
            folders.add(self.streams_folder)
        return folders

    def concerns_stream(self, stream: str) -> bool:
        return self.prefix is not None and stream.startswith(self.prefix)

    def concerns_file(self, folder: Path, name: str | None) -> bool:
        if self.prefix is not None and folder == self.streams_folder:
            return name is None or (name.startswith(self.prefix) and name.endswith(".jsonl"))
        if self.view == "goals":
            return False
        return any(switch.parent == folder and (name is None or switch.name == name) for switch in self.switches)

    def head(self, sequence: int, hash_: str) -> Head:
        return Head(stream=self.topic, sequence=sequence, hash=hash_)


def snapshot_of(service: Any, root: str, view: str) -> tuple[Any, str]:
    """The topic's snapshot as builtins, and its digest (service thread)."""
    snapshot = msgspec.to_builtins(service.query(root, proto.TOPICS[view]()))
    return snapshot, digest(snapshot)
