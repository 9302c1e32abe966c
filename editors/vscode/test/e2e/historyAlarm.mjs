// End-to-end: a history rewritten behind the editor's back, in real VS Code (code-server
// 4.100.3 with the built .vsix, driven by Debian's chromium through puppeteer-core), with a
// real `loopstate serve` (the one on this process's PATH, named in loopstate.serverPath).
//
// The extension's server follows the intent stream while two checkpoints are signed (its
// witness remembers what it saw); the server is stopped (a folder setting that names a missing
// loopstate); the stream is rewritten and re-sealed with loopstate's own code
// (rewrite_history.py) and a new checkpoint signed; the setting names loopstate again, so a new
// server starts; one append, and its witness pushes `loopstate/historyAlarm`. Checked as a
// person sees it: the error notification with its three buttons, the status item in its alarm
// state (with the tooltip saying what happened), the Output line, the alarm still shown after a
// window reload, and the item back to normal after "loopstate: Acknowledge history alarm". Screenshots go to artifacts/history-alarm-*.png
// (beside run.mjs's, gitignored). Prints "N passed, N failed" last.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";

import {
  artifacts, checks, here, ITEM, openWorkbench, outputLog as outputLogOf, requireFiles, scratchArea, sleep, startCodeServer,
  tearDown, waitForOutput as waitForOutputIn, WAIT_MS, workbenchWaits,
} from "./harness.mjs";

const loopstate = (process.env.PATH ?? "").split(path.delimiter).filter((d) => path.isAbsolute(d)).map((d) => path.join(d, "loopstate")).find(existsSync);
requireFiles([["loopstate on PATH", loopstate ?? ""]]);
// The Python beside that loopstate has loopstate's code: what the attacker uses.
const python = path.join(path.dirname(loopstate), "python");

const { scratch, dirs, env } = scratchArea("lsha");
const folder = path.join(dirs.work, "proj");
mkdirSync(folder);
const { check, setUpFailed, finish } = checks();
const outputLog = () => outputLogOf(dirs);
const waitForOutput = (text, what) => waitForOutputIn(dirs, text, what);

const cli = (...args) => execFileSync(loopstate, args, { cwd: folder, env, encoding: "utf8" });

function addClaim(statement) {
  const [task] = JSON.parse(cli("intent", "tasks", "--json")).tasks;
  cli("intent", "add", task.task_id, statement);
}

/** The `loopstate serve` processes on this test's store (by their environment), by pid. */
function servers() {
  const found = [];
  for (const pid of readdirSync("/proc").filter((name) => /^\d+$/.test(name))) {
    try {
      const args = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
      if (args.at(-1) !== "serve") continue;
      if (readFileSync(`/proc/${pid}/environ`, "utf8").split("\0").includes(`LOOPSTATE_DATA_DIR=${dirs.data}`)) found.push(pid);
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return found;
}

/** The folder's own loopstate.serverPath: changing it restarts the extension's server. */
function folderServerPath(value) {
  mkdirSync(path.join(folder, ".vscode"), { recursive: true });
  writeFileSync(path.join(folder, ".vscode", "settings.json"), JSON.stringify({ "loopstate.serverPath": value }));
}

let codeServerProcess = null;
let browser = null;
const browserLog = [];
try {
  execFileSync("git", ["init", "-q", folder]);
  cli("init");
  cli("intent", "start", "--label", "Ship the parser", "--claim", "outcome:The parser reads the old format");
  addClaim("Keep the public API stable");
  writeFileSync(path.join(folder, ".gitignore"), ".vscode/\n");
  folderServerPath(loopstate);

  const started = await startCodeServer({ dirs, env, folder, hostEnv: { ...env, HOME: dirs.home } });
  codeServerProcess = started.codeServerProcess;
  const opened = await openWorkbench({ dirs, env, port: started.port, folder, browserLog });
  browser = opened.browser;
  const { page } = opened;
  mkdirSync(artifacts, { recursive: true });
  for (const old of readdirSync(artifacts).filter((name) => name.startsWith("history-alarm-"))) rmSync(path.join(artifacts, old));
  const shot = (name) => page.screenshot({ path: path.join(artifacts, `history-alarm-${name}.png`) });
  const { itemText, waitForItem, waitForText } = workbenchWaits(page, dirs);

  async function palette(title, category = "loopstate") {
    await page.keyboard.press("F1");
    await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: WAIT_MS });
    await page.keyboard.type(`${category}: ${title}`);
    await page.waitForFunction(
      (wanted) => [...document.querySelectorAll(".quick-input-list .monaco-list-row")].some((row) => row.textContent.includes(wanted)),
      { timeout: WAIT_MS },
      title,
    );
    await page.keyboard.press("Enter");
  }

  await check("the extension's server follows intent while two checkpoints are signed, with no alarm", async () => {
    await waitForItem((text) => text.includes("2 claims"), "2 claims");
    cli("checkpoint", "intent");
    addClaim("Read the old format"); // news: the witness takes the checkpoint on trust
    cli("checkpoint", "intent");
    addClaim("Write the new format"); // news: a checkpoint that extends what it saw
    await waitForItem((text) => text.includes("4 claims"), "4 claims");
    if ((await itemText()).includes("HISTORY")) throw new Error(`an alarm on honest growth: ${await itemText()}`);
  });

  await check("with the server stopped, the stream is rewritten, re-sealed with loopstate's code, and a checkpoint signed", async () => {
    folderServerPath(path.join(scratch, "no-such-loopstate"));
    await waitForText("could not start", "the stopped server's notification");
    const deadline = Date.now() + WAIT_MS;
    while (servers().length > 0) {
      if (Date.now() > deadline) throw new Error(`loopstate serve still runs: ${servers()}`);
      await sleep(200);
    }
    const said = execFileSync(python, [path.join(here, "rewrite_history.py"), folder], { env, encoding: "utf8" });
    if (!said.startsWith("rewrote event 2 of ")) throw new Error(said);
    cli("checkpoint", "intent");
    // the chain is whole again: only the witness's memory can tell
    cli("verify");
  });

  await check("a new server's witness pushes the alarm: an error notification and the status item's alarm state, with its tooltip", async () => {
    folderServerPath(loopstate);
    await waitForItem((text) => text.includes("4 claims"), "4 claims again, from the new server");
    await palette("Clear All Notifications", "Notifications"); // the stopped server's, so the alarm's toast is seen alone
    await page.waitForFunction(() => document.querySelectorAll(".notification-toast").length === 0, { timeout: WAIT_MS });
    addClaim("A claim after the rewrite");
    await waitForText("changed in a way appending never does", "the alarm's error notification");
    await page.waitForFunction(
      () => [...document.querySelectorAll(".notification-toast")].some(
        (toast) => toast.textContent.includes("history was rewritten") && ["Show output", "Copy verify command", "Acknowledge"].every((b) => toast.textContent.includes(b)),
      ),
      { timeout: WAIT_MS },
    );
    await waitForItem((text) => text.includes("HISTORY REWRITTEN (intent)") && text.includes("5 claims"), "the alarm state");
    const colour = await page.$eval(ITEM, (element) => getComputedStyle(element).backgroundColor);
    if (colour === "rgba(0, 0, 0, 0)") throw new Error("the alarmed status item has no background");
    await waitForOutput("proj: HISTORY ALARM: stream intent of ", "the alarm's Output line");
    await shot("1-notification");
    await page.hover(ITEM);
    await waitForText("Acknowledge history alarm", "the alarm's tooltip");
    await waitForText("does not extend the history loopstate saw before", "what happened, in the tooltip");
    await shot("2-tooltip");
  });

  await check("the alarm outlives a window reload (kept in the workspace state; the new server does not say it again)", async () => {
    const count = (text) => outputLog().split(text).length - 1;
    const alarmsSaid = count("HISTORY ALARM");
    const windows = count("first state of");
    await page.reload({ waitUntil: "domcontentloaded" });
    const deadline = Date.now() + WAIT_MS;
    while (count("first state of") === windows) {
      if (Date.now() > deadline) throw new Error("the reloaded window never showed a first state");
      await sleep(200);
    }
    await waitForItem((text) => text.includes("HISTORY REWRITTEN (intent)") && text.includes("5 claims"), "the alarm state after the reload");
    addClaim("A claim after the reload"); // news for the new server's witness: the same checkpoint, so no second alarm
    await waitForItem((text) => text.includes("HISTORY REWRITTEN (intent)") && text.includes("6 claims"), "6 claims, still alarmed");
    await sleep(2000); // the witness's check runs after the news: give a second alarm the time to come
    if (count("HISTORY ALARM") !== alarmsSaid) throw new Error(`the alarm was said again after the reload:\n${outputLog()}`);
  });

  await check('"loopstate: Acknowledge history alarm" puts the status item back to the project\'s state', async () => {
    await page.mouse.move(700, 300);
    await palette("Acknowledge history alarm");
    await waitForItem((text) => !text.includes("HISTORY") && text.includes("6 claims"), "the project's state without the alarm");
    await waitForOutput("proj: 1 history alarm acknowledged", "the acknowledgement");
    await shot("3-acknowledged");
  });
} catch (error) {
  setUpFailed(error);
} finally {
  await tearDown({ browser, codeServerProcess, scratch });
}
finish(browserLog);
