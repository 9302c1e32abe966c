-- A server command that does not exist: a clear message, the statusline says so, and
-- :checkhealth loopstate reports it as an error.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')

local missing = assert(os.getenv('LOOPSTATE_NVIM_MISSING'))
-- With LOOPSTATE_NVIM_CLI the CLI works (the root is found) and only the server is missing.
local cli = os.getenv('LOOPSTATE_NVIM_CLI')
loopstate.setup({ cmd = { missing, 'serve' }, cli = cli and { cli } or nil })
H.record_message('message', 'not executable', 'the message about the missing server')
H.record('statusline', loopstate.statusline())

vim.cmd('checkhealth loopstate')
H.record('health', vim.api.nvim_buf_get_lines(0, 0, -1, false))
vim.cmd('qa!')
