--- The user commands, defined once: by plugin/loopstate.lua at startup, or by setup() when
--- the plugin's folder joined the runtime path after startup (a package manager's config hook).
--- Each command loads the rest of the plugin on first use. And the highlight groups.
local M = {}

function M.commands()
  if vim.g.loaded_loopstate then
    return
  end
  vim.g.loaded_loopstate = true

  local function cmd(name, fn, opts)
    vim.api.nvim_create_user_command(name, function(args)
      fn(args)
    end, vim.tbl_extend('force', { desc = 'loopstate' }, opts or {}))
  end

  local function commands()
    return require('loopstate.commands')
  end

  cmd('LoopState', function() commands().state() end, { desc = 'loopstate: intent, runs and goals of this project' })
  cmd('LoopStateClaim', function() commands().claim() end, { desc = 'loopstate: add your own claim' })
  cmd('LoopStateStop', function() commands().stop() end, { desc = 'loopstate: the kill switch (asks first)' })
  cmd('LoopStateResume', function() commands().resume() end, { desc = 'loopstate: clear the kill switch (asks first)' })
  cmd('LoopStateBoard', function(a) commands().board(a.args) end, {
    nargs = '?', desc = 'loopstate: a goal board',
    complete = function(lead) return commands().goal_ids(lead) end,
  })
  cmd('LoopStateGate', function() commands().gate() end, { desc = 'loopstate: resolve an open gate' })
  cmd('LoopStateVerify', function() commands().verify() end, { desc = 'loopstate: verify the store' })
  cmd('LoopStateLog', function(a) commands().log(a.args) end, {
    nargs = '?', desc = 'loopstate: the audit log of a stream',
    complete = function(lead) return commands().stream_names(lead) end,
  })
  cmd('LoopStateAckHistory', function(a) commands().ack_history(a.args) end, {
    nargs = '?', desc = 'loopstate: acknowledge a history alarm (after checking the stream)',
    complete = function(lead) return commands().alarm_streams(lead) end,
  })
  cmd('LoopStateRestart', function() commands().restart() end, { desc = 'loopstate: restart the server' })
end

--- The statusline states' highlight groups, linked to standard groups (`default`, so a
--- colorscheme or the user's own `:highlight` wins); set again after every :colorscheme.
M.GROUPS = {
  LoopStateOk = 'DiagnosticOk',          -- running, nothing wrong
  LoopStateBusy = 'DiagnosticWarn',      -- starting, restarting
  LoopStateHalted = 'DiagnosticError',   -- a kill switch stands
  LoopStateError = 'DiagnosticError',    -- no server, a stream unreadable
  LoopStateHistory = 'ErrorMsg',         -- a history alarm stands (until :LoopStateAckHistory)
}

function M.highlights()
  for name, link in pairs(M.GROUPS) do
    vim.api.nvim_set_hl(0, name, { link = link, default = true })
  end
end

return M
