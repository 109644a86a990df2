" .net scripts of netrun (netrun-lang(5)).  `set filetype`, not setfiletype:
" Vim's own detection would take a file that starts with a '#' comment for
" a configuration file.
autocmd BufRead,BufNewFile *.net set filetype=netrun
