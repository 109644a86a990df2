/* session.h — a loaded script: the arena, diagnostics, lowerer and program
 * one script (with the stdlib files it imports) lives in, and where the
 * installed stdlib is.  The verbs load one, run it, and free it whole. */
#ifndef NETRUN_SESSION_H
#define NETRUN_SESSION_H

#include "front/lower.h"

typedef struct Session {
  Arena arena;
  Diag diag;
  Lowerer *L;
  Program *prog;
} Session;

/* An empty session: arena, diagnostics, a lowerer and its program. */
void session_init(Session *s);
/* session_init, then lowers the script at path (errors reported and
 * counted); false on error.  Free it with session_free either way. */
bool session_load(Session *s, const char *path);
void session_free(Session *s);
/* --dtype f64: every script session_load loads from now on is promoted to
 * f64 (lower_promote_f64). */
void session_set_f64(bool on);
/* The installed stdlib folder (beside the executable or under
 * ../share/netrun), or NULL when there is none. */
const char *session_stdlib_dir(void);

#endif
