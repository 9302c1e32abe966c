-- Shared by the headless Neovim tests: load the plugin from the checkout, wait for conditions
-- (driving the event loop, never sleeping blind), run the CLI, and report results to the
-- Python test as JSON.
local H = {}

H.plugin = assert(os.getenv('LOOPSTATE_NVIM_PLUGIN'), 'LOOPSTATE_NVIM_PLUGIN is not set')
H.results_path = assert(os.getenv('LOOPSTATE_NVIM_RESULTS'), 'LOOPSTATE_NVIM_RESULTS is not set')
H.results = {}
H.messages = {}

vim.opt.runtimepath:prepend(H.plugin)
-- As Neovim's startup would source it; with LOOPSTATE_NVIM_LATE_RTP the folder joins the runtime
-- path too late for that (a package manager's config hook) and setup() must define the commands.
if os.getenv('LOOPSTATE_NVIM_LATE_RTP') ~= '1' then
  vim.cmd.runtime('plugin/loopstate.lua')
end

-- Every vim.notify is kept, so a test can assert on the messages a user would see.
vim.notify = function(msg, level)
  table.insert(H.messages, { msg = msg, level = level or vim.log.levels.INFO })
end

--- Wait until fn() is truthy (the event loop runs meanwhile); fail with `what` if it never is.
function H.wait_for(what, fn, timeout)
  local ok = vim.wait(timeout or 30000, fn, 10)
  if not ok then
    error(('timed out waiting for %s; messages: %s'):format(what, vim.inspect(H.messages)), 2)
  end
end

function H.record(key, value)
  H.results[key] = value
  local f = assert(io.open(H.results_path, 'w'))
  f:write(vim.json.encode(H.results))
  f:close()
end

--- Run the real CLI (another process) and return its stdout; fail on a non-zero status.
function H.cli(args)
  local done = vim.system(vim.list_extend({ 'loopstate' }, args), { text = true }):wait(60000)
  assert(done.code == 0, ('loopstate %s failed: %s %s'):format(table.concat(args, ' '), done.stdout, done.stderr))
  return done.stdout
end

--- Answer the next vim.ui.input / vim.ui.select prompts from a script (what a user would type).
function H.answer(answers)
  local queue = vim.deepcopy(answers)
  local function next_answer(kind, prompt)
    local a = table.remove(queue, 1)
    assert(a ~= nil, 'no scripted answer left for ' .. kind .. ' ' .. tostring(prompt))
    return a
  end
  vim.ui.input = function(opts, on_confirm)
    on_confirm(next_answer('input', opts.prompt))
  end
  vim.ui.select = function(items, opts, on_choice)
    local a = next_answer('select', opts.prompt)
    for i, item in ipairs(items) do
      local label = opts.format_item and opts.format_item(item) or item
      if label == a or item == a then
        return on_choice(item, i)
      end
    end
    error(('answer %s is not among %s'):format(a, vim.inspect(items)))
  end
  return queue
end

function H.message_matching(pattern)
  for _, m in ipairs(H.messages) do
    if tostring(m.msg):find(pattern) then
      return m
    end
  end
end

--- setup(opts), open a file of the project (the current directory, which has a store), then
--- wait until its server runs and its intent snapshot is in (with `discovered`: also the
--- listing of runs and goals); the project.
function H.setup_and_attach(opts, discovered)
  require('loopstate').setup(opts or {})
  vim.cmd.edit(vim.fn.fnameescape(vim.fs.joinpath(vim.fn.getcwd(), 'notes.txt')))
  local client = require('loopstate.client')
  H.wait_for('the server to attach', function()
    local p = package.loaded['loopstate.client'] and client.current(0)
    return p and p.status == 'running' and p.topics['intent/snapshot'].snapshot ~= nil and (not discovered or p.discovered)
  end)
  return client.current(0)
end

--- Wait for a message matching `pattern` and record it as {msg, level} under `key`.
function H.record_message(key, pattern, what)
  H.wait_for(what, function() return H.message_matching(pattern) end)
  local m = H.message_matching(pattern)
  H.record(key, { msg = m.msg, level = m.level })
end

--- The distinct statuses the project of the current buffer goes through from now on.
function H.track_statuses()
  local statuses = {}
  require('loopstate.client').on_change(function(p)
    if statuses[#statuses] ~= p.status then
      table.insert(statuses, p.status)
    end
  end)
  return statuses
end

return H
