/* lower.h — from syntax trees to a program (LANGUAGE.md sections 4-8). */
#ifndef NETRUN_LOWER_H
#define NETRUN_LOWER_H

#include "ast.h"
#include "program.h"

typedef struct Lowerer Lowerer;

/* Limits that keep lowering's memory and recursion bounded whatever the
 * script: ops in a program (function calls expand inline), levels of
 * expression (counting the bodies of the functions called) and of nested
 * blocks (while, if, else if, counting the functions called). */
#define LOWER_MAX_OPS 500000
#define LOWER_MAX_DEPTH 2000
#define LOWER_MAX_BLOCKS 256

/* A lowerer builds one program in `arena`, reporting through `diag`.
 * stdlib_dir is the installed stdlib folder searched last by import. */
Lowerer *lower_new(Arena *arena, Diag *diag, const char *stdlib_dir);
void lower_free(Lowerer *L);
/* Lowers at most max_ops ops (default LOWER_MAX_OPS), then stops with an error. */
void lower_set_max_ops(Lowerer *L, int64_t max_ops);
Program *lower_program(Lowerer *L);
/* Loads, parses and lowers the script at path.  False on any error. */
bool lower_file(Lowerer *L, const char *path);
/* Lowers the statements of an already parsed source (the REPL's input). */
bool lower_block(Lowerer *L, const AstNode *root, int file);
/* Records every top-level name's final variable in the program's exports. */
void lower_export(Lowerer *L);

#endif
