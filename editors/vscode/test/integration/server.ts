// A real `loopstate serve` over stdio, spoken to with vscode-jsonrpc (the library under
// vscode-languageclient), on a temporary store: what the integration tests share.
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { createMessageConnection, type MessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";
import { findOnPath } from "../../src/serverCommand";

export const LOOPSTATE = findOnPath("loopstate", process.env.PATH);
if (LOOPSTATE === null) {
  throw new Error("`loopstate` is not on PATH: run these tests from the repository venv (`PATH=$PWD/.venv/bin:$PATH`)");
}

export interface Store {
  scratch: string;
  folder: string;
  env: NodeJS.ProcessEnv;
  cli(...args: string[]): string;
  dispose(): void;
}

export function makeStore(): Store {
  const scratch = mkdtempSync(path.join(tmpdir(), "ls-int-"));
  const folder = path.join(scratch, "proj");
  mkdirSync(folder);
  mkdirSync(path.join(scratch, "data"));
  const env = { ...process.env, LOOPSTATE_DATA_DIR: path.join(scratch, "data") };
  return {
    scratch,
    folder,
    env,
    cli: (...args: string[]) => execFileSync(LOOPSTATE!, args, { cwd: folder, env, encoding: "utf8" }),
    dispose: () => rmSync(scratch, { recursive: true, force: true }),
  };
}

export interface Server {
  process: ChildProcess;
  connection: MessageConnection;
  initialize(): Promise<any>;
  close(): Promise<void>;
}

export function startServer(store: Store): Server {
  const child = spawn(LOOPSTATE!, ["serve"], { env: store.env, stdio: ["pipe", "pipe", "inherit"] });
  const connection = createMessageConnection(new StreamMessageReader(child.stdout!), new StreamMessageWriter(child.stdin!));
  connection.listen();
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return {
    process: child,
    connection,
    async initialize() {
      const result = await connection.sendRequest("initialize", { processId: process.pid, capabilities: {}, rootUri: null });
      await connection.sendNotification("initialized", {});
      return result;
    },
    async close() {
      if (child.exitCode === null && child.signalCode === null) {
        await connection.sendRequest("shutdown").catch(() => undefined);
        await connection.sendNotification("exit").catch(() => undefined);
      }
      await exited;
      connection.dispose();
    },
  };
}

/** Resolves once ``predicate`` holds after a change LiveProjects reports (bounded by the test timeout). */
export function changeWhere(subscribe: (listener: () => void) => { dispose(): void }, predicate: () => boolean): Promise<void> {
  return new Promise((resolve) => {
    if (predicate()) return resolve();
    const subscription = subscribe(() => {
      if (predicate()) {
        subscription.dispose();
        resolve();
      }
    });
  });
}
