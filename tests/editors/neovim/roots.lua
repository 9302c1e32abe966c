-- The plugin's own answer (loopstate.root, in Lua, no process) to which project each folder of
-- LOOPSTATE_NVIM_DIRS (newline-separated) belongs to; the test compares it with `loopstate root`.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local env_data = os.getenv('LOOPSTATE_NVIM_CMD_ENV_DATA')
require('loopstate').setup({ cmd_env = env_data and { LOOPSTATE_DATA_DIR = env_data } or nil })
local roots = require('loopstate.root')
local out = {}
for dir in vim.gsplit(assert(os.getenv('LOOPSTATE_NVIM_DIRS')), '\n', { plain = true }) do
  local info, why = roots.find(dir)
  out[#out + 1] = info and { root = info.root, how = info.how, store = info.store, exists = info.exists,
    project_id = info.project_id } or { error = why }
end
H.record('found', out)
vim.cmd('qa!')
