--- `:checkhealth loopstate`: the server and its version, the protocol version, the data dir,
--- and whether changes by other processes can be pushed (inotify).
local M = {}

local function run(cmd, timeout)
  local ok, proc = pcall(vim.system, cmd, { text = true, env = require('loopstate.config').options.cmd_env and
    vim.tbl_extend('force', vim.fn.environ(), require('loopstate.config').options.cmd_env) or nil })
  if not ok then
    return nil, proc
  end
  local done = proc:wait(timeout or 10000)
  if done.code ~= 0 then
    return nil, vim.trim((done.stderr or '') .. (done.stdout or ''))
  end
  return done.stdout
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
  local cli = require('loopstate.cli')
  h.start('loopstate: server')
  local cmd = config.options.cmd
  local missing = cli.missing(cmd)
  local advice = { 'pip install loopstate (or pipx install loopstate)', 'or set setup{cmd = {"/path/to/loopstate", "serve"}}' }
  if missing then
    h.error(missing, advice)
  else
    h.ok(('`%s` found: %s'):format(table.concat(cmd, ' '), vim.fn.exepath(cmd[1])))
  end
  local cli_missing = cli.missing(config.cli())
  if cli_missing then
    if cli_missing ~= missing then
      h.error(cli_missing:gsub('server command', 'CLI'), advice)
    end
    return
  end
  local version, err = run(vim.list_extend(vim.deepcopy(config.cli()), { '--version' }))
  if version then
    h.ok('version: ' .. vim.trim(version))
  else
    h.error('`' .. table.concat(config.cli(), ' ') .. ' --version` failed: ' .. tostring(err))
  end
  local schema = run(vim.list_extend(vim.deepcopy(config.cli()), { 'schema' }))
  local ok, decoded = pcall(vim.json.decode, schema or '')
  local protocol = ok and type(decoded) == 'table' and decoded['x-protocol-version'] or nil
  if not protocol then
    h.error('the server did not print its protocol version (`loopstate schema`)')
  elseif protocol:match('^%d+%.%d+') == client.PROTOCOL:match('^%d+%.%d+') then
    h.ok(('protocol %s (this plugin speaks %s)'):format(protocol, client.PROTOCOL))
  else
    h.error(('the server speaks protocol %s, this plugin %s'):format(protocol, client.PROTOCOL),
      { 'upgrade whichever of the two is older' })
  end

  h.start('loopstate: project and data dir')
  local root_out, root_err = run(vim.list_extend(vim.deepcopy(config.cli()), { 'root', vim.fn.getcwd(), '--json' }))
  local rok, info = pcall(vim.json.decode, root_out or '')
  if not rok or type(info) ~= 'table' then
    h.error('cannot resolve the project of ' .. vim.fn.getcwd() .. ': ' .. tostring(root_err))
  else
    h.ok(('project root %s (%s)'):format(info.root, info.reason))
    local data_dir = vim.fs.dirname(vim.fs.dirname(info.store))
    h.ok(('data dir %s%s'):format(data_dir, info.exists and '' or ' (this project has no store yet)'))
  end
  for root, project in pairs(client.projects) do
    if project.status == 'running' then
      h.ok(('%s: server %s running (protocol %s)'):format(root, project.server_version or '?', project.protocol or '?'))
    elseif project.status == 'missing' or project.status == 'failed' then
      h.error(('%s: %s'):format(root, project.error or project.status))
    else
      h.warn(('%s: %s%s'):format(root, project.status, project.error and (': ' .. project.error) or ''))
    end
  end

  h.start('loopstate: live updates')
  if vim.uv.os_uname().sysname ~= 'Linux' then
    h.warn('not Linux: the server has no inotify, so changes by other processes show at the next request')
  else
    local limit = vim.fn.filereadable('/proc/sys/fs/inotify/max_user_instances') == 1
      and vim.trim(vim.fn.readfile('/proc/sys/fs/inotify/max_user_instances')[1] or '') or nil
    local probe = vim.uv.new_fs_event()
    local watching = probe and probe:start(vim.fn.getcwd(), {}, function() end)
    if probe then
      probe:stop()
      probe:close()
    end
    if watching then
      h.ok('inotify available (max_user_instances ' .. (limit or '?') .. '): changes are pushed, nothing is polled')
    else
      h.error('inotify watches cannot be created (max_user_instances ' .. (limit or '?') .. ')',
        { 'raise fs.inotify.max_user_instances / max_user_watches' })
    end
  end
end

return M
