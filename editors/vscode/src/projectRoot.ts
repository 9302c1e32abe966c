/**
 * Which loopstate project a workspace folder is: the same walk as the CLI's
 * (server/loopstate/core/discovery.py), so the extension and a `loopstate` typed in that
 * folder's terminal reach the same store. From the folder upward: the nearest directory
 * that is already a loopstate project (its store folder exists in the data dir), else the
 * top of the git work tree (the nearest `.git`, folder or file), else the folder itself.
 * test/integration/projectRoot.test.ts checks it against the CLI on real folders.
 */

import { createHash } from "node:crypto";
import { existsSync, lstatSync, realpathSync, statSync } from "node:fs";
import * as path from "node:path";

const PROJECT_ID_PREFIX = "loopstate-project-v1\0";

/** The data dir by the CLI's documented order (core/paths.py), or null when none can be named. */
export function dataDir(env: NodeJS.ProcessEnv): string | null {
  const explicit: Array<[string, string[]]> = [
    ["LOOPSTATE_DATA_DIR", []],
    ["CODEX_HOME", ["plugin-data", "loopstate", "v1"]],
    ["PLUGIN_DATA", []],
  ];
  for (const [name, suffix] of explicit) {
    const value = env[name];
    if (value) return path.isAbsolute(value) ? path.join(value, ...suffix) : null;
  }
  let state = env.XDG_STATE_HOME ?? "";
  if (!state || !path.isAbsolute(state)) {
    const home = env.HOME;
    if (!home || !path.isAbsolute(home)) return null;
    state = path.join(home, ".local", "state");
  }
  return path.join(state, "loopstate", "v1");
}

export function projectId(root: string): string {
  return createHash("sha256").update(PROJECT_ID_PREFIX + root, "utf8").digest("hex");
}

function ancestors(start: string): string[] {
  const chain = [start];
  for (;;) {
    const parent = path.dirname(chain[chain.length - 1]);
    if (parent === chain[chain.length - 1]) return chain;
    chain.push(parent);
  }
}

function isDirectory(candidate: string): boolean {
  try {
    return statSync(candidate).isDirectory();
  } catch {
    return false;
  }
}

function lexists(candidate: string): boolean {
  try {
    lstatSync(candidate);
    return true;
  } catch {
    return existsSync(candidate);
  }
}

/** The project root of the folder at ``folder`` (an absolute path). */
export function discoverRoot(folder: string, env: NodeJS.ProcessEnv = process.env): string {
  const here = realpathSync(folder);
  const chain = ancestors(here);
  const data = dataDir(env);
  if (data !== null) {
    const projects = path.join(data, "projects");
    for (const candidate of chain) {
      if (isDirectory(path.join(projects, projectId(candidate)))) return candidate;
    }
  }
  for (const candidate of chain) {
    if (lexists(path.join(candidate, ".git"))) return candidate;
  }
  return here;
}
