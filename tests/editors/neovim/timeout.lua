-- A `cmd` that never answers `initialize` (here `sleep`): after start_timeout_ms the plugin stops
-- it, says so once, shows `LS: no server` and does not restart it; :checkhealth says the same
-- of the command, within its probe's bound.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')
local client = require('loopstate.client')

local statuses = H.track_statuses()
loopstate.setup({ cmd = { 'sleep', '600' }, start_timeout_ms = 700, restart = { initial_ms = 10, max_ms = 40, max_attempts = 3 } })
vim.cmd.edit('notes.txt')
H.wait_for('the timeout', function()
  local p = client.current(0)
  return p and p.status == 'failed'
end)
local function children()
  return #vim.api.nvim_get_proc_children(vim.fn.getpid())
end
H.wait_for('the stopped command to exit', function() return children() == 0 end)
vim.wait(500) -- a restart, or a late message, would show up now
H.record('statuses', statuses)
H.record('messages', H.messages)
H.record('statusline', loopstate.statusline())
H.record('children', children())
local t = vim.uv.hrtime()
vim.cmd('checkhealth loopstate')
H.record('health', { lines = vim.api.nvim_buf_get_lines(0, 0, -1, false), ms = (vim.uv.hrtime() - t) / 1e6 })
vim.cmd('qa!')
