--- One `loopstate serve` per project root, started with vim.lsp.start and shared by every
--- buffer of that project; the subscriptions it keeps (the intent snapshot, the runs, the goal
--- boards) and their latest projections; restart with backoff after a crash, resubscribing
--- with `since` from the last head seen so nothing is missed.
local config = require('loopstate.config')
local cli = require('loopstate.cli')
local discovery = require('loopstate.discovery')

local M = {}

M.PROTOCOL = '0.1.0'
--- Run statuses that never change again (seed 002); such runs are followed only when they are
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

local function client_stop(lsp)
  if METHODS then
    return lsp:stop()
  end
  return lsp.stop()
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
  local since = entry.head and entry.head.sequence or vim.NIL
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
-- notifications) or a re-chained stream costs nothing but the newer projection.
local on_changed = for_subscription(function(_, entry, params)
  entry.head, entry.snapshot, entry.error = params.head, params.snapshot, nil
end)

-- The server no longer answers from that stream; neither does the plugin show what it knew.
local on_stream_error = for_subscription(function(_, entry, params)
  entry.snapshot = nil
  entry.error = ('%s: %s'):format(params.error and params.error.code or 'ERROR', params.message)
  notify(('loopstate: %s can no longer be read: %s'):format(params.topic, params.message), vim.log.levels.ERROR)
end)

-- lifecycle -------------------------------------------------------------------------------

local start

local function schedule_restart(project, why)
  local limits = config.options.restart
  project.attempts = project.attempts + 1
  if project.attempts > limits.max_attempts then
    project.status, project.error = 'failed', ('%s; gave up after %d restarts (:LoopStateRestart tries again)'):format(
      why, limits.max_attempts)
    notify('loopstate: ' .. project.error, vim.log.levels.ERROR)
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

local function on_exit(project, code, signal)
  by_client[project.client_id or -1] = nil
  project.client_id = nil
  project.by_sub = {}
  for _, entry in pairs(project.topics) do
    entry.sub_id, entry.pending = nil, false
  end
  if project.closed or project.stopping then
    if project.status ~= 'failed' then -- a refused server (wrong protocol) keeps saying why
      project.status = 'stopped'
    end
    return changed(project)
  end
  local why = ('the server exited (status %s%s; its stderr is in %s)'):format(code,
    signal ~= 0 and (', signal ' .. signal) or '', vim.lsp.log.get_filename())
  notify(('loopstate: %s for %s; restarting'):format(why, project.root), vim.log.levels.WARN)
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

start = function(project)
  local missing = cli.missing(config.options.cmd)
  if missing then
    project.status, project.error = 'missing', missing
    notify(missing, vim.log.levels.ERROR)
    return changed(project)
  end
  project.status = 'starting'
  local id = vim.lsp.start({
    name = 'loopstate',
    cmd = config.options.cmd,
    cmd_env = config.options.cmd_env,
    root_dir = project.root,
    handlers = { ['loopstate/changed'] = on_changed, ['loopstate/streamError'] = on_stream_error },
    on_init = function(client, result)
      local wrong = check_version(result)
      if wrong then
        project.status, project.error = 'failed', wrong
        project.stopping = true
        notify('loopstate: ' .. wrong, vim.log.levels.ERROR)
        client_stop(client)
        return changed(project)
      end
      project.server_version = result.serverInfo and result.serverInfo.version
      project.protocol = result.capabilities.experimental.loopstate.protocolVersion
      project.status, project.error, project.attempts = 'running', nil, 0
      for topic in pairs(project.topics) do
        M.follow(project, topic)
      end
      discovery.discover(project)
      discovery.watch(project)
      for buf in pairs(project.buffers) do
        if vim.api.nvim_buf_is_loaded(buf) then
          vim.lsp.buf_attach_client(buf, client.id)
        end
      end
      changed(project)
    end,
    on_exit = function(code, signal)
      vim.schedule(function() on_exit(project, code, signal) end)
    end,
  }, { attach = false, silent = true, reuse_client = function() return false end })
  if not id then
    return schedule_restart(project, ('`%s` could not be started'):format(table.concat(config.options.cmd, ' ')))
  end
  project.client_id = id
  by_client[id] = project
  changed(project)
end

--- The project of `root` (resolved), started on first use.
function M.project(info)
  local project = M.projects[info.root]
  if project then
    return project
  end
  project = {
    root = info.root, store = info.store, status = 'new', version = 0, attempts = 0,
    topics = {}, by_sub = {}, runs = {}, goals = {}, buffers = {},
  }
  M.projects[info.root] = project
  M.follow(project, 'intent/snapshot')
  start(project)
  return project
end

--- Resolve the project of `buf` and start or reuse its server; on_done(err, project).
function M.attach(buf, on_done)
  on_done = on_done or function() end
  local name = vim.api.nvim_buf_get_name(buf)
  local dir = (vim.bo[buf].buftype == '' and name ~= '') and vim.fn.fnamemodify(name, ':p:h') or vim.fn.getcwd()
  if not vim.uv.fs_stat(dir) then
    dir = vim.fn.getcwd()
  end
  cli.resolve_root(dir, function(err, info)
    if err then
      -- Said once per distinct failure, and this buffer is not tried again at every BufEnter.
      if vim.api.nvim_buf_is_valid(buf) then
        vim.b[buf].loopstate_error = err
      end
      if M.last_error ~= err then
        M.last_error = err
        notify(err, vim.log.levels.ERROR)
      end
      return on_done(err)
    end
    if not vim.api.nvim_buf_is_valid(buf) then
      return on_done('the buffer is gone')
    end
    local project = M.project(info)
    vim.b[buf].loopstate_root = project.root
    if vim.bo[buf].buftype == '' then
      project.buffers[buf] = true
      local client = M.lsp(project)
      if client and project.status == 'running' then
        vim.lsp.buf_attach_client(buf, client.id)
      end
    end
    on_done(nil, project)
  end)
end

--- The project the current buffer belongs to, if it has been resolved.
function M.current(buf)
  local root = vim.b[buf or 0].loopstate_root
  return root and M.projects[root] or nil
end

--- Stop a project's server (no restart) and start it afresh.
function M.restart(project)
  project.attempts = 0
  local client = M.lsp(project)
  if client then
    project.stopping = true
    client_stop(client)
    vim.wait(2000, function() return project.client_id == nil end)
  end
  project.stopping = false
  start(project)
end

--- Stop every server (at exit).
function M.close_all()
  for _, project in pairs(M.projects) do
    project.closed = true
    discovery.unwatch(project)
    local client = M.lsp(project)
    if client then
      client_stop(client)
    end
  end
end

return M
