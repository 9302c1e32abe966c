-- The intent float's lines for a snapshot that is one page of several: the view says how many
-- active claims are on later pages and prints the command that shows the next one.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local views = require('loopstate.views')

local first = vim.json.decode(H.cli({ 'intent', 'show', '--limit', '2', '--json' }))
H.record('first', views.intent_lines(first))
local whole = vim.json.decode(H.cli({ 'intent', 'show', '--json' }))
H.record('whole', views.intent_lines(whole))
vim.cmd('qa!')
