-- Everything through the sidecar: while other processes create a run and a goal with a gate, add
-- a claim, set the kill switch and the user lifts it by hand, the statusline follows each change
-- live, and the plugin's own commands (verify, log, stop, resume) work; all along, the plugin
-- starts one process (its server) and opens no file watcher (counted by spawns.lua).
local dir = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h')
local S = dofile(vim.fs.joinpath(dir, 'spawns.lua'))
local H = dofile(vim.fs.joinpath(dir, 'helper.lua'))
local loopstate = require('loopstate')

local function other(args)
  return S.uncounted(H.cli, args)
end
local function until_statusline(what, pattern)
  H.wait_for(what, function() return loopstate.statusline():find(pattern) end)
  return loopstate.statusline()
end

local project = H.setup_and_attach({ actor = 'tester' }, true)
local seen = { first = loopstate.statusline() }
local run_id = vim.trim(other({ 'run', 'create', '--objective', 'Ship', '--done-gate', 'tests pass', '--asset', 'parser' }))
seen.run = until_statusline('the run', 'run ready')
other({ 'goals', 'add', 'release', 'Write the changelog', '--id', 'T001' })
other({ 'goals', 'gate', 'release', 'Ship it?', '--id', 'G001', '--todo', 'T001' })
seen.gate = until_statusline('the gate', '1 gate')
other({ 'intent', 'start', '--claim', 'outcome:Ship the parser' })
seen.claim = until_statusline('the claim', '1 claim')
other({ 'run', 'stop' })
seen.halted = until_statusline('the kill switch and the halted run', '^LS HALTED · run halted_kill_switch')
-- The user lifts the switch by hand, as the message of a stop says to: no process at all.
assert(os.remove(vim.fs.joinpath(project.root, '.loopstate', 'STOP')))
H.wait_for('the switch lifted', function() return not loopstate.statusline():find('HALTED', 1, true) end)
seen.lifted = loopstate.statusline()

local function scratch(name)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(buf) == name then
      return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    end
  end
end
vim.cmd('LoopStateVerify')
H.wait_for('the verify report', function() return scratch('loopstate://verify') end)
seen.verify = scratch('loopstate://verify')
vim.cmd('LoopStateLog')
H.wait_for('the log', function() return scratch('loopstate://log/all') end)
seen.log = scratch('loopstate://log/all')
vim.cmd.edit('notes.txt')
H.answer({ 'Stop all runs' })
vim.cmd('LoopStateStop')
seen.stopped = until_statusline('the stop', '^LS HALTED · run halted_kill_switch')
H.wait_for('the stop message', function() return H.message_matching('kill switch set') end)
seen.stop_message = H.message_matching('kill switch set').msg
H.answer({ 'Clear the kill switch' })
vim.cmd('LoopStateResume')
H.wait_for('the resume', function() return not loopstate.statusline():find('HALTED', 1, true) end)
seen.resumed = loopstate.statusline()
H.wait_for('the resume message', function() return H.message_matching('kill switch cleared') end)
seen.resume_message = H.message_matching('kill switch cleared').msg
seen.stop_file = vim.uv.fs_stat(vim.fs.joinpath(project.root, '.loopstate', 'STOP')) ~= nil
seen.run_id = run_id
seen.spawned, seen.watchers, seen.children = S.spawned, S.watchers, S.children()
H.record('seen', seen)
vim.cmd('qa!')
