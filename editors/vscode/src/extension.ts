/**
 * The loopstate extension: one `loopstate serve` per window (src/server.ts), every workspace
 * folder followed as a project (src/live.ts), shown in a status bar item and three tree views
 * (src/views.ts), acted on by the commands (src/commands.ts). Everything shown arrives as a
 * pushed `loopstate/changed`; with no change in the store the extension does nothing.
 */

import * as vscode from "vscode";
import { inventory } from "./cli";
import { registerCommands } from "./commands";
import { LiveProjects } from "./live";
import { NewStreamWatcher } from "./newStreams";
import { discoverRoot } from "./projectRoot";
import { messageOf, ServerSupervisor } from "./server";
import { chooseCommand, type LoopstateCommand } from "./serverCommand";
import { Presenter } from "./views";

/** The Python extension's selected interpreter, if that extension is installed. */
async function pythonInterpreter(): Promise<string | null> {
  const python = vscode.extensions.getExtension("ms-python.python");
  if (python === undefined) return null;
  try {
    const api = (await python.activate()) as {
      environments?: { getActiveEnvironmentPath?(): { path?: string } | undefined };
      settings?: { getExecutionDetails?(): { execCommand?: string[] } | undefined };
    };
    return api.environments?.getActiveEnvironmentPath?.()?.path ?? api.settings?.getExecutionDetails?.()?.execCommand?.[0] ?? null;
  } catch {
    return null;
  }
}

async function resolveCommand(): Promise<LoopstateCommand | null> {
  const setting = vscode.workspace.getConfiguration("loopstate").get<string>("serverPath", "");
  if (setting.trim()) return chooseCommand(setting, process.env.PATH, null);
  return chooseCommand("", process.env.PATH, await pythonInterpreter());
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

  const presenter = new Presenter(live, activeRoot);
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
