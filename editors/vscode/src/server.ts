/**
 * One `loopstate serve` per window, through vscode-languageclient over stdio: the only process
 * the extension starts (everything it reads and writes goes through this server).
 *
 * The language client's own restart is turned off (its error handler answers
 * DoNotRestart) so that this supervisor owns the policy: a crash restarts the server after a
 * backoff (src/backoff.ts) and re-attaches LiveProjects, which subscribes again with
 * `since`. A server that cannot start at all (no such file, not loopstate) is reported in
 * one notification with "Show output" and "Open settings", and is not retried until the
 * setting changes or the user runs "loopstate: Restart server".
 */

import * as vscode from "vscode";
import {
  CloseAction,
  ErrorAction,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";
import { Backoff } from "./backoff";
import type { ChangedNotification, StreamErrorNotification } from "./generated/wire";
import type { LiveProjects } from "./live";
import { describe, type LoopstateCommand } from "./serverCommand";

/**
 * A LanguageClient whose own error notifications go to the output only: the supervisor
 * reports a server that cannot start or keeps crashing in one notification of its own.
 */
class QuietClient extends LanguageClient {
  override error(message: string, data?: unknown, _showNotification?: boolean | "force"): void {
    super.error(message, data, false);
  }
}

export class ServerSupervisor implements vscode.Disposable {
  private client: LanguageClient | null = null;
  private startedAt = 0;
  private readonly backoff = new Backoff();
  private restartTimer: NodeJS.Timeout | null = null;
  private stopping = false;
  private generation = 0;
  /** The problem last notified, so a failing server is reported once, not on every retry. */
  private notified: string | null = null;
  /** Handlers of further server notifications (onNotification), set on every client before it starts. */
  private readonly handlers = new Set<[string, (params: unknown) => void]>();

  constructor(
    private readonly live: LiveProjects,
    private readonly output: vscode.LogOutputChannel,
    private readonly resolveCommand: () => Promise<LoopstateCommand | null>,
    /** After each server is attached: find the folders' projects and track them (src/extension.ts). */
    private readonly onAttached: (client: LanguageClient) => Promise<void> = async () => undefined,
  ) {}

  /** Handle ``method`` on every server this supervisor starts from now on (set before the client starts, so none is missed). */
  onNotification(method: string, handler: (params: unknown) => void): vscode.Disposable {
    const entry: [string, (params: unknown) => void] = [method, handler];
    this.handlers.add(entry);
    this.client?.onNotification(method, handler);
    return { dispose: () => this.handlers.delete(entry) };
  }

  get running(): LanguageClient | null {
    return this.client;
  }

  /** Start (or restart now) the server; resolves when it is attached or has failed. */
  async start(): Promise<void> {
    this.clearTimer();
    await this.stopClient();
    this.stopping = false;
    this.startedAt = 0;
    const generation = ++this.generation;
    const command = await this.resolveCommand();
    if (command === null) {
      this.fail(
        "no loopstate found (looked in the workspace's .venv and venv, beside the Python extension's interpreter, " +
          "on PATH, in pipx's and uv's tool folders and on a login shell's PATH)",
        "Install loopstate (`pipx install loopstate`, or `pip install loopstate` in the workspace's .venv), or set loopstate.serverPath to the `loopstate` executable.",
      );
      return;
    }
    // No `transport`: the client then speaks over the child's stdin/stdout without adding
    // `--stdio` to the arguments (loopstate serve takes none).
    const serverOptions: ServerOptions = {
      command: command.command,
      args: [...command.prefix, "serve"],
      options: { env: process.env },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [],
      outputChannel: this.output,
      errorHandler: {
        error: () => ({ action: ErrorAction.Continue }),
        closed: () => {
          // Before start() resolves, an exit is a failure to start (reported by start itself).
          // The client logs the returned message in place of its own "Server will not be
          // restarted", which would contradict the restart this supervisor schedules.
          if (generation === this.generation && !this.stopping && this.startedAt !== 0) {
            return { action: CloseAction.DoNotRestart, handled: true, message: this.crashed(command) };
          }
          return { action: CloseAction.DoNotRestart, handled: true, message: "loopstate serve stopped" };
        },
      },
      initializationFailedHandler: () => false,
    };
    const client = new QuietClient("loopstate", "loopstate", serverOptions, clientOptions);
    client.onNotification("loopstate/changed", (params: ChangedNotification) => this.live.changed(params));
    client.onNotification("loopstate/streamError", (params: StreamErrorNotification) => this.live.streamError(params));
    for (const [method, handler] of this.handlers) client.onNotification(method, handler);
    this.client = client;
    this.output.appendLine(`starting ${describe(command)} serve (${command.origin})`);
    try {
      await client.start();
    } catch (error) {
      if (generation !== this.generation) return;
      this.client = null;
      this.fail(`\`${describe(command)} serve\` could not start: ${messageOf(error)}`, hintFor(command));
      return;
    }
    if (generation !== this.generation) return;
    this.startedAt = Date.now();
    this.notified = null;
    try {
      await this.live.attach(client);
      await this.onAttached(client);
    } catch (error) {
      this.output.appendLine(`subscribing failed: ${messageOf(error)}`);
      void vscode.window.showErrorMessage(`loopstate: subscribing failed: ${messageOf(error)}`, "Show output")
        .then((choice) => choice && this.output.show());
    }
  }

  async restart(): Promise<void> {
    this.backoff.reset();
    this.notified = null;
    await this.start();
  }

  /** Schedule the restart (or give up); returns the one line the Output gets for the exit. */
  private crashed(command: LoopstateCommand): string {
    const uptime = Date.now() - this.startedAt;
    this.client = null;
    const delay = this.backoff.next(uptime);
    if (delay === null) {
      const problem = `\`${describe(command)} serve\` keeps exiting; stopped restarting it`;
      this.fail(problem, "See the output for its last words.", false);
      return `${problem}. See the lines above for its last words; "loopstate: Restart server" tries again.`;
    }
    this.live.detach(`loopstate serve exited; restarting in ${Math.round(delay / 1000)} s`);
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      void this.start();
    }, delay);
    return `loopstate serve exited after ${Math.round(uptime / 1000)} s; restarting it in ${delay} ms`;
  }

  private fail(problem: string, hint: string, log = true): void {
    this.live.detach(problem);
    if (log) this.output.appendLine(`${problem}. ${hint}`);
    if (this.notified === problem) return;
    this.notified = problem;
    void vscode.window
      .showErrorMessage(`loopstate: ${problem}. ${hint}`, "Show output", "Open settings")
      .then((choice) => {
        if (choice === "Show output") this.output.show();
        else if (choice === "Open settings") void vscode.commands.executeCommand("workbench.action.openSettings", "loopstate.serverPath");
      });
  }

  private clearTimer(): void {
    if (this.restartTimer !== null) clearTimeout(this.restartTimer);
    this.restartTimer = null;
  }

  private async stopClient(): Promise<void> {
    const client = this.client;
    this.client = null;
    if (client === null) return;
    this.stopping = true;
    try {
      await client.stop(2000);
    } catch (error) {
      this.output.appendLine(`stopping the server: ${messageOf(error)}`);
    }
  }

  async dispose(): Promise<void> {
    this.clearTimer();
    this.generation++;
    await this.stopClient();
  }
}

function hintFor(command: LoopstateCommand): string {
  return command.origin === "setting"
    ? "Check loopstate.serverPath: it must name the `loopstate` executable."
    : "Install loopstate, or set loopstate.serverPath.";
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
