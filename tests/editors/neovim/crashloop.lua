-- A server that exits as soon as it starts (here: a real `loopstate serve` given an option it
-- refuses) is restarted with backoff, then given up on with one clear message: no message per
-- attempt, and none of Neovim's own "Client ... quit" warnings.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')
local client = require('loopstate.client')

local statuses = H.track_statuses()
loopstate.setup({
  cmd = { 'loopstate', 'serve', '--log-level', 'loud' },
  restart = { initial_ms = 10, max_ms = 40, max_attempts = 3 },
})
vim.cmd.edit('notes.txt')
H.wait_for('the plugin to give up', function()
  local p = client.current(0)
  return p and p.status == 'failed'
end)
vim.wait(300) -- time for any late message (Neovim's client reports an exit on a later turn)
H.record('statuses', statuses)
H.record('error', client.current(0).error)
H.record('gave_up', H.message_matching('gave up') and H.message_matching('gave up').level)
H.record('messages', H.messages)
H.record('statusline', loopstate.statusline())
vim.cmd('checkhealth loopstate')
H.record('health', vim.api.nvim_buf_get_lines(0, 0, -1, false))
vim.cmd('qa!')
