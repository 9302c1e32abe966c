--- The plugin's options: defaults, and what setup() was given.
local M = {}

M.defaults = {
  -- The sidecar: `loopstate serve` over stdio (any LSP-style command line).
  cmd = { 'loopstate', 'serve' },
  -- Extra environment for the server (LOOPSTATE_DATA_DIR, say); also where the plugin looks
  -- for the data dir when it decides which project a file belongs to.
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

function M.actor()
  return M.options.actor or vim.env.USER or vim.env.USERNAME or 'user'
end

function M.apply(opts)
  opts = opts or {}
  if type(opts) ~= 'table' then
    error(('loopstate: setup() takes a table of options, not a %s'):format(type(opts)), 3)
  end
  if opts.cli ~= nil then
    -- Everything goes through the server now; an old config keeps working, and is told once.
    vim.notify('loopstate: setup{cli = ...} is no longer used (every read and action goes through the server, `cmd`); '
      .. 'remove it', vim.log.levels.WARN, { title = 'loopstate' })
    opts = vim.tbl_extend('force', {}, opts)
    opts.cli = nil
  end
  for _, key in ipairs({ 'cmd', 'cmd_env', 'restart' }) do
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
