-- A buffer that changes project while the first project's server is still starting (or after it
-- runs) ends attached to the new project's server alone. Two ways a buffer changes project: the
-- empty start buffer reused by :edit after a command started the current directory's project
-- (LOOPSTATE_NVIM_HOW=edit), and a file renamed with :file (rename); LOOPSTATE_NVIM_ORDER says
-- whether the change comes before the first server answers `initialize` or after.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')

local a, b = assert(os.getenv('LOOPSTATE_NVIM_A')), assert(os.getenv('LOOPSTATE_NVIM_B'))
local how, order = assert(os.getenv('LOOPSTATE_NVIM_HOW')), assert(os.getenv('LOOPSTATE_NVIM_ORDER'))
loopstate.setup({})
local client = require('loopstate.client')
local buf = vim.api.nvim_get_current_buf()

if how == 'edit' then
  -- What a command in the empty start buffer does first: the current directory's project (A).
  assert(client.for_command(buf))
else
  vim.cmd.edit(vim.fn.fnameescape(a .. '/a.txt'))
  buf = vim.api.nvim_get_current_buf()
  H.wait_for('a.txt to join A', function() return client.current(buf) ~= nil end)
end
local project_a = client.projects[a]
if order == 'after' then
  H.wait_for("A's server", function() return project_a.status == 'running' end)
  H.wait_for('the buffer attached to A', function() return #vim.lsp.get_clients({ bufnr = buf }) == 1 end)
end
local a_status = project_a.status
if how == 'edit' then
  vim.cmd.edit(vim.fn.fnameescape(b .. '/b.txt'))
else
  vim.cmd.file(vim.fn.fnameescape(b .. '/x.txt'))
end
assert(vim.api.nvim_get_current_buf() == buf, 'the buffer was not reused')
H.wait_for('both servers', function()
  local pb = client.projects[b]
  return project_a.status == 'running' and pb and pb.status == 'running'
end)
local project_b = client.projects[b]
H.wait_for('the buffer attached to B', function()
  return vim.lsp.buf_is_attached(buf, project_b.client_id)
end)
vim.wait(300) -- anything late (A's on_init, a second attach) would land now
local clients = vim.lsp.get_clients({ bufnr = buf })
local a_client = vim.lsp.get_client_by_id(project_a.client_id)
H.record('result', {
  a_status_at_change = a_status,
  buffer_clients = vim.tbl_map(function(c) return c.root_dir end, clients),
  a_attached = vim.tbl_keys(a_client.attached_buffers),
  a_buffers = vim.tbl_keys(project_a.buffers),
  b_buffers = vim.tbl_keys(project_b.buffers),
  servers = #vim.lsp.get_clients({ name = 'loopstate' }),
  current = client.current(buf).root,
  statusline = loopstate.statusline(),
})
vim.cmd('qa!')
