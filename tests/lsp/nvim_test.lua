-- nvim_test.lua — Neovim's built-in LSP client against netrun lsp
-- (tests/lsp.bats): opens FILE through editors/vim's configuration, writes
-- the diagnostics it receives and the hover at LINE:COL (1-based) to OUT.
local out = assert(io.open(os.getenv('OUT'), 'w'))
vim.opt.runtimepath:prepend(os.getenv('EDITORS') .. '/vim')
vim.cmd('filetype off')
vim.cmd('filetype plugin on')
vim.cmd('edit ' .. os.getenv('FILE'))
out:write('filetype ' .. vim.bo.filetype .. '\n')
local id = require('netrun').start(0, { cmd = { os.getenv('NETRUN'), 'lsp', '--stdio' } })
vim.wait(30000, function() return #vim.diagnostic.get(0) > 0 end, 20)
for _, d in ipairs(vim.diagnostic.get(0)) do
  out:write(string.format('diagnostic %d:%d %s\n', d.lnum + 1, d.col + 1, d.message))
end
local params = {
  textDocument = { uri = vim.uri_from_bufnr(0) },
  position = { line = tonumber(os.getenv('LINE')) - 1, character = tonumber(os.getenv('COL')) - 1 },
}
local res = vim.lsp.buf_request_sync(0, 'textDocument/hover', params, 30000)
for _, r in pairs(res or {}) do
  if r.result then
    local text = r.result.contents.value:gsub('\n', ' ')
    out:write('hover ' .. text .. '\n')
  end
end
out:close()
vim.lsp.stop_client(id)
vim.cmd('qa!')
