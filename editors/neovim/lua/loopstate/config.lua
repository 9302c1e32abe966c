--- The plugin's options: defaults, and what setup() was given.
local M = {}

M.defaults = {
  -- The sidecar: `loopstate serve` over stdio (any LSP-style command line).
  cmd = { 'loopstate', 'serve' },
  -- The CLI, for what the protocol does not carry (listing runs and goals, verify, log).
  -- Default: `cmd` without its trailing `serve`.
  cli = nil,
  -- Extra environment for the server and the CLI (LOOPSTATE_DATA_DIR, say).
  cmd_env = nil,
  -- Start a server when a file of a project that has a store is entered.
  autostart = true,
  -- How long a started server may take to answer `initialize` before it is stopped and the
  -- user told (a `cmd` that is not loopstate, or hangs).
  start_timeout_ms = 10000,
  -- Restart after a crash: the delay doubles from initial_ms up to max_ms; after max_attempts
  -- failures in a row the plugin gives up and says so (`:LoopStateRestart` tries again).
  restart = { initial_ms = 250, max_ms = 30000, max_attempts = 8 },
  -- Who a kill switch or a gate decision is recorded as (default: $USER).
  actor = nil,
}

M.options = vim.deepcopy(M.defaults)

--- The CLI command line (a list), derived from `cmd` unless given.
function M.cli()
  if M.options.cli then
    return M.options.cli
  end
  local cmd = M.options.cmd
  if #cmd > 1 and cmd[#cmd] == 'serve' then
    return vim.list_slice(cmd, 1, #cmd - 1)
  end
  return { 'loopstate' }
end

function M.actor()
  return M.options.actor or vim.env.USER or vim.env.USERNAME or 'user'
end

function M.apply(opts)
  opts = opts or {}
  if type(opts) ~= 'table' then
    error(('loopstate: setup() takes a table of options, not a %s'):format(type(opts)), 3)
  end
  for _, key in ipairs({ 'cmd', 'cli', 'cmd_env', 'restart' }) do
    if opts[key] ~= nil and type(opts[key]) ~= 'table' then
      error(('loopstate: setup{%s = ...} must be a table (a list for a command line), not a %s'):format(key,
        type(opts[key])), 3)
    end
  end
  if opts.cmd and #opts.cmd == 0 then
    error('loopstate: setup{cmd = ...} is empty; give the server command, e.g. {"loopstate", "serve"}')
  end
  if opts.start_timeout_ms ~= nil and (type(opts.start_timeout_ms) ~= 'number' or opts.start_timeout_ms <= 0) then
    error('loopstate: setup{start_timeout_ms = ...} must be a positive number of milliseconds', 3)
  end
  M.options = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), opts)
  return M.options
end

return M
