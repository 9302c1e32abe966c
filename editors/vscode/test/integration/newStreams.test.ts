// A run or a goal created by another process (the CLI) is noticed through the store folder,
// listed and followed, with no polling: LiveProjects and NewStreamWatcher as the extension
// wires them, against a real `loopstate serve`.
import { mkdirSync } from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { inventory } from "../../src/cli";
import { LiveProjects } from "../../src/live";
import { NewStreamWatcher } from "../../src/newStreams";
import { chooseCommand } from "../../src/serverCommand";
import { changeWhere, makeStore, type Server, startServer, type Store } from "./server";

const command = chooseCommand("", process.env.PATH, null)!;
let store: Store;
let server: Server;
let live: LiveProjects;
let watcher: NewStreamWatcher | null = null;
let listings = 0;

async function follow(root: string): Promise<void> {
  listings += 1;
  const found = await inventory(command, root, store.env);
  await live.track(root, found.runIds, found.goalIds, found.killSwitch);
}

beforeEach(async () => {
  store = makeStore();
  live = new LiveProjects();
  listings = 0;
  server = startServer(store);
  await server.initialize();
  server.connection.onNotification("loopstate/changed", (params) => live.changed(params));
  await live.attach(server.connection);
});

afterEach(async () => {
  watcher?.dispose();
  watcher = null;
  await server.close();
  store.dispose();
});

describe("runs and goals created elsewhere", () => {
  it("are followed once the CLI creates them, in a project that has a store", async () => {
    store.cli("intent", "start", "--label", "first write");
    await follow(store.folder);
    watcher = new NewStreamWatcher(store.folder, (kind, id) => live.follows(store.folder, kind, id), () => void follow(store.folder), store.env);
    const state = () => live.project(store.folder)!;
    expect(state().runs.size).toBe(0);
    store.cli("run", "create", "--objective", "Parse", "--done-gate", "tests pass", "--asset", "parser", "--harness", "manual");
    await changeWhere((l) => live.onDidChange(l), () => state().runs.size === 1);
    store.cli("goals", "add", "later", "A todo of a new goal");
    await changeWhere((l) => live.onDidChange(l), () => state().boards.get("later")?.active?.[0]?.todos.length === 1);
  });

  it("are followed in a project whose store does not exist yet", async () => {
    const fresh = path.join(store.scratch, "fresh");
    mkdirSync(fresh);
    await follow(fresh);
    const before = listings;
    watcher = new NewStreamWatcher(fresh, (kind, id) => live.follows(fresh, kind, id), () => void follow(fresh), store.env);
    expect(listings).toBe(before); // nothing to list: no event, no listing
    store.cli("goals", "add", "first", "The project's first write", "--root", fresh);
    await changeWhere((l) => live.onDidChange(l), () => live.project(fresh)!.boards.get("first")?.active?.[0]?.todos.length === 1);
  });
});
