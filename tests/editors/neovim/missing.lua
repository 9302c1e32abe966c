-- A server command that does not exist, in a plain git work tree: opening a file starts nothing;
-- a command does, and the user gets one clear message; the statusline says so, and
-- :checkhealth loopstate reports it as an error.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')

local missing = assert(os.getenv('LOOPSTATE_NVIM_MISSING'))
loopstate.setup({ cmd = { missing, 'serve' } })
vim.cmd.edit('notes.txt')
vim.wait(100) -- the plugin looks at the buffer on the next turn of the event loop
H.record('before_command', { messages = #H.messages, client_loaded = package.loaded['loopstate.client'] ~= nil })
vim.cmd('LoopState')
H.record_message('message', 'not executable', 'the message about the missing server')
H.record('messages', #H.messages)
H.record('statusline', loopstate.statusline())

vim.cmd('checkhealth loopstate')
H.record('health', vim.api.nvim_buf_get_lines(0, 0, -1, false))
vim.cmd('qa!')
