-- A run halted by a kill switch that the user lifted since: Neovim starts afresh in the project, and
-- the statusline shows the run's halted status but not HALTED, which says a switch stands now.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')

H.setup_and_attach({}, true)
H.wait_for('the halted run in the statusline', function()
  return loopstate.statusline():find('run halted_kill_switch', 1, true)
end)
H.record('statusline', loopstate.statusline())
vim.cmd('qa!')
