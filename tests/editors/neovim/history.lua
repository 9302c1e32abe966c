-- History alarms from the server's witness, in phases (LOOPSTATE_NVIM_PHASE); the Python test
-- rewrites the stream between them, with the editor (and so its server) closed:
--   see:      honest growth under signed checkpoints: no alarm, the plain statusline.
--   alarm:    after the rewrite, one append: one ERROR message, HISTORY REWRITTEN with its group.
--   restored: a new Neovim shows the unacknowledged alarm again; :LoopStateAckHistory clears it.
--   purge:    a purge by another process after a checkpoint was seen: a notice, not the alarm.
local H = dofile(vim.fs.joinpath(vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':h'), 'helper.lua'))
local loopstate = require('loopstate')
local phase = assert(os.getenv('LOOPSTATE_NVIM_PHASE'), 'LOOPSTATE_NVIM_PHASE is not set')

local function history_messages()
  return vim.tbl_filter(function(m)
    local text = tostring(m.msg)
    return text:find('HISTORY', 1, true) or text:find('purged', 1, true) or text:find('history', 1, true)
  end, H.messages)
end

local function claims_shown(n)
  return function()
    return loopstate.statusline():find(('%d claim'):format(n), 1, true) ~= nil
  end
end

local function add_claim(project, statement)
  local view = project.topics['intent/snapshot'].snapshot
  local task = view.tasks[#view.tasks].task_id
  H.cli({ 'intent', 'add', task, statement })
end

--- Stop the server and wait until its process is gone (the stream is then the Python test's).
local function close(project)
  project.closed = true
  local lsp = require('loopstate.client').lsp(project)
  if lsp then
    lsp:stop()
  end
  H.wait_for('the server to exit', function() return project.client_id == nil end, 10000)
  vim.cmd('qa!')
end

local function highlighted()
  local evaluated = vim.api.nvim_eval_statusline("%{%v:lua.require'loopstate'.statusline({'highlight':v:true})%}",
    { highlights = true })
  return { group = loopstate.highlight(), text = loopstate.statusline({ highlight = true }), evaluated = evaluated.str,
    evaluated_group = evaluated.highlights[1] and evaluated.highlights[1].group }
end

local project = H.setup_and_attach({})
local count = project.topics['intent/snapshot'].snapshot.active_count

if phase == 'see' then
  H.cli({ 'checkpoint', 'intent' })
  add_claim(project, 'Seen first') -- news: the witness takes the checkpoint on trust
  H.wait_for('the first claim', claims_shown(count + 1))
  H.cli({ 'checkpoint', 'intent' })
  add_claim(project, 'Seen second') -- news: a checkpoint that extends what it saw
  H.wait_for('the second claim', claims_shown(count + 2))
  vim.wait(2500) -- the witness runs after the news: any alarm would be in by now
  H.record('statusline', loopstate.statusline())
  H.record('group', loopstate.highlight())
  H.record('messages', history_messages())
  H.record('all_messages', vim.deepcopy(H.messages))
  close(project)
elseif phase == 'alarm' then
  add_claim(project, 'After the rewrite') -- news: the witness checks the re-signed checkpoint
  H.wait_for('the history alarm', function() return loopstate.statusline():find('HISTORY REWRITTEN', 1, true) end)
  H.wait_for('the claim', claims_shown(count + 1))
  vim.wait(2500) -- a second message for the same alarm would be in by now
  H.record('statusline', loopstate.statusline())
  H.record('highlight', highlighted())
  H.record('messages', history_messages())
  add_claim(project, 'Once more') -- the same checkpoint checked again: no second alarm
  H.wait_for('the next claim', claims_shown(count + 2))
  vim.wait(2500)
  H.record('messages_after_next', history_messages())
  H.record('all_messages', vim.deepcopy(H.messages))
  H.record('summary', loopstate.summary().history_rewritten)
  vim.cmd('LoopState')
  H.record('float', vim.api.nvim_buf_get_lines(0, 0, 5, false))
  vim.api.nvim_feedkeys('q', 'x', false)
  vim.cmd('LoopStateAckHistory runs.nosuch') -- a stream with no alarm is refused; the alarm stands
  H.record('wrong_ack', { message = H.messages[#H.messages], statusline = loopstate.statusline() })
  vim.cmd('checkhealth loopstate')
  H.record('health', vim.tbl_filter(function(line) return line:find('HISTORY', 1, true) ~= nil end,
    vim.api.nvim_buf_get_lines(0, 0, -1, false)))
  vim.cmd('bwipeout!')
  H.record('completion', vim.fn.getcompletion('LoopStateAckHistory ', 'cmdline'))
  vim.cmd('LoopStateRestart') -- a new server does not say the alarm again; the plugin still shows it
  H.wait_for('the restarted server', function() return project.status == 'running' end)
  H.record('after_restart', { statusline = loopstate.statusline(), messages = #history_messages() })
  close(project) -- not acknowledged: the next Neovim shows it again
elseif phase == 'restored' then
  H.wait_for('the kept alarm', function() return loopstate.statusline():find('HISTORY REWRITTEN', 1, true) end)
  vim.wait(1500)
  H.record('statusline', loopstate.statusline())
  H.record('messages', history_messages())
  vim.cmd('LoopStateAckHistory')
  H.record('acked', { statusline = loopstate.statusline(), group = loopstate.highlight(),
    message = H.messages[#H.messages] })
  vim.cmd('LoopStateAckHistory')
  H.record('again', H.messages[#H.messages])
  close(project)
elseif phase == 'purge' then
  H.cli({ 'checkpoint', 'intent' })
  add_claim(project, 'Purge me')
  H.wait_for('the claim', claims_shown(count + 1))
  vim.wait(1500) -- the witness has taken the checkpoint (it is quiet about honest growth)
  local view = project.topics['intent/snapshot'].snapshot
  local claim
  for _, facet in pairs(view.by_facet) do
    for _, list in pairs(facet) do
      for _, c in ipairs(list) do
        if c.statement == 'Purge me' then
          claim = c.claim_id
        end
      end
    end
  end
  H.cli({ 'intent', 'purge', 'claim', assert(claim, 'the claim to purge'), '--yes' })
  H.wait_for('the purge notice', function() return H.message_matching('purged') end)
  H.wait_for('the purged view', claims_shown(count))
  vim.wait(2500)
  H.record('statusline', loopstate.statusline())
  H.record('group', loopstate.highlight())
  H.record('messages', history_messages())
  H.record('all_messages', vim.deepcopy(H.messages))
  -- A notification that does not say `rewritten: false` is not taken for harmless news.
  require('loopstate.history').on_alarm(project, { root = project.root, stream = 'intent' })
  H.record('malformed', { statusline = loopstate.statusline(), message = H.messages[#H.messages] })
  vim.cmd('LoopStateAckHistory intent')
  close(project)
end
