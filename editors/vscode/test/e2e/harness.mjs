// What the end-to-end scenarios (run.mjs, historyAlarm.mjs) share: a private scratch area, a
// code-server with the built .vsix installed, chromium driven through puppeteer-core, the
// extension's Output read from its log files, waits on the status item and the workbench's
// text, "ok - / not ok -" checks, and a teardown that leaves nothing running.
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

export const here = path.dirname(fileURLToPath(import.meta.url));
export const extensionDir = path.resolve(here, "../..");
export const repo = path.resolve(extensionDir, "../..");
const e2eModules = path.join(extensionDir, "e2e", "node_modules");
export const codeServer = path.join(e2eModules, "code-server", "out", "node", "entry.js");
export const vsix = process.env.LOOPSTATE_E2E_VSIX ?? path.join(extensionDir, "dist", "loopstate.vsix");
export const artifacts = path.join(extensionDir, "artifacts");
export const chromium = process.env.LOOPSTATE_CHROMIUM ?? "/usr/bin/chromium";
export const WAIT_MS = Number(process.env.LOOPSTATE_E2E_WAIT_MS ?? 60_000); // a bound on each wait, not a timed assertion
// The status item: VS Code gives its element the id `<extension id>.<item id>`.
export const ITEM = '[id="loopstate.loopstate.loopstate.status"]';

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Exit 2 (a set-up fault, not a failed check) when one of ``[what, file]`` is missing. */
export function requireFiles(needed) {
  for (const [what, file] of [["code-server", codeServer], ["the .vsix (npm run build)", vsix], ["chromium", chromium], ...needed]) {
    if (!file || !existsSync(file)) {
      console.error(`missing ${what}: ${file}`);
      process.exit(2);
    }
  }
}

/**
 * A private scratch folder under a short name (code-server's socket paths must stay under 108
 * bytes) with the folders a run needs, and the environment that points loopstate and the XDG
 * homes into it.
 */
export function scratchArea(prefix) {
  const scratch = mkdtempSync(`/tmp/${prefix}-`);
  const dirs = Object.fromEntries(
    ["tmp", "data", "work", "user", "extensions", "config", "home"].map((name) => [name, path.join(scratch, name)]),
  );
  for (const dir of Object.values(dirs)) mkdirSync(dir, { recursive: true });
  const env = {
    ...process.env,
    TMPDIR: dirs.tmp,
    LOOPSTATE_DATA_DIR: dirs.data,
    XDG_CONFIG_HOME: dirs.config,
    XDG_DATA_HOME: path.join(dirs.home, "data"),
    XDG_CACHE_HOME: path.join(dirs.home, "cache"),
  };
  return { scratch, dirs, env };
}

/** Named checks, each printed as it ends; ``skip(results)``: skip the checks from the one it first says so on. */
export function checks({ skip = () => false } = {}) {
  const results = [];
  async function check(name, body) {
    if (skip(results)) return;
    const started = Date.now();
    try {
      await body();
      results.push([name, true]);
      console.log(`ok - ${name} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
    } catch (error) {
      results.push([name, false]);
      console.log(`not ok - ${name}: ${error?.stack ?? error}`);
    }
  }
  /** The set-up itself failed: a failed check of its own. */
  function setUpFailed(error) {
    results.push(["set-up", false]);
    console.log(`not ok - set-up: ${error?.stack ?? error}`);
  }
  /** Print the tally (and, after a failure, the workbench's console) and exit with the verdict. */
  function finish(browserLog) {
    if (results.some(([, ok]) => !ok)) console.log(`browser console:\n${browserLog.slice(-80).join("\n")}`);
    const passed = results.filter(([, ok]) => ok).length;
    console.log(`${passed} passed, ${results.length - passed} failed`);
    process.exit(passed === results.length && results.length > 0 ? 0 : 1);
  }
  return { results, check, setUpFailed, finish };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** The extension's Output lines (its log files under the user data dir, one per window), joined. */
export function outputLog(dirs) {
  const found = [];
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name === "loopstate.log") found.push(readFileSync(full, "utf8"));
    }
  };
  walk(path.join(dirs.user, "logs"));
  return found.join("\n");
}

/** Until the Output says ``text``. */
export async function waitForOutput(dirs, text, what) {
  const deadline = Date.now() + WAIT_MS;
  while (!outputLog(dirs).includes(text)) {
    if (Date.now() > deadline) throw new Error(`the Output never said ${what} (${JSON.stringify(text)}):\n${outputLog(dirs)}`);
    await sleep(200);
  }
}

/**
 * Install the .vsix, write the user settings (``settings`` on top of a quiet workbench with
 * workspace trust off) and start code-server on a free port with ``hostEnv``, opening ``folder``.
 */
export async function startCodeServer({ dirs, env, hostEnv, folder, settings = {} }) {
  execFileSync(process.execPath, [codeServer, "--install-extension", vsix, "--extensions-dir", dirs.extensions,
    "--user-data-dir", dirs.user], { env, stdio: "pipe" });
  mkdirSync(path.join(dirs.user, "User"), { recursive: true });
  writeFileSync(path.join(dirs.user, "User", "settings.json"), JSON.stringify({
    "workbench.startupEditor": "none",
    "security.workspace.trust.enabled": false,
    "telemetry.telemetryLevel": "off",
    ...settings,
  }));
  const port = await freePort();
  const serverLog = [];
  const child = spawn(process.execPath, [codeServer, "--auth", "none", "--bind-addr", `127.0.0.1:${port}`,
    "--disable-workspace-trust", "--disable-telemetry", "--user-data-dir", dirs.user, "--extensions-dir", dirs.extensions, folder],
    { env: hostEnv, stdio: ["ignore", "pipe", "pipe"] });
  await new Promise((resolve, reject) => {
    const onData = (chunk) => {
      serverLog.push(String(chunk));
      if (serverLog.join("").includes("HTTP server listening")) resolve();
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code) => reject(new Error(`code-server exited (${code}):\n${serverLog.join("")}`)));
  });
  return { codeServerProcess: child, port };
}

/** A headless chromium on code-server's page for ``folder``; its console lines go to ``browserLog``. */
export async function openWorkbench({ dirs, env, port, folder, browserLog }) {
  const { default: puppeteer } = await import(path.join(e2eModules, "puppeteer-core", "lib", "esm", "puppeteer", "puppeteer-core.js"));
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", `--user-data-dir=${path.join(dirs.home, "chromium")}`],
    env,
  });
  const page = await browser.newPage();
  page.on("console", (message) => browserLog.push(message.text()));
  await page.setViewport({ width: 1400, height: 900 });
  await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(folder)}`, { waitUntil: "domcontentloaded" });
  return { browser, page };
}

/** Waits on what a person reads: the status item's text and the workbench's. */
export function workbenchWaits(page, dirs) {
  const itemText = () => page.$eval(ITEM, (element) => element.textContent ?? "").catch(() => "");
  async function waitForItem(predicate, what) {
    try {
      await page.waitForFunction(
        (selector, source) => {
          const element = document.querySelector(selector);
          return element !== null && new Function("text", `return (${source})(text)`)(element.textContent ?? "");
        },
        { timeout: WAIT_MS },
        ITEM,
        predicate.toString(),
      );
    } catch {
      const body = await page.evaluate(() => document.body?.innerText?.slice(0, 300) ?? "").catch((error) => String(error));
      throw new Error(`the status item never showed ${what}; it shows ${JSON.stringify(await itemText())} at ${page.url()}; ` +
        `the page begins ${JSON.stringify(body)}; the extension's Output:\n${outputLog(dirs)}`);
    }
  }
  async function waitForText(text, what) {
    try {
      await page.waitForFunction((wanted) => document.body.innerText.includes(wanted), { timeout: WAIT_MS }, text);
    } catch {
      throw new Error(`the workbench never showed ${what} (${JSON.stringify(text)})`);
    }
  }
  return { itemText, waitForItem, waitForText };
}

/** Close the browser and code-server, then remove the scratch area (kept with LOOPSTATE_E2E_KEEP=1). */
export async function tearDown({ browser, codeServerProcess, scratch }) {
  await browser?.close().catch(() => undefined);
  if (codeServerProcess != null && codeServerProcess.exitCode === null) {
    codeServerProcess.kill("SIGTERM");
    await new Promise((resolve) => codeServerProcess.once("exit", resolve));
  }
  if (process.env.LOOPSTATE_E2E_KEEP) return;
  // A server may still be flushing its last write as its host goes (each ends on its stdin's
  // hangup): retry the removal, then say what was left rather than fail checks that passed.
  for (let attempt = 1; ; attempt++) {
    try {
      rmSync(scratch, { recursive: true, force: true, maxRetries: 10, retryDelay: 200 });
      return;
    } catch (error) {
      if (attempt === 5) {
        console.log(`warning: could not remove ${scratch}: ${error.code ?? error}`);
        return;
      }
      await sleep(1000);
    }
  }
}
