/* lower.h — from syntax trees to a program (LANGUAGE.md sections 4-8). */
#ifndef NETRUN_LOWER_H
#define NETRUN_LOWER_H

#include "ast.h"
#include "program.h"

typedef struct Lowerer Lowerer;

/* A lowerer builds one program in `arena`, reporting through `diag`.
 * stdlib_dir is the installed stdlib folder searched last by import. */
Lowerer *lower_new(Arena *arena, Diag *diag, const char *stdlib_dir);
void lower_free(Lowerer *L);
Program *lower_program(Lowerer *L);
/* Loads, parses and lowers the script at path.  False on any error. */
bool lower_file(Lowerer *L, const char *path);
/* Lowers the statements of an already parsed source (the REPL's input). */
bool lower_block(Lowerer *L, const AstNode *root, int file);
/* Records every top-level name's final variable in the program's exports. */
void lower_export(Lowerer *L);

#endif
