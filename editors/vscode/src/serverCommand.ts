/**
 * Which loopstate to start, without asking the user where the common installs put it:
 *
 * 1. the `loopstate.serverPath` setting, as given;
 * 2. a virtual environment in a workspace folder (`.venv`, then `venv`; trusted workspaces
 *    only, so a cloned folder cannot choose the program the extension runs);
 * 3. the `loopstate` beside the Python extension's selected interpreter (when that extension
 *    is installed);
 * 4. `loopstate` on the extension host's PATH;
 * 5. where pipx and `uv tool` install commands (their bin folders, then their own venvs);
 * 6. `loopstate` on the PATH of a login shell (the one place a profile adds, e.g. `~/.local/bin`
 *    or a version manager's shims, that a desktop-started VS Code does not inherit);
 * 7. `python -m loopstate` with the Python extension's interpreter.
 *
 * Each step is only tried when the ones before it found nothing; the slow ones (activating the
 * Python extension, starting a login shell) are last in their class. ``locate`` takes the
 * machine's facts as inputs so every step is tested on real folders (test/unit/serverCommand.test.ts).
 */

import { accessSync, constants } from "node:fs";
import * as path from "node:path";

export type Origin = "setting" | "workspace venv" | "python interpreter" | "PATH" | "pipx" | "uv tool" | "login shell" | "python -m";

export interface LoopstateCommand {
  command: string;
  /** Arguments before the verb (`-m loopstate` for an interpreter). */
  prefix: string[];
  /** Where the choice came from, for messages. */
  origin: Origin;
}

/** What ``locate`` may look at; the async ones are called only when reached. */
export interface LocateInputs {
  setting: string;
  /** The workspace folders' paths; searched only when ``trusted``. */
  folders: string[];
  trusted: boolean;
  env: NodeJS.ProcessEnv;
  platform: NodeJS.Platform;
  pythonInterpreter(): Promise<string | null>;
  /** The PATH a login shell sets up, or null when there is none to ask. */
  loginShellPath(): Promise<string | null>;
}

function isExecutable(candidate: string): boolean {
  try {
    accessSync(candidate, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

function executableNames(platform: NodeJS.Platform): string[] {
  return platform === "win32" ? ["loopstate.exe", "loopstate.cmd", "loopstate"] : ["loopstate"];
}

/** The first executable `loopstate` in ``dir``, or null. */
function inFolder(dir: string, platform: NodeJS.Platform): string | null {
  for (const name of executableNames(platform)) {
    const candidate = path.join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

/** The first executable called ``name`` on ``pathVariable``, or null. */
export function findOnPath(name: string, pathVariable: string | undefined, delimiter = path.delimiter): string | null {
  for (const dir of (pathVariable ?? "").split(delimiter)) {
    if (!dir) continue;
    const candidate = path.join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return null;
}

function venvBin(platform: NodeJS.Platform): string {
  return platform === "win32" ? "Scripts" : "bin";
}

/** pipx's and uv's bin folders and tool venvs, by their documented variables and defaults. */
function toolLocations(env: NodeJS.ProcessEnv, platform: NodeJS.Platform): Array<[Origin, string]> {
  const home = env.HOME ?? env.USERPROFILE ?? "";
  const local = home ? path.join(home, ".local") : "";
  const dataHome = env.XDG_DATA_HOME || (local ? path.join(local, "share") : "");
  const bin = venvBin(platform);
  const places: Array<[Origin, string | undefined]> = [
    ["pipx", env.PIPX_BIN_DIR],
    ["uv tool", env.UV_TOOL_BIN_DIR],
    ["uv tool", env.XDG_BIN_HOME],
    ["pipx", local && path.join(local, "bin")],
    ["pipx", env.PIPX_HOME && path.join(env.PIPX_HOME, "venvs", "loopstate", bin)],
    ["pipx", dataHome && path.join(dataHome, "pipx", "venvs", "loopstate", bin)],
    ["pipx", local && path.join(local, "pipx", "venvs", "loopstate", bin)],
    ["uv tool", env.UV_TOOL_DIR && path.join(env.UV_TOOL_DIR, "loopstate", bin)],
    ["uv tool", dataHome && path.join(dataHome, "uv", "tools", "loopstate", bin)],
  ];
  return places.filter((place): place is [Origin, string] => typeof place[1] === "string" && place[1] !== "");
}

/** The command to run, by the order above; null when nothing is found (the caller then asks the user). */
export async function locate(inputs: LocateInputs): Promise<LoopstateCommand | null> {
  const { env, platform } = inputs;
  const found = (command: string | null, origin: Origin): LoopstateCommand | null =>
    command === null ? null : { command, prefix: [], origin };
  const configured = inputs.setting.trim();
  if (configured) return { command: configured, prefix: [], origin: "setting" };
  if (inputs.trusted) {
    for (const folder of inputs.folders) {
      for (const venv of [".venv", "venv"]) {
        const hit = found(inFolder(path.join(folder, venv, venvBin(platform)), platform), "workspace venv");
        if (hit) return hit;
      }
    }
  }
  const interpreter = await inputs.pythonInterpreter();
  if (interpreter) {
    const hit = found(inFolder(path.dirname(interpreter), platform), "python interpreter");
    if (hit) return hit;
  }
  const delimiter = platform === "win32" ? ";" : ":";
  for (const name of executableNames(platform)) {
    const hit = found(findOnPath(name, env.PATH, delimiter), "PATH");
    if (hit) return hit;
  }
  for (const [origin, dir] of toolLocations(env, platform)) {
    const hit = found(inFolder(dir, platform), origin);
    if (hit) return hit;
  }
  const loginPath = await inputs.loginShellPath();
  if (loginPath) {
    const hit = found(findOnPath("loopstate", loginPath, delimiter), "login shell");
    if (hit) return hit;
  }
  if (interpreter) return { command: interpreter, prefix: ["-m", "loopstate"], origin: "python -m" };
  return null;
}

export function describe(command: LoopstateCommand): string {
  return [command.command, ...command.prefix].join(" ");
}
