--- Which runs and goals a project has, for the subscriptions: the protocol lists neither, so
--- the CLI lists them once per server start, and the project's streams folder in the data dir
--- is then watched (inotify through vim.uv, never polled): a new `runs.<id>.jsonl` is a new run,
--- a new `goals.<id>.jsonl` a new goal, followed at once.
local cli = require('loopstate.cli')

local M = {}

-- loopstate.client requires this module, so it is looked up when used, not when loaded.
local function client()
  return require('loopstate.client')
end

--- The CLI's listing: every run that can still change (and the latest), every goal.
function M.discover(project)
  local left = 2
  local function finished(err)
    project.discovery_error = err or project.discovery_error
    left = left - 1
    project.discovered = left == 0
    client().notify_changed(project)
  end
  cli.run({ 'run', 'list', '--json', '--root', project.root }, { json = true }, function(err, listing)
    if err then
      return finished(err)
    end
    project.kill_switch = listing.kill_switch
    local runs = listing.runs or {}
    for i, row in ipairs(runs) do
      if not client().TERMINAL[row.status] or i == #runs then
        client().follow_run(project, row.run_id)
      end
    end
    finished()
  end)
  cli.run({ 'goals', 'list', '--json', '--root', project.root }, { json = true }, function(err, listing)
    if err then
      return finished(err)
    end
    for _, goal_id in ipairs(listing.goals or {}) do
      client().follow_goal(project, goal_id)
    end
    finished()
  end)
end

local function on_stream_file(project, name)
  local run_id = name:match('^runs%.(.+)%.jsonl$')
  if run_id and not project.runs[run_id] then
    return client().follow_run(project, run_id)
  end
  local goal_id = name:match('^goals%.(.+)%.jsonl$')
  if goal_id and not project.goals[goal_id] then
    return client().follow_goal(project, goal_id)
  end
end

--- Watch `<store>/streams`, or while it does not exist yet its nearest existing ancestor
--- (re-armed one level down as folders appear).
function M.watch(project)
  if not project.store or project.watcher then
    return
  end
  local streams = vim.fs.joinpath(project.store, 'streams')
  local target = streams
  while not vim.uv.fs_stat(target) do
    local parent = vim.fs.dirname(target)
    if parent == target then
      return
    end
    target = parent
  end
  local handle = vim.uv.new_fs_event()
  if not handle then
    return
  end
  local ok = handle:start(target, {}, vim.schedule_wrap(function(err, filename)
    if err or project.closed or project.watcher ~= handle then
      return -- a callback queued before this watch was moved down
    end
    if target == streams then
      if filename and project.status == 'running' then
        on_stream_file(project, filename)
      end
      return
    end
    if not (filename and vim.uv.fs_stat(vim.fs.joinpath(target, filename))) then
      return
    end
    handle:stop()
    handle:close()
    project.watcher = nil
    M.watch(project)
    if vim.uv.fs_stat(streams) and project.status == 'running' then
      for name in vim.fs.dir(streams) do
        on_stream_file(project, name)
      end
    end
  end))
  if ok then
    project.watcher, project.watching = handle, target
  else
    handle:close()
  end
end

--- Stop watching (the project is closed).
function M.unwatch(project)
  if project.watcher then
    project.watcher:stop()
    project.watcher:close()
    project.watcher = nil
  end
end

return M
