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
vim.cmd('qa!')
