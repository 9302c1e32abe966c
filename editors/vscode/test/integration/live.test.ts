// LiveProjects (the extension's state, unchanged) against a real `loopstate serve`, with
// changes made by another process (the CLI, a file removed by hand, `loopstate recover`), and
// the project-wide commands and queries the extension sends.
import { randomUUID } from "node:crypto";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { LiveProjects, type StreamNotice } from "../../src/live";
import { haltedCount, summarize } from "../../src/model/status";
import { goalNodes, intentNodes } from "../../src/model/trees";
import { changeWhere, makeStore, type Server, startServer, type Store } from "./server";

let store: Store;
let server: Server | null = null;
let live: LiveProjects;

async function connect(): Promise<Server> {
  const started = startServer(store);
  await started.initialize();
  started.connection.onNotification("loopstate/changed", (params) => live.changed(params));
  started.connection.onNotification("loopstate/streamError", (params) => live.streamError(params));
  await live.attach(started.connection);
  return started;
}

const state = () => live.project(store.folder)!;
const until = (predicate: () => boolean) => changeWhere((l) => live.onDidChange(l), predicate);

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
  it("finds the runs and goals through the project topics and follows what the CLI changes, a new run included", async () => {
    server = await connect();
    await live.track(store.folder);
    await until(() => state().runs.size === 1 && state().boards.has("main") && state().intent !== null && state().killSwitch !== null);
    expect(summarize(state(), "proj").text).toBe("$(pulse) run ready 0% · 1 claim");

    const [task] = JSON.parse(store.cli("intent", "tasks", "--json")).tasks;
    store.cli("intent", "add", "--facet", "hard_constraint", task.task_id, "Keep the public API stable");
    await until(() => state().intent?.active_count === 2);
    store.cli("goals", "add", "main", "Document the old format", "--priority", "P1");
    await until(() => (state().boards.get("main")?.active?.[0]?.todos.length ?? 0) === 2);
    expect(goalNodes(state().boards)[0].children![0].children!.map((n) => n.label)).toEqual(["T002 Document the old format", "T001 Write the parser"]);

    // created by another process: pushed in project/runs, then followed on its own topic
    store.cli("run", "create", "--objective", "Document", "--done-gate", "reviewed", "--asset", "docs", "--harness", "manual");
    await until(() => state().runs.size === 2);
    store.cli("goals", "add", "side", "A second goal");
    await until(() => state().boards.has("side"));
  });

  it("shows the kill switch set by the CLI, and cleared when the STOP file is removed by hand", async () => {
    server = await connect();
    await live.track(store.folder);
    await until(() => state().killSwitch !== null && state().runs.size === 1);
    store.cli("run", "stop", "--harness", "manual");
    await until(() => summarize(state(), "proj").text.includes("HALTED") && haltedCount(state()) === 1);
    const stop = path.join(store.folder, ".loopstate", "STOP");
    expect(existsSync(stop)).toBe(true);
    rmSync(stop);
    await until(() => state().killSwitch?.set === false);
    expect(summarize(state(), "proj").text).toBe("$(watch) run halted 0% · 1 claim");
  });

  it("stops every run and resumes through the server, and the listing gives the true halted count", async () => {
    server = await connect();
    await live.track(store.folder);
    store.cli("run", "create", "--objective", "Second", "--done-gate", "done", "--asset", "b", "--harness", "manual");
    await until(() => state().runs.size === 2);
    const execute = (command: object) =>
      server!.connection.sendRequest<any>("loopstate/execute", { root: store.folder, request_id: randomUUID(), command });
    const stopped = await execute({ kind: "project.stop", actor: { harness: "manual", actor: "tester", session_id: "s1" }, reason: "integration test" });
    expect(stopped.project.kind).toBe("project.stop");
    const halted = await server.connection.sendRequest<any>("loopstate/query", {
      root: store.folder,
      query: { kind: "project.runs", status: ["halted_kill_switch"] },
    });
    const cli = JSON.parse(store.cli("run", "list", "--json"));
    expect(halted.runs.length).toBe(cli.runs.filter((run: any) => run.status === "halted_kill_switch").length);
    expect(halted.runs.length).toBe(2);
    await until(() => state().killSwitch?.set === true && haltedCount(state()) === 2);

    const resumed = await execute({ kind: "project.resume", actor: { harness: "manual", actor: "tester", session_id: "s1" } });
    expect(resumed.project).toMatchObject({ kind: "project.resume", state: { set: false } });
    expect(existsSync(path.join(store.folder, ".loopstate", "STOP"))).toBe(false);
    await until(() => state().killSwitch?.set === false);
  });

  it("after a server restart resubscribes with since and shows what changed while it was down", async () => {
    server = await connect();
    await live.track(store.folder);
    await until(() => state().runs.size === 1 && state().boards.has("main"));
    const runId = [...state().runs.keys()][0];
    server.process.kill("SIGKILL"); // a crash: no shutdown
    await new Promise((resolve) => server!.process.once("exit", resolve));
    server.connection.dispose();
    live.detach("loopstate serve exited");
    expect(state().problem).toBe("loopstate serve exited");

    const [task] = JSON.parse(store.cli("intent", "tasks", "--json")).tasks;
    store.cli("intent", "add", task.task_id, "Added while the server was down");

    const replacement = startServer(store);
    await replacement.initialize();
    replacement.connection.onNotification("loopstate/changed", (params) => live.changed(params));
    const sent: any[] = [];
    const spy = { sendRequest: (method: string, params: unknown) => (sent.push({ method, params }), replacement.connection.sendRequest(method, params)) };
    await live.attach(spy as any);
    server = replacement;
    expect(state().problem).toBeNull();
    expect(state().intent?.active_count).toBe(2);
    const intentSubscribe = sent.find((m) => m.params.topic === "intent/snapshot");
    expect(intentSubscribe.params.since).toBe(1); // the sequence seen before the crash
    expect(sent.map((m) => m.params.topic).sort()).toEqual(
      ["goals/board/main", "intent/snapshot", "project/goals", "project/kill_switch", "project/runs", `runs/status/${runId}`].sort(),
    );
  });

  it("marks a stream another process corrupts, says so once, and comes back by itself after `loopstate recover`", async () => {
    server = await connect();
    await live.track(store.folder);
    await until(() => state().intent !== null);
    const [task] = JSON.parse(store.cli("intent", "tasks", "--json")).tasks;
    store.cli("intent", "add", task.task_id, "A second claim");
    await until(() => state().intent?.active_count === 2);
    const notices: StreamNotice[] = [];
    live.onStreamNotice((notice) => notices.push(notice));

    const verify = JSON.parse(store.cli("verify", "--json"));
    const file = path.join(store.env.LOOPSTATE_DATA_DIR!, "projects", verify.project_id, "streams", "intent.jsonl");
    writeFileSync(file, readFileSync(file, "utf8").replace("A second claim", "A SECOND claim"));
    await until(() => state().streamProblems.has("intent/snapshot"));
    const summary = summarize(state(), "proj");
    expect(summary.text).toBe("$(error) 1 stream unreadable");
    expect(summary.tooltip).toContain("CORRUPT_LEDGER");
    expect(intentNodes(state().intent, state().streamProblems.get("intent/snapshot")!)[0].label).toBe("intent: unreadable");

    store.cli("recover", "--yes");
    await until(() => !state().streamProblems.has("intent/snapshot") && state().intent?.active_count === 1);
    expect(notices.map((n) => [n.topic, n.readable])).toEqual([["intent/snapshot", false], ["intent/snapshot", true]]);
    expect(summarize(state(), "proj").text).toBe("$(pulse) run ready 0% · 1 claim");
  });
});
