-- Counts every process the plugin could start and every file watcher it could open: each of
-- vim.system, vim.uv.spawn, vim.fn.jobstart and vim.uv.new_fs_event is wrapped (before the
-- plugin is loaded) to record its use. Neovim's LSP client starts a server through vim.system,
-- so a server start is counted too, as the command line it ran.
local S = { spawned = {}, watchers = 0 }

local function record(cmd)
  if S.paused then
    return -- the test's own "other process", not the plugin's
  end
  table.insert(S.spawned, type(cmd) == 'table' and table.concat(cmd, ' ') or tostring(cmd))
end

local system, spawn, jobstart, new_fs_event = vim.system, vim.uv.spawn, vim.fn.jobstart, vim.uv.new_fs_event
local inside_system = false
vim.system = function(cmd, ...)
  record(cmd)
  inside_system = true -- vim.system spawns through vim.uv.spawn: that spawn is this one
  local ok, result = pcall(system, cmd, ...)
  inside_system = false
  if not ok then error(result, 0) end
  return result
end
vim.uv.spawn = function(path, opts, ...)
  if not inside_system then record({ path, unpack(opts and opts.args or {}) }) end
  return spawn(path, opts, ...)
end
vim.fn.jobstart = function(cmd, ...)
  record(cmd)
  return jobstart(cmd, ...)
end
vim.uv.new_fs_event = function(...)
  S.watchers = S.watchers + 1
  return new_fs_event(...)
end

--- Run fn() without counting (the test playing another process).
function S.uncounted(fn, ...)
  S.paused = true
  local ok, result = pcall(fn, ...)
  S.paused = false
  if not ok then error(result, 0) end
  return result
end

--- The processes that are children of this Neovim now (pid -> command line).
function S.children()
  local found = {}
  for _, pid in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
    local f = io.open('/proc/' .. pid .. '/cmdline')
    found[#found + 1] = f and f:read('*a'):gsub('%z', ' ') or tostring(pid)
    if f then f:close() end
  end
  return found
end

return S
