// End-to-end test in real VS Code: code-server 4.100.3 (VS Code 1.100) with the built .vsix
// installed into a private extensions dir, driven by Debian's chromium through puppeteer-core,
// on a real workspace folder whose store is a private LOOPSTATE_DATA_DIR.
//
// loopstate is installed for real (pip) into the folder's own `.venv`, and code-server gets a
// PATH without any loopstate and no loopstate.serverPath: the extension must find the venv.
// It checks what a person would see: the status item shows the project's state; a claim and
// a todo added by another process (the CLI) reach the status item and the trees with no
// input, and so does a new run; Add claim, Resolve gate (and the Goals badge), Render
// ACTIVE_GOAL_STATE.md, Verify store, Show audit log (from the palette and by clicking a run)
// do their work; a killed server is restarted and resubscribed, with one Output line; "Stop
// all runs" reports the true halted count and the item stays on the run that was active;
// removing STOP by hand clears HALTED; Resume (its modal confirmed) clears the switch; a
// corrupted stream is marked and said once, and comes back by itself after `loopstate
// recover`; Retract claim from a claim's context menu; a loopstate.serverPath that does not
// exist shows the error notification; a window with no folder starts nothing; in a multi-root
// workspace every view names its project.
// Throughout, every process the extension starts and every file watcher it opens is counted
// (test/e2e/accounting.cjs, loaded into the extension host): only `loopstate serve`, no watcher.
// Screenshots go to artifacts/ (gitignored). Prints "N passed, N failed" last.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import * as path from "node:path";

import {
  artifacts, checks, ITEM, here, openWorkbench, outputLog as outputLogOf, repo, requireFiles, scratchArea, sleep,
  startCodeServer, tearDown, WAIT_MS, workbenchWaits,
} from "./harness.mjs";

// LOOPSTATE_E2E_FIRST_STATE_ONLY=1: only the first check, with loopstate.serverPath naming the
// venv's loopstate (so builds that cannot find it by themselves are timed alike); its
// "first state: N ms" line is the figure test/e2e/first-state.sh compares across builds.
const firstStateOnly = process.env.LOOPSTATE_E2E_FIRST_STATE_ONLY === "1";

requireFiles([]);
const { scratch, dirs, env } = scratchArea("lsvs");
const folder = path.join(dirs.work, "proj");
mkdirSync(folder);
const other = path.join(dirs.work, "other");
mkdirSync(other);
const accounting = path.join(scratch, "accounting.jsonl");
const { check, setUpFailed, finish } = checks({ skip: (results) => firstStateOnly && results.length > 0 });
const outputLog = () => outputLogOf(dirs);

function cli(...args) {
  return execFileSync("loopstate", args, { cwd: folder, env, encoding: "utf8" });
}

function cliIn(cwd, ...args) {
  return execFileSync("loopstate", args, { cwd, env, encoding: "utf8" });
}

/** This process's PATH without any folder that holds a `loopstate`: what code-server gets. */
function pathWithoutLoopstate() {
  return (process.env.PATH ?? "").split(path.delimiter).filter((dir) => dir && !existsSync(path.join(dir, "loopstate"))).join(path.delimiter);
}

/** What the extension started and watched (test/e2e/accounting.cjs), by kind. */
function accounted() {
  const lines = existsSync(accounting) ? readFileSync(accounting, "utf8").split("\n").filter(Boolean) : [];
  const records = lines.map((line) => JSON.parse(line));
  return { processes: records.filter((r) => r.kind === "process"), watchers: records.filter((r) => r.kind === "watch") };
}

/** The extension's own figure: activation to the first state it showed. */
async function firstStateMs() {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const match = /first state of \S+ (\d+) ms after activation/.exec(outputLog());
    if (match) return Number(match[1]);
    if (Date.now() > deadline) throw new Error("the Output never gave the first-state figure");
    await sleep(200);
  }
}

let codeServerProcess = null;
let activeRun = null;
const browserLog = []; // the workbench's console (the extension host's console.log is forwarded there)
let browser = null;
try {
  // The project: a task with one claim, a goal with one todo and a gate, one run that a
  // harness took (active), and loopstate itself installed into the folder's own .venv.
  execFileSync("git", ["init", "-q", folder]);
  cli("init");
  cli("intent", "start", "--label", "Ship the parser", "--claim", "outcome:The parser reads the old format");
  cli("goals", "add", "main", "Write the parser");
  cli("goals", "gate", "main", "Approve the design");
  const created = JSON.parse(cli("run", "create", "--objective", "Parse the old format", "--done-gate", "tests pass", "--asset", "parser", "--harness", "manual", "--json"));
  activeRun = created.run_id;
  cli("run", "acquire", activeRun, "--harness", "manual");
  execFileSync("python3", ["-m", "venv", path.join(folder, ".venv")], { env });
  execFileSync(path.join(folder, ".venv", "bin", "pip"), ["install", "--quiet", "-e", repo], { env, stdio: "pipe" });
  writeFileSync(path.join(folder, ".gitignore"), ".venv/\n");
  // A second project for the multi-root check.
  execFileSync("git", ["init", "-q", other]);
  cliIn(other, "intent", "start", "--label", "Other work", "--claim", "outcome:The other project's outcome");
  writeFileSync(path.join(other, "NOTES.md"), "# notes of the other project\n");
  const workspaceFile = path.join(dirs.work, "both.code-workspace");
  writeFileSync(workspaceFile, JSON.stringify({ folders: [{ path: folder }, { path: other }] }));

  // No loopstate.serverPath: the extension must find the folder's .venv by itself.
  const started = await startCodeServer({
    dirs, env, folder,
    settings: firstStateOnly ? { "loopstate.serverPath": path.join(folder, ".venv", "bin", "loopstate") } : {},
    hostEnv: {
      ...env,
      PATH: pathWithoutLoopstate(),
      HOME: dirs.home,
      NODE_OPTIONS: `--require=${path.join(here, "accounting.cjs")}`,
      LOOPSTATE_E2E_ACCOUNTING: accounting,
    },
  });
  codeServerProcess = started.codeServerProcess;
  const { port } = started;
  const opened = await openWorkbench({ dirs, env, port, folder, browserLog });
  browser = opened.browser;
  const { page } = opened;
  rmSync(artifacts, { recursive: true, force: true }); // this run's screenshots only
  mkdirSync(artifacts, { recursive: true });
  const shot = (name) => page.screenshot({ path: path.join(artifacts, `${name}.png`) });
  const { itemText, waitForItem, waitForText } = workbenchWaits(page, dirs);

  await check("the folder's .venv install is found without settings, and the status item shows the project's state", async () => {
    await waitForItem((text) => text.includes("1 claim") && text.includes("run active"), "1 claim and the active run");
    console.log(`first state: ${await firstStateMs()} ms after activation`);
    const found = `found loopstate: ${path.join(folder, ".venv", "bin", "loopstate")} (workspace venv)`;
    if (!firstStateOnly && !outputLog().includes(found)) throw new Error(`the Output does not say ${JSON.stringify(found)}:\n${outputLog()}`);
    await shot("1-status");
    if (firstStateOnly) {
      const { processes, watchers } = accounted();
      const servers = processes.filter((record) => record.args.at(-1) === "serve").length;
      console.log(`accounted at first state: ${servers} loopstate serve, ${processes.length - servers} other process(es), ${watchers.length} file watcher(s)`);
    }
  });

  await check("a claim and a todo added by another process reach the status item and the tree without input", async () => {
    await page.click(ITEM); // opens the panel (the item's command); the trees are then visible
    await waitForText("Write the parser", "the Goals tree's first todo");
    const [task] = JSON.parse(cli("intent", "tasks", "--json")).tasks;
    cli("intent", "add", "--facet", "hard_constraint", task.task_id, "Keep the public API stable");
    cli("goals", "add", "main", "Document the old format", "--priority", "P1");
    await waitForItem((text) => text.includes("2 claims"), "2 claims");
    await waitForText("Document the old format", "the new todo in the Goals tree");
    // groups start folded (Outcomes and Disputes open): open Constraints to see the new claim
    await clickRow("Constraints", { folded: true });
    await waitForText("Keep the public API stable", "the new claim in the Intent tree");
    await shot("2-live");
  });

  /** The badge on the loopstate activity bar icon (the Goals view's), or its absence with ``null``. */
  async function waitForBadge(value) {
    const read = () => page.$$eval(".activitybar .action-item", (items) => {
      const ours = items.find((item) => (item.querySelector(".action-label")?.getAttribute("aria-label") ?? "").startsWith("loopstate"));
      return ours?.querySelector(".badge-content")?.textContent?.trim() || null;
    });
    const deadline = Date.now() + WAIT_MS;
    for (;;) {
      const shown = await read().catch(() => undefined);
      if (shown === value) return;
      if (Date.now() > deadline) throw new Error(`the activity bar badge shows ${JSON.stringify(shown)}, not ${JSON.stringify(value)}`);
      await sleep(200);
    }
  }
  /**
   * Until the side bar's trees have not changed for 750 ms: a list re-rendered between a click's
   * press and release (its rows replaced by a change pushed meanwhile) gets no click at all.
   */
  async function treesSettled() {
    await page.evaluate(() => {
      const bar = document.querySelector(".part.sidebar");
      if (bar === null || bar.__loopstateObserved) return;
      bar.__loopstateObserved = true;
      window.__loopstateTreesChanged = Date.now();
      new MutationObserver(() => { window.__loopstateTreesChanged = Date.now(); })
        .observe(bar, { subtree: true, childList: true, characterData: true });
    });
    await page.waitForFunction(() => Date.now() - (window.__loopstateTreesChanged ?? 0) > 750, { timeout: WAIT_MS, polling: 100 })
      .catch(() => { throw new Error("the side bar's trees never stopped changing"); });
  }
  /**
   * Click (or right-click, ``{ button: "right" }``) the tree row whose text includes ``text``;
   * ``{ folded: true }``: a folded group to open, so wait until it has children to show (a group
   * that is still empty in the tree's last render takes the click and opens nothing).
   */
  async function clickRow(text, { folded = false, ...options } = {}) {
    // A list recycles its row elements: a row found, then re-rendered for another item (a change
    // pushed meanwhile), would take the click meant for ``text``. Find the row, and click at its
    // point only while the row under that point still shows ``text``.
    const deadline = Date.now() + WAIT_MS;
    await treesSettled();
    for (;;) {
      const handle = await page.waitForFunction(
        (wanted, mustFold) => [...document.querySelectorAll(".monaco-list-row")].find((row) => row.textContent.includes(wanted) &&
          (!mustFold || row.querySelector(".monaco-tl-twistie.collapsible.collapsed") !== null)) ?? null,
        { timeout: Math.max(deadline - Date.now(), 1) },
        text,
        folded,
      ).catch(() => {
        throw new Error(`no tree row shows ${JSON.stringify(text)}${folded ? " as a folded group with children" : ""}`);
      });
      const box = await handle.asElement().boundingBox();
      const point = box && { x: box.x + Math.min(box.width / 2, 120), y: box.y + box.height / 2 };
      const still = point !== null && await page.evaluate(({ x, y }, wanted) =>
        document.elementFromPoint(x, y)?.closest(".monaco-list-row")?.textContent?.includes(wanted) ?? false, point, text);
      if (still) {
        await page.mouse.click(point.x, point.y, options);
        return;
      }
      if (Date.now() > deadline) throw new Error(`the row showing ${JSON.stringify(text)} never held still to be clicked`);
      await sleep(100);
    }
  }
  /** Press ``label`` in the modal dialog that opens, after a screenshot of it. */
  async function confirmModal(label, shotName) {
    await page.waitForSelector(".monaco-dialog-box", { visible: true, timeout: WAIT_MS });
    await shot(shotName);
    const clicked = await page.$$eval(".monaco-dialog-box .monaco-button", (buttons, wanted) => {
      const button = buttons.find((candidate) => candidate.textContent.trim() === wanted);
      button?.click();
      return button !== undefined;
    }, label);
    if (!clicked) throw new Error(`the modal has no ${JSON.stringify(label)} button`);
  }
  /** Every loopstate view's title bar names ``name``. */
  async function waitForHeaders(name) {
    try {
      await page.waitForFunction(
        (wanted) => {
          const headers = [...document.querySelectorAll(".pane-header")].filter((h) => /^(Intent|Runs|Goals)/.test(h.querySelector(".title")?.textContent ?? ""));
          return headers.length === 3 && headers.every((h) => (h.querySelector(".description")?.textContent ?? "").includes(wanted));
        },
        { timeout: WAIT_MS },
        name,
      );
    } catch {
      const seen = await page.$$eval(".pane-header", (all) => all.map((h) => h.textContent));
      throw new Error(`the views' title bars do not all name ${name}: ${JSON.stringify(seen)}`);
    }
  }

  async function palette(title) {
    await page.keyboard.press("F1");
    await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: WAIT_MS });
    await page.keyboard.type(`loopstate: ${title}`);
    await page.waitForFunction(
      (wanted) => [...document.querySelectorAll(".quick-input-list .monaco-list-row")].some((row) => row.textContent.includes(wanted)),
      { timeout: WAIT_MS },
      title,
    );
    await page.keyboard.press("Enter");
  }
  /** Answer the quick input titled ``title``: type ``answer``; for a pick, wait for it to be the focused row. */
  async function quickInputStep(title, answer, pick) {
    try {
      await page.waitForFunction(
        (wanted) => {
          const widget = document.querySelector(".quick-input-widget");
          return widget !== null && widget.style.display !== "none" && (widget.querySelector(".quick-input-title")?.textContent ?? "").includes(wanted);
        },
        { timeout: WAIT_MS },
        title,
      );
    } catch {
      throw new Error(`no quick input titled ${JSON.stringify(title)}`);
    }
    await page.keyboard.type(answer);
    if (pick) {
      // wait until the filter has narrowed the list to the answer
      await page.waitForFunction(
        (wanted) => document.querySelector(".quick-input-list .monaco-list-row.focused")?.textContent?.startsWith(wanted),
        { timeout: WAIT_MS },
        answer,
      );
    }
    await page.keyboard.press("Enter");
  }

  await check("Add claim records the user's explicit claim from a direct user event, shown live", async () => {
    await palette("Add claim");
    await quickInputStep("Add claim", "Errors name the offending line", false);
    await quickInputStep("Add claim: facet", "success_signal", true);
    await quickInputStep("Add claim: status", "explicit", true);
    await waitForItem((text) => text.includes("3 claims"), "3 claims");
    await clickRow("Success signals", { folded: true });
    await waitForText("Errors name the offending line", "the new claim in the Intent tree");
    const shown = JSON.parse(cli("intent", "show", "--json"));
    const claims = Object.values(shown.by_facet.success_signal ?? {}).flat();
    const added = claims.find((claim) => claim.statement === "Errors name the offending line");
    if (!added) throw new Error(`the CLI does not see the claim: ${JSON.stringify(shown.by_facet)}`);
    if (added.role !== "user" || added.epistemic_status !== "explicit" || added.source_ref.kind !== "user_event" || !added.direct_user) {
      throw new Error(`not the user's explicit claim from a direct user event: ${JSON.stringify(added)}`);
    }
    await shot("3-claim-added");
  });

  await check("the Goals view badges the gate waiting for the user; Resolve gate approves it and the badge goes", async () => {
    await waitForText("1 gate", "the open gate");
    await waitForBadge("1");
    await palette("Resolve gate");
    await quickInputStep("Resolve gate", "G001", true);
    await quickInputStep("Resolve G001: decision", "approve", true);
    await quickInputStep("Resolve G001", "", false);
    await waitForText("0 gates", "the emptied gate inbox");
    await waitForBadge(null);
    const board = JSON.parse(cli("goals", "board", "main", "--json"));
    const resolved = board.resolved_gates.find((gate) => gate.gate_id === "G001");
    if (board.user_inbox.length !== 0 || !resolved) throw new Error(`the gate is not resolved: ${JSON.stringify(board.resolved_gates)}`);
  });

  await check("Render ACTIVE_GOAL_STATE.md writes the untracked workbench and opens it; once git tracks it, offers the public-safe view", async () => {
    const file = path.join(folder, "ACTIVE_GOAL_STATE.md");
    await palette("Render ACTIVE_GOAL_STATE.md");
    // the folder is a git work tree, but git does not track the file: the private workbench is written
    await page.waitForFunction(
      () => [...document.querySelectorAll(".tabs-container .tab")].some((tab) => tab.textContent.includes("ACTIVE_GOAL_STATE.md")),
      { timeout: WAIT_MS },
    );
    const written = readFileSync(file, "utf8");
    if (!written.includes("Write the parser") || !written.includes("local_private")) {
      throw new Error("the rendered file is not the private workbench with the todo");
    }
    // once it is in git's index a commit would publish it: the private render is refused, the public-safe one offered
    execFileSync("git", ["-C", folder, "add", "ACTIVE_GOAL_STATE.md"]);
    await palette("Render ACTIVE_GOAL_STATE.md");
    const action = "Render the public-safe view";
    await page.waitForFunction(
      (wanted) => [...document.querySelectorAll(".notification-toast .monaco-button")].some((button) => button.textContent.trim() === wanted),
      { timeout: WAIT_MS },
      action,
    );
    await page.$$eval(".notification-toast .monaco-button", (buttons, wanted) => {
      buttons.find((button) => button.textContent.trim() === wanted)?.click();
    }, action);
    const deadline = Date.now() + WAIT_MS;
    while (!readFileSync(file, "utf8").includes("public_safe")) {
      if (Date.now() > deadline) throw new Error("the public-safe view was not written");
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    if (!readFileSync(file, "utf8").includes("Write the parser")) throw new Error("the public-safe file lacks the todo");
    // the command opens the file once it is written: let that editor take the focus before the next palette
    await waitForText("public_safe._", "the public-safe workbench in its editor");
    await new Promise((resolve) => setTimeout(resolve, 1000));
  });

  await check("Verify store reports the intact store", async () => {
    await palette("Verify store");
    await waitForText("the store is intact", "the verify result");
  });

  await check("Show audit log opens the stream's log read-only", async () => {
    await palette("Show audit log");
    await quickInputStep("Show the audit log of which stream?", "intent", true);
    await waitForText("task_started", "the intent stream's first event in the log document");
    await page.keyboard.type("typed");
    await waitForText("Cannot edit in read-only editor", "the read-only refusal");
    await shot("4-audit-log");
  });

  /** The pids of the `loopstate serve` this test's code-server started (found by its private data dir). */
  function ourServers() {
    const pids = [];
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        const argv = readFileSync(`/proc/${entry}/cmdline`, "utf8").split("\0");
        const environ = readFileSync(`/proc/${entry}/environ`, "utf8").split("\0");
        if (argv.includes("serve") && environ.includes(`LOOPSTATE_DATA_DIR=${dirs.data}`)) pids.push(Number(entry));
      } catch {
        // gone, or not ours to read
      }
    }
    return pids;
  }

  await check("a crashed server is restarted and resubscribed: a change made meanwhile shows up", async () => {
    const [pid, ...others] = ourServers();
    if (pid === undefined || others.length > 0) throw new Error(`expected one loopstate serve, found ${[pid, ...others]}`);
    process.kill(pid, "SIGKILL");
    const [task] = JSON.parse(cli("intent", "tasks", "--json")).tasks;
    cli("intent", "add", "--facet", "unknown", "--status", "unknown", task.task_id, "Which encodings appear?");
    await waitForItem((text) => text.includes("4 claims"), "4 claims after the restart");
    const now = ourServers();
    if (now.length !== 1 || now[0] === pid) throw new Error(`expected one new loopstate serve, found ${now}`);
    const log = outputLog();
    if (!/restarting it in 1000 ms/.test(log)) throw new Error(`the Output does not say the server is restarted:\n${log}`);
    if (/will not be restarted/i.test(log)) throw new Error(`the Output says the server will not be restarted:\n${log}`);
  });

  await check("a run another process creates appears in the Runs tree without input", async () => {
    cli("run", "create", "--objective", "Document the format", "--done-gate", "docs reviewed", "--asset", "docs", "--harness", "manual");
    await waitForText("Document the format", "the new run in the Runs tree");
  });

  await check("a click on a run opens its audit log", async () => {
    await clickRow("Parse the old format");
    await page.waitForFunction(
      (wanted) => [...document.querySelectorAll(".tabs-container .tab")].some((tab) => tab.textContent.includes(wanted)),
      { timeout: WAIT_MS },
      `runs.${activeRun}.log`,
    ).catch(async () => {
      const tabs = await page.$$eval(".tabs-container .tab", (all) => all.map((tab) => tab.textContent));
      throw new Error(`no tab for runs.${activeRun}.log opened; the tabs are ${JSON.stringify(tabs)}`);
    });
    await waitForText("lease_acquired", "the run's lease in its audit log");
    await shot("5-run-log");
  });

  await check("Stop all runs, confirmed in its modal, halts every run, says the true count, and the item stays on the run that was active", async () => {
    await palette("Stop all runs");
    await confirmModal("Stop all runs", "6-stop-modal");
    await waitForItem((text) => text.includes("HALTED"), "HALTED");
    const stop = path.join(folder, ".loopstate", "STOP");
    if (!existsSync(stop)) throw new Error(`no STOP file at ${stop}`);
    const listed = JSON.parse(cli("run", "list", "--json"));
    if (!listed.kill_switch.set) throw new Error("the CLI does not see the kill switch");
    const halted = listed.runs.filter((run) => run.status === "halted_kill_switch").length;
    if (halted !== 2) throw new Error(`expected both runs halted, the CLI lists ${halted}`);
    await waitForText(`${halted} of ${listed.runs.length} run(s) halted`, "the true halted count");
    await page.hover(ITEM);
    await page.waitForFunction(
      (wanted) => [...document.querySelectorAll(".monaco-hover, .workbench-hover")].some((hover) => hover.textContent.includes(wanted)),
      { timeout: WAIT_MS },
      `Run ${activeRun.slice(0, 8)}: halted_kill_switch`,
    ).catch(async () => {
      const hovers = await page.$$eval(".monaco-hover, .workbench-hover", (all) => all.map((h) => h.textContent));
      throw new Error(`the item's tooltip does not follow the run that was active (${activeRun}): ${JSON.stringify(hovers)}`);
    });
    await shot("7-halted");
    await page.mouse.move(700, 450);
  });

  await check("removing .loopstate/STOP by hand clears HALTED with no input", async () => {
    rmSync(path.join(folder, ".loopstate", "STOP"));
    await waitForItem((text) => !text.includes("HALTED") && text.includes("run halted"), "the halted run without HALTED");
    await shot("8-stop-removed");
  });

  await check("a kill switch set from a terminal shows at once; Resume, confirmed in its modal, clears it", async () => {
    cli("run", "stop", "--harness", "manual");
    await waitForItem((text) => text.includes("HALTED"), "HALTED again");
    await palette("Resume");
    await confirmModal("Resume", "9-resume-modal");
    await waitForItem((text) => !text.includes("HALTED"), "no HALTED after Resume");
    if (existsSync(path.join(folder, ".loopstate", "STOP"))) throw new Error("Resume left the STOP file");
    if (JSON.parse(cli("run", "list", "--json")).kill_switch.set) throw new Error("the CLI still sees the kill switch");
    await waitForText("kill switch of proj is cleared", "Resume's message");
  });

  await check("a corrupted stream is marked and said once; after `loopstate recover` it comes back by itself", async () => {
    const verify = JSON.parse(cli("verify", "--json"));
    const file = path.join(dirs.data, "projects", verify.project_id, "streams", "intent.jsonl");
    writeFileSync(file, readFileSync(file, "utf8").replace("Which encodings appear?", "Which ENCODINGS appear?"));
    await waitForItem((text) => text.includes("1 stream unreadable"), "the unreadable stream");
    await waitForText("intent: unreadable", "the marked Intent view");
    await page.waitForFunction(
      () => [...document.querySelectorAll(".notification-toast")].some((toast) => toast.textContent.includes("cannot be read") && toast.textContent.includes("Show output")),
      { timeout: WAIT_MS },
    );
    await shot("10-stream-error");
    const said = () => outputLog().split("\n").filter((line) => line.includes("intent/snapshot cannot be read")).length;
    if (said() !== 1) throw new Error(`the Output says it ${said()} times`);
    cli("recover", "--yes");
    await waitForItem((text) => !text.includes("unreadable") && /\d claims/.test(text), "the state back after recover");
    await page.waitForFunction(
      () => ![...document.querySelectorAll(".monaco-list-row")].some((row) => row.textContent.includes("intent: unreadable")),
      { timeout: WAIT_MS },
    );
    if (!outputLog().includes("intent/snapshot is readable again")) throw new Error("the Output does not say the stream is back");
    if (said() !== 1) throw new Error(`the Output said the fault ${said()} times`);
    await shot("11-recovered");
  });

  await check("Retract claim from a claim's context menu, confirmed in its modal, invalidates it", async () => {
    const before = JSON.parse(cli("intent", "show", "--json")).active_count;
    // The row may be redrawn by a pushed change between the right-click and the menu: open the
    // menu again (up to three times) until its entry opens the modal.
    for (let attempt = 1; ; attempt++) {
      await clickRow("The parser reads the old format", { button: "right" });
      // a real click on the menu entry (the menu acts on trusted mouse events only)
      const entry = await page.waitForFunction(
        () => [...document.querySelectorAll(".context-view .action-label, .monaco-menu .action-label")].find((a) => a.textContent.trim() === "Retract claim") ?? null,
        { timeout: WAIT_MS },
      );
      await sleep(200); // the menu takes clicks once its opening animation is over
      await entry.asElement().click();
      const opened = await page.waitForSelector(".monaco-dialog-box", { visible: true, timeout: 5000 }).then(() => true, () => false);
      if (opened) break;
      if (attempt === 3) throw new Error("Retract claim in the context menu opened no modal, three times");
      await page.keyboard.press("Escape");
    }
    await confirmModal("Retract", "12-retract-modal");
    const deadline = Date.now() + WAIT_MS;
    while (JSON.parse(cli("intent", "show", "--json")).active_count !== before - 1) {
      if (Date.now() > deadline) throw new Error("the claim was not retracted");
      await sleep(100);
    }
    await page.waitForFunction(
      () => ![...document.querySelectorAll(".monaco-list-row")].some((row) => row.textContent.includes("The parser reads the old format")),
      { timeout: WAIT_MS },
    );
  });

  await check("a server path that does not exist shows the error notification", async () => {
    const missing = path.join(scratch, "no-such-loopstate");
    mkdirSync(path.join(folder, ".vscode"), { recursive: true });
    writeFileSync(path.join(folder, ".vscode", "settings.json"), JSON.stringify({ "loopstate.serverPath": missing }));
    await waitForText("could not start", "the server's error notification");
    await page.waitForFunction(
      () => [...document.querySelectorAll(".notification-toast, .notifications-toasts")].some(
        (toast) => toast.textContent.includes("Show output") && toast.textContent.includes("Open settings"),
      ),
      { timeout: WAIT_MS },
    );
    await shot("13-missing-server");
  });

  await check("a window with no folder starts no server and no shell, and shows no status item", async () => {
    // The setting's removal restarts the server of the window still open: let that spawn land first.
    const serves = () => accounted().processes.filter((record) => record.args.at(-1) === "serve").length;
    const servesBefore = serves();
    rmSync(path.join(folder, ".vscode"), { recursive: true, force: true });
    for (const deadline = Date.now() + WAIT_MS; serves() === servesBefore; await sleep(200)) {
      if (Date.now() > deadline) throw new Error(`removing loopstate.serverPath did not restart the server:\n${outputLog()}`);
    }
    const idleSaid = () => outputLog().split("\n").filter((line) => line.includes("no folder is open")).length;
    const before = { said: idleSaid(), spawned: accounted().processes.length };
    await page.goto(`http://127.0.0.1:${port}/?ew=true`, { waitUntil: "domcontentloaded" });
    const deadline = Date.now() + WAIT_MS;
    while (idleSaid() === before.said) {
      if (Date.now() > deadline) throw new Error(`the extension never said it is idle in the empty window:\n${outputLog()}`);
      await sleep(200);
    }
    const spawned = accounted().processes.slice(before.spawned);
    if (spawned.length > 0) throw new Error(`the empty window started processes: ${JSON.stringify(spawned)}`);
    if ((await page.$(ITEM)) !== null && (await itemText()) !== "") throw new Error(`the empty window shows the status item: ${JSON.stringify(await itemText())}`);
  });

  await check("in a multi-root workspace every view and the item name the project they show, and follow the active editor's folder", async () => {
    // VS Code web can open a workspace file without its folders when the window before it was
    // still closing (code-server issue 3061: its workspace service is not initialized yet). That
    // is the harness's page load, not the extension: reload (said in the log), at most twice.
    await page.goto(`http://127.0.0.1:${port}/?workspace=${encodeURIComponent(workspaceFile)}`, { waitUntil: "domcontentloaded" });
    for (let reloads = 0; ; reloads++) {
      const opened = await page
        .waitForFunction(
          (selector) => {
            if (document.querySelector(selector)?.textContent?.includes("proj: ")) return "item";
            return document.body.innerText.includes("You have not yet added a folder to the workspace") ? "no-folders" : false;
          },
          { timeout: WAIT_MS },
          ITEM,
        )
        .then((handle) => handle.jsonValue())
        .catch(() => "timeout");
      if (opened === "item") break;
      if (opened !== "no-folders" || reloads === 2) {
        await waitForItem((text) => text.includes("proj: "), "the project's name");
        break;
      }
      console.log("note: code-server opened the workspace without its folders; reloading the page");
      await page.reload({ waitUntil: "domcontentloaded" });
    }
    await page.click(ITEM);
    await waitForHeaders("proj");
    await page.keyboard.down("Control");
    await page.keyboard.press("KeyP");
    await page.keyboard.up("Control");
    await page.waitForSelector(".quick-input-widget input", { visible: true, timeout: WAIT_MS });
    await page.keyboard.type("NOTES.md");
    await page.waitForFunction(() => document.querySelector(".quick-input-list .monaco-list-row.focused")?.textContent?.includes("NOTES.md"), { timeout: WAIT_MS });
    await page.keyboard.press("Enter");
    await waitForItem((text) => text.includes("other: "), "the other project's name");
    await waitForHeaders("other");
    await waitForText("The other project's outcome", "the other project's claim");
    await shot("14-multi-root");
  });

  await check("the extension started no process but `loopstate serve` and opened no file watcher", async () => {
    const { processes, watchers } = accounted();
    const servers = processes.filter((record) => record.args.at(-1) === "serve");
    const others = processes.filter((record) => record.args.at(-1) !== "serve");
    console.log(`accounted: ${servers.length} loopstate serve, ${others.length} other process(es), ${watchers.length} file watcher(s)`);
    // the first server, one after the SIGKILL, one per multi-root window, and the failing path: at least 3
    if (servers.length < 3) throw new Error(`the accounting saw ${servers.length} server spawn(s): it is not counting (${accounting})`);
    if (others.length > 0) throw new Error(`the extension started other processes: ${JSON.stringify(others)}`);
    if (watchers.length > 0) throw new Error(`the extension opened file watchers: ${JSON.stringify(watchers)}`);
  });
} catch (error) {
  setUpFailed(error);
} finally {
  await tearDown({ browser, codeServerProcess, scratch });
}
finish(browserLog);
