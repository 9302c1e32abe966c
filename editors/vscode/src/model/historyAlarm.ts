/**
 * A history alarm in the extension's words: pure, so it is tested without VS Code.
 *
 * `loopstate serve` pushes `loopstate/historyAlarm` when the newest signed checkpoint of a
 * stream it follows does not extend the history it saw before (`rewritten: true`: history was
 * rewritten or cut, something an append never does) or when the stream was purged on purpose
 * (`rewritten: false`). An alarm is kept, per project, until the user acknowledges it; while
 * one stands, the status item says so ahead of everything else, in words of its own (not
 * HALTED: the runs go on; it is the record of them that cannot be trusted).
 */

import type { HistoryAlarmNotification } from "../generated/wire";
import type { StatusSummary } from "./status";

/** One unacknowledged alarm of a project, as it is kept (workspace state) and shown. */
export interface Alarm {
  stream: string;
  message: string;
  /** When the extension received it (ISO 8601). */
  at: string;
}

/** What to run against a checkpoint kept from before (docs/verifying.md, "Later: ask for a proof"). */
export function verifyCommand(root: string): string {
  return `loopstate verify --against CHECKPOINT_FILE --root ${quoted(root)}`;
}

function quoted(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replace(/'/g, `'\\''`)}'`;
}

/**
 * The notification's params, checked: the wire type is a promise of the server's, but a
 * notification is never answered, so a malformed one is reported (as the returned string) rather
 * than half-shown.
 */
export function parseAlarm(params: unknown): HistoryAlarmNotification | string {
  if (typeof params !== "object" || params === null) return `params must be an object, got ${JSON.stringify(params)}`;
  const p = params as Record<string, unknown>;
  for (const field of ["root", "stream", "message"]) {
    if (typeof p[field] !== "string" || p[field] === "") return `params.${field} must be a non-empty string, got ${JSON.stringify(p[field])}`;
  }
  if (typeof p.rewritten !== "boolean") return `params.rewritten must be true or false, got ${JSON.stringify(p.rewritten)}`;
  return { root: p.root as string, stream: p.stream as string, rewritten: p.rewritten, message: p.message as string };
}

/** The server's message without the "loopstate: STREAM: " it may begin with (the extension names both itself). */
export function plainMessage(stream: string, message: string): string {
  const bare = message.replace(/^loopstate:\s*/, "");
  return bare.startsWith(`${stream}: `) ? bare.slice(stream.length + 2) : bare;
}

/** The Output line for an alarm or a purge. */
export function outputLine(alarm: HistoryAlarmNotification, name: string): string {
  const said = plainMessage(alarm.stream, alarm.message);
  if (!alarm.rewritten) return `${name}: stream ${alarm.stream} was purged on purpose: ${said}`;
  return (
    `${name}: HISTORY ALARM: stream ${alarm.stream} of ${alarm.root}: ${said}. ` +
    `Check the store against a checkpoint you kept from before: \`${verifyCommand(alarm.root)}\` ` +
    `(docs/verifying.md); "loopstate: Acknowledge history alarm" clears the status item.`
  );
}

/** The error notification's text for an alarm. */
export function notificationText(alarm: HistoryAlarmNotification, name: string): string {
  return `loopstate: ${name}: the history of stream "${alarm.stream}" changed in a way appending never does: ${plainMessage(alarm.stream, alarm.message)}.`;
}

/** The status item while ``alarms`` stand for the project: the alarm first, the usual summary after it. */
export function withAlarms(summary: StatusSummary, alarms: readonly Alarm[], folderName: string): StatusSummary {
  if (alarms.length === 0) return summary;
  const streams = [...new Set(alarms.map((alarm) => alarm.stream))];
  const rest = summary.text.replace(/^\$\([\w~-]+\)\s*/, "");
  const lines = [
    `loopstate: ${folderName}: HISTORY ALARM`,
    ...alarms.map((alarm) => `${alarm.stream} (${alarm.at}): ${plainMessage(alarm.stream, alarm.message)}`),
    "A signed checkpoint does not extend the history loopstate saw before: events were edited, dropped or cut.",
    "Check the store against a checkpoint kept from before: `loopstate verify --against CHECKPOINT_FILE` (docs/verifying.md).",
    'Run "loopstate: Acknowledge history alarm" once you have looked.',
    "",
    summary.tooltip,
  ];
  return {
    text: `$(shield) HISTORY REWRITTEN (${streams.join(", ")}) · ${rest}`,
    tone: "alarm",
    tooltip: lines.join("\n"),
  };
}
