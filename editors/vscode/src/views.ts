/**
 * The Intent, Runs and Goals tree views and the status bar item, redrawn from LiveProjects
 * whenever a pushed change lands (never on a timer). Each view shows the active folder's
 * project: the folder of the active editor, else the first folder.
 */

import * as vscode from "vscode";
import type { LiveProjects } from "./live";
import type { ProjectState } from "./model/projections";
import { summarize } from "./model/status";
import { goalNodes, intentNodes, runNodes, type TreeNode } from "./model/trees";

export class NodeTree implements vscode.TreeDataProvider<TreeNode> {
  private readonly changed = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private roots: TreeNode[] = [];

  constructor(private readonly build: (state: ProjectState | undefined) => TreeNode[]) {}

  update(state: ProjectState | undefined): void {
    this.roots = this.build(state);
    this.changed.fire(undefined);
  }

  getChildren(node?: TreeNode): TreeNode[] {
    return node === undefined ? this.roots : node.children ?? [];
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    const collapsible =
      node.children === undefined
        ? vscode.TreeItemCollapsibleState.None
        : node.collapsed
          ? vscode.TreeItemCollapsibleState.Collapsed
          : vscode.TreeItemCollapsibleState.Expanded;
    const item = new vscode.TreeItem(node.label, collapsible);
    item.id = node.id;
    item.description = node.description;
    item.tooltip = node.tooltip;
    item.contextValue = node.contextValue;
    if (node.icon) item.iconPath = new vscode.ThemeIcon(node.icon);
    return item;
  }

  dispose(): void {
    this.changed.dispose();
  }
}

const TONE_COLOURS: Record<string, string | undefined> = {
  halted: "statusBarItem.errorBackground",
  failed: "statusBarItem.errorBackground",
  waiting: "statusBarItem.warningBackground",
  normal: undefined,
};

/** Wires LiveProjects to the status bar item and the three trees. */
export class Presenter implements vscode.Disposable {
  readonly intent = new NodeTree((state) => intentNodes(state?.intent ?? null));
  readonly runs = new NodeTree((state) => runNodes(state?.runs.values() ?? []));
  readonly goals = new NodeTree((state) => goalNodes(state?.boards ?? new Map()));
  private readonly item = vscode.window.createStatusBarItem("loopstate.status", vscode.StatusBarAlignment.Left, 10);
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly live: LiveProjects,
    private readonly activeRoot: () => { root: string; name: string } | null,
  ) {
    this.item.name = "loopstate";
    this.item.command = "loopstate.openPanel";
    this.disposables.push(
      live.onDidChange((root) => {
        if (this.activeRoot()?.root === root) this.render();
      }),
      vscode.window.registerTreeDataProvider("loopstate.intent", this.intent),
      vscode.window.registerTreeDataProvider("loopstate.runs", this.runs),
      vscode.window.registerTreeDataProvider("loopstate.goals", this.goals),
    );
    this.render();
  }

  /** Redraw for the active folder's project (also called when the active folder changes). */
  render(): void {
    const active = this.activeRoot();
    if (active === null) {
      this.item.hide();
      for (const tree of [this.intent, this.runs, this.goals]) tree.update(undefined);
      return;
    }
    const state = this.live.project(active.root);
    for (const tree of [this.intent, this.runs, this.goals]) tree.update(state);
    if (state === undefined) {
      this.item.text = "$(sync~spin) loopstate";
      this.item.tooltip = `loopstate: ${active.name}: connecting`;
      this.item.backgroundColor = undefined;
    } else {
      const summary = summarize(state, active.name);
      this.item.text = summary.text;
      this.item.tooltip = summary.tooltip;
      const colour = TONE_COLOURS[summary.tone];
      this.item.backgroundColor = colour ? new vscode.ThemeColor(colour) : undefined;
    }
    this.item.show();
  }

  dispose(): void {
    for (const disposable of this.disposables) disposable.dispose();
    this.item.dispose();
    this.intent.dispose();
    this.runs.dispose();
    this.goals.dispose();
  }
}
