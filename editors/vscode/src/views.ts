/**
 * The Intent, Runs and Goals tree views and the status bar item, redrawn from LiveProjects
 * whenever a pushed change lands (and when a view is shown again, so "in 12 min" is not read
 * an hour later; never on a timer). Each view shows the active folder's project (the folder
 * of the active editor, else the first folder) and names it in its title bar; the Goals view
 * carries a badge with the gates waiting for the user; a view with an unreadable stream says
 * so in its message.
 */

import * as vscode from "vscode";
import type { LiveProjects } from "./live";
import type { ProjectState } from "./model/projections";
import { type StatusSummary, summarize } from "./model/status";
import { goalNodes, intentNodes, runNodes, type TreeNode, userGates } from "./model/trees";

export class NodeTree implements vscode.TreeDataProvider<TreeNode> {
  private readonly changed = new vscode.EventEmitter<TreeNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private roots: TreeNode[] = [];
  /** The project shown: part of every item's id, so each project keeps its own expansion state. */
  private project = "";

  constructor(private readonly build: (state: ProjectState | undefined) => TreeNode[]) {}

  update(state: ProjectState | undefined): void {
    this.roots = this.build(state);
    this.project = state?.root ?? "";
    this.changed.fire(undefined);
  }

  getChildren(node?: TreeNode): TreeNode[] {
    return node === undefined ? this.roots : node.children ?? [];
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    const collapsible =
      node.children === undefined || node.children.length === 0
        ? vscode.TreeItemCollapsibleState.None
        : node.expanded
          ? vscode.TreeItemCollapsibleState.Expanded
          : vscode.TreeItemCollapsibleState.Collapsed;
    const item = new vscode.TreeItem(node.label, collapsible);
    item.id = `${this.project}\n${node.id}`;
    item.description = node.description;
    item.tooltip = node.tooltip;
    item.contextValue = node.contextValue;
    if (node.icon) item.iconPath = new vscode.ThemeIcon(node.icon);
    if (node.click) item.command = { command: node.click.command, title: node.click.title, arguments: [node] };
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
  alarm: "statusBarItem.errorBackground",
  normal: undefined,
};

export interface ActiveProject {
  root: string;
  /** The workspace folder's name, shown as the project's name. */
  name: string;
}

/** A view's message: the unreadable streams it shows, else what to do when it is empty. */
function problemMessage(state: ProjectState | undefined, matches: (topic: string) => boolean, empty?: string): string | undefined {
  if (state === undefined) return undefined;
  const topics = [...state.streamProblems.keys()].filter(matches);
  if (topics.length === 0) return empty;
  return `⚠ ${topics.join(", ")} ${topics.length === 1 ? "is" : "are"} unreadable: run \`loopstate verify\`, then \`loopstate recover\`.`;
}

/** Wires LiveProjects to the status bar item and the three trees. */
export class Presenter implements vscode.Disposable {
  readonly intent = new NodeTree((state) => intentNodes(state?.intent ?? null, state?.streamProblems.get("intent/snapshot") ?? null));
  readonly runs = new NodeTree((state) => runNodes(state?.runs.values() ?? [], Date.now(), state?.streamProblems));
  readonly goals = new NodeTree((state) => goalNodes(state?.boards ?? new Map(), state?.streamProblems));
  private readonly item = vscode.window.createStatusBarItem("loopstate.status", vscode.StatusBarAlignment.Left, 10);
  private readonly views: Array<{ view: vscode.TreeView<TreeNode>; matches: (topic: string) => boolean }>;
  private readonly goalsView: vscode.TreeView<TreeNode>;
  private readonly disposables: vscode.Disposable[] = [];
  /** The run the status item followed, per project, so a halt does not move it to a never-started run. */
  private readonly followed = new Map<string, string | null>();

  constructor(
    private readonly live: LiveProjects,
    private readonly activeRoot: () => ActiveProject | null,
    private readonly multiRoot: () => boolean = () => false,
    /** What overrides the summary of a project (src/historyAlarms.ts: a history alarm). */
    private readonly decorate: (root: string, summary: StatusSummary, name: string) => StatusSummary = (_root, summary) => summary,
  ) {
    this.item.name = "loopstate";
    this.item.command = "loopstate.openPanel";
    const view = (id: string, tree: NodeTree) => vscode.window.createTreeView(id, { treeDataProvider: tree, showCollapseAll: true });
    const intentView = view("loopstate.intent", this.intent);
    const runsView = view("loopstate.runs", this.runs);
    this.goalsView = view("loopstate.goals", this.goals);
    this.views = [
      { view: intentView, matches: (topic) => topic.startsWith("intent/") },
      { view: runsView, matches: (topic) => topic.startsWith("runs/") || topic === "project/runs" || topic === "project/kill_switch" },
      { view: this.goalsView, matches: (topic) => topic.startsWith("goals/") || topic === "project/goals" },
    ];
    this.disposables.push(
      live.onDidChange((root) => {
        if (this.activeRoot()?.root === root) this.render();
      }),
      ...this.views.map(({ view }) => view),
      ...this.views.map(({ view }) => view.onDidChangeVisibility((event) => event.visible && this.render())),
    );
    this.render();
  }

  /** Redraw for the active folder's project (also called when the active folder changes). */
  render(): void {
    const active = this.activeRoot();
    const state = active === null ? undefined : this.live.project(active.root);
    for (const tree of [this.intent, this.runs, this.goals]) tree.update(state);
    const empty: Array<string | undefined> = [
      undefined,
      state?.runList && state.runList.runs.length === 0 ? "No run yet (`loopstate run create` starts one)." : undefined,
      state?.goalList && state.goalList.goals.length === 0 ? "No goal yet (`loopstate goals add GOAL TITLE` starts one)." : undefined,
    ];
    this.views.forEach(({ view, matches }, index) => {
      view.description = active?.name;
      view.message = problemMessage(state, matches, empty[index]);
    });
    const gates = state === undefined ? 0 : userGates(state.boards.values());
    this.goalsView.badge = gates > 0 ? { value: gates, tooltip: `${gates} ${gates === 1 ? "gate is" : "gates are"} waiting for you` } : undefined;
    if (active === null) {
      this.item.hide();
      return;
    }
    if (state === undefined) {
      this.item.text = "$(sync~spin) loopstate";
      this.item.tooltip = `loopstate: ${active.name}: connecting`;
      this.item.backgroundColor = undefined;
    } else {
      const summarized = summarize(state, active.name, { previousRun: this.followed.get(active.root) ?? null, nameInText: this.multiRoot() });
      if (summarized.runId !== null) this.followed.set(active.root, summarized.runId);
      const summary = this.decorate(active.root, summarized, active.name);
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
