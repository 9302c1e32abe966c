-- loopstate user commands. Nothing starts until require('loopstate').setup() is called
-- (lazy.nvim's `opts = {}` calls it); each command loads the plugin's modules on first use.
if vim.fn.has('nvim-0.10') == 0 then
  vim.api.nvim_create_user_command('LoopState', function()
    vim.notify(require('loopstate').unsupported(), vim.log.levels.ERROR)
  end, {})
  return
end

require('loopstate.define').commands()
