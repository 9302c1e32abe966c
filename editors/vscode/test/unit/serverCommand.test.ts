// Which loopstate the extension starts, on real folders: each install place is made for real
// (an executable file where pip, pipx or uv would put it) and found without any setting.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { describe as describeCommand, findOnPath, type LocateInputs, locate } from "../../src/serverCommand";

const dir = mkdtempSync(path.join(tmpdir(), "ls-path-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

let made = 0;
/** A fresh folder under the scratch dir. */
function folder(): string {
  const fresh = path.join(dir, `f${made++}`);
  mkdirSync(fresh, { recursive: true });
  return fresh;
}

/** An executable `loopstate` at ``file`` (or a plain file with ``executable`` false). */
function install(file: string, executable = true): string {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, "#!/bin/sh\n");
  chmodSync(file, executable ? 0o755 : 0o644);
  return file;
}

/** Inputs with nothing to find; ``asked`` records the slow look-ups that were made. */
function inputs(over: Partial<LocateInputs> = {}, asked: string[] = []): LocateInputs {
  return {
    setting: "",
    folders: [],
    trusted: true,
    env: { HOME: folder(), PATH: folder() },
    platform: "linux",
    pythonInterpreter: async () => (asked.push("python"), null),
    loginShellPath: async () => (asked.push("login shell"), null),
    ...over,
  };
}

describe("which loopstate the extension starts", () => {
  it("takes the setting first, as given, asking nothing else", async () => {
    const asked: string[] = [];
    expect(await locate(inputs({ setting: " /opt/ls/loopstate " }, asked))).toEqual({ command: "/opt/ls/loopstate", prefix: [], origin: "setting" });
    expect(asked).toEqual([]);
  });

  it("finds a workspace .venv (then venv) before anything else, without the Python extension", async () => {
    const workspace = folder();
    const other = folder();
    const venv = install(path.join(workspace, "venv", "bin", "loopstate"));
    const asked: string[] = [];
    const onPath = path.dirname(install(path.join(folder(), "loopstate")));
    expect(await locate(inputs({ folders: [other, workspace], env: { HOME: folder(), PATH: onPath } }, asked))).toEqual({
      command: venv,
      prefix: [],
      origin: "workspace venv",
    });
    const dotVenv = install(path.join(workspace, ".venv", "bin", "loopstate"));
    expect((await locate(inputs({ folders: [workspace] })))?.command).toBe(dotVenv);
    expect(asked).toEqual([]);
  });

  it("does not run a workspace's venv in an untrusted workspace", async () => {
    const workspace = folder();
    install(path.join(workspace, ".venv", "bin", "loopstate"));
    expect(await locate(inputs({ folders: [workspace], trusted: false }))).toBeNull();
  });

  it("takes the loopstate beside the Python extension's interpreter, then PATH, skipping what is not executable", async () => {
    const env = folder();
    const python = install(path.join(env, "bin", "python"));
    const beside = install(path.join(env, "bin", "loopstate"));
    expect(await locate(inputs({ pythonInterpreter: async () => python }))).toEqual({ command: beside, prefix: [], origin: "python interpreter" });
    const plain = folder();
    install(path.join(plain, "loopstate"), false);
    const bin = path.dirname(install(path.join(folder(), "loopstate")));
    const found = await locate(inputs({ env: { HOME: folder(), PATH: [plain, "", bin].join(":") } }));
    expect(found).toEqual({ command: path.join(bin, "loopstate"), prefix: [], origin: "PATH" });
    expect(findOnPath("loopstate", plain)).toBeNull();
  });

  it("finds pipx's and uv tool's installs in their default and configured places", async () => {
    const home = folder();
    const pipxBin = install(path.join(home, ".local", "bin", "loopstate"));
    expect(await locate(inputs({ env: { HOME: home, PATH: folder() } }))).toEqual({ command: pipxBin, prefix: [], origin: "pipx" });
    const home2 = folder();
    const uvVenv = install(path.join(home2, ".local", "share", "uv", "tools", "loopstate", "bin", "loopstate"));
    expect(await locate(inputs({ env: { HOME: home2, PATH: folder() } }))).toEqual({ command: uvVenv, prefix: [], origin: "uv tool" });
    const custom = folder();
    const uvBin = install(path.join(custom, "loopstate"));
    expect(await locate(inputs({ env: { HOME: folder(), PATH: folder(), UV_TOOL_BIN_DIR: custom } }))).toEqual({ command: uvBin, prefix: [], origin: "uv tool" });
    const pipxHome = folder();
    const pipxVenv = install(path.join(pipxHome, "venvs", "loopstate", "bin", "loopstate"));
    expect(await locate(inputs({ env: { HOME: folder(), PATH: folder(), PIPX_HOME: pipxHome } }))).toEqual({ command: pipxVenv, prefix: [], origin: "pipx" });
  });

  it("asks a login shell's PATH only when nothing else is found, then falls back to python -m loopstate", async () => {
    const shellBin = path.dirname(install(path.join(folder(), "loopstate")));
    const asked: string[] = [];
    expect(await locate(inputs({ loginShellPath: async () => (asked.push("login shell"), `/nowhere:${shellBin}`) }, asked))).toEqual({
      command: path.join(shellBin, "loopstate"),
      prefix: [],
      origin: "login shell",
    });
    expect(asked).toEqual(["python", "login shell"]);
    const python = await locate(inputs({ pythonInterpreter: async () => "/venv/bin/python" }));
    expect(python).toEqual({ command: "/venv/bin/python", prefix: ["-m", "loopstate"], origin: "python -m" });
    expect(describeCommand(python!)).toBe("/venv/bin/python -m loopstate");
    expect(await locate(inputs())).toBeNull();
  });

  it("looks for Scripts\\loopstate.exe on Windows", async () => {
    const workspace = folder();
    const exe = install(path.join(workspace, ".venv", "Scripts", "loopstate.exe"));
    expect((await locate(inputs({ folders: [workspace], platform: "win32" })))?.command).toBe(exe);
  });
});
