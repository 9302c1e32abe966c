/**
 * The loopstate extension: one `loopstate serve` per window (src/server.ts), every workspace
 * folder followed as a project (src/live.ts), shown in a status bar item and three tree views
 * (src/views.ts), acted on by the commands (src/commands.ts). Everything shown arrives as a
 * pushed `loopstate/changed`; with no change in the store the extension does nothing.
 */

import { execFile } from "node:child_process";
import * as vscode from "vscode";
import { inventory } from "./cli";
import { registerCommands } from "./commands";
import { LiveProjects } from "./live";
import { NewStreamWatcher } from "./newStreams";
import { discoverRoot } from "./projectRoot";
import { messageOf, ServerSupervisor } from "./server";
import { describe, locate, type LoopstateCommand } from "./serverCommand";
import { Presenter } from "./views";

/**
 * The Python extension's selected interpreter for ``folder``, if that extension is installed
 * (activating it only then: locate() asks only when the workspace has no venv with loopstate).
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

/** Which loopstate to run (src/serverCommand.ts has the order), remembered until the setting or the folders change. */
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
  const supervisor = new ServerSupervisor(live, output, resolveCommand);
  const roots = new Map<string, string>(); // folder uri -> project root

  const folderRoot = (folder: vscode.WorkspaceFolder): string | null => {
    const known = roots.get(folder.uri.toString());
    if (known !== undefined) return known;
    if (folder.uri.scheme !== "file") return null;
    try {
      const root = discoverRoot(folder.uri.fsPath);
      roots.set(folder.uri.toString(), root);
      return root;
    } catch (error) {
      output.appendLine(`${folder.uri.fsPath}: ${messageOf(error)}`);
      return null;
    }
  };
  const folderName = (root: string): string => {
    for (const folder of vscode.workspace.workspaceFolders ?? []) {
      if (roots.get(folder.uri.toString()) === root) return folder.name;
    }
    return root;
  };
  const activeRoot = (): { root: string; name: string } | null => {
    const editor = vscode.window.activeTextEditor;
    const folder =
      (editor && vscode.workspace.getWorkspaceFolder(editor.document.uri)) ?? vscode.workspace.workspaceFolders?.[0];
    if (folder === undefined) return null;
    const root = folderRoot(folder);
    return root === null ? null : { root, name: folder.name };
  };
  // A run or goal another process creates is noticed through the store folder (src/newStreams.ts);
  // the listings it triggers are coalesced: one in flight per project, one more queued at most.
  const watchers = new Map<string, NewStreamWatcher>();
  const listing = new Map<string, { running: Promise<void>; again: boolean }>();
  const relist = (root: string): void => {
    const current = listing.get(root);
    if (current !== undefined) {
      current.again = true;
      return;
    }
    const entry = { running: Promise.resolve(), again: false };
    listing.set(root, entry);
    entry.running = (async () => {
      do {
        entry.again = false;
        await refresh(root);
      } while (entry.again);
      listing.delete(root);
    })();
  };
  const watchStore = (root: string): void => {
    if (watchers.has(root)) return;
    watchers.set(root, new NewStreamWatcher(root, (kind, id) => live.follows(root, kind, id), () => relist(root)));
  };
  const refresh = async (only?: string): Promise<void> => {
    const command = await resolveCommand();
    const folders = vscode.workspace.workspaceFolders ?? [];
    const wanted = [...new Set(folders.map(folderRoot).filter((root): root is string => root !== null))];
    await Promise.all(
      wanted
        .filter((root) => only === undefined || root === only)
        .map(async (root) => {
          watchStore(root);
          if (command === null) {
            await live.track(root);
            return;
          }
          try {
            const found = await inventory(command, root);
            await live.track(root, found.runIds, found.goalIds, found.killSwitch);
          } catch (error) {
            output.appendLine(`listing the runs and goals of ${root}: ${messageOf(error)}`);
            await live.track(root);
          }
        }),
    );
  };

  const presenter = new Presenter(live, activeRoot, () => (vscode.workspace.workspaceFolders?.length ?? 0) > 1);
  // A stream that turns unreadable is said once (a notification with "Show output", an Output
  // line); its return, after `loopstate recover`, is an Output line and the views refetched.
  context.subscriptions.push(
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
  );
  context.subscriptions.push(
    output,
    presenter,
    { dispose: () => void supervisor.dispose() },
    { dispose: () => watchers.forEach((watcher) => watcher.dispose()) },
    ...registerCommands({ live, supervisor, output, activeRoot, command: resolveCommand, refresh }),
    vscode.window.onDidChangeActiveTextEditor(() => presenter.render()),
    vscode.workspace.onDidChangeWorkspaceFolders(async (change) => {
      for (const folder of change.removed) {
        const root = roots.get(folder.uri.toString());
        roots.delete(folder.uri.toString());
        if (root !== undefined && ![...roots.values()].includes(root)) {
          watchers.get(root)?.dispose();
          watchers.delete(root);
          await live.untrack(root);
        }
      }
      await refresh();
      presenter.render();
    }),
    vscode.workspace.onDidChangeConfiguration(async (change) => {
      if (change.affectsConfiguration("loopstate.serverPath")) {
        commands.forget();
        output.appendLine("loopstate.serverPath changed: restarting the server");
        await supervisor.restart();
        await refresh();
      }
    }),
  );
  await refresh();
  await supervisor.start();
}

export function deactivate(): void {
  // context.subscriptions stops the server.
}
