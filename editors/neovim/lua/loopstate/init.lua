--- loopstate for Neovim: the live state of the project (intent, runs, goals) from a
--- `loopstate serve` sidecar, in the statusline, floats and a few commands. `:help loopstate`.
---
--- setup() costs next to nothing: it records the options, defines the commands, highlight
--- groups and autocommands, and loads neither vim.lsp nor the plugin's other modules. A buffer
--- is looked at as it is entered or renamed, on the next turn of the event loop (after startup);
--- a server starts only for a file of a project that already has a store (loopstate.root).
local M = {}

--- Why this Neovim cannot run the plugin, or nil (decided without loading vim.lsp).
function M.unsupported()
  if vim.fn.has('nvim-0.10') == 0 then
    local v = vim.version()
    return ('loopstate needs Neovim 0.10 or newer (vim.lsp.start); this is %d.%d.%d'):format(v.major, v.minor, v.patch)
  end
end

M.did_setup = false

--- Configure: setup({cmd = {'loopstate', 'serve'}, ...}); see `:help loopstate-setup`.
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
  require('loopstate.define').highlights()
  local group = vim.api.nvim_create_augroup('loopstate', { clear = true })
  vim.api.nvim_create_autocmd('ColorScheme', { group = group, callback = require('loopstate.define').highlights })
  if config.options.autostart then
    -- Looked at on the next turn of the event loop, never inside startup itself: no start (and
    -- no vim.lsp) is paid for before the first screen, and a buffer renamed meanwhile is looked
    -- at under its final name.
    -- Until some project has started, the plugin's other modules stay unloaded.
    local function look(buf)
      vim.schedule(function()
        if package.loaded['loopstate.client'] or require('loopstate.root').starts(buf) then
          require('loopstate.client').auto(buf)
        end
      end)
    end
    vim.api.nvim_create_autocmd({ 'BufEnter', 'BufFilePost' }, { group = group, callback = function(ev) look(ev.buf) end })
    look(vim.api.nvim_get_current_buf())
  end
  vim.api.nvim_create_autocmd('BufWipeout', {
    group = group,
    callback = function(ev)
      if package.loaded['loopstate.client'] then
        require('loopstate.client').forget(ev.buf)
      end
    end,
  })
  vim.api.nvim_create_autocmd('VimLeavePre', {
    group = group,
    callback = function()
      if package.loaded['loopstate.client'] then
        require('loopstate.client').close_all()
      end
    end,
  })
end

--- The statusline component (plain statusline, lualine, heirline): the cached text of the
--- current buffer's project, '' outside one. Rebuilt only when the state changes. With
--- `{highlight = true}` the text carries its highlight group (`%#LoopStateHalted#...%*`), for
--- a statusline that evaluates it (`%{%...%}`).
function M.statusline(opts)
  if not package.loaded['loopstate.client'] then
    return '' -- no project has been seen: nothing to load for it
  end
  return require('loopstate.statusline').get(0, opts)
end

--- The highlight group of the current buffer's state (LoopStateOk, LoopStateBusy,
--- LoopStateHalted, LoopStateError), or nil outside a project: for lualine's `color`.
function M.highlight()
  if not package.loaded['loopstate.client'] then
    return nil
  end
  return require('loopstate.statusline').group(0)
end

--- The state behind the statusline, as a table (for custom components): see
--- `:help loopstate.summary()`.
function M.summary()
  if not package.loaded['loopstate.client'] then
    return nil
  end
  local project = require('loopstate.client').current(0)
  return project and require('loopstate.statusline').summary(project) or nil
end

return M
