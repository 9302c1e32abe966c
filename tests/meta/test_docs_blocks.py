"""Every code block in README.md and docs/ that can run here runs as written.

Shell blocks (```sh, and ```console or plain blocks of `$ ` lines) run with
bash in a fresh temporary project with a private data dir and HOME, the
`loopstate` of this environment first on PATH; each must exit 0 (a console
command whose next line is a `loopstate: CODE: ...` refusal must exit 1 with
that code). JSON and TOML blocks must parse. A block that cannot run here
says why in an HTML comment on the line before it:

    <!-- docs-blocks: skip: the reason -->

and this test prints every skipped block with its reason (pytest -rs). The
files other helpers keep (benchmarks.md, protocol.md, storage.md,
editors.md) are classified by the table ``ELSEWHERE`` below instead of
comments in them. Other blocks (Lua, Mermaid, layouts, wire transcripts) are
not programs to run here and are listed as such.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FILES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SKIP = re.compile(r"^<!-- docs-blocks: skip: (.+?) -->$")
FENCE = re.compile(r"^```(\S*)")
REFUSAL = re.compile(r"^loopstate: ([A-Z_]+): ")

# (file, text the block starts with) -> why it cannot run here, for files whose text another helper keeps.
ELSEWHERE = {
    ("benchmarks.md", ".venv/bin/python tests/bench/"): "a benchmark: minutes of load; tests/bench/ runs them on demand",
    ("benchmarks.md", ".venv/bin/pip install"): "installs extras from the package index",
    ("benchmarks.md", "(cd tests/hosts && npm ci)"): "installs the real-host test packages from npm",
    ("editors.md", "$ loopstate root src/parser"): "src/parser stands for a folder of the reader's project",
}


def blocks():
    for path in FILES:
        lines = path.read_text(encoding="utf-8").split("\n")
        index = 0
        while index < len(lines):
            fence = FENCE.match(lines[index])
            if fence is None:
                index += 1
                continue
            end = index + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            marked = SKIP.match(lines[index - 1]) if index else None
            yield path, index + 1, fence.group(1), "\n".join(lines[index + 1:end]), marked.group(1) if marked else None
            index = end + 1


def classify(path: Path, lang: str, body: str, marked: str | None) -> tuple[str, str]:
    """(how to check the block, why when it is skipped)."""
    if marked is not None:
        return "skip", marked
    for (name, start), why in ELSEWHERE.items():
        if path.name == name and body.startswith(start):
            return "skip", why
    if lang == "sh":
        return "sh", ""
    if lang == "console" or (lang == "" and any(line.startswith("$ ") for line in body.split("\n"))):
        return "console", ""
    if lang == "json":
        if "..." in body or "…" in body:
            return "skip", "an excerpt: `...` elides fields"
        return "json", ""
    if lang == "toml":
        return "toml", ""
    return "skip", {"lua": "Neovim configuration: tests/editors runs the plugin in a real Neovim",
                    "mermaid": "a diagram (Mermaid), not a program"}.get(lang, "not a program: a layout, a listing or a wire transcript")


CASES = [pytest.param(path, line, lang, body, marked, id=f"{path.relative_to(REPO)}:{line}")
         for path, line, lang, body, marked in blocks()]


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("LOOPSTATE_DATA_DIR", "CODEX_HOME", "PLUGIN_DATA")}
    env.update(HOME=str(home), LOOPSTATE_DATA_DIR=str(tmp_path / "data"), XDG_STATE_HOME=str(home / ".state"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               GIT_AUTHOR_NAME="docs", GIT_AUTHOR_EMAIL="docs@example.com", GIT_COMMITTER_NAME="docs",
               GIT_COMMITTER_EMAIL="docs@example.com")
    return work, env


def _console_commands(body: str) -> list[tuple[str, str | None]]:
    """Each `$ ` command (continuation lines joined) and the refusal code its next output line shows, if any."""
    lines, out = body.split("\n"), []
    index = 0
    while index < len(lines):
        line = lines[index]
        index += 1
        if not line.startswith("$ "):
            continue
        command = line[2:]
        while command.endswith("\\") and index < len(lines):
            command = command[:-1] + lines[index]
            index += 1
        refused = REFUSAL.match(lines[index]) if index < len(lines) else None
        out.append((command, refused.group(1) if refused else None))
    return out


@pytest.mark.parametrize("path,line,lang,body,marked", CASES)
def test_the_block_runs_as_written(path: Path, line: int, lang: str, body: str, marked: str | None,
                                   tmp_path: Path) -> None:
    how, why = classify(path, lang, body, marked)
    if how == "skip":
        pytest.skip(f"not run here: {why}")
    if how == "json":
        json.loads(body)
        return
    if how == "toml":
        tomllib.loads(body)
        return
    work, env = _project(tmp_path)
    if how == "sh":
        done = subprocess.run(["bash", "-e", "-c", body], cwd=work, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{path.name}:{line}\n{body}\n--- stderr:\n{done.stderr}"
        return
    for command, refusal in _console_commands(body):
        done = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=300)
        if refusal is None:
            assert done.returncode == 0, f"{path.name}:{line}: {command}\n{done.stderr}"
        else:
            assert done.returncode == 1 and f"{refusal}:" in done.stderr, f"{path.name}:{line}: {command}\n{done.stderr}"


def test_every_skip_says_why() -> None:
    for path, line, lang, body, marked in blocks():
        how, why = classify(path, lang, body, marked)
        assert how != "skip" or len(why) > 10, f"{path.name}:{line} is skipped without a reason"
    assert any(classify(p, la, b, m)[0] in ("sh", "console") for p, _, la, b, m in blocks())
