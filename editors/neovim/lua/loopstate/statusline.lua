--- The statusline component: a short string of the current project's state, rebuilt only when
--- a `loopstate/changed` (or a server state change) arrives, so a redraw costs one table lookup.
local client = require('loopstate.client')
local history = require('loopstate.history')

local M = {}

local cache = {} -- root -> {version, text}

--- The run to show: the latest that can still change, else the latest.
function M.primary_run(project)
  local best, best_live
  for run_id in pairs(project.runs) do
    local entry = project.topics['runs/status/' .. run_id]
    local run = entry and type(entry.snapshot) == 'table' and entry.snapshot.run
    if type(run) == 'table' then
      local live = not client.TERMINAL[run.status]
      local key = (run.created_at or '') .. run_id
      if (live and not best_live) or (live == (best_live or false) and (not best or key > best.key)) then
        best, best_live = { key = key, status = entry.snapshot, run = run }, live
      end
    end
  end
  return best
end

local function count(list)
  return type(list) == 'table' and #list or 0
end

--- Everything the string shows, as numbers and words (for tests and custom components).
function M.summary(project)
  local s = { server = project.status, halted = false, blocking = 0, gates = 0, errors = 0 }
  -- Streams whose history the server's witness found rewritten, until the user acknowledges it.
  s.history_rewritten = history.streams(project)
  local seen = {} -- one broken stream read by several topics (a run's status, the run list) counts once
  for _, entry in pairs(project.topics) do
    if entry.error and not seen[entry.error] then
      seen[entry.error] = true
      s.errors = s.errors + 1
    end
  end
  local intent = project.topics['intent/snapshot']
  local view = intent and intent.snapshot
  if type(view) == 'table' then
    s.claims, s.disputes = view.active_count or 0, count(view.disagreements)
  end
  -- HALTED says a kill switch stands now: the server pushes `project/kill_switch` whenever a
  -- switch file appears or goes (also by hand), so a run halted by a switch lifted since shows
  -- its halted status without it.
  s.halted = type(project.kill_switch) == 'table' and project.kill_switch.set == true
  for run_id in pairs(project.runs) do
    local entry = project.topics['runs/status/' .. run_id]
    local status = entry and type(entry.snapshot) == 'table' and entry.snapshot
    if status and type(status.run) == 'table' then
      s.blocking = s.blocking + (status.run.open_blocking_issues or 0)
    end
  end
  for goal_id in pairs(project.goals) do
    local entry = project.topics['goals/board/' .. goal_id]
    if entry and type(entry.snapshot) == 'table' then
      s.gates = s.gates + count(entry.snapshot.user_inbox)
    end
  end
  local primary = M.primary_run(project)
  if primary then
    local run = primary.run
    s.run = { id = primary.status.run_id, status = run.status, stage = run.stage }
    if type(run.usage) == 'table' and type(run.budgets) == 'table' then
      s.run.mutations = { run.usage.mutations, run.budgets.max_mutations }
    end
  end
  return s
end

--- `HISTORY REWRITTEN (streams)` while an alarm stands, else nil: shown whatever the server does.
local function rewritten(project)
  local streams = history.streams(project)
  if #streams == 0 then
    return nil
  end
  return ('HISTORY REWRITTEN (%s)'):format(table.concat(streams, ', '))
end

--- The text for a project (no caching).
function M.render(project)
  local alarm = rewritten(project)
  if project.status ~= 'running' then
    local text = (project.status == 'missing' or project.status == 'failed') and 'LS: no server'
      or ('LS: ' .. project.status)
    return alarm and (text .. ' · ' .. alarm) or text
  end
  local s = M.summary(project)
  local parts = { s.halted and 'LS HALTED' or 'LS' }
  if alarm then
    table.insert(parts, alarm)
  end
  if s.errors > 0 then
    table.insert(parts, ('%d stream%s unreadable'):format(s.errors, s.errors == 1 and '' or 's'))
  end
  if s.run then
    local text = 'run ' .. s.run.status .. (s.run.stage and s.run.stage ~= vim.NIL and ('/' .. s.run.stage) or '')
    if s.run.mutations and s.run.mutations[2] and s.run.mutations[2] ~= vim.NIL then
      text = text .. (' %s/%s mut'):format(s.run.mutations[1], s.run.mutations[2])
    end
    table.insert(parts, text)
  end
  if s.blocking > 0 then
    table.insert(parts, s.blocking .. ' blocking')
  end
  if s.gates > 0 then
    table.insert(parts, s.gates .. ' gate' .. (s.gates == 1 and '' or 's'))
  end
  if s.claims then
    table.insert(parts, s.claims .. ' claim' .. (s.claims == 1 and '' or 's')
      .. (s.disputes > 0 and (', ' .. s.disputes .. ' disputed') or ''))
  end
  return table.concat(parts, ' · ')
end

--- The highlight group of a project's state.
function M.group_of(project)
  if next(project.history or {}) then
    return 'LoopStateHistory' -- the most serious state: it stands until acknowledged
  end
  if project.status == 'missing' or project.status == 'failed' then
    return 'LoopStateError'
  end
  if project.status ~= 'running' then
    return 'LoopStateBusy'
  end
  local s = M.summary(project)
  if s.halted then
    return 'LoopStateHalted'
  end
  return s.errors > 0 and 'LoopStateError' or 'LoopStateOk'
end

--- The group of the current buffer's project, or nil outside one.
function M.group(buf)
  local project = client.current(buf)
  return project and M.group_of(project) or nil
end

--- The component: '' outside a loopstate project; otherwise the cached text of its project
--- (with opts.highlight, wrapped in its highlight group for a `%{%...%}` statusline).
function M.get(buf, opts)
  local project = client.current(buf)
  if not project then
    return ''
  end
  local hit = cache[project.root]
  if not (hit and hit.version == project.version) then
    hit = { version = project.version, text = M.render(project), group = M.group_of(project) }
    cache[project.root] = hit
  end
  if opts and opts.highlight then
    return ('%%#%s#%s%%*'):format(hit.group, (hit.text:gsub('%%', '%%%%')))
  end
  return hit.text
end

local redraw_pending = false
client.on_change(function()
  if redraw_pending then
    return
  end
  redraw_pending = true
  vim.schedule(function()
    redraw_pending = false
    vim.cmd.redrawstatus({ bang = true })
  end)
end)

return M
