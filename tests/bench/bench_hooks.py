"""Hook cost: a fresh `loopstate hook` process per prompt and per tool call, beside the runtimes' floors.

Builds a throwaway store whose intent ledger, one goal and one run each hold
about EVENTS events (default 10,000; bench_cli.build), binds two host sessions
(one plain, one bound to the run through LOOPSTATE_RUN), then times, round by
round and interleaved with the references `python -c pass`,
`python -c "import msgspec"` and `node -e 0` (the upstream hooks' runtime):

* PreToolUse, no run bound, no kill switch (the path every tool call takes);
* PreToolUse of the session bound to the run (reads the run's log);
* UserPromptSubmit, an ordinary prompt whose context did not change (a stat of
  each input tells it so);
* UserPromptSubmit after a change: before each timed run this process appends
  one claim to the intent ledger (untimed), so the hook reads the ledger and
  injects;
* SessionStart (injects the context).

Prints p50/p90 wall per command and its ratio to the msgspec reference.
Usage: python tests/bench/bench_hooks.py [--events 10000] [--rounds 30]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from bench_cli import bench_env, build, loopstate_command  # noqa: E402

from loopstate_protocol import intent as i  # noqa: E402

from loopstate.service import Service  # noqa: E402


CHANGED = "hook UserPromptSubmit (after a change)"


def timed(argv: list[str], env: dict[str, str], cwd: str, stdin: bytes | None) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if done.returncode != 0 or (stdin is not None and b"systemMessage" in done.stdout):
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stdout.decode()} {done.stderr.decode()}")
    return elapsed


def payload(event: str, root: Path, session: str, **fields: object) -> bytes:
    base = {"session_id": session, "cwd": str(root), "hook_event_name": event, "transcript_path": None,
            "permission_mode": "default"}
    return json.dumps({**base, **fields}).encode()


def main() -> None:
    options = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    options.add_argument("--events", type=int, default=10_000)
    options.add_argument("--rounds", type=int, default=30)
    args = options.parse_args()
    ls = loopstate_command()
    with tempfile.TemporaryDirectory(prefix="bench-hooks-") as tmp:
        data_dir = Path(tmp) / "data"
        root = Path(tmp) / "project"
        root.mkdir()
        env = bench_env(data_dir)
        started = time.perf_counter()
        service = Service(data_dir=data_dir)
        ids = build(service, str(root), args.events)
        print(f"store: {args.events} events each in intent, goals.bench and one run's stream "
              f"(built in {time.perf_counter() - started:.1f} s)")
        bound = {**env, "LOOPSTATE_RUN": ids["run_id"]}
        hook = [*ls, "hook", "claude"]
        tool = {"tool_name": "Bash", "tool_input": {"command": "ls"}, "tool_use_id": "toolu_1"}
        for session, session_env in (("plain", env), ("bound", bound)):  # bind both sessions first
            timed([*hook, "SessionStart"], session_env, str(root), payload("SessionStart", root, session, source="startup"))
        changes = iter(range(1, 1 << 30))

        def change() -> None:
            """One more project-wide claim in the intent ledger: the next prompt's context differs."""
            n = next(changes)
            claim = i.ClaimInput(statement=f"change {n}", role="user", epistemic_status="explicit", facets=["outcome"],
                                 scope="project")  # in every task's view: the session's context changes, and is injected
            service.execute(str(root), i.IntentClaimAdd(task_id=ids["task_id"], actor="user", claim=claim), f"change-{n}")

        commands: dict[str, tuple[list[str], dict[str, str], bytes | None]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], env, None),
            'python -c "import msgspec"': ([sys.executable, "-c", "import msgspec"], env, None),
        }
        if shutil.which("node"):
            commands["node -e 0"] = (["node", "-e", "0"], env, None)
        commands |= {
            "hook PreToolUse (no run, no switch)": ([*hook, "PreToolUse"], env, payload("PreToolUse", root, "plain", **tool)),
            "hook PreToolUse (bound run)": ([*hook, "PreToolUse"], bound, payload("PreToolUse", root, "bound", **tool)),
            "hook UserPromptSubmit (unchanged)": ([*hook, "UserPromptSubmit"], env,
                                                  payload("UserPromptSubmit", root, "plain", prompt="go on")),
            CHANGED: ([*hook, "UserPromptSubmit"], env, payload("UserPromptSubmit", root, "plain", prompt="go on")),
            "hook SessionStart (injects)": ([*hook, "SessionStart"], env,
                                            payload("SessionStart", root, "plain", source="resume")),
        }
        for name, (argv, run_env, stdin) in commands.items():  # warm the page cache and .pyc files: warm starts
            if name == CHANGED:
                change()
            timed(argv, run_env, str(root), stdin)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, (argv, run_env, stdin) in commands.items():
                if name == CHANGED:
                    change()
                times[name].append(timed(argv, run_env, str(root), stdin))
        reference = statistics.median(times['python -c "import msgspec"'])
        print(f"\n{args.rounds} rounds, interleaved; wall per fresh process\n")
        print(f"{'command':<40} {'p50 ms':>8} {'p90 ms':>8} {'x msgspec':>10}")
        for name, samples in times.items():
            samples = sorted(samples)
            p50 = statistics.median(samples)
            p90 = samples[min(len(samples) - 1, round(0.9 * (len(samples) - 1)))]
            print(f"{name:<40} {p50 * 1000:>8.1f} {p90 * 1000:>8.1f} {p50 / reference:>10.2f}")


if __name__ == "__main__":
    main()
