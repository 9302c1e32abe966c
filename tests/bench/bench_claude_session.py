"""Hook time as the host sees it: the wall time of a real Claude Code session with and without loopstate.

Two private homes (HOME + CLAUDE_CONFIG_DIR, tests/hosts/claude_kit.py): one
after `loopstate setup apply --host claude` (six hooks and the MCP server), one
bare. Round by round, alternating which goes first, each runs the same
`claude -p` session against the scripted model server: a prompt, one Bash tool
call, a final answer (so SessionStart, UserPromptSubmit, PreToolUse, Stop and
SessionEnd all run once, and the MCP server starts). The loopstate home has a
claim recorded, so its SessionStart and UserPromptSubmit inject.

Prints the median and p90 wall per home and their ratio (the target: hooks +
MCP add under 10% to a real session).
Usage: python tests/bench/bench_claude_session.py [--rounds 9] [--no-mcp]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

HOSTS = Path(__file__).resolve().parents[1] / "hosts"
sys.path[:0] = [str(HOSTS), str(HOSTS.parents[1])]

from claude_kit import ClaudeHome  # noqa: E402
from modelserver import Text, ToolCall  # noqa: E402

SCRIPT = [[ToolCall("Bash", {"command": "true", "description": "a no-op"})], [Text("done")]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--no-mcp", action="store_true", help="register the hooks only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-claude-") as tmp:
        homes = {"with loopstate": ClaudeHome(Path(tmp) / "with"), "without": ClaudeHome(Path(tmp) / "without")}
        ours = homes["with loopstate"]
        ours.loopstate("setup", "apply", "--host", "claude", "--no-mcp" if args.no_mcp else "--mcp")
        ours.session("/intent remember keep the session short", [[Text("ok")]])
        walls: dict[str, list[float]] = {name: [] for name in homes}
        for home in homes.values():  # one untimed session each: the host's own first-start work
            home.session("warm up", SCRIPT)
        for round_ in range(args.rounds):
            order = list(homes) if round_ % 2 == 0 else list(reversed(homes))
            for name in order:
                walls[name].append(homes[name].session("run the no-op", SCRIPT).wall)
    base = statistics.median(walls["without"])
    print(f"claude -p session, {args.rounds} rounds ({'hooks only' if args.no_mcp else 'hooks + MCP server'})")
    print(f"{'home':<16}{'median s':>10}{'p90 s':>10}{'ratio':>8}")
    for name, values in walls.items():
        p90 = sorted(values)[max(0, round(0.9 * len(values)) - 1)]
        print(f"{name:<16}{statistics.median(values):>10.3f}{p90:>10.3f}{statistics.median(values) / base:>8.2f}")


if __name__ == "__main__":
    main()
