/**
 * The palette, view-title and tree-item commands. Everything goes through the server: writes
 * are `loopstate/execute` (with a fresh request id, so a retry of the same call is
 * idempotent), reads `loopstate/query` (`project.runs`, `project.verify`, `project.log`).
 * Each failure is shown with the server's own message and code.
 */

import { randomUUID } from "node:crypto";
import { userInfo } from "node:os";
import * as vscode from "vscode";
import type { LiveProjects } from "./live";
import type { ExecuteResult, LogPage, ProjectStop, ResumeOutcome, RunList, StopOutcome, VerifyReport } from "./generated/wire";
import type { Claim, Gate } from "./model/projections";
import type { TreeNode } from "./model/trees";
import { messageOf, type ServerSupervisor } from "./server";

/** What the commands need from the extension. */
export interface CommandContext {
  live: LiveProjects;
  supervisor: ServerSupervisor;
  output: vscode.LogOutputChannel;
  /** The active folder's project root and folder name, or null without a folder. */
  activeRoot(): { root: string; name: string } | null;
}

export const AUDIT_SCHEME = "loopstate-log";

/** The claim facets a person picks from (protocol FACETS), with a plain-words description. */
const FACET_CHOICES: Array<{ label: string; description: string }> = [
  { label: "outcome", description: "what the work must achieve" },
  { label: "hard_constraint", description: "must hold, no exceptions" },
  { label: "soft_constraint", description: "should hold; may give way" },
  { label: "tradeoff", description: "what may be given up for what" },
  { label: "success_signal", description: "how to tell it worked" },
  { label: "failure_signal", description: "how to tell it did not" },
  { label: "unknown", description: "an open question" },
  { label: "result_feedback", description: "feedback on a result" },
  { label: "disagreement", description: "the user disagrees with a claim" },
];
/** The statuses a claim the user types can have (inferred and evidence are an agent's and a tool's). */
const STATUS_CHOICES: Array<{ label: string; description: string }> = [
  { label: "explicit", description: "the user said it" },
  { label: "unknown", description: "the user does not know yet" },
  { label: "disputed", description: "the user disputes it" },
];

export function registerCommands(ctx: CommandContext): vscode.Disposable[] {
  const guarded = (name: string, body: (...args: any[]) => Promise<unknown>) =>
    vscode.commands.registerCommand(name, async (...args: unknown[]) => {
      try {
        await body(...args);
      } catch (error) {
        ctx.output.appendLine(`${name}: ${messageOf(error)}`);
        void vscode.window.showErrorMessage(`loopstate: ${describeError(error)}`, "Show output")
          .then((choice) => choice && ctx.output.show());
      }
    });
  return [
    guarded("loopstate.openPanel", () => Promise.resolve(vscode.commands.executeCommand("workbench.view.extension.loopstate"))),
    guarded("loopstate.showOutput", async () => ctx.output.show()),
    guarded("loopstate.restartServer", () => ctx.supervisor.restart()),
    guarded("loopstate.stopAll", () => stopAll(ctx)),
    guarded("loopstate.resume", () => resume(ctx)),
    guarded("loopstate.retractClaim", (node?: TreeNode) => retractClaim(ctx, node)),
    guarded("loopstate.addClaim", () => addClaim(ctx)),
    guarded("loopstate.resolveGate", (node?: TreeNode) => resolveGate(ctx, node)),
    guarded("loopstate.renderGoalState", (node?: TreeNode) => renderGoalState(ctx, node)),
    guarded("loopstate.verify", () => verify(ctx)),
    guarded("loopstate.showAuditLog", (node?: TreeNode) => showAuditLog(ctx, node)),
    vscode.workspace.registerTextDocumentContentProvider(AUDIT_SCHEME, new AuditLogProvider(ctx)),
  ];
}

/** `error.data.code` and the message of a JSON-RPC error; the message of anything else. */
export function describeError(error: unknown): string {
  const data = (error as { data?: { code?: string } } | null)?.data;
  return data?.code ? `${data.code}: ${messageOf(error)}` : messageOf(error);
}

function requireRoot(ctx: CommandContext): { root: string; name: string } {
  const active = ctx.activeRoot();
  if (active === null) throw new Error("open a folder first: each workspace folder is a loopstate project");
  return active;
}

function requireClient(ctx: CommandContext) {
  const client = ctx.supervisor.running;
  if (client === null) throw new Error("loopstate serve is not running (see the output)");
  return client;
}

async function execute(ctx: CommandContext, root: string, command: Record<string, unknown>): Promise<ExecuteResult> {
  return requireClient(ctx).sendRequest<ExecuteResult>("loopstate/execute", { root, request_id: randomUUID(), command });
}

/** Who a stop or a resume is recorded as: the person at this editor (a manual harness). */
function person(): ProjectStop["actor"] {
  let name = process.env.USER ?? process.env.USERNAME ?? "";
  try {
    name ||= userInfo().username;
  } catch {
    // no passwd entry (a container): keep the environment's name
  }
  return { harness: "manual", actor: name || "user", session_id: `vscode-${vscode.env.sessionId}` };
}

async function query<R>(ctx: CommandContext, root: string, body: Record<string, unknown>): Promise<R> {
  return requireClient(ctx).sendRequest<R>("loopstate/query", { root, query: body });
}

async function stopAll(ctx: CommandContext): Promise<void> {
  const { root, name } = requireRoot(ctx);
  const confirm = "Stop all runs";
  const choice = await vscode.window.showWarningMessage(
    `Stop every run of ${name}?`,
    {
      modal: true,
      detail:
        "This sets the project's kill switch (the STOP file): every run halts at once and no run starts " +
        "until the switch is cleared (loopstate: Resume) and each run is resumed.",
    },
    confirm,
  );
  if (choice !== confirm) return;
  const result = await execute(ctx, root, { kind: "project.stop", actor: person(), reason: "stopped from VS Code" });
  const outcome = result.project as StopOutcome | null | undefined;
  // The true count: every run of the project that stands halted now, whether this stop or the
  // switch's own probe (a run notices a new switch at once) recorded its halt.
  const halted = await query<RunList>(ctx, root, { kind: "project.runs", status: ["halted_kill_switch"] });
  const failed = outcome?.failed ?? [];
  ctx.output.appendLine(`${name}: kill switch set (${outcome?.kill_switch ?? "?"}); ${halted.runs.length} of ${halted.total} run(s) halted`);
  void vscode.window.showWarningMessage(
    `loopstate: kill switch set; ${halted.runs.length} of ${halted.total} run(s) halted` +
      (failed.length > 0 ? `; ${failed.length} halt(s) not recorded yet (see the output)` : "") + ".",
  );
  for (const failure of failed) ctx.output.appendLine(`${name}: halting ${failure.run_id} failed: ${failure.message} (${failure.code})`);
}

/** Clear the project's kill switch (`project.resume`), after a modal confirmation. */
async function resume(ctx: CommandContext): Promise<void> {
  const { root, name } = requireRoot(ctx);
  const state = ctx.live.project(root);
  if (state?.killSwitch && !state.killSwitch.set) {
    void vscode.window.showInformationMessage(`loopstate: no kill switch stands in ${name}.`);
    return;
  }
  const confirm = "Resume";
  const choice = await vscode.window.showWarningMessage(
    `Clear the kill switch of ${name}?`,
    {
      modal: true,
      detail:
        "This removes the project's STOP file, so runs may start again. Runs the switch halted stay halted " +
        "until their harness resumes them.",
    },
    confirm,
  );
  if (choice !== confirm) return;
  const result = await execute(ctx, root, { kind: "project.resume", actor: person() });
  const outcome = result.project as ResumeOutcome | null | undefined;
  const kept = outcome?.kept ?? [];
  for (const switchFile of kept) ctx.output.appendLine(`${name}: kill switch ${switchFile.path} left standing: ${switchFile.reason}`);
  if (outcome?.state.set) {
    void vscode.window.showWarningMessage(`loopstate: a kill switch still stands in ${name}: ${kept.map((k) => `${k.path} (${k.reason})`).join("; ")}`);
    return;
  }
  const halted = outcome?.halted_runs.length ?? 0;
  void vscode.window.showInformationMessage(
    `loopstate: the kill switch of ${name} is cleared.` + (halted > 0 ? ` ${halted} halted run(s) stay halted until their harness resumes them.` : ""),
  );
}

async function addClaim(ctx: CommandContext): Promise<void> {
  const { root } = requireRoot(ctx);
  const tasks = ctx.live.project(root)?.intent?.tasks ?? [];
  let taskId: string;
  if (tasks.length === 0) {
    const label = await vscode.window.showInputBox({
      title: "Add claim: this project has no task yet",
      prompt: "A label for the new task the claim belongs to",
      ignoreFocusOut: true,
    });
    if (!label) return;
    const started = (await execute(ctx, root, { kind: "intent.task_start", label, actor: "user" })) as {
      events: Array<{ task_id?: string }>;
    };
    taskId = started.events[0]?.task_id ?? "";
  } else if (tasks.length === 1) {
    taskId = tasks[0].task_id;
  } else {
    const picked = await vscode.window.showQuickPick(
      [...tasks].reverse().map((task) => ({ label: task.label ?? task.task_id, description: task.task_id, id: task.task_id })),
      { title: "Add claim: to which task?" },
    );
    if (!picked) return;
    taskId = picked.id;
  }
  const statement = await vscode.window.showInputBox({
    title: "Add claim",
    prompt: "One atomic statement, in your words",
    ignoreFocusOut: true,
    validateInput: (text) => (text.trim() === "" ? "a claim needs a statement" : null),
  });
  if (!statement) return;
  const facet = await vscode.window.showQuickPick(FACET_CHOICES, { title: "Add claim: facet" });
  if (!facet) return;
  const status = await vscode.window.showQuickPick(STATUS_CHOICES, { title: "Add claim: status" });
  if (!status) return;
  // The user's own claim, from a direct user event: role and actor user, a user_event source.
  await execute(ctx, root, {
    kind: "intent.claim_add",
    task_id: taskId,
    actor: "user",
    claim: { statement: statement.trim(), role: "user", epistemic_status: status.label, facets: [facet.label] },
    source: { kind: "user_event", event_id: randomUUID() },
  });
}

/** Every claim the Intent view shows, for a pick when Retract claim runs from the palette. */
function shownClaims(ctx: CommandContext, root: string): Array<{ claim: Claim; taskId: string | null }> {
  const snapshot = ctx.live.project(root)?.intent;
  if (!snapshot) return [];
  const fallbackTask = snapshot.task_id ?? (snapshot.tasks?.length === 1 ? snapshot.tasks[0].task_id : null);
  const seen = new Map<string, { claim: Claim; taskId: string | null }>();
  for (const byStatus of Object.values(snapshot.by_facet ?? {})) {
    for (const list of Object.values(byStatus)) {
      for (const claim of list) seen.set(claim.claim_id, { claim, taskId: claim.task_id ?? fallbackTask });
    }
  }
  for (const claim of [...(snapshot.disagreements ?? []), ...(snapshot.unknowns ?? [])]) {
    if (!seen.has(claim.claim_id)) seen.set(claim.claim_id, { claim, taskId: claim.task_id ?? fallbackTask });
  }
  return [...seen.values()];
}

/** Retract (invalidate) a claim, as the user, after a modal confirmation (`intent.claim_invalidate`). */
async function retractClaim(ctx: CommandContext, node?: TreeNode): Promise<void> {
  const { root } = requireRoot(ctx);
  const claims = shownClaims(ctx, root);
  let chosen = node?.ref?.claim_id ? claims.find((c) => c.claim.claim_id === node.ref!.claim_id) : undefined;
  if (chosen === undefined) {
    if (claims.length === 0) {
      void vscode.window.showInformationMessage("loopstate: this project has no active claim to retract.");
      return;
    }
    const picked = await vscode.window.showQuickPick(
      claims.map((c) => ({ label: c.claim.statement, description: `${c.claim.epistemic_status ?? "?"} · ${c.claim.claim_id}`, c })),
      { title: "Retract which claim?" },
    );
    if (!picked) return;
    chosen = picked.c;
  }
  if (chosen.taskId === null) throw new Error(`the task of claim ${chosen.claim.claim_id} is not known; run \`loopstate intent show\``);
  const confirm = "Retract";
  const choice = await vscode.window.showWarningMessage(
    `Retract the claim "${chosen.claim.statement}"?`,
    { modal: true, detail: "It is recorded as invalidated by you; the claim and its history stay in the audit log." },
    confirm,
  );
  if (choice !== confirm) return;
  await execute(ctx, root, {
    kind: "intent.claim_invalidate",
    task_id: chosen.taskId,
    claim_id: chosen.claim.claim_id,
    actor: "user",
    reason: "retracted from VS Code",
    source: { kind: "user_event", event_id: randomUUID() },
  });
}

function openGates(ctx: CommandContext, root: string): Array<{ goalId: string; gate: Gate }> {
  const boards = ctx.live.project(root)?.boards ?? new Map();
  const gates: Array<{ goalId: string; gate: Gate }> = [];
  for (const [goalId, board] of boards) {
    for (const gate of [...(board.user_inbox ?? []), ...(board.controller_inbox ?? [])]) gates.push({ goalId, gate });
  }
  return gates;
}

async function resolveGate(ctx: CommandContext, node?: TreeNode): Promise<void> {
  const { root } = requireRoot(ctx);
  const gates = openGates(ctx, root);
  let chosen =
    node?.contextValue === "gate" ? gates.find((g) => g.goalId === node.ref?.goal_id && g.gate.gate_id === node.ref?.gate_id) : undefined;
  if (chosen === undefined) {
    if (gates.length === 0) {
      void vscode.window.showInformationMessage("loopstate: no gate is waiting for a decision.");
      return;
    }
    const picked = await vscode.window.showQuickPick(
      gates.map((g) => ({ label: `${g.gate.gate_id} ${g.gate.title}`, description: g.goalId, g })),
      { title: "Resolve gate" },
    );
    if (!picked) return;
    chosen = picked.g;
  }
  const decision = await vscode.window.showQuickPick(["approve", "reject", "defer"], { title: `Resolve ${chosen.gate.gate_id}: decision` });
  if (!decision) return;
  const rationale = await vscode.window.showInputBox({ title: `Resolve ${chosen.gate.gate_id}`, prompt: "Why (optional, one line)" });
  if (rationale === undefined) return;
  await execute(ctx, root, {
    kind: "goals.resolve",
    goal_id: chosen.goalId,
    gate_id: chosen.gate.gate_id,
    decision,
    resolved_by: "user",
    ...(rationale.trim() ? { rationale: rationale.trim() } : {}),
  });
}

async function pickGoal(ctx: CommandContext, root: string, node?: TreeNode): Promise<string | undefined> {
  if (node?.contextValue === "goal" && node.ref?.goal_id) return node.ref.goal_id;
  const goals = [...(ctx.live.project(root)?.boards.keys() ?? [])].sort();
  if (goals.length === 0) throw new Error("this project has no goal yet (`loopstate goals add GOAL TITLE` starts one)");
  return goals.length === 1 ? goals[0] : vscode.window.showQuickPick(goals, { title: "Which goal?" });
}

async function renderGoalState(ctx: CommandContext, node?: TreeNode): Promise<void> {
  const { root } = requireRoot(ctx);
  const goalId = await pickGoal(ctx, root, node);
  if (!goalId) return;
  try {
    await execute(ctx, root, { kind: "goals.render", goal_id: goalId });
  } catch (error) {
    // The private workbench may not go where git would publish it: offer the public-safe view.
    if ((error as { data?: { code?: string } }).data?.code !== "PRIVACY_VIOLATION") throw error;
    const publicView = "Render the public-safe view";
    const choice = await vscode.window.showWarningMessage(`loopstate: ${messageOf(error)}`, publicView);
    if (choice !== publicView) return;
    await execute(ctx, root, { kind: "goals.render", goal_id: goalId, public: true });
  }
  const document = await vscode.workspace.openTextDocument(vscode.Uri.joinPath(vscode.Uri.file(root), "ACTIVE_GOAL_STATE.md"));
  await vscode.window.showTextDocument(document, { preview: true });
}

async function verify(ctx: CommandContext): Promise<void> {
  const { root, name } = requireRoot(ctx);
  const report = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `loopstate: verifying the store of ${name}` },
    () => query<VerifyReport>(ctx, root, { kind: "project.verify" }),
  );
  const events = report.streams.reduce((n, s) => n + (s.events ?? 0), 0);
  if (report.ok) {
    void vscode.window.showInformationMessage(`loopstate: the store is intact: ${report.streams.length} stream(s), ${events} event(s) verified.`);
    return;
  }
  const broken = report.streams.filter((s) => !s.ok);
  for (const stream of broken) ctx.output.appendLine(`verify: ${stream.stream}: ${JSON.stringify(stream.error ?? stream.torn_tail ?? {})}`);
  void vscode.window
    .showErrorMessage(
      `loopstate: broken stream(s): ${broken.map((s) => s.stream).join(", ")}. Run \`loopstate recover\` after reading the output.`,
      "Show output",
    )
    .then((choice) => choice && ctx.output.show());
}

async function showAuditLog(ctx: CommandContext, node?: TreeNode): Promise<void> {
  const { root } = requireRoot(ctx);
  const state = ctx.live.project(root);
  const streams = [
    "intent",
    ...[...(state?.runs.keys() ?? [])].map((id) => `runs.${id}`),
    ...[...(state?.boards.keys() ?? [])].map((id) => `goals.${id}`),
  ];
  // From a run's node (a click or its context menu): that run's stream, without asking.
  const stream = node?.ref?.run_id
    ? `runs.${node.ref.run_id}`
    : await vscode.window.showQuickPick(streams, { title: "Show the audit log of which stream?" });
  if (!stream) return;
  const uri = vscode.Uri.from({ scheme: AUDIT_SCHEME, path: `/${stream}.log`, query: new URLSearchParams({ root }).toString() });
  const document = await vscode.workspace.openTextDocument(uri);
  await vscode.window.showTextDocument(document, { preview: true });
}

/** One event of a log page as a line: sequence, time, type, hash, then its payload as JSON. */
export function logLine(event: Record<string, unknown>): string {
  const field = (...names: string[]) => names.map((name) => event[name]).find((value) => value !== undefined && value !== null);
  const sequence = String(field("append_sequence", "sequence") ?? "?").padStart(6);
  const hash = String(field("event_hash", "hash") ?? "").slice(0, 12);
  const payload = field("payload");
  return `${sequence}  ${String(field("recorded_at", "ts", "at") ?? "")}  ${String(field("event_type", "type") ?? "?").padEnd(24)}  ${hash}${payload === undefined ? "" : `  ${JSON.stringify(payload)}`}`;
}

/** A stream's audit log (`project.log`, every page) as a read-only document (a content provider's documents cannot be edited). */
class AuditLogProvider implements vscode.TextDocumentContentProvider {
  constructor(private readonly ctx: CommandContext) {}

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const root = new URLSearchParams(uri.query).get("root") ?? "";
    const stream = uri.path.replace(/^\//, "").replace(/\.log$/, "");
    const lines: string[] = [];
    let after: number | null = 0;
    try {
      while (after !== null) {
        const page: LogPage = await query<LogPage>(this.ctx, root, { kind: "project.log", stream, after, limit: 1000 });
        lines.push(...page.events.map(logLine));
        after = page.next_after ?? null;
      }
    } catch (error) {
      return `${lines.join("\n")}\nthe audit log of ${stream} could not be read: ${describeError(error)}\n`;
    }
    return `${lines.join("\n")}\n`;
  }
}
