" Vim syntax file for netrun's .net scripts (netrun-lang(5))
if exists('b:current_syntax') | finish | endif

syn keyword netrunKeyword input param state def op grad return while if else import load
syn keyword netrunOperator and or not
syn keyword netrunBoolean true false
syn keyword netrunType f32 f64 i64 bool
syn match netrunNumber '\<\d\+\>'
syn match netrunNumber '\<\d\+\.\d\+\([eE][+-]\=\d\+\)\=\>'
syn match netrunNumber '\.\d\+\([eE][+-]\=\d\+\)\=\>'
syn match netrunNumber '\<\d\+\.\=[eE][+-]\=\d\+\>'
syn match netrunGradName '\<[A-Za-z_][A-Za-z0-9_]*@GRAD\>'
syn match netrunFunction '\<[A-Za-z_][A-Za-z0-9_]*\ze\s*('
syn match netrunDefName '\%(\<def\s\+\|\<op\s\+\)\@<=[A-Za-z_][A-Za-z0-9_]*'
syn match netrunConfig '^\s*\zs[A-Za-z_][A-Za-z0-9_]*\ze\s*{'
syn region netrunString start='"' skip='\\.' end='"' oneline contains=netrunEscape
syn match netrunEscape '\\[\\"nt]' contained
syn match netrunComment '#.*$' contains=netrunTodo
syn keyword netrunTodo TODO FIXME XXX contained

hi def link netrunKeyword Keyword
hi def link netrunOperator Operator
hi def link netrunBoolean Boolean
hi def link netrunType Type
hi def link netrunNumber Number
hi def link netrunGradName Special
hi def link netrunFunction Function
hi def link netrunDefName Function
hi def link netrunConfig Structure
hi def link netrunString String
hi def link netrunEscape SpecialChar
hi def link netrunComment Comment
hi def link netrunTodo Todo

let b:current_syntax = 'netrun'
