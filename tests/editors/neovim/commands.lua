-- A goal created by another process is followed; :LoopStateBoard shows it, :LoopStateGate
-- resolves its gate, :LoopStateVerify and :LoopStateLog show the CLI's reports.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')

local project = H.setup_and_attach({ actor = 'tester' }, true)

H.cli({ 'goals', 'add', 'release', 'Write the changelog', '--id', 'T001' })
H.cli({ 'goals', 'gate', 'release', 'Ship it?', '--id', 'G001', '--todo', 'T001' })
H.wait_for('the gate in the statusline', function() return loopstate.statusline():find('1 gate', 1, true) end)
H.record('statusline_gate', loopstate.statusline())

vim.cmd('LoopStateBoard release')
local board = vim.api.nvim_get_current_buf()
H.record('board', vim.api.nvim_buf_get_lines(0, 0, -1, false))
vim.api.nvim_feedkeys(vim.keycode('<Esc>'), 'x', false)
H.record('board_closed_by_esc', not vim.api.nvim_buf_is_valid(board))

-- A goal the project does not have: refused, no float, and never offered in completion.
local windows = #vim.api.nvim_list_wins()
vim.cmd('LoopStateBoard NoSuchGoal')
H.record('unknown_goal', { message = H.messages[#H.messages], windows = #vim.api.nvim_list_wins() - windows,
  completion = vim.fn.getcompletion('LoopStateBoard ', 'cmdline'),
  completion_n = vim.fn.getcompletion('LoopStateBoard N', 'cmdline') })

H.answer({ 'release/G001 Ship it?', 'approve', 'looks good' })
vim.cmd('LoopStateGate')
H.wait_for('the gate to be resolved', function() return not loopstate.statusline():find('gate', 1, true) end)
H.record('statusline_resolved', loopstate.statusline())

local function scratch(name)
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(buf) == name then
      return vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    end
  end
end
vim.cmd('LoopStateVerify')
H.wait_for('the verify report', function() return scratch('loopstate://verify') end)
H.record('verify', scratch('loopstate://verify'))
vim.cmd('LoopStateLog goals.release')
H.wait_for('the log', function() return scratch('loopstate://log/goals.release') end)
H.record('log', scratch('loopstate://log/goals.release'))
H.record('log_completion', vim.fn.getcompletion('LoopStateLog ', 'cmdline'))
-- No run in this project: the kill switch is set all the same (through the CLI's `run stop`).
vim.cmd.edit('notes.txt') -- back to the project's file, whose statusline is the project's
H.answer({ 'Stop all runs' })
vim.cmd('LoopStateStop')
H.wait_for('the statusline to show halted', function() return loopstate.statusline():find('HALTED', 1, true) end)
H.record('statusline_halted_without_runs', loopstate.statusline())
vim.cmd('qa!')
