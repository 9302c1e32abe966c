/**
 * The three tree views as plain nodes (label, description, icon, children): pure, so the
 * grouping and wording are tested without VS Code; src/views.ts turns nodes into TreeItems.
 *
 * Every group starts folded; what a person looks at first starts open: the outcomes and the
 * open disputes, an active run (not its budgets or evidence), a run's open issues, the only
 * goal or a goal with gates waiting, its gate inbox when not empty, a goal's only role. A
 * stream that cannot be read replaces its part of a view with one node that says so (never
 * the state from before the fault). Times are relative and local, durations in units.
 */

import type { Claim, GoalBoard, IntentSnapshot, RunStatus, Todo } from "./projections";
import { duration, humaneTime } from "./time";

export interface TreeNode {
  /** Stable across updates, so VS Code keeps the expansion state when a view refreshes. */
  id: string;
  label: string;
  description?: string;
  tooltip?: string;
  /** A codicon name. */
  icon?: string;
  /** For `view/item/context` menus (e.g. "gate" offers Resolve gate). */
  contextValue?: string;
  children?: TreeNode[];
  /** Shown open at first; every other node with children starts folded. */
  expanded?: boolean;
  /** The command a click runs, with the node as its argument. */
  click?: { command: string; title: string };
  /** Keys a command needs (run id, goal id, task id), so it does not parse ids back out. */
  ref?: Record<string, string>;
}

/** One node standing for a part of a view whose stream cannot be read. */
export function unreadableNode(id: string, topic: string, message: string): TreeNode {
  return {
    id: `${id}/unreadable`,
    label: `${topic}: unreadable`,
    description: message,
    tooltip: `${topic} cannot be read: ${message}\n\nRun \`loopstate verify\`, then \`loopstate recover\`; this view comes back by itself.`,
    icon: "error",
    contextValue: "unreadable",
  };
}

/** The facet groups of the Intent view, in the order a person reads them. */
export const FACET_GROUPS: Array<{ label: string; facets: string[]; icon: string }> = [
  { label: "Outcomes", facets: ["outcome"], icon: "target" },
  { label: "Constraints", facets: ["hard_constraint", "soft_constraint", "tradeoff"], icon: "lock" },
  { label: "Success signals", facets: ["success_signal", "failure_signal", "result_feedback"], icon: "pass" },
  { label: "Unknowns", facets: ["unknown"], icon: "question" },
];

function claimNode(prefix: string, claim: Claim, taskId: string | null | undefined): TreeNode {
  const source = claim.source_ref?.kind ?? "no source";
  const task = claim.task_id ?? taskId ?? null;
  return {
    ref: task ? { claim_id: claim.claim_id, task_id: task } : { claim_id: claim.claim_id },
    id: `${prefix}/${claim.claim_id}`,
    label: claim.statement,
    description: `${claim.epistemic_status ?? "?"} · ${source}`,
    tooltip: `${claim.statement}\n\nstatus: ${claim.epistemic_status ?? "?"}\nrole: ${claim.role ?? "?"}\nscope: ${claim.scope ?? "?"}\nfacets: ${(claim.facets ?? []).join(", ")}\nsource: ${source}${claim.direct_user ? " (direct from the user)" : ""}\nid: ${claim.claim_id}`,
    icon: claim.epistemic_status === "explicit" ? "account" : claim.epistemic_status === "evidence" ? "beaker" : "lightbulb",
    contextValue: "claim",
  };
}

export function intentNodes(snapshot: IntentSnapshot | null, problem: string | null = null): TreeNode[] {
  if (problem !== null) return [unreadableNode("intent", "intent", problem)];
  if (snapshot === null) return [];
  const taskId = snapshot.task_id ?? (snapshot.tasks?.length === 1 ? snapshot.tasks[0].task_id : null);
  const byFacet = snapshot.by_facet ?? {};
  const nodes: TreeNode[] = [];
  for (const group of FACET_GROUPS) {
    const seen = new Set<string>();
    const claims: Claim[] = [];
    for (const facet of group.facets) {
      for (const list of Object.values(byFacet[facet] ?? {})) {
        for (const claim of list) {
          if (!seen.has(claim.claim_id)) {
            seen.add(claim.claim_id);
            claims.push(claim);
          }
        }
      }
    }
    if (group.facets.includes("unknown")) {
      for (const claim of snapshot.unknowns ?? []) {
        if (!seen.has(claim.claim_id)) {
          seen.add(claim.claim_id);
          claims.push(claim);
        }
      }
    }
    nodes.push({
      id: `intent/${group.label}`,
      label: group.label,
      description: String(claims.length),
      icon: group.icon,
      expanded: group.label === "Outcomes" && claims.length > 0,
      children: claims.map((claim) => claimNode(`intent/${group.label}`, claim, taskId)),
    });
  }
  const remaining = snapshot.remaining ?? 0;
  if (remaining > 0) {
    const task = snapshot.task_id ? ` --task ${snapshot.task_id}` : "";
    nodes.push({
      id: "intent/More",
      label: `${remaining} more active claim${remaining === 1 ? "" : "s"}`,
      description: "not on this page",
      tooltip: `The view shows the first page of ${snapshot.active_count ?? "?"} active claims; the next page:\nloopstate intent show${task} --cursor ${snapshot.next_cursor ?? ""}`,
      icon: "ellipsis",
    });
  }
  const disputes = snapshot.disagreements ?? [];
  nodes.push({
    id: "intent/Disputes",
    label: "Disputes",
    description: String(disputes.length),
    icon: disputes.length > 0 ? "warning" : "comment-discussion",
    expanded: disputes.length > 0,
    children: disputes.map((claim) => claimNode("intent/Disputes", claim, taskId)),
  });
  const stale = snapshot.stale ?? [];
  if (stale.length > 0) {
    nodes.push({
      id: "intent/Stale",
      label: "Stale long-term claims",
      description: String(stale.length),
      icon: "history",
      tooltip: "Long-term claims not confirmed for a long time: confirm them or invalidate them.",
      children: stale.map((claim) => ({ ...claimNode("intent/Stale", claim, taskId), icon: "warning", description: claim.reason ?? "stale" })),
    });
  }
  return nodes;
}

function shortId(id: string): string {
  return id.slice(0, 8);
}

/** "3 of 100", or "3 (no limit)"; a money amount keeps its decimals as the store wrote them. */
function share(spent: string, limit: string | null): string {
  return limit === null ? `${spent} (no limit)` : `${spent} of ${limit}`;
}

function budgetLines(status: RunStatus): TreeNode[] {
  const used = status.run?.usage ?? {};
  const limits = status.run?.budgets ?? {};
  const count = (n: number | undefined) => (typeof n === "number" ? String(n) : null);
  const rows: Array<[string, string]> = [
    ["duration", share(duration(used.duration_seconds ?? 0), typeof limits.max_duration_seconds === "number" ? duration(limits.max_duration_seconds) : null)],
    ["mutations", share(count(used.mutations) ?? "0", count(limits.max_mutations))],
    ["external actions", share(count(used.external_actions) ?? "0", count(limits.max_external_actions))],
    ["cost", limits.max_cost_usd ? share(`$${used.cost_usd ?? "0"}`, `$${limits.max_cost_usd}`) : `$${used.cost_usd ?? "0"} (no spending authority)`],
  ];
  return rows.map(([name, text]) => ({ id: `runs/${status.run_id}/budget/${name}`, label: name, description: text, icon: "dashboard" }));
}

/** The Runs view, newest first; ``now`` dates the lease and the run's stamps; ``problems`` are unreadable streams by topic. */
export function runNodes(
  runs: Iterable<RunStatus>,
  now: number,
  problems: ReadonlyMap<string, string> = new Map(),
  timeZone?: string,
): TreeNode[] {
  const broken = [...problems].filter(([topic]) => topic.startsWith("runs/status/") || topic === "project/runs");
  const marks = broken.map(([topic, message]) => unreadableNode(`runs/${topic}`, topic, message));
  const sorted = [...runs]
    .filter((status) => status.run !== null && !problems.has(`runs/status/${status.run_id}`))
    .sort((a, b) => (b.run!.updated_at ?? "").localeCompare(a.run!.updated_at ?? "") || a.run_id.localeCompare(b.run_id));
  return [...marks, ...sorted.map((status) => {
    const run = status.run!;
    const id = `runs/${status.run_id}`;
    const lease = status.lease;
    const expiry = lease?.expires_at;
    const leaseNode: TreeNode = {
      id: `${id}/lease`,
      label: "lease",
      description: lease
        ? `${lease.owner?.actor ?? "?"} · ${status.lease_expired ? "expired" : "expires"} ${humaneTime(expiry, now, timeZone)}`
        : "none",
      tooltip: lease ? `holder: ${lease.owner?.actor ?? "?"}${lease.owner?.session_id ? ` (session ${lease.owner.session_id})` : ""}\nexpires: ${expiry ?? "?"} UTC\ngeneration: ${lease.generation ?? "?"}` : undefined,
      icon: "key",
    };
    const openIssues = status.issues.filter((issue) => issue.status !== "closed");
    return {
      id,
      ref: { run_id: status.run_id },
      label: `${shortId(status.run_id)} ${run.objective ?? ""}`.trim(),
      description: `${run.status.replace(/_/g, " ")} · ${run.stage ?? "?"} · updated ${humaneTime(run.updated_at, now, timeZone)}`,
      tooltip: `run ${status.run_id}\nstatus: ${run.status}${run.terminal_reason ? ` (${run.terminal_reason})` : ""}\nstage: ${run.stage ?? "?"}\nmode: ${run.mode ?? "?"}\ncreated: ${humaneTime(run.created_at, now, timeZone)}\nupdated: ${humaneTime(run.updated_at, now, timeZone)}\n\nClick for its audit log.`,
      icon: run.status === "active" ? "play-circle" : run.status === "failed" ? "error" : run.status === "halted_kill_switch" ? "debug-stop" : "circle-outline",
      contextValue: "run",
      expanded: run.status === "active",
      click: { command: "loopstate.showAuditLog", title: "Show the run's audit log" },
      children: [
        { id: `${id}/stage`, label: "stage", description: run.stage ?? "?", icon: "milestone" },
        leaseNode,
        { id: `${id}/budgets`, label: "budgets", icon: "dashboard", children: budgetLines(status) },
        {
          id: `${id}/issues`,
          label: "open issues",
          description: String(openIssues.length),
          expanded: openIssues.length > 0,
          icon: "issues",
          children: openIssues.map((issue) => ({
            id: `${id}/issues/${issue.issue_id}`,
            label: issue.title ?? issue.issue_id,
            description: `${issue.severity ?? "?"}${issue.blocking ? " · blocking" : ""} · ${issue.status ?? "?"}`,
            icon: issue.blocking ? "error" : "info",
          })),
        },
        {
          id: `${id}/evidence`,
          label: "evidence",
          description: String(status.evidence_ids.length),
          icon: "beaker",
          children: status.evidence_ids.map((evidence) => ({ id: `${id}/evidence/${evidence}`, label: evidence, icon: "file" })),
        },
      ],
    };
  })];
}

const PRIORITY_ORDER = ["P0", "P1", "P2", "P3", "P4"];

function todoNode(goalId: string, todo: Todo): TreeNode {
  return {
    id: `goals/${goalId}/todo/${todo.todo_id}`,
    label: `${todo.todo_id} ${todo.title}`,
    description: `${todo.priority ?? "?"} · ${todo.status ?? "open"}`,
    icon: todo.status === "blocked" ? "circle-slash" : todo.status === "claimed" ? "person" : "circle-large-outline",
    contextValue: "todo",
  };
}

/** Gates waiting for the user across the boards (the Goals view's badge). */
export function userGates(boards: Iterable<GoalBoard>): number {
  let count = 0;
  for (const board of boards) count += board.user_inbox?.length ?? 0;
  return count;
}

/** One node per goal: its todos by role (each role's todos by priority), then its gate inbox. */
export function goalNodes(boards: Map<string, GoalBoard>, problems: ReadonlyMap<string, string> = new Map()): TreeNode[] {
  const marks = [...problems]
    .filter(([topic]) => topic.startsWith("goals/board/") || topic === "project/goals")
    .map(([topic, message]) => unreadableNode(`goals/${topic}`, topic, message));
  const ids = [...boards.keys()].filter((goalId) => !problems.has(`goals/board/${goalId}`)).sort();
  return [...marks, ...ids.map((goalId) => {
    const board = boards.get(goalId)!;
    const active = board.active ?? [];
    const roles = active.map((group) => ({
      id: `goals/${goalId}/role/${group.role}`,
      label: group.role,
      description: String(group.todos.length),
      icon: "person",
      expanded: active.length === 1,
      children: [...group.todos]
        .sort((a, b) => PRIORITY_ORDER.indexOf(a.priority ?? "P4") - PRIORITY_ORDER.indexOf(b.priority ?? "P4"))
        .map((todo) => todoNode(goalId, todo)),
    }));
    const gates = [...(board.user_inbox ?? []), ...(board.controller_inbox ?? [])];
    const inbox: TreeNode = {
      id: `goals/${goalId}/inbox`,
      label: "gate inbox",
      description: String(gates.length),
      icon: gates.length > 0 ? "bell-dot" : "bell",
      expanded: gates.length > 0,
      children: gates.map((gate) => ({
        id: `goals/${goalId}/gate/${gate.gate_id}`,
        ref: { goal_id: goalId, gate_id: gate.gate_id },
        label: `${gate.gate_id} ${gate.title}`,
        description: `${gate.gate_kind ?? "user"} · ${gate.status ?? "open"}`,
        tooltip: `${gate.title}\n\nClick to approve, reject or defer.`,
        icon: "question",
        contextValue: "gate",
        click: { command: "loopstate.resolveGate", title: "Resolve gate" },
      })),
    };
    const open = board.page?.active_total ?? roles.reduce((n, role) => n + role.children.length, 0);
    // The board arrives one page at a time: say what this page leaves out and where to see it.
    const leftOut = board.page?.after ?? 0;
    const more: TreeNode[] = leftOut > 0 ? [{
      id: `goals/${goalId}/more`,
      label: `${leftOut} more todo${leftOut === 1 ? "" : "s"} not shown`,
      description: `loopstate goals board ${goalId} --all`,
      icon: "ellipsis",
    }] : [];
    return {
      id: `goals/${goalId}`,
      ref: { goal_id: goalId },
      label: goalId,
      description: `${open} open · ${gates.length} gate${gates.length === 1 ? "" : "s"}`,
      icon: "checklist",
      contextValue: "goal",
      expanded: ids.length === 1 || (board.user_inbox?.length ?? 0) > 0,
      children: [...roles, ...more, inbox],
    };
  })];
}
