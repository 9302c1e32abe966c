/**
 * How to start loopstate: the `loopstate.serverPath` setting, else `loopstate` on PATH, else
 * `python -m loopstate` with the Python extension's interpreter. The same command runs the
 * CLI verbs the protocol has no method for (listing runs and goals, the project-wide kill
 * switch, `verify`, `log`), so the server and the CLI are always the same loopstate.
 */

import { accessSync, constants } from "node:fs";
import * as path from "node:path";

export interface LoopstateCommand {
  command: string;
  /** Arguments before the verb (`-m loopstate` for an interpreter). */
  prefix: string[];
  /** Where the choice came from, for messages. */
  origin: "setting" | "PATH" | "python";
}

/** The first executable called ``name`` on ``pathVariable``, or null. */
export function findOnPath(name: string, pathVariable: string | undefined): string | null {
  for (const dir of (pathVariable ?? "").split(path.delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not here: keep looking
    }
  }
  return null;
}

/**
 * The command to run, by the order above; null when none is available (then the caller says
 * so once, with the setting to fix it). ``pythonInterpreter`` is the Python extension's
 * interpreter when that extension is installed.
 */
export function chooseCommand(
  setting: string,
  pathVariable: string | undefined,
  pythonInterpreter: string | null,
): LoopstateCommand | null {
  const configured = setting.trim();
  if (configured) return { command: configured, prefix: [], origin: "setting" };
  const onPath = findOnPath("loopstate", pathVariable);
  if (onPath) return { command: onPath, prefix: [], origin: "PATH" };
  if (pythonInterpreter) return { command: pythonInterpreter, prefix: ["-m", "loopstate"], origin: "python" };
  return null;
}

export function describe(command: LoopstateCommand): string {
  return [command.command, ...command.prefix].join(" ");
}
