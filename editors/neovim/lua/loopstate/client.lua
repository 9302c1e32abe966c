--- One `loopstate serve` per project root, started with vim.lsp.start and shared by every
--- buffer of that project; which buffer belongs to which project (each to one at most, whatever
--- the order of events); the subscriptions it keeps (the intent snapshot, the runs, the goal
--- boards) and their latest projections; an initialize timeout; restart with backoff after a
--- crash, resubscribing with `since` from the last head seen so nothing is missed; one message
--- per fault; the server's history alarms (handed to history.lua). Loading this module loads no
--- part of vim.lsp: that happens at the first start.
local config = require('loopstate.config')
local roots = require('loopstate.root')

local M = {}

M.PROTOCOL = '0.1.0'
--- Run statuses that never change again (terminal); such runs are followed only when they are
--- the project's latest.
M.TERMINAL = { complete = true, cancelled = true }

---@type table<string, table> root -> project
M.projects = {}
local by_client = {} -- LSP client id -> project
local listeners = {}

--- Call fn(project) after every change of any project's state (the statusline, open floats).
function M.on_change(fn)
  table.insert(listeners, fn)
end

--- Count a change of `project`'s state and tell every listener (and `User LoopStateChanged`).
function M.notify_changed(project)
  project.version = project.version + 1
  for _, fn in ipairs(listeners) do
    fn(project)
  end
  vim.api.nvim_exec_autocmds('User', { pattern = 'LoopStateChanged', modeline = false, data = { root = project.root } })
end

local changed = M.notify_changed

local function notify(msg, level)
  vim.notify(msg, level or vim.log.levels.INFO, { title = 'loopstate' })
end

function M.uuid()
  local b = { string.byte(vim.uv.random(16), 1, 16) }
  b[7] = bit.bor(bit.band(b[7], 0x0f), 0x40)
  b[9] = bit.bor(bit.band(b[9], 0x3f), 0x80)
  local hex = ('%02x'):rep(16):format(unpack(b))
  return ('%s-%s-%s-%s-%s'):format(hex:sub(1, 8), hex:sub(9, 12), hex:sub(13, 16), hex:sub(17, 20), hex:sub(21))
end

-- Neovim 0.11 made the client's functions methods (the dot form is deprecated there); 0.10
-- has only the dot form. These two calls are the only ones the plugin makes on a client.
local METHODS = vim.fn.has('nvim-0.11') == 1

local function client_request(lsp, method, params, handler)
  if METHODS then
    return lsp:request(method, params, handler)
  end
  return lsp.request(method, params, handler)
end

local function client_stop(lsp, force)
  if METHODS then
    return lsp:stop(force)
  end
  return lsp.stop(force)
end

--- The live LSP client of a project, or nil while it is down.
function M.lsp(project)
  return project.client_id and vim.lsp.get_client_by_id(project.client_id) or nil
end

--- A loopstate request; on_done(err_message, result, err) on the main loop. A project whose
--- server is down answers at once with why.
function M.request(project, method, params, on_done)
  local client = M.lsp(project)
  if not client or project.status ~= 'running' then
    return on_done(('loopstate: the server of %s is %s'):format(project.root, project.error or project.status))
  end
  params.root = project.root
  client_request(client, method, params, function(err, result)
    if err then
      local code = err.data and err.data.code or tostring(err.code)
      return on_done(('%s: %s'):format(code, err.message), nil, err)
    end
    on_done(nil, result)
  end)
end

function M.execute(project, command, on_done)
  M.request(project, 'loopstate/execute', { request_id = 'nvim-' .. M.uuid(), command = command }, on_done)
end

function M.query(project, query, on_done)
  M.request(project, 'loopstate/query', { query = query }, on_done)
end

-- subscriptions ----------------------------------------------------------------------------

-- A `project/...` topic has a head of its own (a count of snapshots), not a stream's: it is
-- never resubscribed `since` one.
local function is_project_topic(topic)
  return vim.startswith(topic, 'project/')
end

local on_snapshot -- set below: what a project topic's snapshot makes the plugin follow

--- Follow `topic`; the entry keeps its head across restarts, so a resubscription asks `since` it.
function M.follow(project, topic)
  local entry = project.topics[topic]
  if not entry then
    entry = { topic = topic }
    project.topics[topic] = entry
  end
  if entry.sub_id or entry.pending or project.status ~= 'running' then
    return entry
  end
  entry.pending = true
  local since = (entry.head and not is_project_topic(topic)) and entry.head.sequence or vim.NIL
  M.request(project, 'loopstate/subscribe', { topic = topic, since = since, deliver = 'snapshot' }, function(err, result)
    entry.pending = false
    if err and since ~= vim.NIL and project.status == 'running' then
      -- The stream may have been re-chained shorter meanwhile (`loopstate recover`): what we knew
      -- is void, so take the current projection instead.
      entry.head = nil
      return M.follow(project, topic)
    end
    if err then
      entry.error = err
      changed(project)
      return
    end
    entry.error = nil
    entry.sub_id = result.subscription_id
    project.by_sub[result.subscription_id] = entry
    -- What happened while we were away (a restart): the events after the last head we saw.
    entry.missed = since ~= vim.NIL and #(result.events or {}) or 0
    project.caught_up = (project.caught_up or 0) + entry.missed
    entry.head, entry.snapshot = result.head, result.snapshot
    on_snapshot(project, entry)
    changed(project)
  end)
  return entry
end

function M.follow_run(project, run_id)
  project.runs[run_id] = true
  return M.follow(project, 'runs/status/' .. run_id)
end

function M.follow_goal(project, goal_id)
  project.goals[goal_id] = true
  return M.follow(project, 'goals/board/' .. goal_id)
end

--- The three project topics the server pushes: every run (with the kill switch), every goal,
--- the kill switch alone. Which runs and goals to follow comes from them, so a run or goal
--- that another process creates is followed as soon as the server says it exists.
M.PROJECT_TOPICS = { 'project/runs', 'project/goals', 'project/kill_switch' }

on_snapshot = function(project, entry)
  local snapshot = type(entry.snapshot) == 'table' and entry.snapshot or nil
  if not snapshot then
    return
  end
  if entry.topic == 'project/runs' then
    local runs = snapshot.runs or {}
    for i, row in ipairs(runs) do
      -- Runs that can still change are followed, and the latest whatever its status.
      if not M.TERMINAL[row.status] or i == #runs then
        M.follow_run(project, row.run_id)
      end
    end
    project.listed_runs = true
  elseif entry.topic == 'project/goals' then
    for _, goal in ipairs(snapshot.goals or {}) do
      M.follow_goal(project, goal.goal_id)
    end
    project.listed_goals = true
  elseif entry.topic == 'project/kill_switch' then
    project.kill_switch = snapshot
  end
  project.discovered = project.listed_runs and project.listed_goals or false
end

--- A notification handler for `fn(project, entry, params)`, called for the subscriptions this
--- plugin holds (one dropped at a restart is ignored), then the change is announced.
local function for_subscription(fn)
  return function(_, params, ctx)
    local project = by_client[ctx.client_id]
    local entry = project and project.by_sub[params.subscription_id]
    if entry then
      fn(project, entry, params)
      changed(project)
    end
  end
end

-- A snapshot subscription's notification carries the whole projection: a gap (coalesced
-- notifications) or a re-chained stream costs nothing but the newer projection. After a
-- stream error, the stream readable again (`loopstate recover`) comes as `rewritten: true`:
-- the error is cleared and the fresh projection shown, with no restart.
local on_changed = for_subscription(function(project, entry, params)
  if entry.error then
    project.unreadable[entry.error] = nil
  end
  entry.head, entry.snapshot, entry.error = params.head, params.snapshot, nil
  on_snapshot(project, entry)
end)

-- The server no longer answers from that stream; neither does the plugin show what it knew.
-- One broken stream is reported by each topic that reads it: the user is told once.
local on_stream_error = for_subscription(function(project, entry, params)
  entry.snapshot = nil
  entry.error = ('%s: %s'):format(params.error and params.error.code or 'ERROR', params.message)
  if not project.unreadable[entry.error] then
    project.unreadable[entry.error] = true
    notify(('loopstate: %s can no longer be read: %s'):format(params.topic, params.message), vim.log.levels.ERROR)
  end
end)

-- The server's witness found a followed stream's history rewritten, or purged (history.lua).
local function on_history_alarm(_, params, ctx)
  local project = by_client[ctx.client_id]
  if project then
    require('loopstate.history').on_alarm(project, params)
  end
end

-- lifecycle -------------------------------------------------------------------------------

local start

local function say(msg, level)
  notify('loopstate: ' .. msg, level)
end

local function log_path()
  return vim.lsp.get_log_path()
end

--- Why `cmd` cannot start, or nil when its program is executable.
function M.missing(cmd)
  if vim.fn.executable(cmd[1]) == 1 then
    return nil
  end
  return ('loopstate: the server command `%s` is not executable (not found, or not on PATH). '
    .. 'Install loopstate (`pip install loopstate`) or point setup{cmd = {...}} at it.'):format(cmd[1])
end

-- A fault is said once: the first exit of a server that was running warns and restarts it;
-- the attempts after it are silent (the statusline shows them) and giving up is one error. A
-- server that ran for STABLE_MS before it exited starts a new count (and a new warning); one
-- that keeps exiting soon after it started is the same fault.
M.STABLE_MS = 60000
local function schedule_restart(project, why)
  local limits = config.options.restart
  project.attempts = project.attempts + 1
  if project.attempts > limits.max_attempts then
    project.status, project.error = 'failed', ('%s; gave up after %d restarts (:LoopStateRestart tries again)'):format(
      why, limits.max_attempts)
    say(project.error, vim.log.levels.ERROR)
    return changed(project)
  end
  local delay = math.min(limits.initial_ms * 2 ^ (project.attempts - 1), limits.max_ms)
  project.status, project.error = 'restarting', why
  changed(project)
  project.timer = vim.defer_fn(function()
    project.timer = nil
    if not project.closed and project.status == 'restarting' then
      start(project)
    end
  end, delay)
end

local function stop_init_timer(project)
  if project.init_timer then
    project.init_timer:stop()
    project.init_timer:close()
    project.init_timer = nil
  end
end

local function forget_client(project)
  by_client[project.client_id or -1] = nil
  project.client_id = nil
  project.by_sub = {}
  for _, entry in pairs(project.topics) do
    entry.sub_id, entry.pending = nil, false
  end
end

--- The server of `project` (started as generation `gen`) exited with `code` and `signal`.
local function on_exit(project, gen, code, signal)
  if gen ~= project.generation then
    return -- a server this project no longer uses (stopped for a restart)
  end
  stop_init_timer(project)
  local was = project.status
  forget_client(project)
  if project.closed or project.stopping or was == 'failed' then
    if was ~= 'failed' then -- a refused or timed-out server keeps saying why
      project.status = 'stopped'
    end
    return changed(project)
  end
  local why = ('the server exited (status %s%s; its stderr is in %s)'):format(code,
    signal ~= 0 and (', signal ' .. signal) or '', log_path())
  if was == 'running' and (vim.uv.now() - (project.running_since or 0)) >= M.STABLE_MS then
    project.attempts, project.warned = 0, false
  end
  if was == 'running' and not project.warned then
    project.warned = true
    say(('%s for %s; restarting'):format(why, project.root), vim.log.levels.WARN)
  end
  schedule_restart(project, why)
end

local function check_version(result)
  local caps = result and result.capabilities and result.capabilities.experimental
  local advertised = caps and caps.loopstate and caps.loopstate.protocolVersion
  if not advertised then
    return 'the server does not advertise capabilities.experimental.loopstate: is `cmd` really `loopstate serve`?'
  end
  local want, have = M.PROTOCOL:match('^(%d+%.%d+)'), advertised:match('^(%d+%.%d+)')
  if want ~= have then
    return ('the server speaks loopstate protocol %s, this plugin %s: upgrade the one that is older'):format(
      advertised, M.PROTOCOL)
  end
end
M.check_version = check_version

--- A refusal that no restart would mend: said once, the server stopped, not restarted.
local function fail(project, client, why)
  project.status, project.error = 'failed', why
  say(why, vim.log.levels.ERROR)
  if client then
    client_stop(client, true)
  end
  changed(project)
end

--- The `cmd` of vim.lsp.start as a function: the same process through vim.lsp.rpc, except that
--- the exit is reported here, once, by the plugin (with the real status and where the server's
--- stderr is), and Neovim's client is told of a clean exit so it adds no second warning.
local function transport(project, gen)
  local cmd, env = config.options.cmd, config.options.cmd_env
  return function(dispatchers)
    return vim.lsp.rpc.start(cmd, {
      notification = dispatchers.notification,
      server_request = dispatchers.server_request,
      on_error = dispatchers.on_error,
      on_exit = function(code, signal)
        vim.schedule(function() on_exit(project, gen, code, signal) end)
        dispatchers.on_exit(0, 0)
      end,
    }, { cwd = project.root, env = env })
  end
end

local function on_init(project, gen, client, result)
  if gen ~= project.generation then
    return
  end
  stop_init_timer(project)
  if project.status ~= 'starting' then
    return -- timed out meanwhile; the server is being stopped
  end
  local wrong = check_version(result)
  if wrong then
    return fail(project, client, wrong)
  end
  project.init_result = result
  project.server_version = result.serverInfo and result.serverInfo.version
  project.protocol = result.capabilities.experimental.loopstate.protocolVersion
  project.status, project.error, project.running_since = 'running', nil, vim.uv.now()
  for _, topic in ipairs(M.PROJECT_TOPICS) do
    M.follow(project, topic)
  end
  for topic in pairs(project.topics) do
    M.follow(project, topic)
  end
  M.check_root(project)
  for buf in pairs(project.buffers) do
    M.attach_lsp(project, buf)
  end
  changed(project)
end

--- The server's own answer to which project the root is (`project.root`): the plugin decided it
--- from the file system, and a server that disagrees (another data dir in its environment, a
--- newer rule) is worth one warning rather than a silent split.
function M.check_root(project)
  M.query(project, { kind = 'project.root', path = project.root }, function(err, info)
    if err or type(info) ~= 'table' then
      return
    end
    project.server_root = info
    if info.root ~= project.root then
      say(('the server puts %s in the project %s (%s); this plugin found %s. Check LOOPSTATE_DATA_DIR and '
        .. 'setup{cmd_env}'):format(project.root, info.root, info.reason, project.root), vim.log.levels.WARN)
    elseif project.exists and not info.exists then
      say(('the server finds no store for %s (it looks in %s), though this plugin found one in %s. Check '
        .. 'LOOPSTATE_DATA_DIR and setup{cmd_env}'):format(project.root, info.store, project.store), vim.log.levels.WARN)
    end
  end)
end

start = function(project)
  local cmd = config.options.cmd
  local missing = M.missing(cmd)
  if missing then
    project.status, project.error = 'missing', missing
    notify(missing, vim.log.levels.ERROR)
    return changed(project)
  end
  project.generation = project.generation + 1
  local gen = project.generation
  project.status = 'starting'
  local id = vim.lsp.start({
    name = 'loopstate',
    cmd = transport(project, gen),
    root_dir = project.root,
    handlers = { ['loopstate/changed'] = on_changed, ['loopstate/streamError'] = on_stream_error,
      ['loopstate/historyAlarm'] = on_history_alarm },
    on_init = function(client, result) on_init(project, gen, client, result) end,
  }, { attach = false, silent = true, reuse_client = function() return false end })
  if not id then
    return schedule_restart(project, ('`%s` could not be started'):format(table.concat(cmd, ' ')))
  end
  project.client_id = id
  by_client[id] = project
  -- A command that never answers `initialize` (not loopstate, or hung) must not leave the
  -- project `starting` for ever: after start_timeout_ms it is stopped and the user told once.
  local timeout = config.options.start_timeout_ms
  stop_init_timer(project)
  project.init_timer = vim.uv.new_timer()
  project.init_timer:start(timeout, 0, vim.schedule_wrap(function()
    if gen ~= project.generation or project.status ~= 'starting' then
      return
    end
    fail(project, vim.lsp.get_client_by_id(id), ('`%s` did not answer `initialize` within %.1f s: is it really '
      .. '`loopstate serve`? Fix setup{cmd = ...} (its stderr is in %s), then :LoopStateRestart'):format(
      table.concat(cmd, ' '), timeout / 1000, log_path()))
  end))
  changed(project)
end

--- The project of a resolved root ({root, store}), started on first use.
function M.project(info)
  local project = M.projects[info.root]
  if project then
    return project
  end
  project = {
    root = info.root, store = info.store, how = info.how, exists = info.exists, status = 'new', version = 0, attempts = 0, generation = 0,
    topics = {}, by_sub = {}, runs = {}, goals = {}, buffers = {}, unreadable = {}, history = {},
  }
  M.projects[info.root] = project
  require('loopstate.history').restore(project)
  M.follow(project, 'intent/snapshot')
  start(project)
  return project
end

-- buffers ---------------------------------------------------------------------------------

-- buf -> {root, name}: the project a buffer belongs to, and the name it had when that was
-- decided. A buffer belongs to one project at most; a new name (`:file`, `:saveas`, an empty
-- buffer reused by `:edit`) is decided afresh, and the buffer leaves its old project first.
local membership = {}

--- Attach `buf` to the project's client when both are ready (vim.lsp ignores a repeat).
function M.attach_lsp(project, buf)
  local client = M.lsp(project)
  local member = membership[buf]
  if client and project.status == 'running' and member and member.root == project.root
    and vim.api.nvim_buf_is_loaded(buf) and vim.bo[buf].buftype == '' then
    vim.lsp.buf_attach_client(buf, client.id)
  end
end

local function leave(buf)
  local member = membership[buf]
  if not member then
    return
  end
  membership[buf] = nil
  local project = M.projects[member.root]
  if project then
    project.buffers[buf] = nil
    local client = M.lsp(project)
    if client and vim.api.nvim_buf_is_valid(buf) and vim.lsp.buf_is_attached(buf, client.id) then
      vim.lsp.buf_detach_client(buf, client.id)
    end
  end
end

local function join(buf, project)
  local name = vim.api.nvim_buf_get_name(buf)
  local member = membership[buf]
  if member and member.root == project.root then
    member.name = name
    return
  end
  leave(buf)
  membership[buf] = { root = project.root, name = name }
  project.buffers[buf] = true
  M.attach_lsp(project, buf)
end

--- Called as buffers are entered or renamed: a named file buffer whose project already has a
--- store (or whose project runs already, after a command there) joins that project's server;
--- anything else (no project, a plain git work tree, a special buffer, $HOME) starts nothing.
function M.auto(buf)
  if not vim.api.nvim_buf_is_valid(buf) then
    return
  end
  local member = membership[buf]
  local name = vim.api.nvim_buf_get_name(buf)
  if member and member.name == name then
    return
  end
  local dir = roots.folder_of(buf)
  local info = dir and roots.find(dir)
  if not info or info.refused then
    return leave(buf)
  end
  local running = M.projects[info.root]
  if info.how == 'project' or (running and not running.closed) then
    return join(buf, M.project(info))
  end
  leave(buf)
end

--- For a command: the project of `buf` (of the current directory for a buffer that is not a
--- file), started if need be. A plain git work tree is a project from the first command on;
--- a folder in neither is refused, as are $HOME and a folder holding the data dir.
--- Returns project, nil, and whether this call created it; or nil and why.
function M.for_command(buf)
  local current = M.lookup(buf)
  if current then
    return current
  end
  local dir = roots.folder_of(buf) or vim.fn.getcwd()
  local info, why = roots.find(dir)
  if not info then
    return nil, 'loopstate: ' .. why
  end
  if info.refused then
    return nil, 'loopstate: ' .. info.refused
  end
  if info.how == 'cwd' and not M.projects[info.root] then
    return nil, ('loopstate: %s is in no loopstate project and no git work tree; open a file of a project '
      .. '(or :cd into one), or create one there with the CLI (`loopstate intent start`)'):format(dir)
  end
  local fresh = M.projects[info.root] == nil
  local project = M.project(info)
  join(buf, project)
  return project, nil, fresh
end

--- The project the buffer belongs to (as its current name says), or nil.
function M.current(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  local member = membership[buf]
  if member and member.name == vim.api.nvim_buf_get_name(buf) then
    return M.projects[member.root]
  end
end

--- The project a command or a completion in `buf` means, if it runs already: the buffer's own,
--- or for a buffer that is not a file (a float, a scratch buffer) the current directory's.
function M.lookup(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  local own = M.current(buf)
  if own or roots.folder_of(buf) then
    return own
  end
  local info = roots.find(vim.fn.getcwd())
  return info and M.projects[info.root] or nil
end

--- Forget a wiped buffer.
function M.forget(buf)
  leave(buf)
end

--- Stop a project's server (no restart) and start it afresh.
function M.restart(project)
  project.attempts, project.warned = 0, false
  local client = M.lsp(project)
  if client then
    project.stopping = true
    client_stop(client)
    vim.wait(2000, function() return project.client_id == nil end)
    if project.client_id then
      client_stop(client, true)
      forget_client(project)
    end
  end
  project.stopping = false
  project.status = 'stopped'
  start(project)
end

--- Stop every server (at exit).
function M.close_all()
  for _, project in pairs(M.projects) do
    project.closed = true
    local client = M.lsp(project)
    if client then
      client_stop(client)
    end
  end
end

return M
