import { beforeEach, describe, expect, it } from "vitest";
import * as vscode from "vscode";
import { LiveProjects } from "../../src/live";
import type { TreeNode } from "../../src/model/trees";
import { type NodeTree, Presenter } from "../../src/views";
import { created, type FakeStatusBarItem } from "./fakeVscode";
import { board, intent, run } from "./fixtures";

const ROOT = "/work/proj";

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
    await live.track(ROOT, ["r1"], ["main"]);
    await live.attach(preparedWire({ "intent/snapshot": intent(), "runs/status/r1": run("r1", "active"), "goals/board/main": board() }));
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
    expect(item.text).toBe("$(debug-stop) HALTED · run halted 40% · 3 claims · 1 dispute");
    expect((item.backgroundColor as vscode.ThemeColor).id).toBe("statusBarItem.errorBackground");
    expect(redraws).toBe(1);
  });

  it("turns tree nodes into items: ids kept, run details folded, the rest open", () => {
    const runs = created.treeProviders.get("loopstate.runs") as NodeTree;
    const [top] = runs.getChildren();
    const item = runs.getTreeItem(top) as vscode.TreeItem & { collapsibleState: number };
    expect(item.id).toBe("runs/r1");
    expect(item.collapsibleState).toBe(vscode.TreeItemCollapsibleState.Expanded);
    const budgets = runs.getChildren(top).find((node: TreeNode) => node.label === "budgets")!;
    expect((runs.getTreeItem(budgets) as any).collapsibleState).toBe(vscode.TreeItemCollapsibleState.Collapsed);
    const stage = runs.getChildren(top)[0];
    expect((runs.getTreeItem(stage) as any).collapsibleState).toBe(vscode.TreeItemCollapsibleState.None);
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
    const wire = preparedWire({ "intent/snapshot": intent(), "runs/status/r1": run("r1", "active"), "goals/board/main": board() });
    await live.attach(wire);
    expect(item.text).toBe("$(pulse) run active 40% · 3 claims · 1 dispute");
    // resubscribed with since: the last sequence each topic had reached
    expect(wire.sent.map((m) => m.params.since).every((since: unknown) => typeof since === "number")).toBe(true);
    presenter.dispose();
  });
});
