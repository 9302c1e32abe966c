--- Which loopstate project a file belongs to, decided in Lua from the file system alone: no
--- process is started, so opening a file outside a project costs a few `stat` calls and nothing
--- else. The rules are loopstate's own (docs/editors.md, "Which project a buffer belongs to"),
--- walking up from the file's folder (its physical path, links resolved):
---
---   1. the nearest folder that is already a loopstate project: its store exists in the data dir
---      (`<data dir>/projects/<SHA-256 of "loopstate-project-v1\0" .. folder>`), or it holds a
---      team's committed store file (`.loopstate/store.json`, whose `project_id` is then the id), else
---   2. the top of the git work tree (the nearest folder holding `.git`), else
---   3. the folder itself.
---
--- The data dir is resolved as the server resolves it, from the environment the server gets
--- (Neovim's, with setup{cmd_env} on top): LOOPSTATE_DATA_DIR, else
--- $CODEX_HOME/plugin-data/loopstate/v1, else $PLUGIN_DATA, else $XDG_STATE_HOME/loopstate/v1
--- (default ~/.local/state). Only rule 1 starts a server by itself; see loopstate.client.
local sha256 = require('loopstate.sha256')

local M = {}

M.PREFIX = 'loopstate-project-v1\0'

--- The value of an environment variable the server would see.
local function getenv(name)
  local extra = require('loopstate.config').options.cmd_env
  local value = extra and extra[name]
  if value == nil then
    value = vim.env[name]
  end
  return value ~= '' and value or nil
end

local function absolute(path)
  return path:sub(1, 1) == '/'
end

--- The data dir, or nil and why it cannot be known (a relative setting the server refuses too).
function M.data_dir()
  for _, entry in ipairs({ { 'LOOPSTATE_DATA_DIR', '' }, { 'CODEX_HOME', '/plugin-data/loopstate/v1' }, { 'PLUGIN_DATA', '' } }) do
    local value = getenv(entry[1])
    if value then
      if not absolute(value) then
        return nil, ('%s=%s is not an absolute path'):format(entry[1], value)
      end
      return vim.fs.normalize(value) .. entry[2], nil, entry[1] == 'LOOPSTATE_DATA_DIR'
    end
  end
  local state = getenv('XDG_STATE_HOME')
  if not (state and absolute(state)) then
    local home = getenv('HOME')
    if not (home and absolute(home)) then
      return nil, 'neither XDG_STATE_HOME nor HOME is an absolute path; set LOOPSTATE_DATA_DIR'
    end
    state = home .. '/.local/state'
  end
  return vim.fs.normalize(state) .. '/loopstate/v1'
end

--- The project id of a canonical root (as the server computes it).
function M.project_id(root)
  return sha256(M.PREFIX .. root)
end

--- The store folder of a canonical root in `data_dir` (`id`: the project id, when not the root's own).
function M.store(root, data_dir, id)
  return data_dir .. '/projects/' .. (id or M.project_id(root))
end

M.STORE_FILE = '/.loopstate/store.json'

--- Whether `folder` holds a team's store file, and the project id it names (nil when the file names
--- none the server would take: the server then says what is wrong with it).
local function store_file(folder)
  local st = vim.uv.fs_stat(folder .. M.STORE_FILE)
  if not (st and st.type == 'file') then
    return false
  end
  local fd = io.open(folder .. M.STORE_FILE, 'rb')
  local text = fd and fd:read(64 * 1024)
  if fd then
    fd:close()
  end
  local ok, doc = pcall(vim.json.decode, text or '')
  local id = ok and type(doc) == 'table' and doc.project_id
  return true, type(id) == 'string' and id:match('^%x+$') and #id == 64 and id or nil
end

local function is_dir(path)
  local st = vim.uv.fs_stat(path)
  return st ~= nil and st.type == 'directory'
end

--- The project of the directory `dir`: {root, how = 'project'|'git'|'cwd', project_id, store, exists, data_dir},
--- or nil and why not (the folder does not exist; no data dir).
function M.find(dir)
  local here = vim.uv.fs_realpath(dir)
  if not here or not is_dir(here) then
    return nil, ('%s is not an existing directory'):format(dir)
  end
  local data, why, explicit = M.data_dir()
  if not data then
    return nil, why
  end
  local chain, folder = {}, here
  while true do
    table.insert(chain, folder)
    local parent = vim.fs.dirname(folder)
    if parent == folder then
      break
    end
    folder = parent
  end
  local found
  for _, f in ipairs(chain) do
    if is_dir(M.store(f, data)) then
      found = { root = f, how = 'project' }
      break
    end
    local team, id = store_file(f)
    if team then
      found = { root = f, how = 'project', project_id = id }
      break
    end
  end
  if not found then
    for _, f in ipairs(chain) do
      if vim.uv.fs_lstat(f .. '/.git') then
        found = { root = f, how = 'git' }
        break
      end
    end
  end
  found = found or { root = here, how = 'cwd' }
  found.project_id = found.project_id or M.project_id(found.root)
  found.data_dir, found.store = data, M.store(found.root, data, found.project_id)
  found.exists = is_dir(found.store)
  found.refused = M.refused(found.root, data, explicit)
  return found
end

--- Why `root` cannot be a project (as the server refuses it), or nil: the home folder, or any
--- folder that holds the data dir, unless LOOPSTATE_DATA_DIR was given explicitly.
function M.refused(root, data, explicit)
  local home = getenv('HOME')
  home = home and vim.uv.fs_realpath(home) or home
  if root == home then
    return ('%s is your home folder, not a project: open a file of a project folder'):format(root)
  end
  if not explicit and (data == root or vim.startswith(data, root == '/' and '/' or (root .. '/'))) then
    return ('%s holds loopstate\'s own data dir (%s): open a file of a project folder, or set LOOPSTATE_DATA_DIR'):format(
      root, data)
  end
end

--- The folder a buffer's project is looked up from: a file's own folder (its nearest existing
--- ancestor for a file not written yet), or nil for a buffer that is not a named file (a special
--- buffer, an unnamed one, a URL such as `fugitive://`).
function M.folder_of(buf)
  local name = vim.api.nvim_buf_get_name(buf)
  if vim.bo[buf].buftype ~= '' or name == '' or name:match('^%a[%w+.-]*://') then
    return nil
  end
  local dir = vim.fs.dirname(vim.fn.fnamemodify(name, ':p'))
  while dir and not vim.uv.fs_stat(dir) do
    local parent = vim.fs.dirname(dir)
    dir = parent ~= dir and parent or nil
  end
  return dir
end

--- Whether entering `buf` may start a server: a named file whose project has a store.
function M.starts(buf)
  local dir = vim.api.nvim_buf_is_valid(buf) and M.folder_of(buf)
  local info = dir and M.find(dir)
  return info ~= nil and info.how == 'project' and not info.refused
end

return M
