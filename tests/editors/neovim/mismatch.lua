-- A server that looks in another data dir than the plugin (its `cmd` sets LOOPSTATE_DATA_DIR
-- itself): the plugin found the project's store, the server's `project.root` answer has none,
-- and the user is warned once.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
H.setup_and_attach({ cmd = { 'env', 'LOOPSTATE_DATA_DIR=' .. assert(os.getenv('LOOPSTATE_NVIM_OTHER_DATA')), 'loopstate', 'serve' } })
H.wait_for('the warning', function() return H.message_matching('finds no store') end)
vim.wait(200)
H.record('messages', H.messages)
vim.cmd('qa!')
