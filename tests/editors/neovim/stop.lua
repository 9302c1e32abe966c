-- A run created by another process after attach is followed; :LoopStateStop (confirmed) sets
-- the kill switch and the statusline shows halted; a server killed with SIGKILL is restarted,
-- resubscribes with `since`, and the statusline catches up with what happened meanwhile.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')

-- Once the CLI's listing is done, the run below can only be found by watching the streams folder.
local project = H.setup_and_attach({ restart = { initial_ms = 50, max_ms = 1000, max_attempts = 5 } }, true)

local run_id = vim.trim(H.cli({ 'run', 'create', '--objective', 'Ship the parser', '--done-gate', 'tests pass',
  '--asset', 'parser' }))
H.wait_for('the new run in the statusline', function() return loopstate.statusline():find('run ready', 1, true) end)
H.record('run_id', run_id)
H.record('statusline_with_run', loopstate.statusline())

-- Declined first: nothing is set.
H.answer({ 'Cancel' })
vim.cmd('LoopStateStop')
H.record('stop_declined_file', vim.uv.fs_stat(vim.fs.joinpath(project.root, '.loopstate', 'STOP')) ~= nil)

H.answer({ 'Stop all runs' })
vim.cmd('LoopStateStop')
H.wait_for('the statusline to show halted', function()
  local text = loopstate.statusline()
  return text:find('HALTED', 1, true) and text:find('run halted_kill_switch', 1, true)
end)
H.record('statusline_halted', loopstate.statusline())
local evaluated = vim.api.nvim_eval_statusline("%{%v:lua.require'loopstate'.statusline({'highlight':v:true})%}",
  { highlights = true })
H.record('halted_highlight', { group = loopstate.highlight(), text = loopstate.statusline({ highlight = true }),
  evaluated = evaluated.str, evaluated_group = evaluated.highlights[1] and evaluated.highlights[1].group })

-- SIGKILL the server; while it is down another process adds a claim.
--- The pid of the running `loopstate serve` (the child of Neovim whose command line ends in serve).
local function server_pid()
  local found = {}
  for _, pid in ipairs(vim.api.nvim_get_proc_children(vim.fn.getpid())) do
    local f = io.open('/proc/' .. pid .. '/cmdline')
    local cmdline = f and f:read('*a') or ''
    if f then f:close() end
    if cmdline:find('serve%z?$') then
      table.insert(found, pid)
    end
  end
  assert(#found == 1, 'expected one server process, got ' .. vim.inspect(found))
  return found[1]
end
local pid = server_pid()
local claims = project.topics['intent/snapshot'].snapshot.active_count
local head = project.topics['intent/snapshot'].head.sequence
local statuses = H.track_statuses()
local messages_before = #H.messages
vim.uv.kill(pid, 'sigkill')
H.wait_for('the plugin to see the crash', function() return statuses[1] ~= nil end)
H.cli({ 'intent', 'start', '--claim', 'outcome:Recorded while the server was down' })
H.wait_for('the restart', function() return project.status == 'running' end)
local new_pid = server_pid()
H.wait_for('the statusline to catch up', function()
  local view = project.topics['intent/snapshot'].snapshot
  return view and view.active_count == claims + 1 and loopstate.statusline():find((claims + 1) .. ' claim', 1, true)
end)
vim.wait(300) -- Neovim's client reports an exit on a later turn: any such message would be in now
H.record('messages_after_kill', vim.list_slice(H.messages, messages_before + 1))
H.record('restarted', {
  new_pid = new_pid, old_pid = pid, statusline = loopstate.statusline(),
  missed = project.topics['intent/snapshot'].missed, head_before = head,
  head_after = project.topics['intent/snapshot'].head.sequence,
  warned = H.message_matching('signal 9') ~= nil, statuses = vim.deepcopy(statuses),
})
vim.cmd('LoopState')
H.record('float_after_restart', vim.api.nvim_buf_get_lines(0, 0, 3, false))
vim.api.nvim_feedkeys('q', 'x', false)

-- Killed again soon after it came back: the same fault, so no second warning.
local second = server_pid()
vim.uv.kill(second, 'sigkill')
H.wait_for('the second crash', function() return project.status ~= 'running' end)
H.wait_for('the second restart', function() return project.status == 'running' end)
vim.wait(300)
H.record('messages_after_second_kill', vim.list_slice(H.messages, messages_before + 1))
vim.cmd('qa!')
