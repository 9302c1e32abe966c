// LiveProjects (the extension's state, unchanged) against a real `loopstate serve`, with
// changes made by another process: the CLI.
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { inventory } from "../../src/cli";
import { LiveProjects } from "../../src/live";
import { summarize } from "../../src/model/status";
import { goalNodes } from "../../src/model/trees";
import { chooseCommand } from "../../src/serverCommand";
import { changeWhere, makeStore, type Server, startServer, type Store } from "./server";

let store: Store;
let server: Server | null = null;
let live: LiveProjects;
const command = chooseCommand("", process.env.PATH, null)!;

async function connect(): Promise<Server> {
  const started = startServer(store);
  await started.initialize();
  started.connection.onNotification("loopstate/changed", (params) => live.changed(params));
  started.connection.onNotification("loopstate/streamError", (params) => live.streamError(params));
  await live.attach(started.connection);
  return started;
}

beforeEach(() => {
  store = makeStore();
  store.cli("init");
  store.cli("intent", "start", "--label", "Ship the parser", "--claim", "outcome:The parser reads the old format");
  store.cli("goals", "add", "main", "Write the parser");
  store.cli("run", "create", "--objective", "Parse", "--done-gate", "tests pass", "--asset", "parser", "--harness", "manual");
  live = new LiveProjects();
});

afterEach(async () => {
  await server?.close();
  server = null;
  store.dispose();
});

describe("the live view of a project", () => {
  it("follows the project's intent, runs and goals, and updates when the CLI changes them", async () => {
    const found = await inventory(command, store.folder, store.env);
    expect(found.runIds).toHaveLength(1);
    expect(found.goalIds).toEqual(["main"]);
    server = await connect();
    await live.track(store.folder, found.runIds, found.goalIds, found.killSwitch);
    const state = () => live.project(store.folder)!;
    expect(summarize(state(), "proj").text).toBe("$(pulse) run ready 0% · 1 claim");

    const [task] = JSON.parse(store.cli("intent", "tasks", "--json")).tasks;
    store.cli("intent", "add", "--facet", "hard_constraint", task.task_id, "Keep the public API stable");
    await changeWhere((l) => live.onDidChange(l), () => state().intent?.active_count === 2);
    store.cli("goals", "add", "main", "Document the old format", "--priority", "P1");
    await changeWhere((l) => live.onDidChange(l), () => (state().boards.get("main")?.active?.[0]?.todos.length ?? 0) === 2);
    expect(goalNodes(state().boards)[0].children![0].children!.map((n) => n.label)).toEqual(["T002 Document the old format", "T001 Write the parser"]);

    store.cli("run", "stop", "--harness", "manual");
    await changeWhere((l) => live.onDidChange(l), () => summarize(state(), "proj").tone === "halted");
    expect(existsSync(path.join(store.folder, ".loopstate", "STOP"))).toBe(true);
    expect(summarize(state(), "proj").text).toBe("$(debug-stop) HALTED · run halted 0% · 2 claims");
  });

  it("after a server restart resubscribes with since and shows what changed while it was down", async () => {
    const found = await inventory(command, store.folder, store.env);
    server = await connect();
    await live.track(store.folder, found.runIds, found.goalIds);
    const sent: any[] = [];
    server.process.kill("SIGKILL"); // a crash: no shutdown
    await new Promise((resolve) => server!.process.once("exit", resolve));
    server.connection.dispose();
    live.detach("loopstate serve exited");
    expect(live.project(store.folder)!.problem).toBe("loopstate serve exited");

    const [task] = JSON.parse(store.cli("intent", "tasks", "--json")).tasks;
    store.cli("intent", "add", task.task_id, "Added while the server was down");

    const replacement = startServer(store);
    await replacement.initialize();
    replacement.connection.onNotification("loopstate/changed", (params) => live.changed(params));
    const spy = { sendRequest: (method: string, params: unknown) => (sent.push({ method, params }), replacement.connection.sendRequest(method, params)) };
    await live.attach(spy as any);
    server = replacement;
    const state = live.project(store.folder)!;
    expect(state.problem).toBeNull();
    expect(state.intent?.active_count).toBe(2);
    const intentSubscribe = sent.find((m) => m.params.topic === "intent/snapshot");
    expect(intentSubscribe.params.since).toBe(1); // the sequence seen before the crash
    expect(sent.map((m) => m.params.topic).sort()).toEqual([`goals/board/main`, "intent/snapshot", `runs/status/${found.runIds[0]}`]);
  });

  it("reports a stream that another process corrupts, and stops showing its state", async () => {
    server = await connect();
    await live.track(store.folder);
    const verify = JSON.parse(store.cli("verify", "--json"));
    const data = store.env.LOOPSTATE_DATA_DIR!;
    const file = path.join(data, "projects", verify.project_id, "streams", "intent.jsonl");
    const bytes = readFileSync(file, "utf8");
    writeFileSync(file, bytes.replace("The parser reads the old format", "The parser reads the OLD format"));
    await changeWhere((l) => live.onDidChange(l), () => live.project(store.folder)!.problem !== null);
    const summary = summarize(live.project(store.folder)!, "proj");
    expect(summary.text).toBe("$(error) loopstate");
    expect(summary.tooltip).toContain("CORRUPT_LEDGER");
  });
});
