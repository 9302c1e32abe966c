"""What loopstate adds to a real Codex session: `codex exec` wall time with and without it, side by side.

Three private Codex homes (tests/hosts/codex_kit: HOME, CODEX_HOME, a project, the scripted model server on
127.0.0.1), each set up as a user would:

- ``without``: Codex with the model server only;
- ``hooks``: after `loopstate setup apply --host codex --no-mcp --trust-hooks` (7 hooks, 4 of which run in
  this session: SessionStart, UserPromptSubmit, PreToolUse, Stop);
- ``hooks+mcp``: after `loopstate setup apply --host codex --mcp --trust-hooks` (the MCP entry is
  ``required``, so Codex waits for `loopstate mcp` before its first request).

Each session is the same script: one prompt, one shell call (``true``), one answer: two model requests. The
rounds interleave the three homes (one untimed warm-up each first), and the script prints the median and the
spread of each, and the ratios to ``without``. The model server answers at once, so this is the host's own
time plus what loopstate adds to it; a real model's seconds per request would dilute the ratio.

Usage: python tests/bench/bench_codex_session.py [--rounds 9]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

HOSTS = Path(__file__).resolve().parents[1] / "hosts"
sys.path[:0] = [str(HOSTS.parents[1]), str(HOSTS)]

from codex_kit import codex_kit, shell  # noqa: E402
from conftest import CODEX  # noqa: E402
from modelserver import Text  # noqa: E402

SCRIPT = [[shell("true", "call_true")], [Text("done")]]
SETUPS = {"without": None, "hooks": ("--no-mcp", "--trust-hooks"), "hooks+mcp": ("--mcp", "--trust-hooks")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    rounds = parser.parse_args().rounds
    if not CODEX.exists():
        sys.exit(f"the Codex CLI is not installed ({CODEX}): run `npm ci` in {HOSTS}")
    times: dict[str, list[float]] = {name: [] for name in SETUPS}
    with tempfile.TemporaryDirectory(prefix="bench-codex-") as tmp, ExitStack() as stack:
        kits = {}
        for name, flags in SETUPS.items():
            kit = stack.enter_context(codex_kit(Path(tmp) / name.replace("+", "-")))
            if flags is not None:
                kit.loopstate("setup", "apply", "--host", "codex", *flags)
            kits[name] = kit
        for round_ in range(rounds + 1):
            for name, kit in kits.items():
                kit.server.then(SCRIPT)
                session = kit.exec("run true")
                assert session.returncode == 0 and "done" in session.stdout, session.stderr
                assert (SETUPS[name] is None) == (session.hooks == []), (name, session.hooks)
                if round_:  # the first round warms up
                    times[name].append(session.seconds)
    base = statistics.median(times["without"])
    print(f"codex exec, one prompt, one shell call, one answer; {rounds} rounds interleaved")
    print(f"{'setup':<10} {'median s':>9} {'min':>7} {'max':>7} {'vs without':>11}")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"{name:<10} {median:9.3f} {min(seconds):7.3f} {max(seconds):7.3f} {median / base:10.2f}x")


if __name__ == "__main__":
    main()
