/**
 * The live state of every tracked project, kept by `loopstate/subscribe` and the pushed
 * `loopstate/changed` / `loopstate/streamError` notifications; nothing here polls, spawns or
 * watches files.
 *
 * Per project it subscribes `intent/snapshot` and the three project topics: `project/runs`
 * and `project/goals` (each run and goal of the project: a new one, created by any process,
 * is pushed, and its `runs/status/<id>` or `goals/board/<id>` is then subscribed too) and
 * `project/kill_switch` (set or cleared by anyone, a STOP file removed by hand included).
 *
 * It knows no VS Code: it talks through ``Wire`` (a LanguageClient in the extension, a
 * vscode-jsonrpc connection in test/integration), so the same code is tested against a real
 * `loopstate serve`. After a server restart ``attach`` subscribes every topic again with
 * ``since`` set to the last sequence seen, so a change made while the server was down is in
 * the new result and nothing is missed.
 */

import type { ChangedNotification, Head, StreamErrorNotification, SubscribeParams, SubscribeResult } from "./generated/wire";
import {
  emptyProject,
  type GoalBoard,
  type GoalList,
  type IntentSnapshot,
  type KillSwitch,
  type ProjectState,
  type RunList,
  type RunStatus,
} from "./model/projections";

/** What LiveProjects needs of a connection to `loopstate serve`. */
export interface Wire {
  sendRequest<R>(method: string, params: unknown): Promise<R>;
}

type TopicKind = "intent" | "run" | "goal" | "runs" | "goals" | "kill_switch";

const PROJECT_KINDS = new Set<TopicKind>(["runs", "goals", "kill_switch"]);

/** The topics every tracked project has; runs and goals are added as `project/runs` and `project/goals` list them. */
const PROJECT_TOPICS: Array<[TopicKind, string]> = [
  ["intent", "intent/snapshot"],
  ["kill_switch", "project/kill_switch"],
  ["runs", "project/runs"],
  ["goals", "project/goals"],
];

interface Subscription {
  root: string;
  topic: string;
  kind: TopicKind;
  key: string;
  /** The last sequence this client has folded in (the `since` of a resubscription). */
  sequence: number | null;
  id: string | null;
}

export type Listener = (root: string) => void;

/** A stream became unreadable or readable again: the extension says so once, in a notification and the Output. */
export interface StreamNotice {
  root: string;
  topic: string;
  readable: boolean;
  message: string;
}

export class LiveProjects {
  private readonly projects = new Map<string, ProjectState>();
  private readonly topics = new Map<string, Subscription>(); // root + "\n" + topic
  private readonly byId = new Map<string, Subscription>();
  private readonly listeners = new Set<Listener>();
  private readonly noticeListeners = new Set<(notice: StreamNotice) => void>();
  private wire: Wire | null = null;
  /** Why no server is attached (shown on every project), or null while one is. */
  private serverProblem: string | null = "loopstate serve is not running yet";
  /** A project's root refused by the server (subscribing failed), by root. */
  private readonly rootProblems = new Map<string, string>();

  /** Called after every change to a project's state. */
  onDidChange(listener: Listener): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /** Called when a stream turns unreadable (once per fault) and when it is readable again. */
  onStreamNotice(listener: (notice: StreamNotice) => void): { dispose(): void } {
    this.noticeListeners.add(listener);
    return { dispose: () => this.noticeListeners.delete(listener) };
  }

  project(root: string): ProjectState | undefined {
    return this.projects.get(root);
  }

  /** Use ``wire`` from now on and subscribe every known topic on it (with ``since`` where known). */
  async attach(wire: Wire): Promise<void> {
    this.wire = wire;
    this.serverProblem = null;
    // A new server reads every stream again: a topic it subscribes is readable (its mark goes),
    // one it refuses or reports stays marked.
    this.rootProblems.clear();
    this.byId.clear();
    for (const sub of this.topics.values()) sub.id = null;
    for (const root of this.projects.keys()) this.settle(root);
    await Promise.all([...this.topics.values()].map((sub) => this.subscribe(sub)));
  }

  /** The server is gone: keep the last state (marked) until a new one is attached. */
  detach(reason: string): void {
    this.wire = null;
    this.serverProblem = reason;
    this.byId.clear();
    for (const root of this.projects.keys()) this.settle(root);
  }

  /** Follow the project at ``root``: its intent, kill switch, runs and goals, each as pushed. */
  async track(root: string): Promise<void> {
    if (!this.projects.has(root)) this.projects.set(root, emptyProject(root));
    const state = this.projects.get(root)!;
    state.problem = this.rootProblems.get(root) ?? this.serverProblem;
    const fresh = PROJECT_TOPICS.map(([kind, topic]) => this.want(root, kind, topic, "")).filter((sub): sub is Subscription => sub !== null);
    this.emit(root);
    if (this.wire !== null) await Promise.all(fresh.map((sub) => this.subscribe(sub)));
  }

  /** The subscription for ``topic`` of ``root``, made if new (returned then, else null). */
  private want(root: string, kind: TopicKind, topic: string, key: string): Subscription | null {
    const name = `${root}\n${topic}`;
    if (this.topics.has(name)) return null;
    const sub: Subscription = { root, topic, kind, key, sequence: null, id: null };
    this.topics.set(name, sub);
    return sub;
  }

  /** Subscribe the run or goal topics a project listing names that are not followed yet. */
  private follow(root: string, kind: "run" | "goal", ids: string[]): void {
    const prefix = kind === "run" ? "runs/status" : "goals/board";
    for (const id of ids) {
      const sub = this.want(root, kind, `${prefix}/${id}`, id);
      if (sub !== null && this.wire !== null) void this.subscribe(sub);
    }
  }

  /** Stop following ``root`` (its folder left the workspace). */
  async untrack(root: string): Promise<void> {
    const subs = [...this.topics.values()].filter((sub) => sub.root === root);
    for (const sub of subs) {
      this.topics.delete(`${root}\n${sub.topic}`);
      if (sub.id !== null) this.byId.delete(sub.id);
    }
    this.projects.delete(root);
    this.rootProblems.delete(root);
    const wire = this.wire;
    if (wire !== null) {
      await Promise.all(
        subs
          .filter((sub) => sub.id !== null)
          .map((sub) => wire.sendRequest("loopstate/unsubscribe", { subscription_id: sub.id }).catch(() => undefined)),
      );
    }
  }

  /**
   * A `loopstate/changed` notification. After a `loopstate/streamError` the server sends one
   * with `rewritten: true` once the stream is readable again (repaired by `loopstate recover`):
   * the fault is cleared and the topic fetched afresh, so the view comes back by itself.
   */
  changed(params: ChangedNotification): void {
    const sub = this.byId.get(params.subscription_id);
    if (sub === undefined) return; // a subscription of a folder that has left the workspace
    const state = this.projects.get(sub.root);
    const wasBroken = state?.streamProblems.delete(sub.topic) ?? false;
    if (wasBroken) this.notice({ root: sub.root, topic: sub.topic, readable: true, message: "readable again" });
    if (params.rewritten || wasBroken) {
      // What this client knew of the stream is void: take the whole projection again.
      sub.sequence = null;
      void this.resubscribe(sub);
      return;
    }
    this.fold(sub, params.head, params.snapshot ?? null);
  }

  /** A `loopstate/streamError` notification: the stream cannot be read; show why, never the old state. */
  streamError(params: StreamErrorNotification): void {
    const sub = this.byId.get(params.subscription_id);
    if (sub === undefined) return;
    const state = this.projects.get(sub.root);
    if (state === undefined) return;
    const message = `${params.message} (${params.error.code})`;
    const known = state.streamProblems.get(sub.topic);
    state.streamProblems.set(sub.topic, message);
    if (known === undefined) this.notice({ root: sub.root, topic: sub.topic, readable: false, message });
    this.settle(sub.root);
  }

  /** Drop ``sub``'s subscription and take it again from the start (its state is void). */
  private async resubscribe(sub: Subscription): Promise<void> {
    const wire = this.wire;
    if (wire === null) return;
    if (sub.id !== null) {
      this.byId.delete(sub.id);
      const old = sub.id;
      sub.id = null;
      await wire.sendRequest("loopstate/unsubscribe", { subscription_id: old }).catch(() => undefined);
    }
    await this.subscribe(sub);
  }

  private notice(notice: StreamNotice): void {
    for (const listener of this.noticeListeners) listener(notice);
  }

  private async subscribe(sub: Subscription): Promise<void> {
    const wire = this.wire;
    if (wire === null) return;
    // A project topic is no stream of events (its snapshot is the whole state): never `since`.
    const since = PROJECT_KINDS.has(sub.kind) ? null : sub.sequence;
    const params: SubscribeParams = { root: sub.root, topic: sub.topic, deliver: "snapshot", since };
    let result: SubscribeResult;
    try {
      result = await wire.sendRequest<SubscribeResult>("loopstate/subscribe", params);
    } catch (error) {
      // Refused (a root the server does not accept, a corrupt stream): that project shows why.
      if (this.wire !== wire) return;
      const code = (error as { data?: { code?: string } }).data?.code;
      const message = `${error instanceof Error ? error.message : String(error)}${code ? ` (${code})` : ""}`;
      const state = this.projects.get(sub.root);
      if (code === "CORRUPT_LEDGER" || code === "STORE_IO_ERROR" || code === "UNSAFE_PATH" || code === "FUTURE_SCHEMA") {
        // One stream cannot be read: mark its part of the views.
        if (state !== undefined && !state.streamProblems.has(sub.topic)) {
          state.streamProblems.set(sub.topic, message);
          this.notice({ root: sub.root, topic: sub.topic, readable: false, message });
        }
      } else {
        this.rootProblems.set(sub.root, `subscribing to ${sub.topic} failed: ${message}`);
      }
      this.settle(sub.root);
      return;
    }
    if (this.wire !== wire || !this.topics.has(`${sub.root}\n${sub.topic}`)) return;
    sub.id = result.subscription_id;
    this.byId.set(result.subscription_id, sub);
    if (this.projects.get(sub.root)?.streamProblems.delete(sub.topic)) {
      this.notice({ root: sub.root, topic: sub.topic, readable: true, message: "readable again" });
    }
    this.fold(sub, result.head, result.snapshot);
  }

  private fold(sub: Subscription, head: Head, snapshot: unknown): void {
    const state = this.projects.get(sub.root);
    if (state === undefined) return;
    sub.sequence = head.sequence;
    switch (sub.kind) {
      case "intent":
        state.intent = (snapshot ?? null) as IntentSnapshot | null;
        break;
      case "kill_switch":
        state.killSwitch = (snapshot ?? null) as KillSwitch | null;
        break;
      case "runs": {
        const list = (snapshot ?? null) as RunList | null;
        state.runList = list;
        if (list?.kill_switch) state.killSwitch = list.kill_switch;
        this.follow(sub.root, "run", (list?.runs ?? []).map((run) => run.run_id));
        break;
      }
      case "goals": {
        const list = (snapshot ?? null) as GoalList | null;
        state.goalList = list;
        this.follow(sub.root, "goal", (list?.goals ?? []).map((goal) => goal.goal_id));
        break;
      }
      case "run":
        if (snapshot === null || snapshot === undefined) state.runs.delete(sub.key);
        else state.runs.set(sub.key, snapshot as RunStatus);
        break;
      case "goal":
        if (snapshot === null || snapshot === undefined) state.boards.delete(sub.key);
        else state.boards.set(sub.key, snapshot as GoalBoard);
        break;
    }
    this.emit(sub.root);
  }

  /** Recompute the project's problem from the server's and its streams', and tell the listeners. */
  private settle(root: string): void {
    const state = this.projects.get(root);
    if (state === undefined) return;
    state.problem = this.rootProblems.get(root) ?? this.serverProblem;
    this.emit(root);
  }

  private emit(root: string): void {
    for (const listener of this.listeners) listener(root);
  }
}
