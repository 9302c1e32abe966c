-- Nothing starts where there is no loopstate project: a folder with no git, $HOME, a plain git
-- work tree (until a command runs there), the empty start buffer, special buffers, a URL. Every
-- spawn and watcher is counted (spawns.lua, wrapped before the plugin loads); then, as the
-- positive control, a file of a project with a store starts exactly one server, and a command
-- in the git work tree starts its server.
local dir = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local S = dofile(vim.fs.joinpath(dir, 'spawns.lua'))
local H = dofile(vim.fs.joinpath(dir, 'helper.lua'))

local t = vim.uv.hrtime()
require('loopstate').setup({})
local setup_ms = (vim.uv.hrtime() - t) / 1e6
local function settle()
  vim.wait(100) -- the plugin looks at a buffer on the next turn of the event loop
end
local function state(what)
  settle()
  return {
    what = what, spawned = vim.deepcopy(S.spawned), watchers = S.watchers, children = S.children(),
    lsp_loaded = package.loaded['vim.lsp'] ~= nil, client_loaded = package.loaded['loopstate.client'] ~= nil,
    statusline = require('loopstate').statusline(),
  }
end

local steps = { state('the empty start buffer') }
local function edit(path, what)
  vim.cmd.edit(vim.fn.fnameescape(path))
  table.insert(steps, state(what))
end
edit(assert(os.getenv('LOOPSTATE_NVIM_PLAIN')) .. '/notes.txt', 'a file in a folder with no git')
edit(assert(os.getenv('HOME')) .. '/.profile', 'a file in $HOME')
edit(assert(os.getenv('LOOPSTATE_NVIM_GIT')) .. '/src/main.c', 'a file of a plain git work tree')
vim.cmd('enew | setlocal buftype=nofile')
table.insert(steps, state('a special buffer'))
vim.cmd('help')
table.insert(steps, state('a help buffer'))
vim.cmd('only')
edit('fugitive://' .. assert(os.getenv('LOOPSTATE_NVIM_STORE')) .. '/.git//0/a.txt', 'a URL buffer')
H.record('quiet', steps)
H.record('setup_ms', setup_ms)

-- The control: a file of a project with a store starts its one server.
local store = assert(os.getenv('LOOPSTATE_NVIM_STORE'))
vim.cmd.edit(vim.fn.fnameescape(store .. '/a.txt'))
local client = require('loopstate.client')
H.wait_for('the server of the project with a store', function()
  local p = client.current(0)
  return p and p.status == 'running'
end)
vim.cmd.edit(vim.fn.fnameescape(store .. '/b.txt')) -- a second file of it: the same server
settle()
H.record('store', state('files of a project with a store'))

-- A command in the plain git work tree starts its server; later files there join it.
vim.cmd.edit(vim.fn.fnameescape(assert(os.getenv('LOOPSTATE_NVIM_GIT')) .. '/src/main.c'))
H.answer({ 'Cancel' })
vim.cmd('LoopStateStop')
H.wait_for('the git work tree server', function()
  local p = client.current(0)
  return p and p.status == 'running'
end)
vim.cmd.edit(vim.fn.fnameescape(os.getenv('LOOPSTATE_NVIM_GIT') .. '/README'))
settle()
H.record('git_after_command', state('the git work tree after a command'))
H.record('git_readme_root', client.current(0) and client.current(0).root)
-- A command where there is no project at all is refused with a message, and starts nothing.
vim.cmd.edit(vim.fn.fnameescape(os.getenv('LOOPSTATE_NVIM_PLAIN') .. '/notes.txt'))
local before = #S.spawned
vim.cmd('LoopState')
H.record('plain_command', { message = H.messages[#H.messages], spawned = #S.spawned - before })
vim.cmd('qa!')
