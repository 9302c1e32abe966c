/**
 * The status bar's text, tone and tooltip for one project: pure, so it is tested without VS Code.
 *
 * The summary follows one run: the most recently updated active run (a run being worked on);
 * with none active, the run it followed before (so after a halt it stays on the run that was
 * working, not on one that never started), else the most recently updated run that ever
 * started, else the most recently updated run. Around it: open blocking issues of every run,
 * the active claim count and the open disputes of the project's intent.
 */

import type { ProjectState, RunStatus } from "./projections";

/** How the item is coloured: VS Code's error and warning backgrounds, or none ("alarm": src/model/historyAlarm.ts). */
export type Tone = "normal" | "halted" | "failed" | "waiting" | "alarm";

export interface StatusSummary {
  text: string;
  tone: Tone;
  tooltip: string;
}

const HALTED = new Set(["halted_kill_switch"]);
const FAILED = new Set(["failed"]);
const WAITING = new Set(["waiting_approval", "waiting_external", "blocked"]);
const ACTIVE = new Set(["active"]);

/** A run status in the status bar's words. */
export function statusWords(status: string): string {
  return status === "halted_kill_switch" ? "halted" : status.replace(/_/g, " ");
}

/** Whether a run ever had a lease (a never-started run is created `ready`, without one). */
export function everStarted(status: RunStatus): boolean {
  if (status.lease !== null && status.lease !== undefined) return true;
  const run = status.run;
  if (run === null) return false;
  if (run.status === "active") return true;
  const used = run.usage ?? {};
  return (used.mutations ?? 0) > 0 || (used.external_actions ?? 0) > 0 || (used.duration_seconds ?? 0) > 0;
}

/** The run the status bar follows (see the module's docstring), or null when the project has no run. */
export function followedRun(runs: Iterable<RunStatus>, previous: string | null = null): RunStatus | null {
  const known = [...runs].filter((status) => status.run !== null);
  const newest = (list: RunStatus[]) =>
    list.reduce<RunStatus | null>((best, item) => (best === null || stamp(item) > stamp(best) ? item : best), null);
  return (
    newest(known.filter((status) => ACTIVE.has(status.run!.status))) ??
    known.find((status) => status.run_id === previous) ??
    newest(known.filter(everStarted)) ??
    newest(known)
  );
}

function stamp(status: RunStatus): string {
  return `${status.run?.updated_at ?? ""}\u0000${status.run_id}`;
}

/** The share of the tightest budget a run has used, as a whole percentage, or null without limits. */
export function budgetUse(status: RunStatus): number | null {
  const used = status.run?.usage ?? {};
  const limits = status.run?.budgets ?? {};
  const pairs: Array<[number | undefined, number | undefined]> = [
    [used.duration_seconds, limits.max_duration_seconds],
    [used.mutations, limits.max_mutations],
    [used.external_actions, limits.max_external_actions],
    [decimal(used.cost_usd), decimal(limits.max_cost_usd)],
  ];
  const shares = pairs
    .filter((pair): pair is [number, number] => typeof pair[0] === "number" && typeof pair[1] === "number" && pair[1] > 0)
    .map(([spent, limit]) => spent / limit);
  return shares.length === 0 ? null : Math.round(Math.max(...shares) * 100);
}

function decimal(value: string | null | undefined): number | undefined {
  return typeof value === "string" && value !== "" ? Number(value) : undefined;
}

export function openBlockingIssues(runs: Iterable<RunStatus>): number {
  let count = 0;
  for (const status of runs) {
    count += status.issues.filter((issue) => issue.blocking && issue.status !== "closed" && issue.status !== "deferred").length;
  }
  return count;
}

/**
 * Red while a kill switch stands or the run failed; yellow while the run waits (for approval,
 * an external event, or, halted by a switch that has since been cleared, for its harness to
 * resume it).
 */
export function toneOf(runStatus: string | undefined, killSwitchSet: boolean): Tone {
  if (killSwitchSet) return "halted";
  if (runStatus !== undefined && HALTED.has(runStatus)) return "waiting";
  if (runStatus !== undefined && FAILED.has(runStatus)) return "failed";
  if (runStatus !== undefined && WAITING.has(runStatus)) return "waiting";
  return "normal";
}

/**
 * Whether the kill switch stands: as the project's kill-switch topic last pushed it (set or
 * cleared by any process), else as a run's view last probed it.
 */
export function killSwitchSet(state: ProjectState): boolean {
  if (state.killSwitch !== null) return state.killSwitch.set;
  for (const status of state.runs.values()) {
    if (status.kill_switch) return status.kill_switch.set;
  }
  return false;
}

export interface SummaryOptions {
  /** The run followed last time (src/views.ts keeps it per project). */
  previousRun?: string | null;
  /** Name the project in the text too (a multi-root workspace has several). */
  nameInText?: boolean;
}

/** Runs the kill switch halted, for "Stop all runs" to report. */
export function haltedCount(state: ProjectState): number {
  return [...state.runs.values()].filter((status) => status.run?.status === "halted_kill_switch").length;
}

export function summarize(state: ProjectState, folderName: string, options: SummaryOptions = {}): StatusSummary & { runId: string | null } {
  const prefix = options.nameInText ? `${folderName}: ` : "";
  if (state.problem !== null) {
    return { text: `$(error) ${prefix}loopstate`, tone: "failed", tooltip: `loopstate: ${folderName}\n${state.problem}`, runId: null };
  }
  if (state.streamProblems.size > 0) {
    const count = state.streamProblems.size;
    const lines = [...state.streamProblems].map(([topic, message]) => `${topic}: ${message}`);
    return {
      text: `$(error) ${prefix}${count} ${count === 1 ? "stream" : "streams"} unreadable`,
      tone: "failed",
      tooltip: [`loopstate: ${folderName}`, ...lines, "Run `loopstate verify`, then `loopstate recover`; the views come back by themselves."].join("\n"),
      runId: null,
    };
  }
  const runs = [...state.runs.values()];
  const run = followedRun(runs, options.previousRun ?? null);
  const halted = killSwitchSet(state);
  const blocking = openBlockingIssues(runs);
  const claims = state.intent?.active_count ?? 0;
  const disputes = state.intent?.disagreements?.length ?? 0;
  const parts: string[] = [];
  if (halted) parts.push("HALTED");
  if (run?.run) {
    const use = budgetUse(run);
    const status = halted && run.run.status === "active" ? "halting" : statusWords(run.run.status);
    parts.push(use === null ? `run ${status}` : `run ${status} ${use}%`);
  }
  if (blocking > 0) parts.push(`${blocking} blocking`);
  parts.push(`${claims} ${claims === 1 ? "claim" : "claims"}`);
  if (disputes > 0) parts.push(`${disputes} ${disputes === 1 ? "dispute" : "disputes"}`);
  const tone = toneOf(run?.run?.status, halted);
  const icon = tone === "halted" ? "$(debug-stop)" : tone === "failed" ? "$(error)" : tone === "waiting" ? "$(watch)" : "$(pulse)";
  return { text: `${icon} ${prefix}${parts.join(" · ")}`, tone, tooltip: tooltipOf(state, folderName, run, halted, blocking), runId: run?.run_id ?? null };
}

function tooltipOf(state: ProjectState, folderName: string, run: RunStatus | null, halted: boolean, blocking: number): string {
  const lines = [`loopstate: ${folderName} (${state.root})`];
  if (halted) lines.push("Kill switch SET: every run of this project halts. \"loopstate: Resume\" clears it (or remove the STOP file).");
  if (run?.run) {
    const r = run.run;
    lines.push(`Run ${run.run_id.slice(0, 8)}: ${r.status}, stage ${r.stage ?? "?"}${r.objective ? `: ${r.objective}` : ""}`);
    const use = budgetUse(run);
    if (use !== null) lines.push(`Budget use: ${use}% of the tightest budget`);
  } else {
    lines.push("No run in this project.");
  }
  lines.push(`Open blocking issues: ${blocking}`);
  lines.push(`Active claims: ${state.intent?.active_count ?? 0}; open disputes: ${state.intent?.disagreements?.length ?? 0}`);
  const todos = [...state.boards.values()].reduce((n, board) => n + (board.active ?? []).reduce((m, g) => m + g.todos.length, 0), 0);
  const gates = [...state.boards.values()].reduce((n, board) => n + (board.user_inbox?.length ?? 0), 0);
  lines.push(`Open todos: ${todos}; gates waiting for you: ${gates}`);
  lines.push("Click to open the loopstate panel.");
  return lines.join("\n");
}
