/**
 * The loopstate extension: one `loopstate serve` per window (src/server.ts), every workspace
 * folder followed as a project (src/live.ts), shown in a status bar item and three tree views
 * (src/views.ts), acted on by the commands (src/commands.ts). Everything goes through the
 * server: a folder's project is its `project.root` answer, what is shown arrives as a pushed
 * `loopstate/changed`, and the extension starts no other process and watches no file (finding
 * loopstate may ask a login shell for its PATH, once, when nothing else found it).
 */

import { execFile } from "node:child_process";
import * as vscode from "vscode";
import { registerCommands } from "./commands";
import type { RootInfo } from "./generated/wire";
import { HistoryAlarms, registerHistoryAlarms } from "./historyAlarms";
import { LiveProjects, type Wire } from "./live";
import { messageOf, ServerSupervisor } from "./server";
import { describe, locate, type LoopstateCommand } from "./serverCommand";
import { type ActiveProject, Presenter } from "./views";

/**
 * The Python extension's selected interpreter for ``folder``, if that extension is installed
 * (activated only then: locate() asks only when no workspace venv has loopstate).
 */
async function pythonInterpreter(folder: vscode.Uri | undefined): Promise<string | null> {
  const python = vscode.extensions.getExtension("ms-python.python");
  if (python === undefined) return null;
  try {
    const api = (await python.activate()) as {
      environments?: { getActiveEnvironmentPath?(resource?: vscode.Uri): { path?: string } | undefined };
      settings?: { getExecutionDetails?(resource?: vscode.Uri): { execCommand?: string[] } | undefined };
    };
    return api.environments?.getActiveEnvironmentPath?.(folder)?.path ?? api.settings?.getExecutionDetails?.(folder)?.execCommand?.[0] ?? null;
  } catch {
    return null;
  }
}

/** The PATH a login shell of the user's sets up (bounded: a profile that hangs is given up on). */
function loginShellPath(): Promise<string | null> {
  const shell = process.env.SHELL;
  if (process.platform === "win32" || !shell) return Promise.resolve(null);
  return new Promise((resolve) => {
    execFile(shell, ["-l", "-c", 'printf "%s" "$PATH"'], { timeout: 3000, encoding: "utf8" }, (error, stdout) =>
      resolve(error ? null : stdout.trim() || null),
    );
  });
}

/** Which loopstate to run (src/serverCommand.ts has the order), remembered until the setting, trust or folders change. */
class CommandResolver {
  private found: Promise<LoopstateCommand | null> | null = null;

  resolve(): Promise<LoopstateCommand | null> {
    this.found ??= locate({
      setting: vscode.workspace.getConfiguration("loopstate").get<string>("serverPath", ""),
      folders: (vscode.workspace.workspaceFolders ?? []).filter((f) => f.uri.scheme === "file").map((f) => f.uri.fsPath),
      trusted: vscode.workspace.isTrusted,
      env: process.env,
      platform: process.platform,
      pythonInterpreter: () => pythonInterpreter(vscode.workspace.workspaceFolders?.[0]?.uri),
      loginShellPath,
    });
    return this.found;
  }

  forget(): void {
    this.found = null;
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const activatedAt = Date.now();
  const output = vscode.window.createOutputChannel("loopstate", { log: true });
  const live = new LiveProjects();
  // How long a person waits for the first state (docs/benchmarks.md, the editor section).
  const firstState = live.onDidChange((root) => {
    const state = live.project(root);
    if (state?.intent == null || state.problem !== null) return;
    output.appendLine(`first state of ${root} ${Date.now() - activatedAt} ms after activation`);
    firstState.dispose();
  });

  const commands = new CommandResolver();
  const resolveCommand = async () => {
    const command = await commands.resolve();
    if (command !== null && command.origin !== "setting") output.appendLine(`found loopstate: ${describe(command)} (${command.origin})`);
    return command;
  };

  const roots = new Map<string, string>(); // folder uri -> project root, as the server answered
  const folderRoot = (folder: vscode.WorkspaceFolder): string | null => roots.get(folder.uri.toString()) ?? null;
  const folderName = (root: string): string =>
    (vscode.workspace.workspaceFolders ?? []).find((folder) => folderRoot(folder) === root)?.name ?? root;
  const activeRoot = (): ActiveProject | null => {
    const editor = vscode.window.activeTextEditor;
    const folder =
      (editor && vscode.workspace.getWorkspaceFolder(editor.document.uri)) ?? vscode.workspace.workspaceFolders?.[0];
    if (folder === undefined) return null;
    const root = folderRoot(folder);
    return root === null ? null : { root, name: folder.name };
  };

  /** A window without a folder on disk holds no project: the extension stays idle there (no server, no shell). */
  const hasFolder = (): boolean => (vscode.workspace.workspaceFolders ?? []).some((folder) => folder.uri.scheme === "file");

  /** Ask the server for each folder's project (`project.root`) and follow the new ones. */
  const trackFolders = async (wire: Wire): Promise<void> => {
    const folders = (vscode.workspace.workspaceFolders ?? []).filter((folder) => folder.uri.scheme === "file");
    await Promise.all(
      folders.map(async (folder) => {
        const known = roots.get(folder.uri.toString());
        if (known !== undefined) return live.track(known);
        try {
          const info = await wire.sendRequest<RootInfo>("loopstate/query", { root: folder.uri.fsPath, query: { kind: "project.root" } });
          roots.set(folder.uri.toString(), info.root);
          await live.track(info.root);
        } catch (error) {
          output.appendLine(`${folder.uri.fsPath}: ${messageOf(error)}`);
        }
      }),
    );
    presenter.render();
  };

  const supervisor = new ServerSupervisor(live, output, resolveCommand, (client) => trackFolders(client));
  const alarms = new HistoryAlarms(context.workspaceState, output, folderName);
  const presenter = new Presenter(live, activeRoot, () => (vscode.workspace.workspaceFolders?.length ?? 0) > 1, (root, summary, name) => alarms.decorate(root, summary, name));
  context.subscriptions.push(
    output,
    presenter,
    { dispose: () => void supervisor.dispose() },
    ...registerCommands({ live, supervisor, output, activeRoot }),
    ...registerHistoryAlarms({ alarms, onNotification: (method, handler) => supervisor.onNotification(method, handler), activeRoot, render: () => presenter.render() }),
    // A stream that turns unreadable is said once (a notification with "Show output", an Output
    // line); its return, after `loopstate recover`, is an Output line and the views refetched.
    live.onStreamNotice((notice) => {
      const name = folderName(notice.root);
      if (notice.readable) {
        output.appendLine(`${name}: ${notice.topic} is readable again; its state was fetched afresh`);
        return;
      }
      output.appendLine(`${name}: ${notice.topic} cannot be read: ${notice.message}. Run \`loopstate verify\`, then \`loopstate recover\`.`);
      void vscode.window
        .showErrorMessage(`loopstate: ${name}: ${notice.topic} cannot be read (${notice.message}). Its views are marked until the store is repaired.`, "Show output")
        .then((choice) => choice && output.show());
    }),
    vscode.window.onDidChangeActiveTextEditor(() => presenter.render()),
    vscode.workspace.onDidChangeWorkspaceFolders(async (change) => {
      for (const folder of change.removed) {
        const root = roots.get(folder.uri.toString());
        roots.delete(folder.uri.toString());
        if (root !== undefined && ![...roots.values()].includes(root)) await live.untrack(root);
      }
      commands.forget(); // a new folder may bring its own venv
      const client = supervisor.running;
      if (client !== null) await trackFolders(client);
      else if (change.added.length > 0 && hasFolder()) await supervisor.restart(); // the first folder of an idle window
      presenter.render();
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(async () => {
      commands.forget();
      if (supervisor.running === null && hasFolder()) await supervisor.restart();
    }),
    vscode.workspace.onDidChangeConfiguration(async (change) => {
      if (change.affectsConfiguration("loopstate.serverPath")) {
        commands.forget();
        if (!hasFolder()) return;
        output.appendLine("loopstate.serverPath changed: restarting the server");
        await supervisor.restart();
      }
    }),
  );
  if (hasFolder()) await supervisor.start();
  else output.appendLine("no folder is open: loopstate starts its server when a folder is added");
}

export function deactivate(): void {
  // context.subscriptions stops the server.
}
