--- The user commands: each finds the current buffer's project, asks what it needs through
--- vim.ui, and sends its command or query to the sidecar. No other process is run.
local client = require('loopstate.client')
local config = require('loopstate.config')
local views = require('loopstate.views')

local M = {}

local FACETS = {
  'outcome', 'success_signal', 'failure_signal', 'hard_constraint', 'soft_constraint', 'tradeoff', 'unknown',
  'result_feedback', 'disagreement',
}
-- What a user's own claim may be (a user states, leaves open, or disputes).
local USER_STATUSES = { 'explicit', 'unknown', 'disputed' }

local function say(msg, level)
  vim.notify(msg, level or vim.log.levels.INFO, { title = 'loopstate' })
end

--- The project of the current buffer (started by this command in a plain git work tree), once
--- its server runs (or has failed, which the server's status then says); fn(project).
local function with_project(fn)
  local project, why, fresh = client.for_command(vim.api.nvim_get_current_buf())
  if not project then
    return say(why, vim.log.levels.ERROR)
  end
  local before = project.status
  if project.status ~= 'running' then
    vim.wait(config.options.start_timeout_ms + 1000, function()
      return project.status ~= 'starting' and project.status ~= 'new'
    end)
  end
  if project.status ~= 'running' then
    -- A start that failed during this command has said why already (one message per fault).
    if not (fresh or before == 'starting' or before == 'new') then
      say(('loopstate: the server of %s is %s%s'):format(project.root, project.status,
        project.error and (': ' .. project.error) or ''), vim.log.levels.ERROR)
    end
    return
  end
  fn(project)
end

local function done_or_error(what)
  return function(err)
    if err then
      return say(('loopstate: %s failed: %s'):format(what, err), vim.log.levels.ERROR)
    end
    say('loopstate: ' .. what .. ' done')
  end
end

function M.state()
  with_project(function(project)
    views.float(project, 'loopstate', views.state_lines)
  end)
end

local function tasks_of(project)
  local entry = project.topics['intent/snapshot']
  return entry and type(entry.snapshot) == 'table' and entry.snapshot.tasks or {}
end

--- :LoopStateClaim: the user's own claim (role user, source: a direct user event the server
--- records), added to the chosen task; with no task yet, a task is started with it.
function M.claim()
  with_project(function(project)
    vim.ui.input({ prompt = 'Claim (one atomic statement): ' }, function(statement)
      if not statement or vim.trim(statement) == '' then
        return
      end
      vim.ui.select(FACETS, { prompt = 'Facet' }, function(facet)
        if not facet then
          return
        end
        vim.ui.select(USER_STATUSES, { prompt = 'Status' }, function(status)
          if not status then
            return
          end
          local claim = { statement = vim.trim(statement), role = 'user', epistemic_status = status, facets = { facet } }
          local tasks = tasks_of(project)
          local function add(task)
            if not task then
              return client.execute(project, { kind = 'intent.task_start', label = 'from Neovim', actor = 'user',
                initial_claims = { claim } }, done_or_error('claim'))
            end
            client.execute(project, { kind = 'intent.claim_add', task_id = task.task_id, claim = claim, actor = 'user' },
              done_or_error('claim'))
          end
          if #tasks <= 1 then
            return add(tasks[1])
          end
          vim.ui.select(tasks, {
            prompt = 'Task',
            format_item = function(t) return ('%s %s (%d claims)'):format(t.task_id:sub(1, 8), t.label or '', t.active_claims or 0) end,
          }, function(task)
            if task then
              add(task)
            end
          end)
        end)
      end)
    end)
  end)
end

local function actor()
  return { harness = 'manual', actor = config.actor(), session_id = 'nvim-' .. vim.fn.getpid() }
end

local function live_runs(project)
  local listing = project.topics['project/runs']
  local count = 0
  for _, row in ipairs(listing and type(listing.snapshot) == 'table' and listing.snapshot.runs or {}) do
    if not client.TERMINAL[row.status] and row.status ~= 'halted_kill_switch' then
      count = count + 1
    end
  end
  return count
end

--- :LoopStateStop: the kill switch, after a confirmation: `project.stop` creates the project's
--- STOP file (durably) and halts every run of the project (and of projects around it).
function M.stop()
  with_project(function(project)
    local prompt = ('Set the kill switch of %s? Every run of the project halts (%d live now).'):format(project.root,
      live_runs(project))
    vim.ui.select({ 'Stop all runs', 'Cancel' }, { prompt = prompt }, function(choice)
      if choice ~= 'Stop all runs' then
        return say('loopstate: kill switch not set')
      end
      client.execute(project, { kind = 'project.stop', actor = actor(), reason = 'stopped from Neovim' }, function(err, result)
        if err then
          return say('loopstate: the kill switch was not set: ' .. err, vim.log.levels.ERROR)
        end
        local outcome = result.project or {}
        local halted, failed = 0, {}
        for _, p in ipairs(outcome.projects or {}) do
          halted = halted + #(p.halted or {})
          for _, f in ipairs(p.failed or {}) do
            table.insert(failed, ('%s: %s'):format(f.run_id:sub(1, 8), f.message))
          end
        end
        say(('loopstate: kill switch set (%s); halted %d run(s)%s'):format(outcome.kill_switch or '?', halted,
          #failed > 0 and ('; not recorded (they halt at their next command): ' .. table.concat(failed, '; ')) or ''),
          vim.log.levels.WARN)
      end)
    end)
  end)
end

--- :LoopStateResume: clear the kill switch, after a confirmation (`project.resume`): the switch
--- files inside the project's `.loopstate` folder are removed; others are listed, never deleted.
--- Halted runs stay halted until each is resumed.
function M.resume()
  with_project(function(project)
    local switch = project.kill_switch
    if type(switch) == 'table' and not switch.set then
      return say('loopstate: no kill switch stands in ' .. project.root)
    end
    local prompt = ('Clear the kill switch of %s (%s)? Runs may then be resumed.'):format(project.root,
      table.concat(type(switch) == 'table' and switch.paths or {}, ', '))
    vim.ui.select({ 'Clear the kill switch', 'Cancel' }, { prompt = prompt }, function(choice)
      if choice ~= 'Clear the kill switch' then
        return say('loopstate: kill switch left as it is')
      end
      client.execute(project, { kind = 'project.resume', actor = actor() }, function(err, result)
        if err then
          return say('loopstate: the kill switch was not cleared: ' .. err, vim.log.levels.ERROR)
        end
        local outcome = result.project or {}
        local kept = vim.tbl_map(function(k) return ('%s (%s)'):format(k.path, k.reason) end, outcome.kept or {})
        local halted = #(outcome.halted_runs or {})
        local text = ('loopstate: kill switch %s'):format(#kept == 0 and 'cleared' or ('still stands: ' .. table.concat(kept, '; ')))
        if halted > 0 then
          text = text .. ('; %d run(s) stay halted until resumed (loopstate run resume RUN)'):format(halted)
        end
        say(text, #kept == 0 and vim.log.levels.INFO or vim.log.levels.WARN)
      end)
    end)
  end)
end

--- :LoopStateBoard GOAL: the goal's board in a float, live (the goal is followed from now on).
--- A goal the project does not have is refused (and so never offered in completion).
function M.board(goal_id)
  with_project(function(project)
    local function show(goal)
      client.follow_goal(project, goal)
      views.float(project, 'goal ' .. goal, function(p)
        local entry = p.topics['goals/board/' .. goal]
        local lines = views.board_lines(goal, entry and entry.snapshot)
        if entry and entry.error then
          table.insert(lines, '  error: ' .. entry.error)
        end
        return lines
      end)
    end
    if not project.discovered then
      vim.wait(10000, function() return project.discovered or project.status ~= 'running' end)
    end
    local goals = vim.tbl_keys(project.goals)
    table.sort(goals)
    if goal_id and goal_id ~= '' then
      if not project.goals[goal_id] then
        return say(('loopstate: %s has no goal %q (%s)'):format(project.root, goal_id,
          #goals > 0 and ('its goals: ' .. table.concat(goals, ', ')) or 'it has no goal yet'), vim.log.levels.ERROR)
      end
      return show(goal_id)
    end
    if #goals == 0 then
      return say('loopstate: this project has no goals yet (:LoopStateBoard GOAL names one)', vim.log.levels.WARN)
    end
    vim.ui.select(goals, { prompt = 'Goal' }, function(goal)
      if goal then
        show(goal)
      end
    end)
  end)
end

local function matching(names, lead)
  lead = lead or ''
  return vim.tbl_filter(function(name) return vim.startswith(name, lead) end, names)
end

--- Goal ids for completion: the project's own goals (none before its server has listed them).
function M.goal_ids(lead)
  local project = client.lookup(0)
  local ids = project and vim.tbl_keys(project.goals) or {}
  table.sort(ids)
  return matching(ids, lead)
end

--- :LoopStateGate: pick an open gate of any followed goal, decide it (approve, reject, defer).
function M.gate()
  with_project(function(project)
    local gates = {}
    for goal_id in pairs(project.goals) do
      local entry = project.topics['goals/board/' .. goal_id]
      local board = entry and type(entry.snapshot) == 'table' and entry.snapshot or {}
      for _, inbox in ipairs({ 'user_inbox', 'controller_inbox' }) do
        for _, gate in ipairs(board[inbox] or {}) do
          table.insert(gates, { goal_id = goal_id, gate = gate })
        end
      end
    end
    if #gates == 0 then
      return say('loopstate: no open gate in this project')
    end
    vim.ui.select(gates, {
      prompt = 'Gate',
      format_item = function(g) return ('%s/%s %s'):format(g.goal_id, g.gate.gate_id, g.gate.title) end,
    }, function(choice)
      if not choice then
        return
      end
      vim.ui.select({ 'approve', 'reject', 'defer' }, { prompt = 'Decision' }, function(decision)
        if not decision then
          return
        end
        vim.ui.input({ prompt = 'Rationale (optional): ' }, function(rationale)
          if rationale == nil then
            return
          end
          local command = { kind = 'goals.resolve', goal_id = choice.goal_id, gate_id = choice.gate.gate_id,
            decision = decision, resolved_by = config.actor() }
          if vim.trim(rationale) ~= '' then
            command.rationale = vim.trim(rationale)
          end
          client.execute(project, command, done_or_error(('gate %s: %s'):format(choice.gate.gate_id, decision)))
        end)
      end)
    end)
  end)
end

--- :LoopStateVerify: `project.verify` (every stream's chain from its first byte), the report in
--- a scratch buffer.
function M.verify()
  with_project(function(project)
    say('loopstate: verifying ' .. project.root .. ' ...')
    client.query(project, { kind = 'project.verify' }, function(err, report)
      if err then
        return say('loopstate: verify failed: ' .. err, vim.log.levels.ERROR)
      end
      views.scratch('loopstate://verify', views.verify_lines(report))
      say('loopstate: verify ' .. (report.ok and 'passed' or 'found problems'), not report.ok and vim.log.levels.ERROR or nil)
    end)
  end)
end

--- Every page of one stream's log (`project.log`, paged with `after`); on_done(err, pages).
local function log_pages(project, stream, on_done)
  local pages = {}
  local function page(after)
    client.query(project, { kind = 'project.log', stream = stream, after = after, limit = 1000 }, function(err, result)
      if err then
        return on_done(err)
      end
      table.insert(pages, result)
      if result.next_after ~= nil and result.next_after ~= vim.NIL then
        return page(result.next_after)
      end
      on_done(nil, pages)
    end)
  end
  page(0)
end

--- The project's stream names (the protocol lists them in a verification, which reads each
--- stream as a full log would anyway); on_done(err, names). Kept for completion.
local function all_streams(project, on_done)
  client.query(project, { kind = 'project.verify' }, function(err, report)
    if err then
      return on_done(err)
    end
    project.stream_names = vim.tbl_map(function(r) return r.stream end, report.streams or {})
    on_done(nil, project.stream_names)
  end)
end

--- :LoopStateLog [STREAM]: the audit log of one stream, or of every stream, in a scratch buffer.
function M.log(stream)
  with_project(function(project)
    local one = stream and stream ~= ''
    local function show(streams)
      local left, by_stream = #streams, {}
      if left == 0 then
        return views.scratch('loopstate://log/all', { 'no streams yet for ' .. project.root })
      end
      for _, name in ipairs(streams) do
        log_pages(project, name, function(err, pages)
          by_stream[name] = pages or err
          left = left - 1
          if left > 0 then
            return
          end
          if one and err then
            return say('loopstate: log failed: ' .. err, vim.log.levels.ERROR)
          end
          local lines = {}
          for _, n in ipairs(streams) do
            local got = by_stream[n]
            vim.list_extend(lines, type(got) == 'table' and views.log_lines(got) or { ('== %s: %s'):format(n, got) })
          end
          views.scratch('loopstate://log/' .. (one and stream or 'all'), lines)
        end)
      end
    end
    if one then
      return show({ stream })
    end
    all_streams(project, function(err, names)
      if err then
        return say('loopstate: log failed: ' .. err, vim.log.levels.ERROR)
      end
      show(names)
    end)
  end)
end

--- Stream names for :LoopStateLog completion.
function M.stream_names(lead, project)
  project = project or client.lookup(0)
  if not project then
    return {}
  end
  -- The streams that exist: intent once it has an event, each run the server lists, each goal.
  local names = {}
  local intent = project.topics['intent/snapshot']
  if intent and type(intent.head) == 'table' and (intent.head.sequence or 0) > 0 then
    table.insert(names, 'intent')
  end
  local listing = project.topics['project/runs']
  for _, row in ipairs(listing and type(listing.snapshot) == 'table' and listing.snapshot.runs or {}) do
    table.insert(names, 'runs.' .. row.run_id)
  end
  for goal_id in pairs(project.goals) do
    table.insert(names, 'goals.' .. goal_id)
  end
  for _, name in ipairs(project.stream_names or {}) do -- every stream, once a full log listed them
    if not vim.tbl_contains(names, name) then
      table.insert(names, name)
    end
  end
  table.sort(names)
  return matching(names, lead)
end

--- :LoopStateAckHistory [STREAM]: the user has checked the stream; its history alarm (or every
--- alarm of the project) goes from the statusline. Needs no server: an alarm kept from an earlier
--- Neovim can be acknowledged while the server is down.
function M.ack_history(stream)
  local project = client.lookup(0)
  if not project then
    return say('loopstate: this buffer is in no loopstate project that is open here: no history alarm to acknowledge',
      vim.log.levels.ERROR)
  end
  require('loopstate.history').ack(project, stream)
end

--- Streams with a standing history alarm, for :LoopStateAckHistory completion.
function M.alarm_streams(lead)
  return matching(require('loopstate.history').streams(client.lookup(0)), lead)
end

--- :LoopStateRestart: the project's server stopped and started afresh (also after giving up).
function M.restart()
  local project, why = client.for_command(vim.api.nvim_get_current_buf())
  if not project then
    return say(why, vim.log.levels.ERROR)
  end
  client.restart(project)
end

return M
