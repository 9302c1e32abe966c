--- `:checkhealth loopstate`: the configured server command itself (started, asked `initialize`,
--- its answer checked, then shut down), the project of the current folder and the data dir
--- (from the file system, as the plugin decides them), and each project's server. No CLI is
--- run and nothing is watched; a running server of the same command answers for it at no cost.
local M = {}

-- How long the probe waits for `initialize` (a healthy server answers in about half a second).
M.PROBE_TIMEOUT_MS = 3000

local function frame(message)
  local body = vim.json.encode(message)
  return ('Content-Length: %d\r\n\r\n%s'):format(#body, body)
end

--- Start `cmd`, send `initialize`, and return its result (or nil and why) within timeout_ms;
--- the process is then asked to shut down and exit (and killed two seconds later if it has not).
function M.probe(cmd, env, timeout_ms)
  local buffer, answer = '', nil
  local ok, proc = pcall(vim.system, cmd, {
    stdin = true, env = env,
    stdout = function(_, data)
      buffer = buffer .. (data or '')
      while not answer do
        local header_end = buffer:find('\r\n\r\n', 1, true)
        local length = header_end and tonumber(buffer:sub(1, header_end):match('Content%-Length: *(%d+)'))
        if not (length and #buffer >= header_end + 3 + length) then
          return
        end
        local body = buffer:sub(header_end + 4, header_end + 3 + length)
        buffer = buffer:sub(header_end + 4 + length)
        local decoded_ok, message = pcall(vim.json.decode, body, { luanil = { object = true, array = true } })
        if decoded_ok and type(message) == 'table' and message.id == 1 then
          answer = message
        end
      end
    end,
  })
  if not ok then
    return nil, ('cannot start it: %s'):format(proc)
  end
  proc:write(frame({ jsonrpc = '2.0', id = 1, method = 'initialize',
    params = { processId = vim.fn.getpid(), capabilities = vim.empty_dict(), clientInfo = { name = 'loopstate-checkhealth' } } }))
  local exited
  vim.wait(timeout_ms, function()
    exited = proc:is_closing()
    return answer ~= nil or exited
  end, 10)
  if answer then
    proc:write(frame({ jsonrpc = '2.0', id = 2, method = 'shutdown' }))
    proc:write(frame({ jsonrpc = '2.0', method = 'exit' }))
    proc:write(nil)
  end
  if answer then
    -- It exits by itself after `exit`; one that does not is killed soon after, without waiting here.
    vim.defer_fn(function()
      if not proc:is_closing() then
        proc:kill('sigkill')
      end
    end, 2000)
  elseif not exited then
    proc:kill('sigkill')
  end
  if answer and answer.result then
    return answer.result
  end
  if answer then
    return nil, ('it refused `initialize`: %s'):format(vim.inspect(answer.error))
  end
  if exited then
    return nil, ('it exited (status %s) before answering `initialize`'):format(proc:wait(1000).code)
  end
  return nil, ('it did not answer `initialize` within %.1f s'):format(timeout_ms / 1000)
end

function M.check()
  local h = vim.health
  local loopstate = require('loopstate')
  h.start('loopstate: Neovim')
  local wrong = loopstate.unsupported()
  if wrong then
    return h.error(wrong)
  end
  h.ok(('Neovim %s'):format(tostring(vim.version())))
  if not loopstate.did_setup then
    h.warn('require("loopstate").setup() has not been called: nothing starts', { 'Call setup() from your config' })
  end

  local config = require('loopstate.config')
  local client = require('loopstate.client')
  local roots = require('loopstate.root')
  h.start('loopstate: server')
  local cmd = config.options.cmd
  local shown = '`' .. table.concat(cmd, ' ') .. '`'
  local advice = { 'pip install loopstate (or pipx install loopstate)', 'or set setup{cmd = {"/path/to/loopstate", "serve"}}' }
  local missing = client.missing(cmd)
  if missing then
    h.error(missing, advice)
  else
    h.ok(('%s found: %s'):format(shown, vim.fn.exepath(cmd[1])))
    local result, why
    for _, project in pairs(client.projects) do
      if project.init_result then
        result = project.init_result -- started from the same options: its answer is the command's
        break
      end
    end
    local how = 'its running server'
    if not result then
      how = 'a probe'
      result, why = M.probe(cmd, config.options.cmd_env, M.PROBE_TIMEOUT_MS)
    end
    if not result then
      h.error(('%s does not work as a loopstate server: %s'):format(shown, why),
        { 'check that it is `loopstate serve` (Neovim\'s LSP log has what it printed)', advice[2] })
    else
      local refused = client.check_version(result)
      local info = result.serverInfo or {}
      if refused then
        h.error(('%s answered `initialize` (%s), but %s'):format(shown, how, refused))
      else
        h.ok(('%s answered `initialize` (%s): %s %s, protocol %s (this plugin speaks %s)'):format(shown, how,
          info.name or '?', info.version or '?', result.capabilities.experimental.loopstate.protocolVersion,
          client.PROTOCOL))
      end
    end
  end

  h.start('loopstate: project and data dir')
  local info, why = roots.find(vim.fn.getcwd())
  if not info then
    h.error('cannot resolve the project of ' .. vim.fn.getcwd() .. ': ' .. tostring(why))
  else
    local reasons = {
      project = 'a loopstate project: files here start its server',
      git = 'the top of a git work tree with no store yet: a loopstate command starts its server',
      cwd = 'in no project and no git work tree: nothing starts here',
    }
    if info.refused then
      h.warn(('%s: %s'):format(info.root, info.refused))
    else
      h.ok(('project root %s (%s)'):format(info.root, reasons[info.how]))
    end
    h.ok(('data dir %s'):format(info.data_dir))
  end
  for root, project in pairs(client.projects) do
    if project.status == 'running' then
      h.ok(('%s: server %s running (protocol %s)'):format(root, project.server_version or '?', project.protocol or '?'))
    elseif project.status == 'missing' or project.status == 'failed' then
      h.error(('%s: %s'):format(root, project.error or project.status))
    else
      h.warn(('%s: %s%s'):format(root, project.status, project.error and (': ' .. project.error) or ''))
    end
    for stream, alarm in pairs(project.history or {}) do
      h.error(('%s: HISTORY REWRITTEN in %s: %s'):format(root, stream, alarm.message), {
        ('check it: `loopstate verify --against <kept checkpoint of %s>` (docs/verifying.md)'):format(stream),
        'then :LoopStateAckHistory',
      })
    end
  end
end

return M
