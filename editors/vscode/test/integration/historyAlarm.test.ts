// The history alarm handler (src/historyAlarms.ts) against a real `loopstate serve`: the
// server's witness follows intent while checkpoints are signed, the server is closed, the
// stream is rewritten and re-sealed with loopstate's own code (test/e2e/rewrite_history.py),
// a new checkpoint is signed, a new server started, and an append made: the one alarm it
// pushes is kept, said and shown on the status item until acknowledged.
import { execFileSync } from "node:child_process";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { HISTORY_ALARM, HistoryAlarms } from "../../src/historyAlarms";
import { LiveProjects } from "../../src/live";
import { plainMessage } from "../../src/model/historyAlarm";
import { summarize } from "../../src/model/status";
import { messages } from "../unit/fakeVscode";
import { MemoryMemento } from "../unit/memento";
import { changeWhere, LOOPSTATE, makeStore, type Server, startServer, type Store } from "./server";

const REWRITE = path.resolve(__dirname, "../e2e/rewrite_history.py");
const PYTHON = path.join(path.dirname(LOOPSTATE!), "python");

let store: Store;
let server: Server | null = null;
let live: LiveProjects;
let alarms: HistoryAlarms;
const output: string[] = [];

async function connect(): Promise<Server> {
  const started = startServer(store);
  await started.initialize();
  started.connection.onNotification("loopstate/changed", (params) => live.changed(params));
  started.connection.onNotification(HISTORY_ALARM, (params) => void alarms.receive(params));
  await live.attach(started.connection);
  await live.track(store.folder);
  await changeWhere((l) => live.onDidChange(l), () => live.project(store.folder)?.intent != null);
  return started;
}

function addClaim(statement: string): void {
  const [task] = JSON.parse(store.cli("intent", "tasks", "--json")).tasks;
  store.cli("intent", "add", task.task_id, statement);
}

beforeEach(() => {
  messages.shown = [];
  messages.answer = () => undefined;
  output.length = 0;
  store = makeStore();
  store.cli("init");
  store.cli("intent", "start", "--claim", "outcome:Prove it");
  addClaim("Claim 0");
  live = new LiveProjects();
  alarms = new HistoryAlarms(new MemoryMemento() as never, { appendLine: (line) => output.push(line), show() {} }, () => "proj");
});

afterEach(async () => {
  await server?.close();
  server = null;
  store.dispose();
});

describe("a history rewritten behind the sidecar's back", () => {
  it("is pushed, kept, said and shown on the status item; honest growth never alarms", async () => {
    server = await connect();
    store.cli("checkpoint", "intent");
    addClaim("Claim 1"); // news: the witness takes the checkpoint on trust
    store.cli("checkpoint", "intent");
    addClaim("Claim 2"); // news: a checkpoint that extends what it saw
    await changeWhere((l) => live.onDidChange(l), () => live.project(store.folder)?.intent?.active_count === 4);
    await server.close();
    server = null;
    expect(alarms.alarmed()).toEqual([]);
    expect(messages.shown).toEqual([]);

    const said = execFileSync(PYTHON, [REWRITE, store.folder], { env: store.env, encoding: "utf8" });
    expect(said).toMatch(/^rewrote event 2 of .*intent\.jsonl and re-sealed 4 events/);
    store.cli("checkpoint", "intent");
    live = new LiveProjects();
    server = await connect();
    const changed = new Promise<string>((resolve) => alarms.onDidChange(resolve));
    addClaim("Claim 3");
    const root = await changed;

    expect(alarms.of(root)).toHaveLength(1);
    const [alarm] = alarms.of(root);
    expect(alarm.stream).toBe("intent");
    expect(alarm.message).toContain("history was rewritten");
    expect(messages.shown).toEqual([
      {
        kind: "error",
        text: `loopstate: proj: the history of stream "intent" changed in a way appending never does: ${plainMessage("intent", alarm.message)}.`,
        buttons: ["Show output", "Copy verify command", "Acknowledge"],
      },
    ]);
    expect(output).toHaveLength(1);
    expect(output[0]).toContain(`proj: HISTORY ALARM: stream intent of ${root}: ${plainMessage("intent", alarm.message)}.`);
    const state = live.project(store.folder)!;
    const shown = alarms.decorate(root, summarize(state, "proj"), "proj");
    expect(shown.tone).toBe("alarm");
    expect(shown.text).toMatch(/^\$\(shield\) HISTORY REWRITTEN \(intent\) · \d+ claims$/);

    expect(await alarms.acknowledge(root)).toBe(1);
    expect(alarms.decorate(root, summarize(state, "proj"), "proj").tone).toBe("normal");
  });

  it("a purge made on purpose, with the server running, is an information message only", async () => {
    server = await connect();
    store.cli("checkpoint", "intent");
    addClaim("Claim 1"); // news: the witness takes the checkpoint on trust
    await changeWhere((l) => live.onDidChange(l), () => live.project(store.folder)?.intent?.active_count === 3);
    const log = JSON.parse(store.cli("log", "--stream", "intent", "--json"));
    const claimId = log.streams[0].events.find((event: any) => event.event_type === "claim_added").payload.claim.claim_id;
    const said = new Promise<void>((resolve) => {
      const before = messages.shown.length;
      const timer = setInterval(() => {
        if (messages.shown.length > before || output.length > 0) {
          clearInterval(timer);
          resolve();
        }
      }, 50);
    });
    store.cli("intent", "purge", "claim", claimId, "--yes");
    addClaim("After the purge"); // news after the purge's checkpoint
    await said;
    expect(messages.shown).toEqual([{ kind: "information", text: expect.stringMatching(/^loopstate: proj: intent was purged at .*re-chained/), buttons: [] }]);
    expect(output).toEqual([expect.stringMatching(/^proj: stream intent was purged on purpose: intent was purged at /)]);
    expect(alarms.alarmed()).toEqual([]);
  });
});
