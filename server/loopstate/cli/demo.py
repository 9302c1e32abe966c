"""`loopstate demo`: the whole product end to end on a temporary store.

An "editor" starts a real `loopstate serve` over stdio and subscribes to the
intent snapshot, a goal's board and a run's status. A "harness" in other
processes (the `loopstate` CLI) records claims, adds todos, takes a lease, and
finally pulls the kill switch. Every change reaches the editor as a
`loopstate/changed` notification, printed here as a status bar would show it.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Iterable

from loopstate_protocol.client import LoopstateClient
from loopstate_protocol.messages import ChangedNotification

GOAL = "demo-goal"


def register(sub: argparse._SubParsersAction) -> None:
    demo = sub.add_parser("demo", help="run an editor and a harness against a temporary store and show the live updates")
    demo.add_argument("--keep", action="store_true", help="keep the temporary store and print where it is")
    demo.set_defaults(func=cmd_demo)


class Demo:
    def __init__(self, base: str) -> None:
        self.data_dir = os.path.join(base, "data")
        self.root = os.path.join(base, "workspace")
        os.mkdir(self.root)
        self.env = {**os.environ, "LOOPSTATE_DATA_DIR": self.data_dir}
        self.topics: dict[str, str] = {}

    def harness(self, *args: str) -> Any:
        """One CLI call in its own process, as a harness hook or sidecar would make it."""
        command = [sys.executable, "-m", "loopstate.cli.main", *args, "--root", self.root, "--json"]
        done = subprocess.run(command, env=self.env, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise SystemExit(f"demo: `{shlex.join(['loopstate', *args])}` failed:\n{done.stdout}{done.stderr}")
        print(f"  harness$ {shlex.join(['loopstate', *args])}")  # quoted: it runs as printed when pasted
        return json.loads(done.stdout) if done.stdout.strip() else None

    def status_bar(self, topic: str, snapshot: Any, head: Any) -> str:
        if topic.startswith("intent/"):
            disputes = len(snapshot.get("disagreements", []))
            text = f"intent: {snapshot.get('active_count', 0)} active claims, {disputes} disputes"
        elif topic.startswith("goals/"):
            todos = sum(len(group.get("todos", [])) for group in snapshot.get("active", []))
            gates = len(snapshot.get("user_inbox", []))
            last = snapshot["meta"]["last_append_sequence"]
            text = f"goal {GOAL}: {todos} open todos, {gates} user gates (projection at #{last})"
        else:
            run = (snapshot or {}).get("run") or {}
            text = f"run: {run.get('status')} (stage {run.get('stage')})"
        return f"  [status bar] {text}  @ {head['stream']}#{head['sequence']}"

    def expect_change(self, client: LoopstateClient) -> None:
        change = client.next_change(timeout=30)
        if not isinstance(change, ChangedNotification):
            raise SystemExit(f"demo: the stream failed: {change.message}")
        head = {"stream": change.head.stream, "sequence": change.head.sequence}
        print(self.status_bar(change.topic, change.snapshot, head))


def cmd_demo(args: argparse.Namespace) -> int:
    base = tempfile.mkdtemp(prefix="loopstate-demo-")
    try:
        demo = Demo(base)
        _run(demo)
    finally:
        if args.keep:
            print(f"\nstore kept at {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0


def _run(demo: Demo) -> None:
    print(f"workspace {demo.root}\nstore     {demo.data_dir}\n")
    server = [sys.executable, "-m", "loopstate.cli.main", "serve"]
    with LoopstateClient(server, env=demo.env) as editor:
        info = editor.initialize()
        capability = info["capabilities"]["experimental"]["loopstate"]
        print(f"editor: started `loopstate serve` (protocol {capability['protocolVersion']}, domains {', '.join(capability['domains'])})")

        sub = editor.subscribe(demo.root, "intent/snapshot")
        print(f"editor: subscribed to intent/snapshot at #{sub.head.sequence}")
        print("\nharness: the user states what they want")
        started = demo.harness(
            "intent", "start", "--label", "demo task",
            "--claim", "outcome:Add a --json flag to the export command",
            "--claim", "hard_constraint:Do not change the public API",
        )
        task_id = started["events"][0]["task_id"]
        demo.expect_change(editor)
        demo.harness("intent", "add", task_id, "Existing tests must keep passing", "--facet", "success_signal")
        demo.expect_change(editor)

        editor.subscribe(demo.root, f"goals/board/{GOAL}")
        print(f"\neditor: subscribed to goals/board/{GOAL}\nharness: the agent plans its work")
        demo.harness("goals", "add", GOAL, "Add --json to export", "--priority", "P0")
        demo.expect_change(editor)
        demo.harness("goals", "add", GOAL, "Document the flag", "--priority", "P1")
        demo.expect_change(editor)

        print("\nharness: the user grants bounded authority and the agent starts a run")
        grant = demo.harness(
            "run", "authority", "grant", "--level", "bounded", "--by", "demo-user", "--asset", "*",
            "--action", "local_write", "--destination", "repository",
            "--risk", "edits files in this workspace", "--confirm", "I approve bounded local edits",
            "--expires", "2999-01-01T00:00:00Z",
        )
        grant_id = _find(grant, "grant_id")
        created = demo.harness(
            "run", "create", "--grant", grant_id, "--objective", "Add --json to export",
            "--done-gate", "tests pass", "--asset", "demo-asset",
        )
        run_id = _find(created, "run_id")
        editor.subscribe(demo.root, f"runs/status/{run_id}")
        print(f"editor: subscribed to runs/status/{run_id}")
        demo.harness("run", "acquire", run_id, "--host", "codex", "--session", "demo-session")
        demo.expect_change(editor)

        print("\nuser: pulls the kill switch from another terminal")
        demo.harness("run", "stop")
        demo.expect_change(editor)

        editor.shutdown()
        code = editor.exit()
        print(f"\neditor: shut the server down (exit code {code})")

    check = subprocess.run(
        [sys.executable, "-m", "loopstate.cli.main", "verify", "--root", demo.root],
        env=demo.env, capture_output=True, text=True, timeout=60,
    )
    print("\n$ loopstate verify\n" + check.stdout.rstrip())
    if check.returncode != 0:
        raise SystemExit("demo: verify failed")


def _find(value: Any, key: str) -> str:
    """The first ``key`` anywhere in a JSON answer (ids sit at different depths per verb)."""
    children: Iterable[Any]
    if isinstance(value, dict):
        if isinstance(value.get(key), str):
            return value[key]
        children = value.values()
    elif isinstance(value, list):
        children = value
    else:
        children = ()
    for child in children:
        try:
            return _find(child, key)
        except LookupError:
            continue
    raise LookupError(key)
