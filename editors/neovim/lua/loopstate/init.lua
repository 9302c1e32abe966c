--- loopstate for Neovim: the live state of the project (intent, runs, goals) from a
--- `loopstate serve` sidecar, in the statusline, floats and a few commands. `:help loopstate`.
local M = {}

local MIN_VERSION = 'nvim-0.10'

--- Why this Neovim cannot run the plugin, or nil.
function M.unsupported()
  if vim.fn.has(MIN_VERSION) == 0 or not vim.lsp or not vim.lsp.start then
    local v = vim.version()
    return ('loopstate needs Neovim 0.10 or newer (vim.lsp.start); this is %d.%d.%d'):format(v.major, v.minor, v.patch)
  end
end

M.did_setup = false

--- Configure and start: setup({cmd = {'loopstate', 'serve'}, ...}); see `:help loopstate-setup`.
function M.setup(opts)
  local wrong = M.unsupported()
  if wrong then
    vim.notify(wrong, vim.log.levels.ERROR, { title = 'loopstate' })
    return
  end
  local config = require('loopstate.config')
  config.apply(opts)
  M.did_setup = true
  require('loopstate.define').commands()
  local client = require('loopstate.client')
  local group = vim.api.nvim_create_augroup('loopstate', { clear = true })
  if config.options.autostart then
    vim.api.nvim_create_autocmd({ 'BufEnter' }, {
      group = group,
      callback = function(ev)
        if vim.api.nvim_buf_is_valid(ev.buf) and vim.b[ev.buf].loopstate_root == nil and vim.b[ev.buf].loopstate_error == nil then
          client.attach(ev.buf)
        end
      end,
    })
    client.attach(vim.api.nvim_get_current_buf())
  end
  vim.api.nvim_create_autocmd('VimLeavePre', { group = group, callback = client.close_all })
end

--- The statusline component (plain statusline, lualine, heirline): the cached text of the
--- current buffer's project, '' outside one. Rebuilt only when the state changes.
function M.statusline()
  return require('loopstate.statusline').get(0)
end

--- The state behind the statusline, as a table (for custom components): see
--- `:help loopstate.summary()`.
function M.summary()
  local project = require('loopstate.client').current(0)
  return project and require('loopstate.statusline').summary(project) or nil
end

return M
