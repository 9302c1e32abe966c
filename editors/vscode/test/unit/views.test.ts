import { beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { LiveProjects } from "../../src/live";
import type { TreeNode } from "../../src/model/trees";
import { type NodeTree, Presenter } from "../../src/views";
import { created, type FakeStatusBarItem } from "./fakeVscode";
import { board, intent, run } from "./fixtures";

const ROOT = "/work/proj";

/** What the server would push for the project: its listings name r1 and main. */
function snapshots(extra: Record<string, unknown> = {}, runIds = ["r1"]): Record<string, unknown> {
  return {
    "intent/snapshot": intent(),
    "project/kill_switch": { set: false, paths: [] },
    "project/runs": { runs: runIds.map((run_id) => ({ run_id, status: "active" })), kill_switch: { set: false, paths: [] }, total: runIds.length },
    "project/goals": { goals: [{ goal_id: "main" }] },
    "runs/status/r1": run("r1", "active"),
    "goals/board/main": board(),
    ...extra,
  };
}

/** Let the subscriptions a listing starts (without awaiting them) finish. */
const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

/** A Wire that answers each subscribe with the next prepared snapshot, as the server would. */
function preparedWire(snapshots: Record<string, unknown>) {
  const sent: Array<{ method: string; params: any }> = [];
  let next = 0;
  return {
    sent,
    async sendRequest<R>(method: string, params: any): Promise<R> {
      sent.push({ method, params });
      next += 1;
      const topic: string = params.topic;
      return { subscription_id: `sub-${topic}`, topic, head: { stream: "s", sequence: next, hash: null }, snapshot: snapshots[topic], events: null } as R;
    },
  };
}

describe("the presenter", () => {
  let live: LiveProjects;
  let presenter: Presenter;
  let item: FakeStatusBarItem;

  beforeEach(async () => {
    created.statusBarItems.length = 0;
    live = new LiveProjects();
    presenter = new Presenter(live, () => ({ root: ROOT, name: "proj" }));
    item = created.statusBarItems[0];
    await live.track(ROOT);
    await live.attach(preparedWire(snapshots()));
    await settled();
  });

  it("creates one status item that opens the panel, and registers the three views", () => {
    expect(created.statusBarItems).toHaveLength(1);
    expect(item).toMatchObject({ id: "loopstate.status", command: "loopstate.openPanel", visible: true });
    expect([...created.treeProviders.keys()].sort()).toEqual(["loopstate.goals", "loopstate.intent", "loopstate.runs"]);
  });

  it("redraws the item and the trees when a change is pushed, with no other call", () => {
    expect(item.text).toBe("$(pulse) run active 40% · 3 claims · 1 dispute");
    const goals = created.treeProviders.get("loopstate.goals") as NodeTree;
    let redraws = 0;
    goals.onDidChangeTreeData(() => redraws++);
    const halted = run("r1", "halted_kill_switch", {}, { kill_switch: { set: true, paths: ["/p/STOP"] } });
    live.changed({ subscription_id: "sub-runs/status/r1", topic: "runs/status/r1", head: { stream: "s", sequence: 9, hash: null }, previous_sequence: 2, snapshot: halted as any });
    expect(redraws).toBe(1);
    live.changed({ subscription_id: "sub-project/kill_switch", topic: "project/kill_switch", head: { stream: "s", sequence: 0, hash: null }, previous_sequence: 0, snapshot: { set: true, paths: ["/p/STOP"] } as any });
    expect(item.text).toBe("$(debug-stop) HALTED · run halted 40% · 3 claims · 1 dispute");
    expect((item.backgroundColor as vscode.ThemeColor).id).toBe("statusBarItem.errorBackground");
    expect(redraws).toBe(2);
  });

  it("names the project in every view, offers Collapse All, and badges the gates waiting for the user", () => {
    for (const id of ["loopstate.intent", "loopstate.runs", "loopstate.goals"]) {
      expect(created.treeViews.get(id)).toMatchObject({ description: "proj", showCollapseAll: true });
    }
    expect(created.treeViews.get("loopstate.goals")!.badge).toEqual({ value: 1, tooltip: "1 gate is waiting for you" });
    const emptied = { ...board(), user_inbox: [] };
    live.changed({ subscription_id: "sub-goals/board/main", topic: "goals/board/main", head: { stream: "s", sequence: 9, hash: null }, previous_sequence: 3, snapshot: emptied as any });
    expect(created.treeViews.get("loopstate.goals")!.badge).toBeUndefined();
  });

  it("says what to do in an empty Runs or Goals view", () => {
    expect(created.treeViews.get("loopstate.runs")!.message).toBeUndefined();
    live.changed({ subscription_id: "sub-project/runs", topic: "project/runs", head: { stream: "s", sequence: 0, hash: null }, previous_sequence: 0, snapshot: { runs: [], kill_switch: { set: false, paths: [] }, total: 0 } as any });
    expect(created.treeViews.get("loopstate.runs")!.message).toBe("No run yet (`loopstate run create` starts one).");
  });

  it("marks the view of an unreadable stream, and tells once", () => {
    const notices: unknown[] = [];
    live.onStreamNotice((notice) => notices.push(notice));
    const error = { subscription_id: "sub-intent/snapshot", topic: "intent/snapshot", error: { code: "CORRUPT_LEDGER" }, message: "chain broken at 2" };
    live.streamError(error);
    live.streamError(error);
    expect(notices).toEqual([{ root: ROOT, topic: "intent/snapshot", readable: false, message: "chain broken at 2 (CORRUPT_LEDGER)" }]);
    expect(created.treeViews.get("loopstate.intent")!.message).toContain("intent/snapshot is unreadable");
    expect(created.treeViews.get("loopstate.runs")!.message).toBeUndefined();
    const intentTree = created.treeProviders.get("loopstate.intent") as NodeTree;
    expect(intentTree.getChildren().map((node) => node.label)).toEqual(["intent: unreadable"]);
    expect(item.text).toBe("$(error) 1 stream unreadable");
  });

  it("after a repair, clears the mark and fetches the topic afresh, by itself", async () => {
    const wire = preparedWire(snapshots());
    await live.attach(wire);
    await settled();
    const notices: Array<{ readable: boolean }> = [];
    live.onStreamNotice((notice) => notices.push(notice));
    live.streamError({ subscription_id: "sub-intent/snapshot", topic: "intent/snapshot", error: { code: "CORRUPT_LEDGER" }, message: "broken" });
    wire.sent.length = 0;
    live.changed({ subscription_id: "sub-intent/snapshot", topic: "intent/snapshot", head: { stream: "s", sequence: 1, hash: null }, previous_sequence: 0, snapshot: intent() as any, rewritten: true });
    await new Promise((resolve) => setTimeout(resolve, 0));
    expect(notices.map((n) => n.readable)).toEqual([false, true]);
    expect(wire.sent.map((m) => [m.method, m.params.since ?? null])).toEqual([["loopstate/unsubscribe", null], ["loopstate/subscribe", null]]);
    expect(item.text).toBe("$(pulse) run active 40% · 3 claims · 1 dispute");
    expect(created.treeViews.get("loopstate.intent")!.message).toBeUndefined();
  });

  it("after a halt keeps following the run that was active, not a never-started one", async () => {
    const wire = preparedWire(snapshots({ "runs/status/r2": run("r2", "ready", { updated_at: "2026-01-15T09:00:00Z" }) }, ["r1", "r2"]));
    await live.attach(wire);
    await settled();
    expect(item.tooltip).toContain("Run r1: active");
    // the kill switch halts both; the never-started r2 is now the more recently updated
    const halt = (id: string, updated: string) => run(id, "halted_kill_switch", { updated_at: updated, usage: {} }, { kill_switch: { set: true, paths: ["/p/STOP"] } });
    live.changed({ subscription_id: "sub-runs/status/r1", topic: "runs/status/r1", head: { stream: "s", sequence: 9, hash: null }, previous_sequence: 2, snapshot: halt("r1", "2026-01-15T10:00:00Z") as any });
    live.changed({ subscription_id: "sub-runs/status/r2", topic: "runs/status/r2", head: { stream: "s", sequence: 9, hash: null }, previous_sequence: 2, snapshot: halt("r2", "2026-01-15T10:00:01Z") as any });
    expect(item.tooltip).toContain("Run r1: halted_kill_switch");
  });

  it("turns tree nodes into items: ids kept, run details folded, the rest open", () => {
    const runs = created.treeProviders.get("loopstate.runs") as NodeTree;
    const [top] = runs.getChildren();
    const item = runs.getTreeItem(top) as vscode.TreeItem & { collapsibleState: number };
    expect(item.id).toBe(`${ROOT}\nruns/r1`);
    expect(item.collapsibleState).toBe(vscode.TreeItemCollapsibleState.Expanded);
    const budgets = runs.getChildren(top).find((node: TreeNode) => node.label === "budgets")!;
    expect((runs.getTreeItem(budgets) as any).collapsibleState).toBe(vscode.TreeItemCollapsibleState.Collapsed);
    const stage = runs.getChildren(top)[0];
    expect((runs.getTreeItem(stage) as any).collapsibleState).toBe(vscode.TreeItemCollapsibleState.None);
    // a click on a run opens its audit log, with the node as the argument
    expect(item.command).toEqual({ command: "loopstate.showAuditLog", title: "Show the run's audit log", arguments: [top] });
  });

  it("shows a refused subscription as the project's problem, with the server's code", async () => {
    const refusing = {
      async sendRequest<R>(_method: string, params: any): Promise<R> {
        if (params.topic === "intent/snapshot") throw Object.assign(new Error("project root is not acceptable"), { data: { code: "INVALID_ROOT" } });
        return { subscription_id: "s", topic: params.topic, head: { stream: "s", sequence: 1, hash: null }, snapshot: null, events: null } as R;
      },
    };
    await live.attach(refusing);
    expect(item.text).toBe("$(error) loopstate");
    expect(item.tooltip).toContain("subscribing to intent/snapshot failed: project root is not acceptable (INVALID_ROOT)");
  });

  it("says the server is down, then shows the state again when a new server is attached", async () => {
    live.detach("loopstate serve exited; restarting in 1 s");
    expect(item.text).toBe("$(error) loopstate");
    expect(item.tooltip).toContain("restarting in 1 s");
    const wire = preparedWire(snapshots());
    await live.attach(wire);
    await settled();
    expect(item.text).toBe("$(pulse) run active 40% · 3 claims · 1 dispute");
    // resubscribed with since (the last sequence each stream's topic had reached); project topics are whole snapshots
    const streams = wire.sent.filter((m) => !m.params.topic.startsWith("project/"));
    expect(streams.map((m) => m.params.topic).sort()).toEqual(["goals/board/main", "intent/snapshot", "runs/status/r1"]);
    expect(streams.every((m) => typeof m.params.since === "number")).toBe(true);
    expect(wire.sent.filter((m) => m.params.topic.startsWith("project/")).every((m) => m.params.since === null)).toBe(true);
    presenter.dispose();
  });
});
