/**
 * One-shot `loopstate` CLI calls for what the protocol has no method for: the list of a
 * project's runs and goals, the project-wide kill switch (`run stop` halts every run, even
 * with none yet), `verify` and `log`. Each is a real subprocess of the same loopstate the
 * server runs; a failure carries the CLI's own message.
 */

import { execFile } from "node:child_process";
import type { KillSwitch } from "./model/projections";
import type { LoopstateCommand } from "./serverCommand";

export class CliError extends Error {
  constructor(message: string, readonly exitCode: number | null, readonly stderr: string) {
    super(message);
  }
}

export interface CliResult {
  stdout: string;
  stderr: string;
  exitCode: number;
}

/** Run `loopstate ARGS --root ROOT` in ``root``; resolves with the output whatever the exit status. */
export function runCli(command: LoopstateCommand, root: string, args: string[], env = process.env): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    execFile(
      command.command,
      [...command.prefix, ...args, "--root", root],
      { cwd: root, env, maxBuffer: 64 * 1024 * 1024 },
      (error, stdout, stderr) => {
        if (error && typeof error.code !== "number") {
          reject(new CliError(`could not run ${command.command}: ${error.message}`, null, String(stderr)));
          return;
        }
        resolve({ stdout: String(stdout), stderr: String(stderr), exitCode: error ? Number(error.code) : 0 });
      },
    );
  });
}

/** Run a `--json` verb and parse its output; a non-zero exit is a CliError with the CLI's message. */
export async function runCliJson<T>(command: LoopstateCommand, root: string, args: string[], env = process.env): Promise<T> {
  const result = await runCli(command, root, [...args, "--json"], env);
  if (result.exitCode !== 0) {
    const message = result.stderr.trim() || result.stdout.trim() || `exit status ${result.exitCode}`;
    throw new CliError(`loopstate ${args.join(" ")}: ${message}`, result.exitCode, result.stderr);
  }
  try {
    return JSON.parse(result.stdout) as T;
  } catch {
    throw new CliError(`loopstate ${args.join(" ")} printed no JSON: ${result.stdout.slice(0, 200)}`, 0, result.stderr);
  }
}

export interface Inventory {
  runIds: string[];
  goalIds: string[];
  killSwitch: KillSwitch;
}

/** The project's runs and goals (what to subscribe to) and its kill switch. */
export async function inventory(command: LoopstateCommand, root: string, env = process.env): Promise<Inventory> {
  const [runs, goals] = await Promise.all([
    runCliJson<{ runs: Array<{ run_id: string }>; kill_switch: KillSwitch }>(command, root, ["run", "list"], env),
    runCliJson<{ goals: string[] }>(command, root, ["goals", "list"], env),
  ]);
  return { runIds: runs.runs.map((run) => run.run_id), goalIds: goals.goals, killSwitch: runs.kill_switch };
}
