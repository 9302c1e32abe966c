-- A stream another process corrupts (an edit in place): the server's loopstate/streamError
-- reaches the user as an error message, the statusline and the float.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')

H.cli({ 'intent', 'start', '--claim', 'outcome:Keep the ledger honest' })
local project = H.setup_and_attach({})
H.record('statusline_before', loopstate.statusline())

-- Change one verified byte of the statement, in place (same length).
local path = vim.fs.joinpath(project.store, 'streams', 'intent.jsonl')
local f = assert(io.open(path, 'r+b'))
local text = f:read('*a')
local at = assert(text:find('honest', 1, true))
f:seek('set', at - 1)
f:write('HONEST')
f:close()

H.record_message('message', 'can no longer be read', 'the stream error')
H.record('statusline_after', loopstate.statusline())
vim.cmd('LoopState')
H.record('float', vim.api.nvim_buf_get_lines(0, 0, -1, false))
H.record('messages', #H.messages)
vim.api.nvim_feedkeys('q', 'x', false)

-- Repaired by another process (`loopstate recover`): the server says the stream reads again
-- (`rewritten: true`), and the statusline comes back by itself, with no restart.
local client_id = project.client_id
H.cli({ 'recover', '--yes' })
H.wait_for('the repaired stream', function()
  return not loopstate.statusline():find('unreadable', 1, true)
end)
local statusline = loopstate.statusline()
vim.cmd('LoopState')
H.record('repaired', { statusline = statusline, same_server = project.client_id == client_id,
  float = vim.api.nvim_buf_get_lines(0, 0, 3, false), messages = #H.messages })
vim.cmd('qa!')
