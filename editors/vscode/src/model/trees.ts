/**
 * The three tree views as plain nodes (label, description, icon, children): pure, so the
 * grouping and wording are tested without VS Code; src/views.ts turns nodes into TreeItems.
 */

import type { Claim, GoalBoard, IntentSnapshot, RunStatus, Todo } from "./projections";

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
  /** Shown folded (a run's details); other nodes with children are shown open. */
  collapsed?: boolean;
}

/** The facet groups of the Intent view, in the order a person reads them. */
export const FACET_GROUPS: Array<{ label: string; facets: string[]; icon: string }> = [
  { label: "Outcomes", facets: ["outcome"], icon: "target" },
  { label: "Constraints", facets: ["hard_constraint", "soft_constraint", "tradeoff"], icon: "lock" },
  { label: "Success signals", facets: ["success_signal", "failure_signal", "result_feedback"], icon: "pass" },
  { label: "Unknowns", facets: ["unknown"], icon: "question" },
];

function claimNode(prefix: string, claim: Claim): TreeNode {
  const source = claim.source_ref?.kind ?? "no source";
  return {
    id: `${prefix}/${claim.claim_id}`,
    label: claim.statement,
    description: `${claim.epistemic_status ?? "?"} · ${source}`,
    tooltip: `${claim.statement}\n\nstatus: ${claim.epistemic_status ?? "?"}\nrole: ${claim.role ?? "?"}\nscope: ${claim.scope ?? "?"}\nfacets: ${(claim.facets ?? []).join(", ")}\nsource: ${source}${claim.direct_user ? " (direct from the user)" : ""}\nid: ${claim.claim_id}`,
    icon: claim.epistemic_status === "explicit" ? "account" : claim.epistemic_status === "evidence" ? "beaker" : "lightbulb",
    contextValue: "claim",
  };
}

export function intentNodes(snapshot: IntentSnapshot | null): TreeNode[] {
  if (snapshot === null) return [];
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
      children: claims.map((claim) => claimNode(`intent/${group.label}`, claim)),
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
    children: disputes.map((claim) => claimNode("intent/Disputes", claim)),
  });
  const stale = snapshot.stale ?? [];
  if (stale.length > 0) {
    nodes.push({
      id: "intent/Stale",
      label: "Stale long-term claims",
      description: String(stale.length),
      icon: "history",
      tooltip: "Long-term claims not confirmed for a long time: confirm them or invalidate them.",
      children: stale.map((claim) => ({ ...claimNode("intent/Stale", claim), icon: "warning", description: claim.reason ?? "stale" })),
    });
  }
  return nodes;
}

function shortId(id: string): string {
  return id.slice(0, 8);
}

function budgetLines(status: RunStatus): TreeNode[] {
  const used = status.run?.usage ?? {};
  const limits = status.run?.budgets ?? {};
  const rows: Array<[string, unknown, unknown]> = [
    ["duration (s)", used.duration_seconds, limits.max_duration_seconds],
    ["mutations", used.mutations, limits.max_mutations],
    ["external actions", used.external_actions, limits.max_external_actions],
    ["cost (USD)", used.cost_usd ?? "0", limits.max_cost_usd ?? "no spending authority"],
  ];
  return rows.map(([name, spent, limit]) => ({
    id: `runs/${status.run_id}/budget/${name}`,
    label: name,
    description: `${String(spent ?? 0)} / ${String(limit ?? "?")}`,
    icon: "dashboard",
  }));
}

export function runNodes(runs: Iterable<RunStatus>): TreeNode[] {
  const sorted = [...runs]
    .filter((status) => status.run !== null)
    .sort((a, b) => (b.run!.updated_at ?? "").localeCompare(a.run!.updated_at ?? "") || a.run_id.localeCompare(b.run_id));
  return sorted.map((status) => {
    const run = status.run!;
    const id = `runs/${status.run_id}`;
    const lease = status.lease;
    const leaseNode: TreeNode = {
      id: `${id}/lease`,
      label: "lease",
      description: lease
        ? `${lease.owner?.actor ?? "?"} until ${lease.expires_at ?? "?"}${status.lease_expired ? " (expired)" : ""}`
        : "none",
      icon: "key",
    };
    const openIssues = status.issues.filter((issue) => issue.status !== "closed");
    return {
      id,
      label: `${shortId(status.run_id)} ${run.objective ?? ""}`.trim(),
      description: `${run.status} · ${run.stage ?? "?"}`,
      tooltip: `run ${status.run_id}\nstatus: ${run.status}${run.terminal_reason ? ` (${run.terminal_reason})` : ""}\nstage: ${run.stage ?? "?"}\nmode: ${run.mode ?? "?"}`,
      icon: run.status === "active" ? "play-circle" : run.status === "failed" ? "error" : run.status === "halted_kill_switch" ? "debug-stop" : "circle-outline",
      contextValue: "run",
      children: [
        { id: `${id}/stage`, label: "stage", description: run.stage ?? "?", icon: "milestone" },
        leaseNode,
        { id: `${id}/budgets`, label: "budgets", icon: "dashboard", collapsed: true, children: budgetLines(status) },
        {
          id: `${id}/issues`,
          label: "open issues",
          description: String(openIssues.length),
          collapsed: openIssues.length === 0,
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
          collapsed: true,
          icon: "beaker",
          children: status.evidence_ids.map((evidence) => ({ id: `${id}/evidence/${evidence}`, label: evidence, icon: "file" })),
        },
      ],
    };
  });
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

/** One node per goal: its todos by role (each role's todos by priority), then its gate inbox. */
export function goalNodes(boards: Map<string, GoalBoard>): TreeNode[] {
  return [...boards.keys()].sort().map((goalId) => {
    const board = boards.get(goalId)!;
    const roles = (board.active ?? []).map((group) => ({
      id: `goals/${goalId}/role/${group.role}`,
      label: group.role,
      description: String(group.todos.length),
      icon: "person",
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
      children: gates.map((gate) => ({
        id: `goals/${goalId}/gate/${gate.gate_id}`,
        label: `${gate.gate_id} ${gate.title}`,
        description: `${gate.gate_kind ?? "user"} · ${gate.status ?? "open"}`,
        icon: "question",
        contextValue: "gate",
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
      label: goalId,
      description: `${open} open · ${gates.length} gate${gates.length === 1 ? "" : "s"}`,
      icon: "checklist",
      contextValue: "goal",
      children: [...roles, ...more, inbox],
    };
  });
}
