--- History alarms: the sidecar is a witness of every stream it follows, and pushes
--- `loopstate/historyAlarm` when a stream's newest signed checkpoint does not extend the
--- history it saw before (`rewritten: true`: rewritten or cut, an alarm) or when the stream was
--- purged on purpose (`rewritten: false`: news). An alarm is said once, at ERROR, and stands in
--- the statusline (`HISTORY REWRITTEN`) until the user acknowledges it (:LoopStateAckHistory).
---
--- The server says each alarm once only (its witness remembers it did), so an alarm the user has
--- not acknowledged yet is kept in Neovim's state folder and shown again by the next Neovim that
--- opens the project: closing the editor does not make it go away.
local client = require('loopstate.client')

local M = {}

local function say(msg, level)
  vim.notify(msg, level, { title = 'loopstate' })
end

--- Where unacknowledged alarms are kept: root -> stream -> {message, at}.
function M.path()
  return vim.fs.joinpath(vim.fn.stdpath('state'), 'loopstate', 'history_alarms.json')
end

local function read_all()
  local f = io.open(M.path(), 'r')
  if not f then
    return {}
  end
  local text = f:read('*a')
  f:close()
  local ok, decoded = pcall(vim.json.decode, text)
  return (ok and type(decoded) == 'table') and decoded or {}
end

--- Record the project's standing alarms (none: its entry goes), replacing the file whole.
local function save(project)
  local all = read_all()
  all[project.root] = next(project.history) and project.history or nil
  if next(all) == nil then
    all = vim.empty_dict() -- `{}` in the file, not `[]`
  end
  local path = M.path()
  vim.fn.mkdir(vim.fs.dirname(path), 'p')
  local tmp = path .. '.' .. vim.fn.getpid() .. '.tmp'
  local f, why = io.open(tmp, 'w')
  if not f then
    return say(('loopstate: cannot keep the history alarm in %s (%s): it shows until this Neovim exits'):format(
      path, why), vim.log.levels.WARN)
  end
  f:write(vim.json.encode(all))
  f:close()
  local ok, err = vim.uv.fs_rename(tmp, path)
  if not ok then
    os.remove(tmp)
    say(('loopstate: cannot keep the history alarm in %s (%s)'):format(path, err), vim.log.levels.WARN)
  end
end

--- The advice every alarm carries: how to check the stream, and how to clear the alarm.
function M.advice(stream)
  return ('Check it against a checkpoint you kept elsewhere: `loopstate verify --against <kept checkpoint of %s>` '
    .. '(docs/verifying.md, :help loopstate-history); :LoopStateAckHistory clears this alarm once you have looked.'):format(stream)
end

local function text_of(value, fallback)
  return (type(value) == 'string' and value ~= '') and value or fallback
end

--- A `loopstate/historyAlarm` for `project`. Anything but `rewritten: false` is an alarm (a
--- malformed notification is not taken for harmless news).
function M.on_alarm(project, params)
  params = type(params) == 'table' and params or {}
  local stream = text_of(params.stream, '(a stream)')
  local message = text_of(params.message, 'the server sent a history alarm without a message'):gsub('^loopstate: ', '')
  if params.rewritten == false then
    say(('loopstate: %s: %s. A checkpoint of %s kept from before the purge no longer matches it if it covers '
      .. 'the purged events (they and what follows were re-chained); keep a new one (`loopstate checkpoint %s`).'):format(
      project.root, message, stream, stream), vim.log.levels.WARN)
    return
  end
  local standing = project.history[stream]
  if standing and standing.message == message then
    return -- the same alarm again (a server restarted, the same checkpoint): said once
  end
  project.history[stream] = { message = message, at = os.date('!%Y-%m-%dT%H:%M:%SZ') }
  say(('loopstate: HISTORY REWRITTEN in %s: %s. %s'):format(project.root, message, M.advice(stream)), vim.log.levels.ERROR)
  save(project)
  client.notify_changed(project)
end

--- The alarms kept by an earlier Neovim for this project, shown again (one reminder).
function M.restore(project)
  local kept = read_all()[project.root]
  if type(kept) ~= 'table' then
    return
  end
  local streams = {}
  for stream, alarm in pairs(kept) do
    if type(alarm) == 'table' and type(alarm.message) == 'string' then
      project.history[stream] = { message = alarm.message, at = alarm.at }
      table.insert(streams, stream)
    end
  end
  if #streams == 0 then
    return
  end
  table.sort(streams)
  say(('loopstate: HISTORY REWRITTEN in %s (%s), not acknowledged yet: %s. %s'):format(project.root,
    table.concat(streams, ', '), project.history[streams[1]].message, M.advice(streams[1])), vim.log.levels.ERROR)
  client.notify_changed(project)
end

--- The streams of `project` with a standing alarm, sorted.
function M.streams(project)
  local streams = vim.tbl_keys(project and project.history or {})
  table.sort(streams)
  return streams
end

--- :LoopStateAckHistory [STREAM]: the user has looked; the alarm (of one stream, or all) goes.
function M.ack(project, stream)
  local streams = M.streams(project)
  if #streams == 0 then
    return say(('loopstate: no history alarm stands in %s'):format(project.root), vim.log.levels.INFO)
  end
  if stream and stream ~= '' then
    if not project.history[stream] then
      return say(('loopstate: no history alarm stands for %s in %s (alarms: %s)'):format(stream, project.root,
        table.concat(streams, ', ')), vim.log.levels.ERROR)
    end
    streams = { stream }
  end
  for _, name in ipairs(streams) do
    project.history[name] = nil
  end
  save(project)
  say(('loopstate: history alarm of %s acknowledged'):format(table.concat(streams, ', ')), vim.log.levels.INFO)
  client.notify_changed(project)
end

return M
