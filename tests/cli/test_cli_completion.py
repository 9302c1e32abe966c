"""`loopstate completion SHELL`: scripts generated from the whole parser, checked by the shells themselves."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from clirun import cli

from tests.conftest import PREREQUISITE_MISSING

CHECKS = {"bash": ["bash", "-n"], "zsh": ["zsh", "-n"], "fish": ["fish", "--no-execute"]}


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_a_completion_script_is_generated_for_each_shell(shell: str, root: Path, data_dir: Path, tmp_path: Path) -> None:
    done = cli("completion", shell, cwd=root, data_dir=data_dir)
    assert done.returncode == 0, done.stderr
    script = done.stdout
    # Every verb and a nested verb's flag are in it: it was made from the whole parser.
    for word in ("intent", "goals", "verify", "recover", "completion", "hook-context", "--dry-run"):
        assert word in script, (shell, word)
    path = tmp_path / f"loopstate.{shell}"
    path.write_text(script)
    if shell != "bash" and shutil.which(shell) is None:
        pytest.skip(f"{PREREQUISITE_MISSING} {shell} is not installed here; the script was generated but not parsed")
    checked = subprocess.run([*CHECKS[shell], str(path)], capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0, checked.stderr


def test_bash_completes_verbs_and_flags_from_the_script(root: Path, data_dir: Path, tmp_path: Path) -> None:
    path = tmp_path / "loopstate.bash"
    path.write_text(cli("completion", "bash", cwd=root, data_dir=data_dir).stdout)

    def complete(line: str) -> list[str]:
        words = line.split(" ")
        probe = (f"source {path}; COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
                 f"COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; _shtab_loopstate; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
        return subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=60).stdout.split()

    assert complete("loopstate goals bo") == ["board"]
    assert "--dry-run" in complete("loopstate recover --d")


def test_an_unknown_shell_is_refused_with_the_shells_listed(root: Path, data_dir: Path) -> None:
    done = cli("completion", "tcsh", cwd=root, data_dir=data_dir)
    assert done.returncode == 1 and "bash, zsh, fish" in done.stderr
