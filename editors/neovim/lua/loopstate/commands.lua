--- The user commands: each finds the current buffer's project, asks what it needs through
--- vim.ui, and sends one command to the sidecar (or runs the CLI for verify and log).
local client = require('loopstate.client')
local config = require('loopstate.config')
local cli = require('loopstate.cli')
local views = require('loopstate.views')

local M = {}

local FACETS = {
  'outcome', 'success_signal', 'failure_signal', 'hard_constraint', 'soft_constraint', 'tradeoff', 'unknown',
  'result_feedback', 'disagreement',
}
-- What a user's own claim may be (seed 000: a user states, leaves open, or disputes).
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

local function live_runs(project)
  local runs = {}
  for run_id in pairs(project.runs) do
    local entry = project.topics['runs/status/' .. run_id]
    local run = entry and type(entry.snapshot) == 'table' and entry.snapshot.run
    if type(run) == 'table' and not client.TERMINAL[run.status] and run.status ~= 'halted_kill_switch' then
      table.insert(runs, run_id)
    end
  end
  table.sort(runs)
  return runs
end

--- :LoopStateStop: the kill switch, after a confirmation. `runs.stop` on a live run creates the
--- project's STOP file and halts that run; the server, which follows every run this editor
--- shows, then halts the others at once. With no live run the CLI's `run stop` sets the switch.
function M.stop()
  with_project(function(project)
    local runs = live_runs(project)
    local prompt = ('Set the kill switch of %s? Every run of the project halts (%d live now).'):format(project.root, #runs)
    vim.ui.select({ 'Stop all runs', 'Cancel' }, { prompt = prompt }, function(choice)
      if choice ~= 'Stop all runs' then
        return say('loopstate: kill switch not set')
      end
      if #runs == 0 then
        return cli.run({ 'run', 'stop', '--json', '--root', project.root }, { json = true }, function(err, result)
          if err then
            return say('loopstate: the kill switch was not set: ' .. err, vim.log.levels.ERROR)
          end
          project.kill_switch = { set = true, paths = { result.kill_switch } }
          client.notify_changed(project)
          say('loopstate: kill switch set: ' .. result.kill_switch, vim.log.levels.WARN)
        end)
      end
      local actor = { harness = 'manual', actor = config.actor(), session_id = 'nvim-' .. vim.fn.getpid() }
      local pending, failures = #runs, {}
      for _, run_id in ipairs(runs) do
        client.execute(project, { kind = 'runs.stop', run_id = run_id, actor = actor, reason = 'stopped from Neovim' },
          function(err)
            if err then
              table.insert(failures, run_id:sub(1, 8) .. ': ' .. err)
            end
            pending = pending - 1
            if pending == 0 then
              if #failures == #runs then
                return say('loopstate: the kill switch was not set: ' .. table.concat(failures, '; '), vim.log.levels.ERROR)
              end
              say(('loopstate: kill switch set; halted %d run(s)%s'):format(#runs - #failures,
                #failures > 0 and (' (not recorded: ' .. table.concat(failures, '; ') .. ')') or ''), vim.log.levels.WARN)
            end
          end)
      end
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

--- :LoopStateVerify: `loopstate verify` of the project, its report in a scratch buffer.
function M.verify()
  with_project(function(project)
    say('loopstate: verifying ' .. project.root .. ' ...')
    cli.run({ 'verify', '--root', project.root }, {}, function(err, out)
      local lines = vim.split(vim.trim((out or '') .. (err and ('\n' .. err) or '')), '\n')
      views.scratch('loopstate://verify', lines)
      say('loopstate: verify ' .. (err and 'found problems' or 'passed'), err and vim.log.levels.ERROR or nil)
    end)
  end)
end

--- :LoopStateLog [STREAM]: `loopstate log` (one stream, or every stream) in a scratch buffer.
function M.log(stream)
  with_project(function(project)
    local args = { 'log', '--root', project.root }
    if stream and stream ~= '' then
      vim.list_extend(args, { '--stream', stream })
    end
    cli.run(args, {}, function(err, out)
      if err then
        return say('loopstate: log failed: ' .. err, vim.log.levels.ERROR)
      end
      views.scratch('loopstate://log/' .. (stream ~= '' and stream or 'all'), vim.split(vim.trim(out), '\n'))
    end)
  end)
end

--- Stream names for :LoopStateLog completion.
function M.stream_names(lead)
  local project = client.lookup(0)
  if not project then
    return {}
  end
  local names = { 'intent' }
  for run_id in pairs(project.runs) do
    table.insert(names, 'runs.' .. run_id)
  end
  for goal_id in pairs(project.goals) do
    table.insert(names, 'goals.' .. goal_id)
  end
  table.sort(names)
  return matching(names, lead)
end

function M.restart()
  with_project(client.restart)
end

return M
