/**
 * The projections loopstate pushes, as far as the extension reads them.
 *
 * The protocol schema types a subscription's `snapshot` as "any" (each topic has its own
 * shape, documented in docs/intent.md, docs/runs.md, docs/goals.md), so these interfaces
 * name only the fields the views show; everything is optional where the server may omit it.
 */

export interface Claim {
  claim_id: string;
  task_id?: string;
  statement: string;
  role?: string;
  epistemic_status?: string;
  scope?: string;
  facets?: string[];
  source_ref?: { kind?: string; event_id?: string } | null;
  direct_user?: boolean;
}

/** `intent/snapshot`: the first page of active claims grouped by facet, then by epistemic status;
 * `remaining` active claims are on later pages (`loopstate intent show --cursor <next_cursor>`). */
export interface IntentSnapshot {
  sequence?: number;
  task_id?: string | null;
  tasks?: Array<{ task_id: string; label?: string | null; mode?: string; active_claims?: number }>;
  by_facet?: Record<string, Record<string, Claim[]>>;
  disagreements?: Claim[];
  unknowns?: Claim[];
  stale?: Array<Claim & { reason?: string }>;
  active_count?: number;
  remaining?: number;
  next_cursor?: string | null;
}

export interface RunIssue {
  issue_id: string;
  title?: string;
  severity?: string;
  blocking?: boolean;
  status?: string;
}

export interface KillSwitch {
  set: boolean;
  paths: string[];
  config_error?: string | null;
}

/** `runs/status/<run_id>` (the RunStatus of the protocol package). */
export interface RunStatus {
  run_id: string;
  sequence: number;
  run: {
    status: string;
    stage?: string;
    objective?: string;
    mode?: string;
    created_at?: string;
    updated_at?: string;
    terminal_reason?: string | null;
    budgets?: { max_duration_seconds?: number; max_mutations?: number; max_external_actions?: number; max_cost_usd?: string | null };
    usage?: { duration_seconds?: number; mutations?: number; external_actions?: number; cost_usd?: string | null };
    open_blocking_issues?: number;
    asset?: { name?: string };
  } | null;
  lease: { owner?: { actor?: string; session_id?: string } | null; expires_at?: string; lease_id?: string; generation?: number } | null;
  pending_operation?: unknown;
  issues: RunIssue[];
  evidence_ids: string[];
  lease_expired?: boolean | null;
  kill_switch?: KillSwitch | null;
}

export interface Todo {
  todo_id: string;
  title: string;
  role?: string;
  priority?: string;
  status?: string;
}

export interface Gate {
  gate_id: string;
  gate_kind?: string;
  title: string;
  status?: string;
}

/** `goals/board/<goal_id>`: todos by role and priority, the gate inboxes. */
export interface GoalBoard {
  meta?: { goal_id?: string; last_append_sequence?: number };
  active?: Array<{ role: string; todos: Todo[] }>;
  completed?: Todo[];
  user_inbox?: Gate[];
  controller_inbox?: Gate[];
  runs?: unknown[];
  /** The page the subscription pushes (the default board page) and the counts of what it leaves out. */
  page?: { after?: number; active_total?: number; completed_total?: number; next_cursor?: string | null };
}

/** One run of the `project/runs` listing (the fields the extension reads). */
export interface RunSummary {
  run_id: string;
  status: string;
  objective?: string;
  updated_at?: string;
}

/** `project/runs`: every run of the project, and the kill switch. */
export interface RunList {
  runs: RunSummary[];
  kill_switch?: KillSwitch;
  total?: number;
}

/** `project/goals`: every goal of the project with its counts and the gates waiting for the user. */
export interface GoalList {
  goals: Array<{ goal_id: string; active_total?: number; user_gates?: Gate[]; error?: { code?: string; message?: string } | null }>;
}

/** Everything the extension knows of one project (one workspace folder's root). */
export interface ProjectState {
  root: string;
  intent: IntentSnapshot | null;
  runs: Map<string, RunStatus>;
  boards: Map<string, GoalBoard>;
  /** The project's listings as last pushed (`project/runs`, `project/goals`). */
  runList: RunList | null;
  goalList: GoalList | null;
  /** As the project's kill-switch topic last pushed it; null before it is known. */
  killSwitch: KillSwitch | null;
  /** Why the project cannot be shown at all (no server, a refused root), if it cannot. */
  problem: string | null;
  /** Streams that cannot be read now, by topic (`loopstate/streamError`), with the reason. */
  streamProblems: Map<string, string>;
}

export function emptyProject(root: string): ProjectState {
  return {
    root,
    intent: null,
    runs: new Map(),
    boards: new Map(),
    runList: null,
    goalList: null,
    killSwitch: null,
    problem: null,
    streamProblems: new Map(),
  };
}
