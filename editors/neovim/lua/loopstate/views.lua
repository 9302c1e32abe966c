--- What the commands show: the lines of the state float and the goal board (pure functions of
--- the projections), and the floats and scratch buffers that hold them.
local client = require('loopstate.client')

local M = {}

local FACET_ORDER = {
  'outcome', 'success_signal', 'failure_signal', 'hard_constraint', 'soft_constraint', 'tradeoff', 'unknown',
  'result_feedback', 'disagreement',
}

local function short(id)
  return type(id) == 'string' and id:sub(1, 8) or '?'
end

local function str(value, default)
  if value == nil or value == vim.NIL then
    return default or '-'
  end
  return tostring(value)
end

--- The intent snapshot (a CurrentView) as lines: each facet, then each status, then its claims.
function M.intent_lines(view)
  local lines = {}
  if type(view) ~= 'table' then
    return { 'Intent: not loaded yet' }
  end
  table.insert(lines, ('Intent: %d active claim%s, %d task%s (sequence %s)'):format(view.active_count or 0,
    view.active_count == 1 and '' or 's', #(view.tasks or {}), #(view.tasks or {}) == 1 and '' or 's',
    str(view.sequence)))
  local facets = {}
  for facet in pairs(view.by_facet or {}) do
    table.insert(facets, facet)
  end
  local rank = {}
  for i, facet in ipairs(FACET_ORDER) do
    rank[facet] = i
  end
  table.sort(facets, function(a, b) return (rank[a] or 99) < (rank[b] or 99) or ((rank[a] or 99) == (rank[b] or 99) and a < b) end)
  for _, facet in ipairs(facets) do
    table.insert(lines, '  ' .. facet)
    local statuses = vim.tbl_keys(view.by_facet[facet])
    table.sort(statuses)
    for _, status in ipairs(statuses) do
      for _, claim in ipairs(view.by_facet[facet][status]) do
        table.insert(lines, ('    [%s] %s  (%s%s)'):format(status, claim.statement, short(claim.claim_id),
          claim.stale and ', stale' or ''))
      end
    end
  end
  local remaining = type(view.remaining) == 'number' and view.remaining or 0
  if remaining > 0 then
    local task = type(view.task_id) == 'string' and (' --task ' .. view.task_id) or ''
    table.insert(lines, ('  %d more active claim%s not shown; the next page: loopstate intent show%s --cursor %s'):format(
      remaining, remaining == 1 and '' or 's', task, str(view.next_cursor, '')))
  end
  for _, d in ipairs(view.disagreements or {}) do
    table.insert(lines, ('  disputed: %s  (%s)'):format(d.statement, short(d.claim_id)))
  end
  for _, w in ipairs(view.stale or {}) do
    table.insert(lines, ('  stale: %s (unconfirmed %d days)'):format(w.statement, w.days_unconfirmed or 0))
  end
  return lines
end

--- One run's status (a RunStatus) as lines.
function M.run_lines(status)
  local run = type(status) == 'table' and status.run
  if type(run) ~= 'table' then
    return {}
  end
  local usage, budgets = run.usage or {}, run.budgets or {}
  local lines = {
    ('  %s %s%s  %s'):format(short(status.run_id), run.status, run.stage and run.stage ~= vim.NIL and ('/' .. run.stage) or '',
      str(run.objective, '')),
    ('    mutations %s/%s, external %s/%s, time %ss/%ss, blocking issues %s'):format(str(usage.mutations),
      str(budgets.max_mutations), str(usage.external_actions), str(budgets.max_external_actions),
      str(usage.duration_seconds), str(budgets.max_duration_seconds), str(run.open_blocking_issues, '0')),
  }
  if type(status.lease) == 'table' then
    table.insert(lines, ('    lease generation %s held by %s until %s%s'):format(str(status.lease.generation),
      str(status.lease.owner and status.lease.owner.actor), str(status.lease.expires_at),
      status.lease_expired and ' (expired)' or ''))
  end
  for _, issue in ipairs(status.issues or {}) do
    table.insert(lines, ('    issue %s: %s %s%s %s'):format(short(issue.issue_id), str(issue.status), str(issue.severity),
      issue.blocking and ' blocking' or '', str(issue.title, '')))
  end
  if type(status.kill_switch) == 'table' and status.kill_switch.set then
    table.insert(lines, '    kill switch SET: ' .. table.concat(status.kill_switch.paths or {}, ', '))
  end
  return lines
end

--- A goal's board as lines: active todos by role, the gate inboxes, runs.
function M.board_lines(goal_id, board)
  if type(board) ~= 'table' then
    return { ('  %s: not loaded yet'):format(goal_id) }
  end
  local lines = { ('  %s (%d runs)'):format(goal_id, board.run_count or 0) }
  for _, group in ipairs(board.active or {}) do
    table.insert(lines, '    ' .. group.role)
    for _, todo in ipairs(group.todos or {}) do
      table.insert(lines, ('      %s [%s/%s] %s%s'):format(todo.todo_id, todo.status, todo.priority, todo.title,
        todo.claimed_by and (' (' .. todo.claimed_by .. ')') or ''))
    end
  end
  for _, inbox in ipairs({ 'user_inbox', 'controller_inbox' }) do
    for _, gate in ipairs(board[inbox] or {}) do
      table.insert(lines, ('    gate %s [%s, %s] %s'):format(gate.gate_id, gate.status, inbox == 'user_inbox' and 'you' or 'controller', gate.title))
    end
  end
  local page = type(board.page) == 'table' and board.page or {}
  local completed = page.completed_total or #(board.completed or {})
  if completed > 0 then
    table.insert(lines, ('    %d completed'):format(completed))
  end
  -- The board arrives one page at a time: say what this page leaves out and where to see it.
  if (page.after or 0) > 0 then
    table.insert(lines, ('    %d more todos not shown (loopstate goals board %s --all)'):format(page.after, goal_id))
  end
  return lines
end

local function sorted_keys(set)
  local keys = vim.tbl_keys(set)
  table.sort(keys)
  return keys
end

--- Append a titled section: render(id, projection) for each followed id of a set.
local function section(lines, project, title, ids, topic_prefix, render)
  table.insert(lines, '')
  table.insert(lines, title)
  local sorted = sorted_keys(ids)
  if #sorted == 0 then
    table.insert(lines, '  none')
  end
  for _, id in ipairs(sorted) do
    local entry = project.topics[topic_prefix .. id]
    vim.list_extend(lines, render(id, entry and entry.snapshot))
  end
end

--- The whole state float of a project.
function M.state_lines(project)
  local lines = { 'loopstate  ' .. project.root, '' }
  if (project.caught_up or 0) > 0 then
    lines[2] = ('(%d event%s caught up after a server restart)'):format(project.caught_up, project.caught_up == 1 and '' or 's')
    table.insert(lines, '')
  end
  for _, stream in ipairs(require('loopstate.history').streams(project)) do
    vim.list_extend(lines, { ('HISTORY REWRITTEN: %s'):format(project.history[stream].message),
      ('  check: loopstate verify --against <kept checkpoint of %s>; then :LoopStateAckHistory'):format(stream), '' })
  end
  local intent = project.topics['intent/snapshot']
  if intent and intent.error then
    vim.list_extend(lines, { 'Intent: unreadable', '  ' .. intent.error })
  else
    vim.list_extend(lines, M.intent_lines(intent and intent.snapshot))
  end
  section(lines, project, 'Runs', project.runs, 'runs/status/', function(_, view) return M.run_lines(view) end)
  section(lines, project, 'Goals', project.goals, 'goals/board/', M.board_lines)
  if project.kill_switch and project.kill_switch.set then
    table.insert(lines, '')
    table.insert(lines, 'Kill switch SET: ' .. table.concat(project.kill_switch.paths or {}, ', '))
  end
  return lines
end

--- A `project.verify` report as lines, one per stream.
function M.verify_lines(report)
  local lines = {}
  for _, r in ipairs(report.streams or {}) do
    if r.ok then
      local line = ('ok      %s: %d events, head %s %s'):format(r.stream, r.events or 0, str(r.sequence),
        str(r.hash):sub(1, 12))
      if type(r.torn_tail) == 'table' then
        line = line .. (' (partial final line of %d bytes at byte %d: the next mutation quarantines it)'):format(
          r.torn_tail.length, r.torn_tail.offset)
      end
      table.insert(lines, line)
    else
      local e = type(r.error) == 'table' and r.error or {}
      table.insert(lines, ('CORRUPT %s: byte %s, sequence %s: %s (%d events verified before it; `loopstate recover` keeps them)'):format(
        r.stream, str(e.offset), str(e.sequence), str(e.reason), r.events or 0))
    end
  end
  if #lines == 0 then
    lines = { 'no streams yet for ' .. str(report.root) }
  end
  return lines
end

--- The pages of one stream's `project.log` as lines: a heading, then one line per event
--- (sequence, time, type, hash).
function M.log_lines(pages)
  local first = pages[1]
  local lines = { ('== %s (head %s %s, %d events)'):format(first.stream, str(first.head.sequence),
    str(first.head.hash):sub(1, 12), first.event_count or 0) }
  for _, page in ipairs(pages) do
    for _, event in ipairs(page.events or {}) do
      local kind = event.event_type or event.type or '?'
      if kind == 'current_task_set' and type(event.payload) == 'table' then
        kind = ('%s (%s)'):format(kind, str(event.payload.reason))
      end
      local at = event.occurred_at or event.at or event.recorded_at or ''
      local hash = event.event_hash or event.event_digest or ''
      table.insert(lines, ('%6s  %-27s  %-24s  %s'):format(str(event.sequence or event.append_sequence), at, kind,
        tostring(hash):sub(1, 12)))
    end
  end
  return lines
end

-- floats ------------------------------------------------------------------------------------

local open = {} -- buffer -> {project, lines_fn}

local function fill(buf, lines)
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
end

--- A float that shows lines_fn(project), redrawn on every change; `q` and `<Esc>` close it.
function M.float(project, title, lines_fn)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = 'wipe'
  vim.bo[buf].filetype = 'loopstate'
  local lines = lines_fn(project)
  fill(buf, lines)
  local width = math.min(math.max(60, unpack(vim.tbl_map(vim.fn.strdisplaywidth, lines))), vim.o.columns - 4)
  local height = math.min(#lines, math.max(vim.o.lines - 6, 3))
  local win = vim.api.nvim_open_win(buf, true, {
    relative = 'editor', style = 'minimal', border = 'rounded', title = ' ' .. title .. ' ', title_pos = 'center',
    width = width, height = height, row = math.floor((vim.o.lines - height) / 2) - 1,
    col = math.floor((vim.o.columns - width) / 2),
  })
  vim.wo[win].wrap = false
  local function close()
    if vim.api.nvim_win_is_valid(win) then
      vim.api.nvim_win_close(win, true)
    end
  end
  for _, key in ipairs({ 'q', '<Esc>' }) do
    vim.keymap.set('n', key, close, { buffer = buf, nowait = true, desc = 'loopstate: close' })
  end
  open[buf] = { project = project, lines_fn = lines_fn }
  vim.api.nvim_create_autocmd('BufWipeout', { buffer = buf, once = true, callback = function() open[buf] = nil end })
  return buf, win
end

client.on_change(function(project)
  for buf, view in pairs(open) do
    if view.project == project and vim.api.nvim_buf_is_valid(buf) then
      fill(buf, view.lines_fn(project))
    end
  end
end)

--- A read-only scratch buffer in a split (verify and log output).
function M.scratch(name, lines)
  vim.cmd('botright new')
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype, vim.bo[buf].bufhidden, vim.bo[buf].swapfile = 'nofile', 'wipe', false
  pcall(vim.api.nvim_buf_set_name, buf, name)
  fill(buf, lines)
  for _, key in ipairs({ 'q', '<Esc>' }) do
    vim.keymap.set('n', key, '<cmd>close<cr>', { buffer = buf, nowait = true, desc = 'loopstate: close' })
  end
  return buf
end

return M
