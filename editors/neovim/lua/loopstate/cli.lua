--- The loopstate CLI, run asynchronously (vim.system) for what the sidecar protocol does not
--- carry: the lists of runs and goals, verify and log.
local config = require('loopstate.config')

local M = {}

--- Why the command line cannot start, or nil when its program is executable.
function M.missing(cmd)
  return require('loopstate.client').missing(cmd)
end

local function env()
  local extra = config.options.cmd_env
  return extra and vim.tbl_extend('force', vim.fn.environ(), extra) or nil
end

--- Run `cli ARGS` in `cwd`; on_done(err, stdout) on the main loop. With `json`, stdout is decoded
--- and a refusal ({"error": {code, message}}) becomes err.
function M.run(args, opts, on_done)
  local cmd = vim.list_extend(vim.deepcopy(config.cli()), args)
  local missing = M.missing(cmd)
  if missing then
    return vim.schedule(function() on_done(missing) end)
  end
  local ok, err = pcall(vim.system, cmd, { text = true, cwd = opts.cwd, env = env() }, vim.schedule_wrap(function(done)
    local out = done.stdout or ''
    if not opts.json then
      if done.code ~= 0 then
        return on_done(vim.trim(done.stderr or '') ~= '' and vim.trim(done.stderr) or ('exit status ' .. done.code), out)
      end
      return on_done(nil, out)
    end
    local decoded_ok, value = pcall(vim.json.decode, out, { luanil = { object = true, array = true } })
    if not decoded_ok or type(value) ~= 'table' then
      local why = vim.trim(done.stderr or '')
      return on_done(('`%s` printed no JSON (exit %d)%s'):format(table.concat(cmd, ' '), done.code,
        why ~= '' and (': ' .. why) or ''))
    end
    if done.code ~= 0 or value.error then
      local e = value.error or {}
      return on_done(('%s: %s'):format(e.code or 'ERROR', e.message or vim.trim(done.stderr or '')), value)
    end
    on_done(nil, value)
  end))
  if not ok then
    vim.schedule(function() on_done(('loopstate: cannot run `%s`: %s'):format(cmd[1], err)) end)
  end
end

return M
