" netrun scripts: the layout of netrun fmt (netrun-lang(5), LAYOUT)
if exists('b:did_ftplugin') | finish | endif
let b:did_ftplugin = 1
setlocal expandtab shiftwidth=2 softtabstop=2 tabstop=8
setlocal commentstring=#\ %s comments=:#
setlocal textwidth=100
let b:undo_ftplugin = 'setlocal expandtab< shiftwidth< softtabstop< tabstop< commentstring< comments< textwidth<'
