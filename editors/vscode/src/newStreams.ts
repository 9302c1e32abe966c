/**
 * Notice a run or goal another process creates, without polling.
 *
 * The protocol has topics for each run and each goal but none that lists them, so the
 * extension learns of a new one from the store itself: every run and goal is a stream file
 * (`<data dir>/projects/<id>/streams/runs.<run_id>.jsonl`, `goals.<goal_id>.jsonl`: see
 * docs/storage.md), and a new file is an inotify event on that folder. On such an event for a
 * name not yet followed, ``onNew`` runs (the extension lists the project again and subscribes).
 * Before the project's first write the folder does not exist: then the nearest existing
 * ancestor is watched until it appears.
 */

import { existsSync, type FSWatcher, readdirSync, watch } from "node:fs";
import * as path from "node:path";
import { dataDir, projectId } from "./projectRoot";

const STREAM = /^(runs|goals)\.(.+)\.jsonl$/;

export class NewStreamWatcher {
  private watcher: FSWatcher | null = null;
  private disposed = false;
  private readonly streams: string | null;

  constructor(
    root: string,
    private readonly known: (kind: "runs" | "goals", id: string) => boolean,
    private readonly onNew: () => void,
    env: NodeJS.ProcessEnv = process.env,
  ) {
    const data = dataDir(env);
    this.streams = data === null ? null : path.join(data, "projects", projectId(root), "streams");
    this.arm();
  }

  private arm(): void {
    this.watcher?.close();
    this.watcher = null;
    if (this.disposed || this.streams === null) return;
    if (existsSync(this.streams)) {
      this.watcher = this.open(this.streams, (name) => {
        if (this.unknown(name)) this.onNew();
      });
      // A stream written before the watch began (the folder's first files, say) is no event.
      if (this.watcher !== null && this.list().some((name) => this.unknown(name))) this.onNew();
      return;
    }
    // Not yet written: wait for the folder on the way to it to appear, then watch it.
    let folder = path.dirname(this.streams);
    while (!existsSync(folder) && path.dirname(folder) !== folder) folder = path.dirname(folder);
    this.watcher = this.open(folder, () => this.arm());
    if (existsSync(this.streams)) this.arm(); // created between the check and the watch
  }

  private unknown(name: string): boolean {
    const match = STREAM.exec(name);
    return match !== null && !this.known(match[1] as "runs" | "goals", match[2]);
  }

  private list(): string[] {
    try {
      return readdirSync(this.streams!);
    } catch {
      return [];
    }
  }

  private open(folder: string, onName: (name: string) => void): FSWatcher | null {
    try {
      const watcher = watch(folder, { persistent: false }, (_event, name) => {
        if (name !== null) onName(String(name));
      });
      watcher.on("error", () => this.arm());
      return watcher;
    } catch {
      return null; // unreadable: the listing on refresh still works
    }
  }

  dispose(): void {
    this.disposed = true;
    this.watcher?.close();
    this.watcher = null;
  }
}
