-- netrun.lua — netrun lsp for Neovim's built-in LSP client (Neovim 0.7 and
-- later: vim.lsp.start_client and vim.lsp.buf_attach_client).
--
--   require('netrun').setup()                       -- every netrun buffer
--   require('netrun').setup({cmd = {'/path/to/netrun', 'lsp', '--stdio'}})
local M = {}

local client_id = nil

-- Starts the server once and attaches buffer bufnr (0: the current one) to
-- it.  Returns the client's id.
function M.start(bufnr, opts)
  opts = opts or {}
  if not client_id or not vim.lsp.get_client_by_id(client_id) then
    client_id = vim.lsp.start_client({
      name = 'netrun',
      cmd = opts.cmd or { 'netrun', 'lsp', '--stdio' },
      root_dir = opts.root_dir or vim.fn.getcwd(),
    })
  end
  if client_id then
    vim.lsp.buf_attach_client(bufnr or 0, client_id)
  end
  return client_id
end

-- Attaches every buffer of filetype netrun (editors/vim/ftdetect) as it opens.
function M.setup(opts)
  local group = vim.api.nvim_create_augroup('netrun_lsp', { clear = true })
  vim.api.nvim_create_autocmd('FileType', {
    group = group,
    pattern = 'netrun',
    callback = function(args) M.start(args.buf, opts) end,
  })
end

return M
