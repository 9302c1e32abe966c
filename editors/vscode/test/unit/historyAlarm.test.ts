import { beforeEach, describe, expect, it } from "vitest";
import { HistoryAlarms, registerHistoryAlarms } from "../../src/historyAlarms";
import { parseAlarm, plainMessage, verifyCommand, withAlarms } from "../../src/model/historyAlarm";
import { messages } from "./fakeVscode";
import { MemoryMemento } from "./memento";

const ROOT = "/work/proj";
const REWRITE = { root: ROOT, stream: "intent", rewritten: true, message: "loopstate: intent: its checkpoint of 4 events does not extend the 3 seen before: history was rewritten" };
/** The message as the extension says it (its own "loopstate: proj:" and the stream's name come first). */
const SAID = "its checkpoint of 4 events does not extend the 3 seen before: history was rewritten";
const PURGE = { root: ROOT, stream: "intent", rewritten: false, message: "intent was purged at 2026-12-01T00:00:00Z; watching from there" };

class Output {
  lines: string[] = [];
  shown = 0;
  appendLine(line: string): void {
    this.lines.push(line);
  }
  show(): void {
    this.shown++;
  }
}

const settled = () => new Promise((resolve) => setTimeout(resolve, 0));

let memento: MemoryMemento;
let output: Output;
let alarms: HistoryAlarms;

beforeEach(() => {
  messages.shown = [];
  messages.answer = () => undefined;
  messages.clipboard = "";
  messages.commands.clear();
  memento = new MemoryMemento();
  output = new Output();
  alarms = new HistoryAlarms(memento as never, output, (root) => (root === ROOT ? "proj" : root));
});

describe("a history alarm", () => {
  it("is an error notification with its buttons, an Output line, and kept for the project", async () => {
    const fired: string[] = [];
    alarms.onDidChange((root) => fired.push(root));
    await alarms.receive(REWRITE);
    expect(messages.shown).toEqual([
      {
        kind: "error",
        text: `loopstate: proj: the history of stream "intent" changed in a way appending never does: ${SAID}.`,
        buttons: ["Show output", "Copy verify command", "Acknowledge"],
      },
    ]);
    expect(output.lines).toHaveLength(1);
    expect(output.lines[0]).toContain(`proj: HISTORY ALARM: stream intent of ${ROOT}: ${SAID}.`);
    expect(output.lines[0]).toContain("loopstate verify --against CHECKPOINT_FILE --root /work/proj");
    expect(alarms.of(ROOT).map((alarm) => [alarm.stream, alarm.message])).toEqual([["intent", REWRITE.message]]);
    expect(fired).toEqual([ROOT]);
    // kept in the workspace state: a new window's extension still has it
    expect(new HistoryAlarms(memento as never, output, () => "proj").of(ROOT)).toHaveLength(1);
  });

  it("puts the status item in its own alarm state, not HALTED, with a tooltip that says what happened", async () => {
    await alarms.receive(REWRITE);
    const halted = { text: "$(debug-stop) HALTED · run halting · 1 claim", tone: "halted" as const, tooltip: "loopstate: proj (/work/proj)\nKill switch SET" };
    const shown = alarms.decorate(ROOT, halted, "proj");
    expect(shown.text).toBe("$(shield) HISTORY REWRITTEN (intent) · HALTED · run halting · 1 claim");
    expect(shown.tone).toBe("alarm");
    expect(shown.tooltip).toContain(`intent (${alarms.of(ROOT)[0].at}): ${SAID}\n`);
    expect(shown.tooltip).toContain("loopstate verify --against CHECKPOINT_FILE");
    expect(shown.tooltip).toContain('"loopstate: Acknowledge history alarm"');
    expect(shown.tooltip.endsWith(halted.tooltip)).toBe(true);
    // another project, or none alarmed: the summary as it was
    expect(alarms.decorate("/work/other", halted, "other")).toBe(halted);
    expect(withAlarms(halted, [], "proj")).toBe(halted);
  });

  it("is kept once when the same alarm comes again (a restarted server), and each stream is named", async () => {
    await alarms.receive(REWRITE);
    await alarms.receive(REWRITE);
    await alarms.receive({ ...REWRITE, stream: "runs/r1", message: "runs/r1: history was cut" });
    expect(alarms.of(ROOT).map((alarm) => alarm.stream)).toEqual(["intent", "runs/r1"]);
    expect(alarms.decorate(ROOT, { text: "$(pulse) 1 claim", tone: "normal", tooltip: "" }, "proj").text).toBe(
      "$(shield) HISTORY REWRITTEN (intent, runs/r1) · 1 claim",
    );
  });

  it("stays until acknowledged: the notification's button or the command (active project first)", async () => {
    messages.answer = (_text, buttons) => (buttons.includes("Acknowledge") ? "Acknowledge" : undefined);
    await alarms.receive(REWRITE);
    await settled();
    expect(alarms.of(ROOT)).toEqual([]);
    expect(output.lines.at(-1)).toBe("proj: 1 history alarm acknowledged");

    messages.answer = () => undefined;
    let active: string | null = ROOT;
    let renders = 0;
    const disposables = registerHistoryAlarms({
      alarms,
      onNotification: () => ({ dispose() {} }),
      activeRoot: () => (active === null ? null : { root: active }),
      render: () => renders++,
    });
    const acknowledge = messages.commands.get("loopstate.acknowledgeHistoryAlarm")!;
    await alarms.receive(REWRITE);
    await alarms.receive({ ...REWRITE, root: "/work/other" });
    expect(renders).toBe(2);
    await acknowledge();
    expect(alarms.of(ROOT)).toEqual([]);
    expect(alarms.of("/work/other")).toHaveLength(1);
    active = null; // no active project: the only alarmed one
    await acknowledge();
    expect(alarms.alarmed()).toEqual([]);
    expect(renders).toBe(4);
    await acknowledge();
    expect(messages.shown.at(-1)).toEqual({ kind: "information", text: "loopstate: no history alarm to acknowledge.", buttons: [] });
    for (const disposable of disposables) disposable.dispose();
  });

  it("copies the verify command, with the project's root quoted for a shell", async () => {
    messages.answer = (_text, buttons) => (buttons.includes("Copy verify command") ? "Copy verify command" : undefined);
    await alarms.receive(REWRITE);
    await settled();
    expect(messages.clipboard).toBe("loopstate verify --against CHECKPOINT_FILE --root /work/proj");
    expect(messages.shown.at(-1)?.text).toContain("CHECKPOINT_FILE is a checkpoint of intent kept from before");
    expect(alarms.of(ROOT)).toHaveLength(1); // copying is not acknowledging
    expect(verifyCommand("/home/me/it's here")).toBe("loopstate verify --against CHECKPOINT_FILE --root '/home/me/it'\\''s here'");
  });

  it("Show output opens the Output", async () => {
    messages.answer = (_text, buttons) => (buttons.includes("Show output") ? "Show output" : undefined);
    await alarms.receive(REWRITE);
    await settled();
    expect(output.shown).toBe(1);
  });
});

describe("the server's message", () => {
  it("is said without the loopstate and stream prefix it may carry, and kept whole otherwise", () => {
    expect(plainMessage("intent", REWRITE.message)).toBe(SAID);
    expect(plainMessage("intent", "intent was purged at X")).toBe("intent was purged at X");
    expect(plainMessage("runs/r1", "loopstate: intent: other stream")).toBe("intent: other stream");
  });
});

describe("a purge", () => {
  it("is an information message and an Output line only: no alarm kept, the status item unchanged", async () => {
    await alarms.receive(PURGE);
    expect(messages.shown).toEqual([{ kind: "information", text: `loopstate: proj: ${PURGE.message}.`, buttons: [] }]);
    expect(output.lines).toEqual([`proj: stream intent was purged on purpose: ${PURGE.message}`]);
    expect(alarms.of(ROOT)).toEqual([]);
  });
});

describe("a notification the extension cannot read", () => {
  it.each([
    [null, "params must be an object, got null"],
    [{ ...REWRITE, root: "" }, 'params.root must be a non-empty string, got ""'],
    [{ ...REWRITE, stream: 3 }, "params.stream must be a non-empty string, got 3"],
    [{ root: ROOT, stream: "intent", rewritten: true }, "params.message must be a non-empty string, got undefined"],
    [{ ...REWRITE, rewritten: "yes" }, 'params.rewritten must be true or false, got "yes"'],
  ])("%j is said in the Output, shown nowhere else, and kept nowhere", async (params, problem) => {
    expect(parseAlarm(params)).toBe(problem);
    await alarms.receive(params);
    expect(output.lines).toEqual([`ignored a loopstate/historyAlarm notification the extension cannot read (${problem}); run \`loopstate verify\` yourself`]);
    expect(messages.shown).toEqual([]);
    expect(alarms.alarmed()).toEqual([]);
  });
});
