"""`loopstate doctor`: the effects of checking each host, and the record of what was seen.

Per host (a harness status record): ``installed`` and ``version`` from the
host's CLI when it is on PATH (``claude --version``, a 5 s bound); ``discovery``
from every file the host reads hooks from: each of our events is registered
and its program exists; ``behavior`` from running each registered hook of ours
once with a synthetic input of that event, in a scratch project and data dir
of its own (so the probe never touches the user's stores), whose exit code
must be 0 and stdout what the host accepts; ``collisions``: other hooks on the
same events that can deny or block. The status and the probe (a
``harness_probe`` evidence record: procedure, per-hook outcome, observed_at) are
written to ``<data dir>/harnesses/<harness>.json``, replacing the last check.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from loopstate.core import safefs
from loopstate.core.clock import format_time, system_clock
from loopstate.core.errors import LoopstateError
from loopstate.install import probe
from loopstate.install.hosts import HOSTS, MCP_SERVER, Host, inspected_files, is_our_server, mcp_files, servers_key
from loopstate.install.registration import ConfigShapeError, handlers, load
from loopstate.install.setup import Places, read_regular
from loopstate.install.shapes import output_problem
from loopstate.service.run_records import SCHEMA_VERSION, to_dict, validate

VERSION_TIMEOUT = 5.0
MCP_TIMEOUT = 20.0
MCP_INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "loopstate-doctor", "version": "1"}}}
# How Claude Code 2.1.332 opens an MCP session (recorded from the real host in tests/hosts): the 2026-07-28
# revision's server/discover, its version and capabilities in _meta, no initialize.
CLAUDE_MCP_VERSION = "2026-07-28"
CLAUDE_MCP_DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
    "io.modelcontextprotocol/protocolVersion": CLAUDE_MCP_VERSION,
    "io.modelcontextprotocol/clientInfo": {"name": "loopstate-doctor", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"roots": {"listChanged": True}}}}}
DEFAULT_HOOK_TIMEOUT = 10.0
STDERR_SHOWN = 300


@dataclass
class HostReport:
    host: Host
    status: dict[str, Any]
    probe: dict[str, Any]
    problems: list[str] = field(default_factory=list)  # each says what failed and how to fix it
    notes: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # the files holding our hooks
    cli: bool = False  # the host's CLI is on PATH
    recorded: str | None = None

    @property
    def failed(self) -> bool:
        return "failed" in (self.status["discovery"], self.status["behavior"])


@dataclass
class Report:
    hosts: list[HostReport]
    problems: list[str]
    store: dict[str, Any] | None = None  # install/store_check.py: the store in use and whether it answers

    @property
    def ok(self) -> bool:
        return not self.problems and not any(h.failed for h in self.hosts)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "problems": self.problems, "store": self.store, "hosts": {
            h.host.name: {"harness": h.host.harness, "status": h.status, "probe": h.probe, "problems": h.problems,
                          "notes": h.notes, "files": h.files, "recorded": h.recorded} for h in self.hosts}}

    def text(self) -> str:
        lines = []
        for h in self.hosts:
            s = h.status
            lines.append(f"{h.host.label} ({h.host.harness})")
            installed = ("no" if not s["installed"] else f"yes, {s['version']}" if s["version"] else
                         "yes (loopstate's hooks are registered)" if not h.cli else "yes (its version is unknown)")
            lines.append(f"  installed: {installed}")
            where = f" ({', '.join(h.files)})" if h.files else ""
            lines.append(f"  discovery: {s['discovery']}{where}")
            results = h.probe["results"]
            passed = sum(r["outcome"] == "passed" for r in results)
            lines.append(f"  behavior:  {s['behavior']}" + (f" ({passed} of {len(results)} probes answered as the "
                                                            "host expects)" if results else ""))
            for c in s["collisions"]:
                lines.append(f"  collision: {c['name']}: {c['program']} in {c['sources'][0]} can also deny or block")
            lines += [f"  problem: {p}" for p in h.problems] + [f"  note: {n}" for n in h.notes]
            if h.recorded:
                lines.append(f"  recorded: {h.recorded}")
        if self.store is not None:
            from loopstate.install.store_check import text

            lines += text(self.store)
        lines += [f"problem: {p}" for p in self.problems if self.store is None or p != self.store["problem"]]
        lines.append("ok" if self.ok else "doctor found problems (each line above says how to fix it)")
        return "\n".join(lines) + "\n"


def _version(host: Host) -> tuple[bool, str | None]:
    program = shutil.which(host.version_command[0])
    if program is None:
        return False, None
    try:
        done = subprocess.run([program, *host.version_command[1:]], capture_output=True, text=True,
                              timeout=VERSION_TIMEOUT, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return True, None
    first = (done.stdout or done.stderr).strip().splitlines()
    return True, (first[0][:200] if done.returncode == 0 and first else None)


def _read_config(path: str) -> tuple[Any, str | None]:
    """One config file parsed (None when absent) and what is wrong with it, if anything."""
    try:
        data = read_regular(path, follow=True)  # links followed, as the host follows them: doctor only reads
        if data is None:
            return None, None
        return load("toml" if path.endswith(".toml") else "json", data.decode("utf-8")), None
    except LoopstateError as exc:
        return None, exc.message
    except OSError as exc:
        return None, f"{path} cannot be read ({exc.strerror or exc})"
    except UnicodeDecodeError as exc:
        return None, f"{path} is not UTF-8 text (byte {exc.start})"
    except ConfigShapeError as exc:
        return None, f"{path}: {exc}"


def _codex_hooks_disabled(config: Any, path: str) -> str | None:
    features = config.get("features") if isinstance(config, dict) else None
    for key in ("hooks", "codex_hooks"):
        if isinstance(features, dict) and features.get(key) is False:
            return (f"{path} turns hooks off ([features] {key} = false), so Codex runs none of them: remove that "
                    "line or set it to true")
    return None


def _spawn(argv: list[str], payload: bytes, timeout: float, what: str, scratch: Path,
           extra_env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess | None, str | None]:
    """Run one probe in the scratch project with the scratch data dir; (the process, None) or (None, why not)."""
    env = {**os.environ, **(extra_env or {}), "LOOPSTATE_DATA_DIR": str(scratch / "data")}
    try:
        return subprocess.run(argv, input=payload, capture_output=True, timeout=timeout, cwd=scratch / "project",
                              env=env), None
    except subprocess.TimeoutExpired:
        return None, f"it did not answer {what} within {timeout:g} s"
    except OSError as exc:
        return None, f"it could not be started: {exc.strerror}"


def _last_line(stderr: bytes) -> str:
    """Where a CLI says what went wrong: the last line of its stderr."""
    lines = stderr.decode("utf-8", "replace").strip().splitlines()
    return f": {lines[-1][:STDERR_SHOWN]}" if lines else ""


def _run_hook(host: Host, event: str, command: str, timeout: float, scratch: Path,
              prompt: str | None = None) -> dict[str, Any]:
    """One probe of a hook; with ``prompt``, a UserPromptSubmit of that prompt, reported as its own probe."""
    fields = probe.synthetic_input(host, event, str(scratch / "project"))
    if prompt is not None:
        fields["prompt"] = prompt
    payload = json.dumps(fields).encode()
    result: dict[str, Any] = {"event": event if prompt is None else f"{event} {prompt}", "outcome": "failed",
                              "problem": None}
    done, result["problem"] = _spawn(shlex.split(command), payload, timeout,
                                     "the synthetic input", scratch)
    if done is None:
        return result
    if done.returncode != 0:
        result["problem"] = f"it exited {done.returncode}{_last_line(done.stderr)}"
        return result
    result["problem"] = output_problem(host.name, event, done.stdout)
    if result["problem"] is None:
        result["outcome"] = "passed"
    if prompt is not None:
        result["stdout"] = done.stdout
    return result


def _runnable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _program_problem(program: str) -> str | None:
    return probe.program_problem(program, exists=_runnable, which=shutil.which)


def _command_problem(command: str) -> str | None:
    return probe.command_problem(command, exists=_runnable, which=shutil.which)


def _our_servers(host: Host, places: Places) -> list[tuple[str, dict[str, Any]]]:
    found: list[tuple[str, dict[str, Any]]] = []
    for path in mcp_files(host, home=places.home, codex_home=places.codex_home, project=places.project,
                          claude_config_dir=places.claude_config_dir):
        config, _ = _read_config(path)  # a file that cannot be read is reported with the hooks' files
        servers = config.get(servers_key("toml" if path.endswith(".toml") else "json")) if isinstance(config, dict) else None
        entry = servers.get(MCP_SERVER) if isinstance(servers, dict) else None
        if isinstance(entry, dict) and is_our_server(entry):
            found.append((path, entry))
    return found


def _mcp_answered(answer: Any) -> bool:
    """An initialize result (protocolVersion, serverInfo) or a 2026-07-28 server/discover result (the versions it
    supports, serverInfo in its _meta) to request 1."""
    result = answer["result"]
    if "supportedVersions" in result:
        return answer.get("id") == 1 and CLAUDE_MCP_VERSION in result["supportedVersions"] and (
            "io.modelcontextprotocol/serverInfo" in result["_meta"])
    return answer.get("id") == 1 and "protocolVersion" in result and "serverInfo" in result


def _probe_mcp(entry: dict, scratch: Path, request: dict[str, Any] = MCP_INITIALIZE) -> dict[str, Any]:
    """One MCP handshake request over the server's stdio (newline-delimited JSON-RPC), as the host opens with it;
    its answer must name the server."""
    method = request["method"]
    result: dict[str, Any] = {"event": f"MCP {method}", "outcome": "failed", "problem": None}
    extra = {k: str(v) for k, v in entry["env"].items()} if isinstance(entry.get("env"), dict) else {}
    done, result["problem"] = _spawn([entry["command"], *entry["args"]], json.dumps(request).encode() + b"\n",
                                     MCP_TIMEOUT, method, scratch, extra)
    if done is None:
        return result
    try:
        ok = _mcp_answered(json.loads(done.stdout.split(b"\n", 1)[0]))
    except (ValueError, KeyError, TypeError, AttributeError):
        ok = False
    if ok:
        result["outcome"] = "passed"
    else:
        result["problem"] = f"it exited {done.returncode} without a {method} result{_last_line(done.stderr)}"
    return result


@dataclass
class _Discovery:
    found: probe.Found
    servers: list[tuple[str, dict]]
    verdict: str
    missing: list[str]
    problems: list[str]
    notes: list[str]


def _discover(host: Host, places: Places, installed: bool) -> _Discovery:
    """Every file the host reads: our hooks and server entries, whether each can run, and what stops the host."""
    per_file, problems, notes, switched_off = [], [], [], None
    for path in inspected_files(host, home=places.home, codex_home=places.codex_home, project=places.project,
                                claude_config_dir=places.claude_config_dir):
        config, problem = _read_config(path)
        per_file.append((path, handlers(config)))
        if problem:
            problems.append(f"{problem} (the host cannot read it either)")
        if host.name == "claude" and isinstance(config, dict) and config.get("disableAllHooks") is True:
            switched_off = switched_off or (f"{path} sets disableAllHooks, so Claude Code runs no hook at all: "
                                            "remove that setting")
        if host.name == "codex" and path.endswith("config.toml"):
            switched_off = switched_off or _codex_hooks_disabled(config, path)
    found = probe.sort_handlers(host, per_file)
    servers = _our_servers(host, places)
    verdict = "failed" if problems else "verified"  # a config the host cannot read
    missing = probe.missing_events(host, found)
    if missing:
        verdict = "failed"
        problems.append(f"loopstate's hooks are not registered for {', '.join(missing)}: run `loopstate setup apply "
                        f"--host {host.name}` (add --scope project for this project only)")
    for path, handler in found.ours:
        if why := _command_problem(handler.command):
            verdict = "failed"
            problems.append(f"the {handler.event} hook in {path}: {why}: re-run `loopstate setup apply --host "
                            f"{host.name}` from the loopstate you mean to use")
    for path, entry in servers:
        if why := _program_problem(entry["command"]):
            verdict = "failed"
            problems.append(f"the MCP server {MCP_SERVER} in {path}: {why}: re-run `loopstate setup apply --host "
                            f"{host.name} --mcp` from the loopstate you mean to use")
    if switched_off:
        verdict = "failed"
        problems.append(switched_off)
    if host.name == "claude" and found.ours:
        claude_problems = _claude_problems(places, servers)
        verdict = "failed" if claude_problems else verdict
        problems += claude_problems
    if not servers:
        notes.append(f"no MCP server entry for loopstate: `loopstate setup apply --host {host.name} --mcp` adds one "
                     "(needs pip install 'loopstate[mcp]')")
    if host.name == "codex":
        trust, source = codex_trust(places, ask_codex=installed)
        if trust:
            trusted = sum(hook["status"] == "trusted" for hook in trust)
            notes.append(f"trust: Codex trusts {trusted} of loopstate's {len(trust)} hooks ({source})")
        for problem in _codex_trust_problems(places, trust) + [p for path, entry in servers
                                                               if (p := _codex_store_problem(path, entry))]:
            verdict = "failed"
            problems.append(problem)
    if not installed:
        notes.append(f"{host.version_command[0]} is not on PATH here: the hooks run only where {host.label} runs")
    return _Discovery(found, servers, verdict, missing, problems, notes)


# Codex ------------------------------------------------------------------------------------


def codex_user_config(places: Places) -> str:
    """The user's Codex config, the one file whose ``[hooks.state]`` and ``[projects]`` Codex reads trust from."""
    return os.path.join(places.codex_home or os.path.join(places.home, ".codex"), "config.toml")


def codex_trust(places: Places, *, ask_codex: bool = False) -> tuple[list[dict[str, str]], str]:
    """Each loopstate hook in a Codex file: where, its event and trust key, and Codex's status of it
    (``trusted``, ``modified``, ``untrusted``), and where the status came from. With ``ask_codex`` (its CLI
    is on PATH) Codex's own ``hooks/list`` says it; else the hashes the user's config.toml holds, computed
    as Codex computes them (install/codex_trust)."""
    from loopstate.install import codex_trust as ct

    user, _ = _read_config(codex_user_config(places))
    trusted = ct.trusted_hashes(user)
    found = []
    for path in inspected_files(HOSTS["codex"], home=places.home, codex_home=places.codex_home,
                                project=places.project):
        config, _ = _read_config(path)
        for key, (event, current) in ct.our_hooks(config, path, HOSTS["codex"]).items():
            found.append({"file": path, "event": event, "key": key, "status": ct.status(key, current, trusted)})
    source = f"from the hashes in {codex_user_config(places)}"
    if ask_codex and found:
        listed, why = _codex_hooks_list(places)
        if listed is None:
            source += f"; `codex app-server` could not be asked: {why}"
        else:
            source = "from Codex's own hooks/list"
            for hook in found:  # a hook Codex does not list is in a file it does not read (an untrusted project)
                hook["status"] = listed.get(hook["key"], "not read by Codex")
    return found, source


def codex_untrusted(places: Places) -> list[dict[str, str]]:
    return [hook for hook in codex_trust(places)[0] if hook["status"] != "trusted"]


APP_SERVER_TIMEOUT = 15.0


def _codex_hooks_list(places: Places) -> tuple[dict[str, str] | None, str | None]:
    """Codex's own trust status per hook key (`codex app-server`, JSON-RPC lines on stdio: initialize, then
    ``hooks/list`` for the project), or (None, why not). Bounded: the server is killed after the answer or
    after APP_SERVER_TIMEOUT."""
    import select
    import time

    program = shutil.which("codex")
    if program is None:
        return None, "codex is not on PATH"
    cwd = places.project or places.home
    requests = [{"jsonrpc": "2.0", "id": 0, "method": "initialize",
                 "params": {"clientInfo": {"name": "loopstate-doctor", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "initialized"},
                {"jsonrpc": "2.0", "id": 1, "method": "hooks/list", "params": {"cwds": [cwd]}}]
    try:
        proc = subprocess.Popen([program, "app-server"], cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL)
    except OSError as exc:
        return None, f"it could not be started: {exc.strerror}"
    deadline, buffer = time.monotonic() + APP_SERVER_TIMEOUT, b""
    assert proc.stdin is not None and proc.stdout is not None  # both are pipes
    try:
        proc.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
        proc.stdin.flush()
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([proc.stdout], [], [], left)[0]:
                break
            chunk = os.read(proc.stdout.fileno(), 65536)
            if not chunk:
                return None, f"it exited {proc.wait()} without answering hooks/list"
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                message = json.loads(line) if line.strip().startswith(b"{") else {}
                if message.get("id") == 1:
                    data = (message.get("result") or {}).get("data") or []
                    if not data:
                        return None, f"hooks/list answered {str(message)[:STDERR_SHOWN]}"
                    return {h["key"]: h["trustStatus"] for h in data[0].get("hooks", [])}, None
        return None, f"it did not answer hooks/list within {APP_SERVER_TIMEOUT:g} s"
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"its answer could not be read ({exc})"
    finally:
        proc.kill()
        proc.wait()


def _codex_trust_problems(places: Places, trust: list[dict[str, str]]) -> list[str]:
    """Why Codex would skip a hook of ours: not trusted (or changed since), or in a project Codex does not read."""
    problems = []
    for hook in [h for h in trust if h["status"] not in ("trusted", "managed", "not read by Codex")]:
        user_scope = os.path.dirname(hook["file"]) == os.path.dirname(codex_user_config(places))
        fix = ("run `loopstate setup apply --host codex --trust-hooks` (or trust it in Codex's /hooks)" if user_scope
               else "open /hooks in Codex in this project and trust it")
        problems.append(f"Codex will not run the {hook['event']} hook in {hook['file']}: it is {hook['status']} "
                        f"(no trusted_hash for {hook['key']!r} in {codex_user_config(places)} matches it); {fix}")
    if places.project and any(h["file"].startswith(os.path.join(places.project, ".codex", "")) for h in trust):
        user, _ = _read_config(codex_user_config(places))
        projects = user.get("projects") if isinstance(user, dict) else None
        entry = projects.get(places.project) if isinstance(projects, dict) else None
        if not (isinstance(entry, dict) and entry.get("trust_level") == "trusted"):
            problems.append(f"Codex reads {places.project}/.codex/ only for a trusted project, and "
                            f"{codex_user_config(places)} does not trust {places.project}: start Codex there and "
                            "trust the folder when it asks (or `codex exec --trust` once)")
    return problems


def _codex_store_problem(path: str, entry: dict) -> str | None:
    """Whether `loopstate mcp`, started by Codex with HOME and PATH plus what its entry passes on, resolves the
    same store as the hooks, which get this environment whole."""
    from loopstate.core.paths import resolve_data_dir
    from loopstate.install.hosts import STORE_VARIABLES

    given = entry.get("env_vars")
    named: list[Any] = given if isinstance(given, list) else []
    seen = {k: os.environ[k] for k in ("HOME", "PATH", *[n for n in named if isinstance(n, str)]) if k in os.environ}
    if isinstance(entry.get("env"), dict):
        seen.update({k: str(v) for k, v in entry["env"].items()})
    try:
        server, hooks = resolve_data_dir(seen), resolve_data_dir(dict(os.environ))
    except LoopstateError as exc:
        return f"the MCP server {MCP_SERVER} in {path}: {exc.message}"
    if server == hooks:
        return None
    missing = [n for n in STORE_VARIABLES if n in os.environ and n not in named]
    return (f"the MCP server {MCP_SERVER} in {path} would use the store in {server}, the hooks the one in {hooks} "
            f"(Codex passes {', '.join(missing) or 'no store variable'} to no MCP server unless its entry names it in "
            f"env_vars): re-run `loopstate setup apply --host codex`")


def _claude_problems(places: Places, servers: list[tuple[str, dict]]) -> list[str]:
    """What keeps a Claude Code session from running what setup registered, beyond the hooks themselves: the
    ``/intent`` command file (without it the host owns the prompt: HOSTS.md), and an MCP entry whose
    environment names another store than the hooks' (Claude Code passes its own environment to both, and the
    entry's ``env`` on top for the server)."""
    from loopstate.core.paths import resolve_data_dir
    from loopstate.install import claude_commands
    from loopstate.install.hosts import CLAUDE, command_files

    problems = []
    paths = command_files(CLAUDE, home=places.home, project=places.project,
                          claude_config_dir=places.claude_config_dir)
    ours = []
    for path in paths:
        try:
            data = read_regular(path, follow=True)
        except LoopstateError:
            data = None
        if data is not None and claude_commands.MARKER.encode() in data:
            ours.append(path)
    if not ours:
        problems.append(f"no loopstate /intent command file ({' or '.join(paths)}), so Claude Code never passes "
                        "/intent to the hooks: run `loopstate setup apply --host claude` (with the scope you use)")
    hooks_store = places.data_dir
    for path, entry in servers:
        given = entry.get("env")
        env: dict[Any, Any] = given if isinstance(given, dict) else {}
        server_store = resolve_data_dir({**os.environ, **{k: str(v) for k, v in env.items()}})
        if os.path.realpath(server_store) != os.path.realpath(hooks_store):
            problems.append(f"the MCP server {MCP_SERVER} in {path} uses the store {server_store} (its env) but "
                            f"the hooks use {hooks_store}: take LOOPSTATE_DATA_DIR out of that entry's env, or re-run "
                            "`loopstate setup apply --host claude`")
    return problems


def _probe_all(host: Host, d: _Discovery) -> tuple[list[dict[str, Any]], list[str], list[str], bool]:
    """Each distinct runnable hook and server entry of ours, once, in a scratch project and data dir:
    (results, procedure, problems, whether something registered could not be probed)."""
    results, procedure, problems, seen, unprobed = [], [], [], set(), False
    with tempfile.TemporaryDirectory(prefix="loopstate-doctor-") as tmp:
        scratch = Path(tmp)
        (scratch / "project").mkdir()
        for path, handler in d.found.ours:
            if (handler.event, handler.command) in seen:
                continue
            seen.add((handler.event, handler.command))
            if _command_problem(handler.command):
                unprobed = True  # already a discovery failure; its behavior stays unknown
                continue
            timeout = handler.handler.get("timeout")
            timeout = float(timeout) if isinstance(timeout, (int, float)) and timeout > 0 else DEFAULT_HOOK_TIMEOUT
            procedure.append(f"{handler.command} < a synthetic {handler.event} input")
            result = _run_hook(host, handler.event, handler.command, timeout, scratch)
            results.append(result)
            if result["problem"]:
                problems.append(f"the {handler.event} hook ({path}) {result['problem']}; try it by hand: "
                                f"`echo '{{}}' | {handler.command}`, or reinstall loopstate and re-run setup apply")
            if host.name == "claude" and handler.event == "UserPromptSubmit" and not result["problem"]:
                procedure.append(f"{handler.command} < a synthetic {probe.INTENT_PROBE} prompt")
                intent = _run_hook(host, handler.event, handler.command, timeout, scratch, probe.INTENT_PROBE)
                intent["problem"] = intent["problem"] or probe.claude_receipt_problem(intent.pop("stdout", b""))
                intent["outcome"] = "failed" if intent["problem"] else "passed"
                results.append(intent)
                if intent["problem"]:
                    problems.append(f"the UserPromptSubmit hook ({path}) does not answer {probe.INTENT_PROBE}: "
                                    f"{intent['problem']}; reinstall loopstate and re-run setup apply")
        for path, entry in d.servers:
            argv = [entry["command"], *entry["args"]]
            if tuple(argv) in seen:
                continue
            seen.add(tuple(argv))
            if _program_problem(entry["command"]):
                unprobed = True
                continue
            procedure.append(f"{shlex.join(argv)} < an MCP initialize request")
            result = _probe_mcp(entry, scratch, CLAUDE_MCP_DISCOVER if host.name == "claude" else MCP_INITIALIZE)
            results.append(result)
            if result["problem"]:
                problems.append(f"the MCP server {MCP_SERVER} ({path}) {result['problem']}; if it says the SDK is "
                                "missing: pip install 'loopstate[mcp]', or set up with --no-mcp")
    return results, procedure, problems, unprobed


def check_host(host: Host, places: Places, *, asked: bool) -> HostReport | None:
    """One host's status; None when the host is neither installed nor set up and was not asked for."""
    installed, version = _version(host)
    d = _discover(host, places, installed)
    if not d.found.ours and not d.servers and not installed and not asked:
        return None
    results, procedure, problems, unprobed = _probe_all(host, d)
    behavior = ("failed" if any(r["outcome"] != "passed" for r in results)
                else "verified" if results and not d.missing and not unprobed else "unverified")
    now = format_time(system_clock())
    evidence_id = str(uuid.uuid4())
    status = to_dict(validate("harness_status", {
        "installed": installed or bool(d.found.ours or d.servers), "version": version, "discovery": d.verdict,
        "behavior": behavior, "skill_roots": [], "collisions": probe.collisions(host, d.found), "checked_at": now,
        "evidence_id": evidence_id,
    }))
    evidence = {"evidence_id": evidence_id, "type": "harness_probe",
                "description": f"loopstate doctor ran each registered {host.label} hook and MCP server once",
                "procedure": procedure, "outcome": {"verified": "passed", "failed": "failed"}.get(behavior, "unverified"),
                "results": results, "observed_at": now}
    files = sorted({path for path, _ in d.found.ours} | {path for path, _ in d.servers})
    return HostReport(host, status, evidence, d.problems + problems, d.notes, files, installed)


def _record(places: Places, report: HostReport) -> str:
    folder = places.data_dir / "harnesses"
    safefs.ensure_base(places.data_dir)
    safefs.ensure_dir(folder, places.data_dir)
    path = folder / f"{report.host.harness}.json"
    body = {"schema_version": SCHEMA_VERSION, "harness": report.host.harness, "status": report.status,
            "evidence": report.probe}
    safefs.atomic_write(path, places.data_dir, (json.dumps(body, indent=2, sort_keys=True) + "\n").encode())
    return str(path)


def run(places: Places, only: list[str] | None, progress: Callable[[str, int, int], None] | None = None) -> Report:
    """Every host's report; ``progress(host, index, total)`` is told before each host is checked (its probes
    take seconds: the CLI shows it on a terminal)."""
    reports, problems = [], []
    names = list(only or HOSTS)
    for index, name in enumerate(names):
        if progress is not None:
            progress(name, index, len(names))
        report = check_host(HOSTS[name], places, asked=bool(only))
        if report is not None:
            report.recorded = _record(places, report)
            reports.append(report)
    if not reports:
        problems.append("loopstate is set up for no host, and neither claude nor codex is on PATH: run "
                        "`loopstate setup apply --host claude` (or --host codex)")
    store = None
    if places.project is not None:
        from loopstate.install.store_check import check_store

        store = check_store(places.project)
        if store["problem"]:
            problems.append(store["problem"])
    return Report(reports, problems, store)
