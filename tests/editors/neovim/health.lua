-- :checkhealth loopstate with a working server, and :help loopstate from the plugin's own tags.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')
local client = require('loopstate.client')

local before_setup = vim.fn.exists(':LoopStateStop')
loopstate.setup({})
H.record('commands', { before_setup = before_setup, after_setup = vim.fn.exists(':LoopStateStop') })
H.wait_for('the server to attach', function()
  local p = client.current(0)
  return p and p.status == 'running'
end)
vim.cmd('checkhealth loopstate')
H.record('health', vim.api.nvim_buf_get_lines(0, 0, -1, false))
vim.cmd('silent! only | enew')

-- The help file parses: its tags are generated (into a copy, the checkout stays clean) and found.
local docs = assert(os.getenv('LOOPSTATE_NVIM_DOC_COPY'))
vim.opt.runtimepath:prepend(vim.fs.dirname(docs))
vim.cmd.helptags(docs)
local found = {}
for _, tag in ipairs({ 'loopstate', 'loopstate-setup', 'loopstate-statusline', ':LoopStateStop', 'loopstate-health' }) do
  local ok = pcall(vim.cmd.help, tag)
  found[tag] = ok and vim.fn.expand('%:t') or false
  if ok then vim.cmd('close') end
end
H.record('help', found)
vim.cmd('qa!')
