-- :checkhealth loopstate with a working server: first probed (no server runs yet), then answered
-- by the running server; and :help loopstate from the plugin's own tags.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')

local before_setup = vim.fn.exists(':LoopStateStop')
loopstate.setup({})
H.record('commands', { before_setup = before_setup, after_setup = vim.fn.exists(':LoopStateStop') })
local function health()
  local t = vim.uv.hrtime()
  vim.cmd('checkhealth loopstate')
  local lines = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  local ms = (vim.uv.hrtime() - t) / 1e6
  vim.cmd('silent! only | enew')
  return { lines = lines, ms = ms }
end
H.record('probed', health())
H.setup_and_attach({})
H.record('running', health())

-- The help file parses: its tags are generated (into a copy, the checkout stays clean) and found.
local docs = assert(os.getenv('LOOPSTATE_NVIM_DOC_COPY'))
vim.opt.runtimepath:prepend(vim.fs.dirname(docs))
vim.cmd.helptags(docs)
local found = {}
for _, tag in ipairs({ 'loopstate', 'loopstate-setup', 'loopstate-statusline', ':LoopStateStop', 'loopstate-health',
  'loopstate-root', 'loopstate-highlight', 'loopstate-history', ':LoopStateAckHistory' }) do
  local ok = pcall(vim.cmd.help, tag)
  found[tag] = ok and vim.fn.expand('%:t') or false
  if ok then vim.cmd('close') end
end
H.record('help', found)
vim.cmd('qa!')
