// Projections in the shapes `loopstate serve` pushes (copied field for field from a real
// store's `loopstate run status --json`, `goals board --json` and the intent snapshot).
import type { GoalBoard, IntentSnapshot, ProjectState, RunStatus } from "../../src/model/projections";

export function run(id: string, status: string, over: Partial<NonNullable<RunStatus["run"]>> = {}, extra: Partial<RunStatus> = {}): RunStatus {
  return {
    run_id: id,
    sequence: 2,
    run: {
      status,
      stage: "build",
      objective: `objective of ${id}`,
      mode: "auto",
      created_at: "2026-01-15T09:00:00Z",
      updated_at: "2026-01-15T09:30:00Z",
      terminal_reason: null,
      budgets: { max_duration_seconds: 7200, max_mutations: 100, max_external_actions: 0, max_cost_usd: null },
      usage: { duration_seconds: 720, mutations: 40, external_actions: 0, cost_usd: null },
      ...over,
    },
    lease: null,
    pending_operation: null,
    issues: [],
    evidence_ids: [],
    lease_expired: null,
    kill_switch: { set: false, paths: [], config_error: null },
    ...extra,
  };
}

export function claim(id: string, statement: string, facet: string, status = "explicit") {
  return {
    claim_id: id,
    statement,
    role: "user",
    epistemic_status: status,
    scope: "task",
    facets: [facet],
    source_ref: { kind: "user_event", event_id: `src-${id}` },
    direct_user: true,
  };
}

export function intent(): IntentSnapshot {
  return {
    sequence: 3,
    tasks: [{ task_id: "t1", label: "Ship the parser", mode: "on", active_claims: 3 }],
    by_facet: {
      outcome: { explicit: [claim("c1", "The parser reads the old format", "outcome")] },
      hard_constraint: { explicit: [claim("c2", "Keep the public API stable", "hard_constraint")] },
      unknown: { unknown: [claim("c3", "Which encodings appear?", "unknown", "unknown")] },
    },
    disagreements: [claim("c4", "Not the old format", "disagreement", "disputed")],
    unknowns: [claim("c3", "Which encodings appear?", "unknown", "unknown")],
    stale: [],
    active_count: 3,
  };
}

export function board(): GoalBoard {
  return {
    meta: { goal_id: "main", last_append_sequence: 3 },
    active: [
      { role: "agent", todos: [
        { todo_id: "T001", title: "Write the parser", role: "agent", priority: "P2", status: "open" },
        { todo_id: "T003", title: "Fix the crash", role: "agent", priority: "P0", status: "open" },
      ] },
      { role: "user", todos: [{ todo_id: "T002", title: "Review", role: "user", priority: "P1", status: "open" }] },
    ],
    completed: [],
    user_inbox: [{ gate_id: "G001", gate_kind: "user", title: "Approve the design", status: "open" }],
    controller_inbox: [],
  };
}

export function project(over: Partial<ProjectState> = {}): ProjectState {
  return {
    root: "/work/proj",
    intent: intent(),
    runs: new Map([["r1", run("r1", "active")]]),
    boards: new Map([["main", board()]]),
    runList: null,
    goalList: null,
    killSwitch: null,
    problem: null,
    streamProblems: new Map(),
    ...over,
  };
}
