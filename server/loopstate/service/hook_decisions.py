"""One harness event, answered: bind the session, gather the facts, apply the rules.

The host adapters (``loopstate.hooks``) parse a host's JSON into a
``HookEvent`` and format the ``HookAnswer``; what happens in between is here,
and the rules it applies are the pure ones of ``domains.harness`` and
``domains.intent.prompt_commands``:

* a session works on the project's current task (or the one ``LOOPSTATE_TASK``
  pins, or its own private task): ``HookSession.task``; no hook starts a task
  by itself, only the user's ``/intent start`` and ``/intent remember`` (in a
  project with no task yet) do. PreToolUse reads the binding only, so a tool
  call costs no intent fold;
* SessionStart injects the context, whatever its source; UserPromptSubmit
  injects it only when it changed since the last injection in this session, or
  after a compaction;
* a prompt that is an ``/intent`` command is recorded as a direct user event
  and answered with a receipt (the host adapter decides how the host shows
  it); any other prompt is not stored;
* PreCompact records the compaction and marks the session; PostCompact marks
  it (Codex cannot inject there): the next prompt injects again;
* PostToolUse and SessionEnd answer nothing and read nothing;
* PreToolUse denies while a kill switch stands or the bound run may not work;
  Stop blocks on open blocking issues and unresolved gates when the project's
  hooks config turns gate enforcement on.

Modes: a task in ``off`` mode injects nothing and records only mode changes;
a ``private`` session (or one whose control cannot be read) injects nothing and
records nothing: a hook process cannot hold private memory past its exit.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping, NamedTuple

import msgspec

from loopstate_protocol.errors import ErrorCode

from loopstate.core.clock import ClockFn, format_time, system_clock
from loopstate.core.errors import LoopstateError
from loopstate.core.ids import random_uuid
from loopstate.core.killswitch import CONFIG_PATH as RUNS_CONFIG
from loopstate.core.killswitch import every_switch, probe_kill_switches
from loopstate.core.project import Project
from loopstate.domains import harness
from loopstate.service import sessions

if TYPE_CHECKING:
    from loopstate.service.engine import Service

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop", "PreCompact", "PostCompact",
          "SessionEnd")
HOOKS_CONFIG = Path(".loopstate") / "hooks.json"
CONFIG_DEFAULTS = {"enforce_gates": False, "context_max_chars": harness.DEFAULT_CONTEXT_CHARS, "goal": None}
MAX_CONTEXT_CHARS = 9000  # under Claude's 10,000-character output cap and Codex's ~2,500-token preview
LOCK_BOUND = 1.5  # seconds a hook waits for a held lock before it fails open
_UNPROBED: Any = object()  # facts() probes the kill switch itself unless the caller already did


class HookEvent(msgspec.Struct, frozen=True, kw_only=True):
    """What loopstate needs of a host event, host-neutral."""

    event: str
    session_id: str
    cwd: str
    source: str | None = None  # SessionStart: startup, resume, clear, compact
    prompt: str | None = None
    prompt_id: str | None = None  # the host's id of this prompt (Codex: turn_id), the user event's identity
    tool_name: str | None = None
    stop_hook_active: bool = False
    trigger: str | None = None  # PreCompact/PostCompact: manual, auto


class HookAnswer(msgspec.Struct, kw_only=True):
    context: str | None = None  # to inject
    deny: str | None = None  # PreToolUse: deny, with this reason
    block: str | None = None  # UserPromptSubmit / Stop: block, with this reason
    receipt: str | None = None  # UserPromptSubmit: what an /intent command did (the host adapter says how it shows)
    notice: str | None = None  # shown to the user (systemMessage)


def hooks_config(root: str) -> dict[str, Any]:
    """``<project>/.loopstate/hooks.json``: gate enforcement, the context cap, the project's goal; or the defaults."""
    path = Path(root) / HOOKS_CONFIG
    try:
        data = path.read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return dict(CONFIG_DEFAULTS)
    import json

    def refuse(why: str) -> LoopstateError:
        return LoopstateError(ErrorCode.VALIDATION_FAILED, f"{path}: {why}; fix or remove it", path=str(path))

    try:
        config = json.loads(data.decode("utf-8"))
    except ValueError:
        raise refuse("is not UTF-8 JSON") from None
    if not isinstance(config, dict) or not set(config) <= set(CONFIG_DEFAULTS):
        raise refuse(f"give an object with only {', '.join(CONFIG_DEFAULTS)}")
    merged = {**CONFIG_DEFAULTS, **config}
    if type(merged["enforce_gates"]) is not bool:
        raise refuse("enforce_gates must be true or false")
    if type(merged["context_max_chars"]) is not int or not 200 <= merged["context_max_chars"] <= MAX_CONTEXT_CHARS:
        raise refuse(f"context_max_chars must be a whole number from 200 to {MAX_CONTEXT_CHARS}")
    if merged["goal"] is not None and not isinstance(merged["goal"], str):
        raise refuse("goal must be a goal id or null")
    return merged


class Standing(NamedTuple):
    """A kill switch that stands: the first switch file found, and the shared store whose stop stands."""

    file: str | None
    shared: str | None


def standing_switch(root: str) -> Standing | None:
    """The kill switch that stands, reading no stream: a STOP the user can see always counts (the
    defaults and whatever the runs config lists, valid or not: core.killswitch.every_switch), and, on
    a team's shared store, the stop recorded there from any machine (service/shared_stop.py).

    `run stop` on a shared store sets both; removing the file alone would leave the shared one
    standing, so a denial names both, and the command that lifts both (harness.tool_denial)."""
    from loopstate.service.shared_stop import standing

    found = probe_kill_switches(root, every_switch(root))
    shared = standing(root)
    if found is None and shared is None:
        return None
    return Standing(None if found is None else str(found["path"]), shared)


NO_SWITCH = Standing(None, None)


class HookSession:
    """One hook process's view of one host session in one project."""

    def __init__(self, root: str, event: HookEvent, env: Mapping[str, str], *, data_dir: Path | None = None,
                 clock: ClockFn = system_clock) -> None:
        self.event = event
        self.env = env
        self.clock = clock
        self.project = Project(root, data_dir=data_dir, lock_timeout=LOCK_BOUND)
        self.root = self.project.root
        self.data_dir = data_dir
        self.session = sessions.session_hash(event.session_id)
        self.faults: list[str] = []
        self._task: tuple[str | None, str] | None = None
        self._intent: Service | None = None  # made at the first intent read or write
        self._config: dict[str, Any] | None = None

    # --- plumbing -----------------------------------------------------------------

    @property
    def config(self) -> dict[str, Any]:
        if self._config is None:
            try:
                self._config = hooks_config(self.root)
            except LoopstateError as error:
                self.faults.append(f"the hooks config ({error.message})")
                self._config = dict(CONFIG_DEFAULTS)
        return self._config

    def intent(self) -> Service:
        if self._intent is None:
            from loopstate.domains.intent import DOMAIN
            from loopstate.service.engine import Service

            self._intent = Service(data_dir=self.data_dir, clock=self.clock, domains=[DOMAIN], lock_timeout=LOCK_BOUND)
        return self._intent

    def _run_env(self) -> tuple[str | None, str | None]:
        return self.env.get("LOOPSTATE_RUN") or None, self.env.get("LOOPSTATE_GOAL") or None

    # --- the binding ------------------------------------------------------------------

    def bind(self) -> sessions.Binding:
        """The session's binding (a new one is not written until there is something to keep); a run or goal
        the environment names is bound durably. Binding starts no task: see ``task``."""
        binding = sessions.read(self.project, self.session) or sessions.Binding(host_session_hash=self.session)
        run_id, goal_id = self._run_env()
        goal_id = goal_id or self.config["goal"]
        if (run_id and run_id != binding.run_id) or (goal_id and goal_id != binding.goal_id):
            binding.run_id, binding.goal_id = run_id or binding.run_id, goal_id or binding.goal_id
            binding.updated_at = format_time(self.clock())
            sessions.write(self.project, binding, durable=True)
        return binding

    def _save(self, binding: sessions.Binding) -> None:
        binding.updated_at = format_time(self.clock())
        sessions.write(self.project, binding, durable=False)

    # --- the session's task and its mode ------------------------------------------------

    def _pin(self) -> str | None:
        return self.env.get("LOOPSTATE_TASK") or None

    def task(self) -> tuple[str | None, str]:
        """The task this session works on now, and its mode (on, off or private).

        In order: the private task this session owns (a one-to-one
        control: a private session is no other session's, and records nothing
        whatever pins it); the task ``LOOPSTATE_TASK`` pins (an id or a unique
        prefix); the project's current task
        (``intent.current``: the task last started or resumed, from any front
        door). None when the project has no task yet: a hook never starts one
        by itself. A control that cannot be read fails closed (private).
        """
        if self._task is not None:
            return self._task
        from loopstate_protocol import intent as p

        from loopstate.service.intent_effects import is_private, read_control, session_hash

        pin = self._pin()
        try:
            control = read_control(self.project, session_hash(self.event.session_id, stored=False))
        except LoopstateError:
            self._task = (None, "private")
            return self._task
        if control is not None:
            self._task = (control["task_id"], "private")
            return self._task
        if pin:
            from loopstate.service.intent_ids import resolve_task

            task_id = resolve_task(self.intent(), self.root, pin)
            found = self.intent().query(self.root, p.IntentTasks(task_id=task_id))
            if not found:
                raise LoopstateError(ErrorCode.NOT_FOUND, f"LOOPSTATE_TASK={pin} names no task of this project; "
                                     "`loopstate intent tasks` lists them", task_id=task_id)
            view = found[0]
        else:
            view = self.intent().query(self.root, p.IntentCurrent()).task
            if view is None:
                self._task = (None, "on")
                return self._task
        try:
            private = is_private(self.project, task_id=view.task_id)
        except LoopstateError:
            private = True
        self._task = (view.task_id, "private" if private else view.mode)
        return self._task

    # --- facts ------------------------------------------------------------------------

    def facts(self, binding: sessions.Binding | None, *, switch: Standing | None = _UNPROBED) -> harness.Facts:
        if switch is _UNPROBED:
            switch = standing_switch(self.root)
        run = None
        gates: tuple[harness.Gate, ...] = ()
        if binding is not None and binding.run_id:
            run = self._run_facts(binding.run_id)
        if binding is not None and binding.goal_id:
            gates = self._open_gates(binding.goal_id)
        file, shared = switch or NO_SWITCH
        return harness.Facts(kill_switch=file, shared_stop=shared, run=run, gates=gates, faults=tuple(self.faults))

    def _run_facts(self, run_id: str) -> harness.RunFacts | None:
        from loopstate_protocol import runs as r

        from loopstate.domains.runs import DOMAIN
        from loopstate.domains.runs.budgets import exhausted_keys
        from loopstate.service.engine import Service

        try:
            status = Service(data_dir=self.data_dir, clock=self.clock, domains=[DOMAIN], lock_timeout=LOCK_BOUND).query(
                self.root, r.Status(run_id=run_id))
        except LoopstateError as error:
            if error.code in (ErrorCode.NOT_FOUND, ErrorCode.VALIDATION_FAILED, ErrorCode.INVALID_PARAMS):
                return harness.RunFacts(run_id=run_id, found=False)
            self.faults.append(f"run {run_id} ({error.code.value}: {error.message})")
            return None
        run = status.run
        if run is None:
            return harness.RunFacts(run_id=run_id, found=False)
        usage, budgets = run["usage"], run["budgets"]
        exhausted = tuple(dict.fromkeys(key for key, _ in exhausted_keys(budgets, usage)))
        spent = (f"{usage['mutations']}/{budgets['max_mutations']} mutations, "
                 f"{int(float(usage['duration_seconds']))}/{budgets['max_duration_seconds']} s")
        lease = status.lease if status.lease is not None and status.lease_expired is False else None
        return harness.RunFacts(
            run_id=run_id, status=run["status"], lease_expired=status.lease_expired, exhausted=exhausted,
            open_blocking_issues=run["open_blocking_issues"], usage=spent,
            live_lease=(lease["lease_id"], lease["generation"]) if lease else None,
        )

    def _open_gates(self, goal_id: str) -> tuple[harness.Gate, ...]:
        from loopstate.service.goals_effects import load_state

        try:
            state = load_state(self.project, goal_id).state
        except LoopstateError as error:
            self.faults.append(f"goal {goal_id} ({error.code.value}: {error.message})")
            return ()
        return tuple(
            harness.Gate(goal_id=goal_id, gate_id=g.gate_id, title=g.title)
            for g in sorted(state.gates.values(), key=lambda g: g.added_sequence) if g.status in ("open", "deferred")
        )

    # --- context ------------------------------------------------------------------------

    def context(self, binding: sessions.Binding) -> str:
        """The hook context: status lines, counts, then the user's own claims (of the session's task, and the
        project's project-wide and long-term ones); capped, deterministic. Without a task yet, the status lines."""
        from loopstate_protocol import intent as p

        task_id, mode = self.task()
        if mode != "on":
            return ""
        cap = self.config["context_max_chars"]
        status = harness.status_lines(self.facts(binding))
        if task_id is None:
            return harness.compose("", status, cap)

        def ask(lines: list[str]) -> Any:
            return self.intent().query(self.root, p.IntentHookContext(
                task_id=task_id, max_chars=harness.intent_budget(lines, cap)))

        def with_counts(hook: Any) -> list[str]:
            counts = harness.omitted_line(hook.omitted, hook.open_disputes)
            return status if counts is None else [*status, counts]

        # The counts line takes room from the claims, which may change the counts: ask until they agree
        # (fewer claims fit each time, so this ends; a few rounds at most).
        hook = ask(status)
        for _ in range(8):
            fitted = ask(with_counts(hook))
            if (fitted.text, fitted.omitted) == (hook.text, hook.omitted):
                break
            hook = fitted
        return harness.compose(hook.text, with_counts(hook), cap)

    def state_key(self, binding: sessions.Binding) -> str | None:
        """A digest of what the context is computed from, read from file identities alone; None when it
        may change while no file does (a bound run: its lease expires with time) or a fault is being told.
        The session's task is among those inputs' functions (the current task is an intent event, a
        private session a control file), so it needs no part of its own; a pin does."""
        if binding.run_id or self.faults:
            return None
        streams = ["intent"] + ([f"goals.{binding.goal_id}"] if binding.goal_id else [])
        paths = [self.project.dir / "private-sessions", Path(self.root) / HOOKS_CONFIG, Path(self.root) / RUNS_CONFIG]
        switch = standing_switch(self.root)
        parts = [self._pin() or "", "" if switch is None else f"{switch.file}|{switch.shared}"]
        try:
            parts += self._stream_stamps(streams)
        except LoopstateError:
            return None
        for path in paths:
            try:
                info = os.stat(path)
            except OSError:
                parts.append("-")
            else:
                parts.append(f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}")
        return sessions.state_digest(self.session, parts)

    def _stream_stamps(self, streams: list[str]) -> list[str]:
        """What says each stream changed: its file's identity on the local store; on a shared store,
        where another machine appends and no file here changes, its head (one query a stream)."""
        from loopstate.service.shared_stop import on_shared_store

        if not on_shared_store(self.root):
            stamps = []
            for name in streams:
                try:
                    info = os.stat(self.project.stream_path(name))
                except OSError:
                    stamps.append("-")
                else:
                    stamps.append(f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}")
            return stamps
        from loopstate.core.project import check_stream_name
        from loopstate.core.stores import open_store
        from loopstate.service.front import stream_layout

        store = open_store(self.project)
        heads = []
        for name in streams:
            check_stream_name(name)
            head = store.head(name, stream_layout(name))
            heads.append(f"{head.sequence}:{head.hash}")
        return heads

    def inject(self, binding: sessions.Binding, *, always: bool) -> str | None:
        """The context when it should be injected now (and the session marked), else None.

        A prompt whose inputs did not change since the last injection (same
        ``state_key``) is answered without reading the store.
        """
        key = self.state_key(binding)  # before the reads: a change while they run shows as a new key next time
        if not always and not binding.reinject and key is not None and key == binding.state_key:
            return None
        text = self.context(binding)
        digest = sessions.context_digest(self.session, text)
        due = always or binding.reinject or digest != binding.injected
        task_id = self.task()[0]
        if due or key != binding.state_key or task_id != binding.task_id:
            binding.injected, binding.reinject, binding.state_key = digest, False, None if self.faults else key
            binding.task_id = task_id
            self._save(binding)
        return (text or None) if due else None


# --- the events -------------------------------------------------------------------------


def fix_for(error: Exception) -> str:
    """A fault, and what the user should run for it, in one sentence (what a failed-open hook says)."""
    if isinstance(error, LoopstateError):
        code = error.code.value
        fix = {"CORRUPT_LEDGER": "run `loopstate verify`, then `loopstate recover`",
               "LOCK_TIMEOUT": "wait for the holder named above, or end it",
               "FUTURE_SCHEMA": "upgrade loopstate"}.get(code, "run `loopstate doctor`")
        if "`loopstate " in error.message:  # the error names its own fix already: said once
            return f"{code}: {error.message}"
        return f"{code}: {error.message}; {fix}"
    if isinstance(error, OSError):
        return f"{error.strerror or error} ({error.filename or 'the data dir'}); check LOOPSTATE_DATA_DIR and its permissions"
    return f"internal error {type(error).__name__}: {error}; please report it"


FAULTS_TOLD = "loopstate-faults-told"  # in the temp dir: which sessions were already told which fault


def fault_answer(event: str, session_id: str | None, where: str, said: str) -> HookAnswer:
    """What a hook that failed open answers: the fault in ``notice`` (systemMessage, which the hosts' interactive
    views show) and, the first time this session meets this fault, as context for the agent to pass on.

    In print mode (``claude -p``) the host shows neither a systemMessage nor a hook's stderr (seen in Claude Code
    2.1.332), so the agent is the one way a fault reaches the person there; once per session, so a broken store
    does not fill every prompt. Which session was told is kept as an empty marker named by a hash of the
    session and the fault's code (``said`` up to its first colon), in the temp dir, since the fault may be that the data dir cannot be written.
    A marker that cannot be written means telling again, never staying silent.
    """
    out = HookAnswer(notice=f"{where}: {said}")
    if event not in ("SessionStart", "UserPromptSubmit") or session_id is None:
        return out
    import hashlib
    import stat
    import tempfile

    code = said.split(":", 1)[0]
    folder = Path(tempfile.gettempdir()) / f"{FAULTS_TOLD}-{os.getuid()}"
    name = hashlib.sha256(f"loopstate-fault-told\0{sessions.session_hash(session_id)}\0{code}".encode()).hexdigest()
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)  # in a shared temp dir: only a real folder of this user's is trusted
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid():
            os.close(os.open(folder / name, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
    except FileExistsError:
        return out
    except OSError:
        pass
    out.context = (f"{where}: {said}\nloopstate failed open: nothing of it is injected or enforced in this session but a "
                   "kill switch. Tell the user this once, with the command it names.")
    return out


def answer(root: str, event: HookEvent, env: Mapping[str, str], *, data_dir: Path | None = None) -> HookAnswer:
    """The answer to one host event (raises on a fault: the front door fails open)."""
    if event.event not in EVENTS:
        raise LoopstateError(ErrorCode.INVALID_PARAMS, f"unknown hook event {event.event!r}; events are {', '.join(EVENTS)}")
    if event.event in ("PostToolUse", "SessionEnd"):
        return HookAnswer()  # nothing to record or say: not even the binding is read
    hs = HookSession(root, event, env, data_dir=data_dir)
    if event.event == "PreToolUse":
        return _pre_tool_use(hs)
    command = _prompt_command(event)
    if command is not None:
        # A command the user typed goes no further than the receipt, even when it could not be recorded.
        try:
            return HookAnswer(receipt=_receipt(hs, hs.bind(), command))
        except Exception as error:
            return HookAnswer(receipt=f"loopstate: /intent {command.verb} was not recorded: {fix_for(error)}")
    binding = hs.bind()
    out = HookAnswer()
    if event.event == "SessionStart":
        out.context = hs.inject(binding, always=True)
    elif event.event == "UserPromptSubmit":
        out.context = hs.inject(binding, always=False)
    elif event.event == "PreCompact":
        from loopstate_protocol import intent as p

        task_id, mode = hs.task()
        if task_id is not None and mode != "private":
            trigger: Literal["manual", "auto"] = "manual" if event.trigger == "manual" else "auto"
            hs.intent().execute(hs.root, p.IntentCompactionObserve(task_id=task_id, trigger=trigger),
                                "hook-compact-" + random_uuid())
        binding.reinject = True
        hs._save(binding)
    elif event.event == "PostCompact":
        binding.reinject = True
        hs._save(binding)
    elif event.event == "Stop":
        facts = hs.facts(binding)
        out.block = harness.stop_block(facts, enforce_gates=hs.config["enforce_gates"],
                                       stop_hook_active=event.stop_hook_active)
    if hs.faults:
        out.notice = "loopstate: " + "; ".join(hs.faults)
    alarms = _history_alarms(hs)
    if alarms:
        out.notice = "\n".join(filter(None, [out.notice, *alarms]))
    return out


def _history_alarms(hs: HookSession) -> list[str]:
    """What the witness found since this project's last hook: a signed checkpoint that rewrites history.

    Checked on the events a user sees (not PreToolUse, the hot path); a check
    whose checkpoints did not change reads two small files a stream. A fault of
    the witness itself is not the session's business: it is logged, not said.
    """
    from loopstate.service import witness

    try:
        return [v.message for v in witness.check_all(hs.project) if not v.ok]
    except Exception as exc:  # noqa: BLE001 (the hook answers whatever the witness hits)
        import logging

        logging.getLogger("loopstate.hooks").warning("the history witness failed: %s", exc)
        return []


def _prompt_command(event: HookEvent) -> Any:
    """The ``/intent`` command a UserPromptSubmit prompt is (domains.intent.prompt_commands), else None.

    Only a prompt that starts with ``/intent`` can be one, so an ordinary
    prompt is answered without loading the intent domain (its context may be
    unchanged: then the hook reads no store at all).
    """
    if event.event != "UserPromptSubmit" or not (event.prompt or "").lstrip().startswith("/intent"):
        return None
    from loopstate.domains.intent import prompt_commands

    return prompt_commands.parse(event.prompt or "")


def _pre_tool_use(hs: HookSession) -> HookAnswer:
    switch = standing_switch(hs.root)
    binding = sessions.read(hs.project, hs.session)
    if switch is None and (binding is None or not binding.run_id) and not hs._run_env()[0]:
        return HookAnswer()  # the fast path: nothing can deny
    run_env = hs._run_env()[0]
    if binding is None or (run_env and run_env != binding.run_id):
        binding = hs.bind()
    reason = harness.tool_denial(hs.event.tool_name or "", hs.facts(binding, switch=switch))
    return HookAnswer(deny=reason, notice=("loopstate: " + "; ".join(hs.faults)) if hs.faults else None)


def deny_if_switch(root: str) -> str | None:
    """For a hook that failed: a kill switch the user can see still denies (no store read)."""
    file, shared = standing_switch(root) or NO_SWITCH
    return harness.tool_denial("", harness.Facts(kill_switch=file, shared_stop=shared))


# --- /intent commands -------------------------------------------------------------------


def _user_source(hs: HookSession, text: str) -> Any:
    """The direct user event's identity: the host's prompt id, else a hash of the redacted command text."""
    from loopstate_protocol import intent as p

    from loopstate.domains.intent import rules

    if hs.event.prompt_id:
        try:
            return p.SourceInput(kind="user_event", event_id=rules.opaque_id(hs.event.prompt_id, "prompt_id"),
                                 via_hook=True)
        except LoopstateError:
            pass
    return p.SourceInput(kind="user_event", text=text, via_hook=True)


def _receipt(hs: HookSession, binding: sessions.Binding, command: Any) -> str:
    """Do what the typed command says; the receipt the user sees (the prompt goes no further)."""
    if command.problem is not None:
        return f"loopstate: {command.problem}"
    task, mode = hs.task()
    try:
        return "loopstate: " + _apply(hs, binding, command, task, mode)
    except LoopstateError as error:
        return f"loopstate: /intent {command.verb} was not recorded: {error.message}"


NO_TASK = "this project has no task yet; /intent remember TEXT or /intent start [LABEL] starts one."


def _apply(hs: HookSession, binding: sessions.Binding, command: Any, task: str | None, mode: str) -> str:
    """``command``: a parsed domains.intent.prompt_commands.PromptCommand; ``task`` and ``mode``: the session's
    (HookSession.task). A command that records something about a project without a task starts one, as the
    user's own act: it becomes the project's current task."""
    from loopstate_protocol import intent as p

    from loopstate.domains.intent import rules

    intent, root = hs.intent(), hs.root
    request = "hook-" + random_uuid()
    if command.verb in ("on", "off", "private"):
        return _switch(hs, binding, command.verb, task, mode, request)
    if mode == "private":
        return "this session is private: nothing was recorded. /intent on records again."
    if command.verb == "start":
        outcome = intent.execute(root, p.IntentTaskStart(
            label=command.argument or None, actor="user", source=_user_source(hs, f"/intent start {command.argument}")),
            request)
        started = outcome.events[-1]["task_id"]
        _fresh(hs, binding)
        before = "" if task is None else (f" Claims of task {task[:8]} are no longer injected "
                                          "(project-wide ones stay); `loopstate intent resume` brings it back.")
        return f"started task {started[:8]}, now the project's current task for every session.{before}"
    if command.verb == "remember":
        facet, statement = rules.split_facet(command.argument)
        claim = p.ClaimInput(statement=statement, role="user", epistemic_status="explicit", facets=[facet],
                             scope="project" if command.project else "task")
        source = _user_source(hs, "/intent remember " + ("--project " if command.project else "") + command.argument)
        if task is None:
            outcome = intent.execute(root, p.IntentTaskStart(actor="user", source=source, initial_claims=[claim]), request)
            added = outcome.events[-1]["payload"]["initial_claims"][0]
            _fresh(hs, binding)
            where = f"; it started task {outcome.events[-1]['task_id'][:8]}, now the project's current task"
        else:
            outcome = intent.execute(root, p.IntentClaimAdd(task_id=task, actor="user", source=source, claim=claim),
                                     request)
            added, where = outcome.events[-1]["payload"]["claim"], ""
        wide = " for every task of the project" if command.project else ""
        return f"remembered [{facet}]{wide} {added['statement']} (claim {added['claim_id'][:8]}){where}."
    if task is None:
        return NO_TASK
    if command.verb == "show":
        hook = intent.query(root, p.IntentHookContext(task_id=task, max_chars=hs.config["context_max_chars"]))
        if mode == "off":
            return "intent is off for this session; /intent on turns it on."
        if not hook.claim_ids:
            return "no claims of yours are recorded for this session yet; /intent remember TEXT adds one."
        lines = hook.text.split("\n")[1:]
        shown = [f"{line} ({claim_id[:8]})" for line, claim_id in zip(lines, hook.claim_ids)]
        counts = harness.omitted_line(hook.omitted, hook.open_disputes)
        return "\n".join(["your recorded intent (forget one with /intent forget ID):", *shown, *([counts] if counts else [])])
    # forget: any claim this session's view shows (its task's, and the project's project-wide ones)
    from loopstate.service.intent_ids import resolve_claim

    try:
        claim_id = resolve_claim(intent, root, command.argument, task)
    except LoopstateError as error:
        return f"{error.message}; /intent show lists the claims with their ids."
    intent.execute(root, p.IntentClaimInvalidate(
        task_id=task, claim_id=claim_id, actor="user", reason="forgotten by the user (/intent forget)",
        source=_user_source(hs, f"/intent forget {command.argument}")), request)
    return f"forgot claim {claim_id[:8]}; it stays in the audit history, no longer injected."


def _fresh(hs: HookSession, binding: sessions.Binding) -> None:
    """The next prompt computes and shows what the session injects now (its task or mode changed)."""
    binding.injected = binding.state_key = None
    hs._save(binding)


def _switch(hs: HookSession, binding: sessions.Binding, verb: Literal["on", "off", "private"], task: str | None,
            mode: str, request: str) -> str:
    """``/intent on|off|private``. ``on`` and ``off`` set the mode of the session's task (shared with every
    session on it). ``private`` makes this session alone private: it takes a private task of its own
    (a one-to-one control: a hashed session id and no content), so the shared task is untouched and
    the session records and injects nothing; ``on`` or ``off`` ends that and the session rejoins the project's
    current task (a private task that was never durable leaves nothing behind)."""
    from loopstate_protocol import intent as p

    intent, root, session_id = hs.intent(), hs.root, hs.event.session_id
    if verb == mode:
        return f"intent is already {mode} for this session."
    _fresh(hs, binding)
    if verb == "private":
        intent.execute(root, p.IntentTaskStart(mode="private", host_session_id=session_id), request)
        return "this session is private: nothing is recorded or injected until /intent on."
    if mode == "private":
        durable = task is not None and bool(intent.query(root, p.IntentTasks(task_id=task)))
        action: Literal["durable_on", "durable_off", "delete"] = (
            ("durable_on" if verb == "on" else "durable_off") if durable else "delete")
        intent.execute(root, p.IntentPrivateRecover(host_session_id=session_id, action=action), request)
        if durable:  # a task of the old rule, a session's own, made private: it is durable again
            return {"on": "intent is on: /intent remember records the user's words, and they are injected.",
                    "off": "intent is off for this session: nothing is recorded or injected until /intent on."}[verb]
        hs._task = None
        task, mode = hs.task()
        if verb == "on" or task is None or mode == "off":
            return f"intent is {'on' if verb == 'on' else 'off'}: this session is no longer private, it shares the " \
                   "project's current task again."
        request = "hook-" + random_uuid()
    if task is None:
        return NO_TASK
    intent.execute(root, p.IntentModeSet(task_id=task, mode=verb), request)
    return {"on": "intent is on: /intent remember records the user's words, and they are injected.",
            "off": f"intent is off for task {task[:8]} (every session on it): nothing is recorded or injected "
                   "until /intent on."}[verb]
