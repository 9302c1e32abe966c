/**
 * `loopstate/historyAlarm` where the user looks: the sidecar's witness found that a stream's
 * newest signed checkpoint does not extend the history it saw (src/model/historyAlarm.ts).
 *
 * Each alarm is an error notification ("Show output", "Copy verify command", "Acknowledge"),
 * an Output line, and the status item in its alarm state for that project until the user
 * acknowledges it ("loopstate: Acknowledge history alarm"). The server says each alarm once
 * (its witness remembers the checkpoint), so unacknowledged alarms are kept in the workspace
 * state: a reload or a restarted server does not make them disappear unseen. A purge, the one
 * rewrite loopstate makes on purpose, is an information message and an Output line only.
 */

import * as vscode from "vscode";
import type { HistoryAlarmNotification } from "./generated/wire";
import { type Alarm, notificationText, outputLine, parseAlarm, plainMessage, verifyCommand, withAlarms } from "./model/historyAlarm";
import type { StatusSummary } from "./model/status";

export const HISTORY_ALARM = "loopstate/historyAlarm";
const STATE_KEY = "loopstate.historyAlarms";

export class HistoryAlarms implements vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<string>();
  /** Fires with the project root whose alarms changed. */
  readonly onDidChange = this.changed.event;

  constructor(
    private readonly memento: vscode.Memento,
    private readonly output: { appendLine(line: string): void; show(): void },
    private readonly nameOf: (root: string) => string,
  ) {}

  /** Every unacknowledged alarm of ``root``, oldest first. */
  of(root: string): readonly Alarm[] {
    return this.all()[root] ?? [];
  }

  /** The roots with an unacknowledged alarm. */
  alarmed(): string[] {
    return Object.keys(this.all()).filter((root) => this.of(root).length > 0);
  }

  /** The status item's summary for ``root``, with its alarms ahead of it. */
  decorate(root: string, summary: StatusSummary, name: string): StatusSummary {
    return withAlarms(summary, this.of(root), name);
  }

  /** A pushed `loopstate/historyAlarm`; resolves once it is kept and said (the notification's answer is not awaited). */
  async receive(params: unknown): Promise<void> {
    const alarm = parseAlarm(params);
    if (typeof alarm === "string") {
      this.output.appendLine(`ignored a ${HISTORY_ALARM} notification the extension cannot read (${alarm}); run \`loopstate verify\` yourself`);
      return;
    }
    const name = this.nameOf(alarm.root);
    this.output.appendLine(outputLine(alarm, name));
    if (!alarm.rewritten) {
      void vscode.window.showInformationMessage(`loopstate: ${name}: ${plainMessage(alarm.stream, alarm.message)}.`);
      return;
    }
    const all = this.all();
    const kept = all[alarm.root] ?? [];
    if (!kept.some((old) => old.stream === alarm.stream && old.message === alarm.message)) {
      all[alarm.root] = [...kept, { stream: alarm.stream, message: alarm.message, at: new Date().toISOString() }];
      await this.memento.update(STATE_KEY, all);
    }
    this.changed.fire(alarm.root);
    void this.notify(alarm, name);
  }

  private async notify(alarm: HistoryAlarmNotification, name: string): Promise<void> {
    const choice = await vscode.window.showErrorMessage(notificationText(alarm, name), "Show output", "Copy verify command", "Acknowledge");
    if (choice === "Show output") this.output.show();
    else if (choice === "Acknowledge") await this.acknowledge(alarm.root);
    else if (choice === "Copy verify command") {
      const command = verifyCommand(alarm.root);
      await vscode.env.clipboard.writeText(command);
      void vscode.window.showInformationMessage(
        `Copied \`${command}\`. CHECKPOINT_FILE is a checkpoint of ${alarm.stream} kept from before (\`loopstate checkpoint ${alarm.stream}\` ` +
          "saved where the agent cannot rewrite it): the command says whether the stream still begins with what it signed (docs/verifying.md).",
      );
    }
  }

  /** Clear ``root``'s alarms; returns how many there were. */
  async acknowledge(root: string): Promise<number> {
    const all = this.all();
    const count = all[root]?.length ?? 0;
    if (count === 0) return 0;
    delete all[root];
    await this.memento.update(STATE_KEY, all);
    this.output.appendLine(`${this.nameOf(root)}: ${count} history ${count === 1 ? "alarm" : "alarms"} acknowledged`);
    this.changed.fire(root);
    return count;
  }

  private all(): Record<string, Alarm[]> {
    return { ...(this.memento.get<Record<string, Alarm[]>>(STATE_KEY) ?? {}) };
  }

  dispose(): void {
    this.changed.dispose();
  }
}

export interface AlarmWiring {
  alarms: HistoryAlarms;
  /** Registers a handler for a server notification on every server started (src/server.ts). */
  onNotification(method: string, handler: (params: unknown) => void): vscode.Disposable;
  activeRoot(): { root: string } | null;
  /** Redraw the status item. */
  render(): void;
}

/** The notification handler, the acknowledge command and the redraw on change. */
export function registerHistoryAlarms({ alarms, onNotification, activeRoot, render }: AlarmWiring): vscode.Disposable[] {
  return [
    alarms,
    onNotification(HISTORY_ALARM, (params) => void alarms.receive(params)),
    alarms.onDidChange(() => render()),
    vscode.commands.registerCommand("loopstate.acknowledgeHistoryAlarm", async (root?: unknown) => {
      const alarmed = alarms.alarmed();
      let chosen = typeof root === "string" ? root : undefined;
      const active = activeRoot()?.root;
      if (chosen === undefined && active !== undefined && alarmed.includes(active)) chosen = active;
      if (chosen === undefined && alarmed.length === 1) chosen = alarmed[0];
      if (chosen === undefined && alarmed.length > 1) {
        chosen = await vscode.window.showQuickPick(alarmed, { title: "Acknowledge the history alarms of which project?" });
        if (chosen === undefined) return;
      }
      const count = chosen === undefined ? 0 : await alarms.acknowledge(chosen);
      if (count === 0) void vscode.window.showInformationMessage("loopstate: no history alarm to acknowledge.");
    }),
  ];
}
