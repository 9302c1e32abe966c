-- The statusline states' highlight groups: linked to standard groups, a user's own definition
-- (made before setup) kept, and the links set again after a :colorscheme clears them.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
vim.api.nvim_set_hl(0, 'LoopStateOk', { fg = '#00ff00' })
require('loopstate').setup({})
local names = { 'LoopStateOk', 'LoopStateBusy', 'LoopStateHalted', 'LoopStateError', 'LoopStateHistory' }
local function groups()
  local out = {}
  for _, name in ipairs(names) do
    local hl = vim.api.nvim_get_hl(0, { name = name })
    out[name] = hl.link or (hl.fg and ('fg #%06x'):format(hl.fg)) or 'none'
  end
  return out
end
H.record('after_setup', groups())
vim.cmd.colorscheme('default')
H.record('after_colorscheme', groups())
vim.cmd('qa!')
