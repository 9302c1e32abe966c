// A small stand-in for the `vscode` module: just what src/views.ts uses, recording the
// status bar items and tree providers the extension creates so a test can read them back.

export class EventEmitter<T> {
  private listeners: Array<(value: T) => void> = [];
  readonly event = (listener: (value: T) => void) => {
    this.listeners.push(listener);
    return { dispose: () => (this.listeners = this.listeners.filter((l) => l !== listener)) };
  };
  fire(value: T): void {
    for (const listener of this.listeners) listener(value);
  }
  dispose(): void {
    this.listeners = [];
  }
}

export enum TreeItemCollapsibleState {
  None = 0,
  Collapsed = 1,
  Expanded = 2,
}

export enum StatusBarAlignment {
  Left = 1,
  Right = 2,
}

export class ThemeIcon {
  constructor(readonly id: string) {}
}

export class ThemeColor {
  constructor(readonly id: string) {}
}

export class TreeItem {
  id?: string;
  description?: string;
  tooltip?: string;
  contextValue?: string;
  iconPath?: ThemeIcon;
  command?: { command: string; title: string; arguments?: unknown[] };
  constructor(readonly label: string, readonly collapsibleState: TreeItemCollapsibleState) {}
}

export interface FakeStatusBarItem {
  id: string;
  name?: string;
  text: string;
  tooltip?: string;
  command?: string;
  backgroundColor?: ThemeColor;
  visible: boolean;
  show(): void;
  hide(): void;
  dispose(): void;
}

export interface FakeTreeView {
  id: string;
  showCollapseAll: boolean;
  description?: string;
  message?: string;
  badge?: { value: number; tooltip: string };
  onDidChangeVisibility(listener: (event: { visible: boolean }) => void): { dispose(): void };
  dispose(): void;
}

export const created = {
  statusBarItems: [] as FakeStatusBarItem[],
  treeProviders: new Map<string, unknown>(),
  treeViews: new Map<string, FakeTreeView>(),
};

export const window = {
  createStatusBarItem(id: string): FakeStatusBarItem {
    const item: FakeStatusBarItem = {
      id,
      text: "",
      visible: false,
      show() {
        item.visible = true;
      },
      hide() {
        item.visible = false;
      },
      dispose() {
        item.visible = false;
      },
    };
    created.statusBarItems.push(item);
    return item;
  },
  createTreeView(id: string, options: { treeDataProvider: unknown; showCollapseAll?: boolean }): FakeTreeView {
    created.treeProviders.set(id, options.treeDataProvider);
    const view: FakeTreeView = {
      id,
      showCollapseAll: options.showCollapseAll ?? false,
      onDidChangeVisibility: () => ({ dispose() {} }),
      dispose: () => {
        created.treeProviders.delete(id);
        created.treeViews.delete(id);
      },
    };
    created.treeViews.set(id, view);
    return view;
  },
};

/**
 * The messages the extension showed (test/unit/historyAlarm.test.ts and its integration test);
 * ``answer`` picks the button a message's promise resolves to (undefined: dismissed).
 */
export const messages = {
  shown: [] as Array<{ kind: "error" | "information"; text: string; buttons: string[] }>,
  answer: (_text: string, _buttons: string[]): string | undefined => undefined,
  clipboard: "",
  commands: new Map<string, (...args: unknown[]) => unknown>(),
};

function showMessage(kind: "error" | "information") {
  return (text: string, ...buttons: string[]): Promise<string | undefined> => {
    messages.shown.push({ kind, text, buttons });
    return Promise.resolve(messages.answer(text, buttons));
  };
}

Object.assign(window, {
  showErrorMessage: showMessage("error"),
  showInformationMessage: showMessage("information"),
  showQuickPick: async (items: string[]) => items[0],
});

export const env = {
  clipboard: {
    writeText: async (text: string) => {
      messages.clipboard = text;
    },
  },
};

export const commands = {
  registerCommand(id: string, handler: (...args: unknown[]) => unknown) {
    messages.commands.set(id, handler);
    return { dispose: () => messages.commands.delete(id) };
  },
};
