// Process and watcher accounting for the end-to-end test, loaded into code-server's Node
// processes with NODE_OPTIONS=--require (the extension host among them). Every call to
// child_process (spawn, execFile, exec, fork and their Sync forms) and to fs.watch /
// fs.watchFile / fs.promises.watch whose stack passes through the loopstate extension's
// bundle is appended, one JSON line each, to $LOOPSTATE_E2E_ACCOUNTING: run.mjs then counts
// what the extension started (only `loopstate serve`) and watched (nothing).
"use strict";
const fs = require("node:fs");
const childProcess = require("node:child_process");

const log = process.env.LOOPSTATE_E2E_ACCOUNTING;
const bundle = /loopstate\.loopstate-[^/\\]+[/\\]dist[/\\]extension\.js/;

function record(kind, name, args) {
  const stack = new Error().stack ?? "";
  if (!bundle.test(stack)) return;
  const [command, argv] = args;
  const line = JSON.stringify({ kind, name, pid: process.pid, command: String(command), args: Array.isArray(argv) ? argv.map(String) : [] });
  try {
    fs.appendFileSync(log, `${line}\n`);
  } catch {
    // the accounting must never break what it watches
  }
}

function wrap(target, kind, names) {
  for (const name of names) {
    const original = target[name];
    if (typeof original !== "function") continue;
    target[name] = function accounted(...args) {
      record(kind, name, args);
      return original.apply(this, args);
    };
  }
}

if (log) {
  wrap(childProcess, "process", ["spawn", "spawnSync", "execFile", "execFileSync", "exec", "execSync", "fork"]);
  wrap(fs, "watch", ["watch", "watchFile"]);
  wrap(fs.promises, "watch", ["watch"]);
}
