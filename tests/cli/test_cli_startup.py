"""What a fresh `loopstate` process imports: only the verb it runs (a hook pays startup on every prompt)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from loopstate.cli.main import SUBCOMMANDS, build_parser


def loaded_by(*argv: str, cwd: Path) -> set[str]:
    """The modules a real `loopstate ARGV` process has loaded when it exits."""
    probe = ("import json, sys\n"
             "from loopstate.cli.main import main  # as the console script does\n"
             "try:\n    main()\n"
             "except SystemExit:\n    pass\n"
             "sys.stderr.write('\\nMODULES ' + json.dumps(sorted(sys.modules)))\n")
    done = subprocess.run([sys.executable, "-c", probe, *argv], cwd=cwd, capture_output=True, text=True, timeout=60)
    return set(json.loads(done.stderr.rsplit("MODULES ", 1)[1]))


def test_version_imports_neither_the_service_nor_any_verb_nor_msgspec(root: Path, data_dir: Path) -> None:
    modules = loaded_by("--version", cwd=root)
    assert "loopstate.cli.main" in modules
    assert not {m for m in modules if m.startswith(("loopstate.service", "loopstate.core", "loopstate.domains"))}
    # cli.terminal guards every command's terminal output and typed arguments (the re module argparse loads anyway).
    assert not {m for m in modules if m.startswith("loopstate.cli.")
                and m not in ("loopstate.cli.main", "loopstate.cli.parser", "loopstate.cli.terminal")}
    assert "msgspec" not in modules and "shtab" not in modules


@pytest.mark.parametrize(("argv", "module", "absent"), [
    (["intent", "show"], "loopstate.cli.intent", ("loopstate.cli.goals", "loopstate.cli.runs", "loopstate.domains.runs", "loopstate.domains.goals")),
    (["goals", "list"], "loopstate.cli.goals", ("loopstate.cli.intent", "loopstate.cli.runs", "loopstate.domains.intent")),
    (["verify"], "loopstate.cli.store", ("loopstate.cli.intent", "loopstate.cli.goals", "loopstate.cli.runs")),
    # A runs read folds with the domain's state and projections; its decide side is a command's.
    (["run", "list"], "loopstate.domains.runs.state", ("loopstate.domains.runs.decide", "loopstate.domains.runs.grants",
                                                       "loopstate.domains.runs.plan", "getpass",
                                                       "loopstate.domains.intent", "loopstate.domains.goals")),
])
def test_a_read_imports_only_its_own_verb_module(root: Path, data_dir: Path, argv: list[str], module: str,
                                                absent: tuple[str, ...]) -> None:
    modules = loaded_by(*argv, cwd=root)
    assert module in modules
    assert not modules & set(absent)
    assert "shtab" not in modules


@pytest.mark.parametrize("argv", [["intent", "show"], ["goals", "board", "g"], ["run", "list"], ["verify"]])
def test_a_read_defines_no_dataclass_and_imports_no_shutil(root: Path, data_dir: Path, argv: list[str]) -> None:
    """A dataclass compiles its methods when it is defined (0.25-0.7 ms each, ~5 ms for the dozen a read
    used to load): the record classes on the read paths are msgspec Structs. And argparse's formatters
    are given their width (cli/parser.help_width), so none imports shutil (~1.5 ms with bz2 and lzma)."""
    assert not loaded_by(*argv, cwd=root) & {"dataclasses", "shutil"}


def test_the_verb_table_names_exactly_the_verbs_each_module_registers() -> None:
    import importlib

    for module, verbs in SUBCOMMANDS.items():
        parser = argparse.ArgumentParser()
        sub = parser.add_subparsers()
        importlib.import_module(module).register(sub)
        assert tuple(sub.choices) == verbs, module


def test_the_narrow_parser_reads_argv_as_the_whole_one_does(root: Path) -> None:
    from loopstate.cli.main import parser_for

    for argv in (["intent", "show", "--json"], ["--root", str(root), "goals", "board", "g"],
                 ["run", "status", "R", f"--root={root}"], ["verify", "--root", str(root)]):
        narrow, whole = parser_for(argv).parse_args(argv), build_parser().parse_args(argv)
        assert {k: v for k, v in vars(narrow).items() if k not in ("func", "build")} == {
            k: v for k, v in vars(whole).items() if k not in ("func", "build")}


def test_top_level_help_lists_every_verb(root: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "--help"], cwd=root, capture_output=True,
                          text=True, timeout=60)
    for verbs in SUBCOMMANDS.values():
        for verb in verbs:
            assert verb in done.stdout, verb


def test_the_plain_hook_form_builds_no_parser_and_any_other_form_is_parsed(root: Path, data_dir: Path) -> None:
    """`hook HOST EVENT` is what every host registration runs: answered without argparse. Help, an option
    or a stray word still go through the hook's parser, which says what is wrong."""
    from loopstate.cli.main import is_plain_hook

    assert is_plain_hook(["hook", "claude", "PreToolUse"]) and is_plain_hook(["hook"])
    assert not is_plain_hook(["hook", "--help"]) and not is_plain_hook(["hook", "claude", "PreToolUse", "x"])
    assert not is_plain_hook(["--root", str(root), "hook", "claude", "PreToolUse"])
    modules = loaded_by("hook", "claude", "PostToolUse", cwd=root)
    assert "loopstate.cli.hook" in modules and not {"argparse", "loopstate.cli.parser"} & modules
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "hook", "claude", "PreToolUse", "extra"],
                          cwd=root, capture_output=True, text=True, timeout=60, input="")
    assert done.returncode == 2 and "unrecognized arguments: extra" in done.stderr and done.stdout == ""
    done = subprocess.run([sys.executable, "-m", "loopstate.cli.main", "hook", "--help"], cwd=root,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "usage: loopstate hook" in done.stdout


def _verbs_of(parser: argparse.ArgumentParser) -> dict[str, object]:
    return next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))


def test_the_narrow_parser_builds_only_the_sub_verb_argv_names() -> None:
    """`run status RUN` builds `run` and `status`, not the other 28 parsers of `run`'s tree."""
    from loopstate.cli.main import parser_for

    run = _verbs_of(parser_for(["run", "status", "R"]))["run"]
    built = {name for name, parser in _verbs_of(run).items() if isinstance(parser, argparse.ArgumentParser)}
    assert built == {"status"}
    assert set(_verbs_of(run)) == set(_verbs_of(_verbs_of(build_parser())["run"]))  # every name is still known
    grant = _verbs_of(_verbs_of(_verbs_of(parser_for(["run", "authority", "grant"]))["run"])["authority"])
    assert isinstance(grant["grant"], argparse.ArgumentParser) and not isinstance(grant["revoke"], argparse.ArgumentParser)


@pytest.mark.parametrize("argv", [
    ["run", "stauts", "R"], ["run", "--help"], ["run"], ["run", "status"], ["run", "status", "R", "--jsn"],
    ["run", "authority", "grant", "--help"], ["run", "authority", "revok"], ["goals", "bord", "g"],
    ["goals", "board", "--help"], ["intent", "show", "--help"], ["intent", "hook-context"], ["intent", "sho"],
    ["setup", "plan", "--host", "nope"], ["run", "issue", "open", "R", "--help"],
])
def test_the_narrow_parser_says_what_the_whole_one_says(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """Help, usage and every refusal read the same from the narrow parser as from the whole one."""
    from loopstate.cli.main import parser_for

    def said(parser: argparse.ArgumentParser) -> tuple[object, ...]:
        try:
            parsed = {k: v for k, v in vars(parser.parse_args(argv)).items() if k not in ("func", "build")}
            code = None
        except SystemExit as stop:
            parsed, code = None, stop.code
        out = capsys.readouterr()
        return code, out.out, out.err, parsed

    assert said(parser_for(argv)) == said(build_parser())


def test_a_read_compiles_no_redaction_pattern(root: Path, data_dir: Path) -> None:
    """The ~25 credential patterns are compiled for the first text redacted, which a read never has."""
    probe = ("import sys\n"
             "from loopstate.cli.main import main\n"
             "try:\n    main()\n"
             "except SystemExit:\n    pass\n"
             "from loopstate.core import redaction\n"
             "sys.stderr.write('\\nCOMPILED %d' % redaction._patterns.cache_info().currsize)\n")
    done = subprocess.run([sys.executable, "-c", probe, "run", "list"], cwd=root, capture_output=True, text=True,
                          timeout=60)
    assert "loopstate.core.redaction" in loaded_by("run", "list", cwd=root)
    assert done.stderr.rsplit("COMPILED ", 1)[1] == "0"


def test_a_sub_verb_the_narrow_parser_did_not_build_is_parsed_by_the_whole_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should argparse ever choose a sub-verb by less than its whole name, the unbuilt one says so and
    main's parse falls back to the whole tree (here forced: a parser narrowed to other words)."""
    from loopstate.cli import main as entry
    from loopstate.cli.parser import NotBuilt

    narrowed_elsewhere = entry.parser_for(["run", "status", "R"])
    with pytest.raises(NotBuilt):
        narrowed_elsewhere.parse_args(["run", "list"])
    monkeypatch.setattr(entry, "parser_for", lambda argv: narrowed_elsewhere)
    assert entry.parse_argv(["run", "list", "--json"]).json is True
