import { describe, expect, it } from "vitest";
import { budgetUse, followedRun, haltedCount, summarize, toneOf } from "../../src/model/status";
import { project, run } from "./fixtures";

describe("the status item's summary", () => {
  it("shows the followed run's status and budget use, the claims and the disputes", () => {
    const summary = summarize(project(), "proj");
    // mutations 40 of 100 is the tightest budget (duration 720 of 7200 is 10%)
    expect(summary.text).toBe("$(pulse) run active 40% · 3 claims · 1 dispute");
    expect(summary.tone).toBe("normal");
    expect(summary.tooltip).toContain("Run r1: active, stage build: objective of r1");
    expect(summary.tooltip).toContain("Open todos: 3; gates waiting for you: 1");
    expect(summary.tooltip).toContain("Click to open the loopstate panel.");
  });

  it("follows the newest active run over a newer finished one", () => {
    const runs = [
      run("old-active", "active", { updated_at: "2026-01-15T09:00:00Z" }),
      run("new-done", "complete", { updated_at: "2026-01-15T10:00:00Z" }),
      run("mid-active", "active", { updated_at: "2026-01-15T09:10:00Z" }),
    ];
    expect(followedRun(runs)?.run_id).toBe("mid-active");
    expect(followedRun([runs[1]])?.run_id).toBe("new-done");
    expect(followedRun([])).toBeNull();
    expect(followedRun([{ ...run("gone", "active"), run: null }])).toBeNull();
  });

  it("counts open blocking issues of every run, not closed or non-blocking ones", () => {
    const issues = [
      { issue_id: "i1", blocking: true, status: "open" },
      { issue_id: "i2", blocking: true, status: "closed" },
      { issue_id: "i3", blocking: false, status: "open" },
      { issue_id: "i4", blocking: true, status: "reopened" },
    ];
    const state = project({ runs: new Map([["r1", run("r1", "active", {}, { issues })], ["r2", run("r2", "ready", {}, { issues: [issues[0]] })]]) });
    expect(summarize(state, "proj").text).toContain("3 blocking");
  });

  it("is halted, red, while a kill switch stands, and says an active run is halting", () => {
    const halting = project({ runs: new Map([["r1", run("r1", "active", {}, { kill_switch: { set: true, paths: ["/p/.loopstate/STOP"] } })]]) });
    const summary = summarize(halting, "proj");
    expect(summary.text).toBe("$(debug-stop) HALTED · run halting 40% · 3 claims · 1 dispute");
    expect(summary.tone).toBe("halted");
    expect(summary.tooltip).toContain("Kill switch SET");
    const halted = project({ runs: new Map([["r1", run("r1", "halted_kill_switch", {}, { kill_switch: { set: true, paths: [] } })]]) });
    expect(summarize(halted, "proj").text).toContain("run halted 40%");
  });

  it("takes the kill switch from the listing when the project has no run", () => {
    const state = project({ runs: new Map(), killSwitch: { set: true, paths: ["/p/.loopstate/STOP"] } });
    expect(summarize(state, "proj").text).toBe("$(debug-stop) HALTED · 3 claims · 1 dispute");
    expect(summarize(project({ runs: new Map() }), "proj").tooltip).toContain("No run in this project.");
  });

  it("colours failed and waiting runs", () => {
    expect(toneOf("failed", false)).toBe("failed");
    expect(toneOf("waiting_approval", false)).toBe("waiting");
    expect(toneOf("waiting_external", false)).toBe("waiting");
    expect(toneOf("blocked", false)).toBe("waiting");
    expect(toneOf("complete", false)).toBe("normal");
    expect(toneOf("complete", true)).toBe("halted");
    const waiting = project({ runs: new Map([["r1", run("r1", "waiting_approval")]]) });
    expect(summarize(waiting, "proj").text).toBe("$(watch) run waiting approval 40% · 3 claims · 1 dispute");
  });

  it("shows the problem instead of stale state when the server or a stream is broken", () => {
    const summary = summarize(project({ problem: "intent/snapshot: chain broken (CORRUPT_LEDGER)" }), "proj");
    expect(summary.text).toBe("$(error) loopstate");
    expect(summary.tone).toBe("failed");
    expect(summary.tooltip).toContain("CORRUPT_LEDGER");
  });

  it("words a single claim and an empty project", () => {
    const one = project({ intent: { active_count: 1, disagreements: [] }, runs: new Map() });
    expect(summarize(one, "proj").text).toBe("$(pulse) 1 claim");
    expect(summarize(project({ intent: null, runs: new Map(), boards: new Map() }), "proj").text).toBe("$(pulse) 0 claims");
  });
});

describe("budget use", () => {
  it("is the share of the tightest budget, cost included, ignoring zero and missing limits", () => {
    expect(budgetUse(run("r", "active"))).toBe(40);
    expect(budgetUse(run("r", "active", { usage: { duration_seconds: 7200, mutations: 0, external_actions: 0, cost_usd: null } }))).toBe(100);
    expect(budgetUse(run("r", "active", {
      budgets: { max_cost_usd: "2.00" },
      usage: { cost_usd: "1.50" },
    }))).toBe(75);
    expect(budgetUse(run("r", "active", { budgets: { max_external_actions: 0 }, usage: { external_actions: 0 } }))).toBeNull();
  });
});

describe("the followed run and the halted count", () => {
  it("with no run active keeps the one followed before, else prefers a run that ever started", () => {
    const halted = (id: string, updated: string, usage = {}) => run(id, "halted_kill_switch", { updated_at: updated, usage });
    const was = halted("was-active", "2026-01-15T10:00:00Z", { mutations: 3 });
    const never = halted("never-started", "2026-01-15T10:00:01Z");
    expect(followedRun([was, never])?.run_id).toBe("was-active");
    expect(followedRun([halted("a", "2026-01-15T10:00:00Z"), never], "a")?.run_id).toBe("a");
    expect(followedRun([was, never], "gone")?.run_id).toBe("was-active");
  });

  it("counts the runs the kill switch halted, and names the project in a multi-root workspace", () => {
    const state = project({ runs: new Map([["a", run("a", "halted_kill_switch")], ["b", run("b", "halted_kill_switch")], ["c", run("c", "complete")]]) });
    expect(haltedCount(state)).toBe(2);
    expect(summarize(project(), "proj", { nameInText: true }).text).toBe("$(pulse) proj: run active 40% · 3 claims · 1 dispute");
  });

  it("takes the pushed kill switch over a run's older probe: a switch removed by hand clears HALTED", () => {
    const probedSet = project({ runs: new Map([["r1", run("r1", "halted_kill_switch", {}, { kill_switch: { set: true, paths: ["/p/STOP"] } })]]) });
    expect(summarize(probedSet, "proj").text).toContain("HALTED");
    const cleared = { ...probedSet, killSwitch: { set: false, paths: [] } };
    expect(summarize(cleared, "proj")).toMatchObject({ text: "$(watch) run halted 40% · 3 claims · 1 dispute", tone: "waiting" });
  });

  it("says how many streams are unreadable", () => {
    const summary = summarize(project({ streamProblems: new Map([["intent/snapshot", "broken (CORRUPT_LEDGER)"]]) }), "proj");
    expect(summary).toMatchObject({ text: "$(error) 1 stream unreadable", tone: "failed" });
    expect(summary.tooltip).toContain("intent/snapshot: broken (CORRUPT_LEDGER)");
  });
});
