-- setup attaches; a claim added by another process changes the statusline without input; the
-- float's lines are the snapshot; :LoopStateClaim adds a direct user claim.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')
local client = require('loopstate.client')

local project = H.setup_and_attach({})
local lsp = client.lsp(project)
H.record('attached', { root = project.root, name = lsp.name, status = project.status, version = project.server_version })
local before = loopstate.statusline()
H.record('statusline_before', before)

H.cli({ 'intent', 'start', '--label', 'parser', '--claim', 'hard_constraint:Keep the old format', '--json' })
H.wait_for('the statusline to change', function() return loopstate.statusline() ~= before end)
H.record('statusline_after_claim', loopstate.statusline())

vim.cmd('LoopState')
local buf = vim.api.nvim_get_current_buf()
H.record('float', { lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false), floating = vim.api.nvim_win_get_config(0).relative ~= '' })
vim.api.nvim_feedkeys('q', 'x', false)
H.record('float_closed', not vim.api.nvim_buf_is_valid(buf))
vim.cmd('LoopState')
local again = vim.api.nvim_get_current_buf()
vim.api.nvim_feedkeys(vim.keycode('<Esc>'), 'x', false)
H.record('float_closed_by_esc', again ~= buf and not vim.api.nvim_buf_is_valid(again))

H.answer({ 'The tests run in real Neovim', 'success_signal', 'explicit' })
local seen = project.version
vim.cmd('LoopStateClaim')
H.wait_for('the claim to arrive', function()
  local v = project.topics['intent/snapshot'].snapshot
  return v.active_count == 2
end)
H.record('statusline_after_own_claim', loopstate.statusline())
H.record('changes_seen', project.version - seen)

-- Buffers of one project share its server; a file of another project gets its own.
local function clients_of(path)
  vim.cmd.edit(vim.fn.fnameescape(path))
  local buf = vim.api.nvim_get_current_buf()
  H.wait_for('the buffer of ' .. path .. ' to attach', function() return #vim.lsp.get_clients({ bufnr = buf }) == 1 end)
  local c = vim.lsp.get_clients({ bufnr = buf })[1]
  return { id = c.id, root = c.root_dir }
end
local other = assert(os.getenv('LOOPSTATE_NVIM_OTHER'))
H.record('buffers', {
  clients_of(vim.fs.joinpath(project.root, 'a.txt')),
  clients_of(vim.fs.joinpath(project.root, 'src', 'sub', 'b.txt')),
  clients_of(vim.fs.joinpath(other, 'c.txt')),
})
vim.cmd('qa!')
