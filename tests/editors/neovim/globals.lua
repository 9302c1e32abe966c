-- No module of the plugin reads or writes a global it does not mean to: every GGET and GSET in
-- the bytecode of each file (nested functions too) must name a Lua or Neovim builtin. A
-- misspelt or out-of-scope local is otherwise a nil call found only when that line runs.
local jutil = require('jit.util')
local bcnames = require('jit.vmdef').bcnames

local ALLOWED = {}
for name in ([[vim bit jit require ipairs pairs type tostring tonumber error assert pcall select
  unpack table string math os io debug next setmetatable getmetatable rawget rawset print package]]):gmatch('%S+') do
  ALLOWED[name] = true
end

local function opname(ins)
  local op = bit.band(ins, 0xff)
  return bcnames:sub(op * 6 + 1, op * 6 + 6):gsub(' ', '')
end

local found = {}
local function walk(fn, file)
  local info = jutil.funcinfo(fn)
  for pc = 1, info.bytecodes - 1 do
    local ins = jutil.funcbc(fn, pc)
    local name = opname(ins)
    if name == 'GGET' or name == 'GSET' then
      local d = bit.rshift(ins, 16)
      local key = jutil.funck(fn, -d - 1)
      if not ALLOWED[key] then
        table.insert(found, ('%s: %s %s (line %d)'):format(file, name, key, jutil.funcinfo(fn, pc).currentline))
      end
    end
  end
  for i = 1, info.gcconsts do
    local k = jutil.funck(fn, -i)
    if type(k) == 'proto' then -- a nested function; funcinfo and funcbc take it as it is
      walk(k, file)
    end
  end
end

local root = assert(os.getenv('LOOPSTATE_NVIM_PLUGIN'))
local files = vim.fs.find(function(name) return name:match('%.lua$') end, { path = root, type = 'file', limit = math.huge })
table.sort(files)
for _, file in ipairs(files) do
  walk(assert(loadfile(file)), file:sub(#root + 2))
end
local out = assert(io.open(assert(os.getenv('LOOPSTATE_NVIM_RESULTS')), 'w'))
out:write(vim.json.encode({ files = #files, globals = found }))
out:close()
vim.cmd('qa!')
