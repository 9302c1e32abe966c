import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

// Unit tests import src/ as it is; `vscode` (only there inside VS Code) resolves to a small
// fake that records what the extension asks of it (test/unit/fakeVscode.ts).
export default defineConfig({
  resolve: { alias: { vscode: fileURLToPath(new URL("./test/unit/fakeVscode.ts", import.meta.url)) } },
  test: { testTimeout: 60_000, hookTimeout: 60_000 },
});
