import { describe, expect, it } from "vitest";
import { goalNodes, intentNodes, runNodes, type TreeNode, userGates } from "../../src/model/trees";
import { board, claim, intent, run } from "./fixtures";

const labels = (nodes: TreeNode[] | undefined) => (nodes ?? []).map((node) => node.label);
const NOW = Date.parse("2026-01-15T10:05:00Z");

describe("the Intent tree", () => {
  it("groups active claims by facet with status and source kind, disputes last", () => {
    const nodes = intentNodes(intent());
    expect(labels(nodes)).toEqual(["Outcomes", "Constraints", "Success signals", "Unknowns", "Disputes"]);
    expect(labels(nodes[0].children)).toEqual(["The parser reads the old format"]);
    expect(nodes[0].children![0].description).toBe("explicit · user_event");
    expect(labels(nodes[1].children)).toEqual(["Keep the public API stable"]);
    // the unknown claim is listed once, though both by_facet and unknowns name it
    expect(labels(nodes[3].children)).toEqual(["Which encodings appear?"]);
    expect(nodes[4].description).toBe("1");
    expect(nodes[4].children![0].description).toBe("disputed · user_event");
  });

  it("warns of stale long-term claims", () => {
    const snapshot = { ...intent(), stale: [{ ...claim("c9", "Always use tabs", "soft_constraint"), scope: "long_term", reason: "not confirmed for 180 days" }] };
    const stale = intentNodes(snapshot).at(-1)!;
    expect(stale.label).toBe("Stale long-term claims");
    expect(stale.children![0]).toMatchObject({ label: "Always use tabs", description: "not confirmed for 180 days", icon: "warning" });
    expect(intentNodes(intent()).map((node) => node.label)).not.toContain("Stale long-term claims");
  });

  it("says how many active claims are on later pages and how to see the next one", () => {
    const paged = { ...intent(), task_id: "t1", active_count: 103, remaining: 100, next_cursor: "intent-page-1:snapshot:t1:3:c3" };
    const nodes = intentNodes(paged);
    const more = nodes.find((node) => node.id === "intent/More")!;
    expect(more).toMatchObject({ label: "100 more active claims", description: "not on this page" });
    expect(more.tooltip).toContain("loopstate intent show --task t1 --cursor intent-page-1:snapshot:t1:3:c3");
    expect(labels(nodes).at(-1)).toBe("Disputes");
    expect(labels(intentNodes(intent()))).not.toContain("100 more active claims");
  });

  it("is empty before the first snapshot", () => {
    expect(intentNodes(null)).toEqual([]);
  });
});

describe("the Runs tree", () => {
  it("lists runs newest first with status, stage, lease, budgets, open issues and evidence", () => {
    const leased = run("aaaaaaaa-1", "active", { updated_at: "2026-01-15T10:00:00Z" }, {
      lease: { owner: { actor: "codex" }, expires_at: "2026-01-15T10:15:00Z", lease_id: "l1", generation: 1 },
      issues: [
        { issue_id: "i1", title: "Crash on empty input", severity: "high", blocking: true, status: "open" },
        { issue_id: "i2", title: "Closed one", severity: "low", blocking: false, status: "closed" },
      ],
      evidence_ids: ["e1"],
    });
    const nodes = runNodes([run("bbbbbbbb-2", "ready"), leased], NOW, new Map(), "UTC");
    expect(labels(nodes)).toEqual(["aaaaaaaa objective of aaaaaaaa-1", "bbbbbbbb objective of bbbbbbbb-2"]);
    const [top] = nodes;
    expect(top.description).toBe("active · build · updated 5 min ago (10:00)");
    expect(labels(top.children)).toEqual(["stage", "lease", "budgets", "open issues", "evidence"]);
    expect(top.children![1].description).toBe("codex · expires in 10 min (10:15)");
    expect(top.children![1].tooltip).toContain("expires: 2026-01-15T10:15:00Z UTC");
    expect(top.children![2].children!.map((n) => `${n.label}: ${n.description}`)).toEqual([
      "duration: 12 min of 2 h",
      "mutations: 40 of 100",
      "external actions: 0 of 0",
      "cost: $0 (no spending authority)",
    ]);
    expect(top.children![3].children!.map((n) => `${n.label}: ${n.description}`)).toEqual(["Crash on empty input: high · blocking · open"]);
    expect(labels(top.children![4].children)).toEqual(["e1"]);
    expect(nodes[1].children![1].description).toBe("none");
  });

  it("marks an expired lease and leaves out a run with no record", () => {
    const expired = run("r", "active", {}, { lease: { owner: { actor: "w" }, expires_at: "2026-01-15T08:05:00Z" }, lease_expired: true });
    expect(runNodes([expired], NOW, new Map(), "UTC")[0].children![1].description).toBe("w · expired 2 h ago (08:05)");
    expect(runNodes([{ ...run("gone", "active"), run: null }], NOW)).toEqual([]);
  });
});

describe("the Goals tree", () => {
  it("shows todos by role, each role's by priority, then the gate inbox", () => {
    const [goal] = goalNodes(new Map([["main", board()]]));
    expect(goal).toMatchObject({ label: "main", description: "3 open · 1 gate", contextValue: "goal" });
    expect(labels(goal.children)).toEqual(["agent", "user", "gate inbox"]);
    expect(labels(goal.children![0].children)).toEqual(["T003 Fix the crash", "T001 Write the parser"]);
    const inbox = goal.children![2];
    expect(inbox.children![0]).toMatchObject({ label: "G001 Approve the design", description: "user · open", contextValue: "gate" });
  });

  it("counts every active todo and says what a board page leaves out", () => {
    const paged = { ...board(), page: { after: 12, active_total: 40, completed_total: 9, next_cursor: "a.2.1.0.7" } };
    const [goal] = goalNodes(new Map([["main", paged]]));
    expect(goal.description).toBe("40 open · 1 gate");
    expect(labels(goal.children)).toEqual(["agent", "user", "12 more todos not shown", "gate inbox"]);
    expect(goal.children![2].description).toBe("loopstate goals board main --all");
  });

  it("orders goals by id", () => {
    expect(labels(goalNodes(new Map([["zeta", {}], ["alpha", {}]])))).toEqual(["alpha", "zeta"]);
  });
});

describe("what starts open", () => {
  it("folds every group but the outcomes and open disputes, an active run and its open issues, gates waiting", () => {
    const intentTree = intentNodes(intent());
    expect(intentTree.filter((node) => node.expanded).map((node) => node.label)).toEqual(["Outcomes", "Disputes"]);
    const [active, ready] = runNodes([run("r1", "active", { updated_at: "2026-01-15T10:00:00Z" }), run("r2", "ready")], NOW);
    expect([active.expanded, ready.expanded]).toEqual([true, false]);
    expect(active.children!.filter((node) => node.expanded)).toEqual([]); // budgets, evidence, an empty issue list: folded
    const [goal] = goalNodes(new Map([["main", board()]]));
    expect(goal.expanded).toBe(true); // the only goal
    expect(goal.children!.find((node) => node.label === "gate inbox")!.expanded).toBe(true);
    expect(goal.children!.filter((node) => node.label !== "gate inbox").some((node) => node.expanded)).toBe(false); // two roles: folded
    const two = goalNodes(new Map([["a", { ...board(), user_inbox: [] }], ["b", board()]]));
    expect(two.map((node) => node.expanded)).toEqual([false, true]); // the one with a gate waiting
  });
});

describe("actions on tree items", () => {
  it("carries what a command needs: a run's id (click: its audit log), a gate's goal (click: resolve), a claim's task", () => {
    const [top] = runNodes([run("r1", "active")], NOW);
    expect(top).toMatchObject({ contextValue: "run", ref: { run_id: "r1" }, click: { command: "loopstate.showAuditLog" } });
    const gate = goalNodes(new Map([["main", board()]]))[0].children!.at(-1)!.children![0];
    expect(gate).toMatchObject({ contextValue: "gate", ref: { goal_id: "main", gate_id: "G001" }, click: { command: "loopstate.resolveGate" } });
    const claimNode = intentNodes(intent())[0].children![0];
    expect(claimNode).toMatchObject({ contextValue: "claim", ref: { claim_id: "c1", task_id: "t1" } });
    expect(userGates([board(), board(), {}])).toBe(2);
  });
});

describe("an unreadable stream", () => {
  it("replaces its part of the view with one node that says so, never the old state", () => {
    const problems = new Map([["runs/status/r1", "chain broken (CORRUPT_LEDGER)"]]);
    const nodes = runNodes([run("r1", "active"), run("r2", "ready")], NOW, problems);
    expect(labels(nodes)).toEqual(["runs/status/r1: unreadable", "r2 objective of r2"]);
    expect(nodes[0]).toMatchObject({ description: "chain broken (CORRUPT_LEDGER)", icon: "error" });
    expect(nodes[0].tooltip).toContain("loopstate recover");
    expect(labels(intentNodes(intent(), "broken"))).toEqual(["intent: unreadable"]);
    const goals = goalNodes(new Map([["main", board()], ["side", {}]]), new Map([["goals/board/main", "broken"]]));
    expect(labels(goals)).toEqual(["goals/board/main: unreadable", "side"]);
  });
});
