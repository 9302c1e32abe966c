import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { chooseCommand, describe as describeCommand, findOnPath } from "../../src/serverCommand";

const dir = mkdtempSync(path.join(tmpdir(), "ls-path-"));
const bin = path.join(dir, "bin");
const plain = path.join(dir, "plain");
for (const folder of [bin, plain]) mkdirSync(folder);
writeFileSync(path.join(bin, "loopstate"), "#!/bin/sh\n");
chmodSync(path.join(bin, "loopstate"), 0o755);
writeFileSync(path.join(plain, "loopstate"), "not executable\n");
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("which loopstate the extension starts", () => {
  it("takes the setting first, as given", () => {
    expect(chooseCommand(" /opt/ls/loopstate ", bin, "/usr/bin/python3")).toEqual({ command: "/opt/ls/loopstate", prefix: [], origin: "setting" });
  });

  it("then the first executable loopstate on PATH, skipping one that is not executable", () => {
    const found = chooseCommand("", [plain, "", bin].join(path.delimiter), "/usr/bin/python3");
    expect(found).toEqual({ command: path.join(bin, "loopstate"), prefix: [], origin: "PATH" });
    expect(findOnPath("loopstate", plain)).toBeNull();
  });

  it("then python -m loopstate with the Python extension's interpreter, else nothing", () => {
    const python = chooseCommand("", plain, "/venv/bin/python");
    expect(python).toEqual({ command: "/venv/bin/python", prefix: ["-m", "loopstate"], origin: "python" });
    expect(describeCommand(python!)).toBe("/venv/bin/python -m loopstate");
    expect(chooseCommand("", plain, null)).toBeNull();
    expect(chooseCommand("", undefined, null)).toBeNull();
  });
});
