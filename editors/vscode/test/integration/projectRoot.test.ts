// The extension's project-root walk gives the root the CLI itself finds, on real folders.
import { execFileSync } from "node:child_process";
import { mkdirSync } from "node:fs";
import * as path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { discoverRoot } from "../../src/projectRoot";
import { makeStore, type Store } from "./server";

let store: Store;
beforeEach(() => (store = makeStore()));
afterEach(() => store.dispose());

function cliRoot(cwd: string): string {
  // `verify --json` reports the root the CLI resolved from its working directory
  return JSON.parse(execFileSync("loopstate", ["verify", "--json"], { cwd, env: store.env, encoding: "utf8" })).root;
}

describe("the project root of a workspace folder", () => {
  it("is the folder itself outside git and any project", () => {
    expect(discoverRoot(store.folder, store.env)).toBe(cliRoot(store.folder));
  });

  it("is the top of the git work tree for a subfolder", () => {
    execFileSync("git", ["init", "-q", store.folder]);
    const sub = path.join(store.folder, "src", "deep");
    mkdirSync(sub, { recursive: true });
    expect(discoverRoot(sub, store.env)).toBe(store.folder);
    expect(cliRoot(sub)).toBe(store.folder);
  });

  it("is the nearest existing loopstate project, even inside another git tree", () => {
    execFileSync("git", ["init", "-q", store.folder]);
    const inner = path.join(store.folder, "packages", "inner");
    mkdirSync(path.join(inner, "src"), { recursive: true });
    store.cli("intent", "start", "--label", "inner work", "--root", inner); // the first write makes the store
    const sub = path.join(inner, "src");
    expect(cliRoot(sub)).toBe(inner);
    expect(discoverRoot(sub, store.env)).toBe(inner);
  });
});
