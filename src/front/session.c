/* session.c — loading a script into a session of its own (session.h). */
#include "front/session.h"

#include "front/userop.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *session_stdlib_dir(void) {
  static char dir[PATH_MAX + 32];
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return NULL;
  exe[n] = 0;
  char *slash = strrchr(exe, '/');
  if (!slash) return NULL;
  *slash = 0;
  static const char *const rel[] = {"/../share/netrun/stdlib", "/stdlib", "/../../stdlib"};
  for (size_t i = 0; i < sizeof rel / sizeof *rel; i++) {
    snprintf(dir, sizeof dir, "%s%s", exe, rel[i]);
    if (access(dir, R_OK) == 0) {
      char *real = mem_realpath(dir);
      if (real) {
        snprintf(dir, sizeof dir, "%s", real);
        mem_free(real);
      }
      return dir;
    }
  }
  return NULL;
}

void session_init(Session *s) {
  arena_init(&s->arena);
  diag_init(&s->diag, &s->arena);
  s->L = lower_new(&s->arena, &s->diag, session_stdlib_dir(), &uop_impl);
  s->prog = lower_program(s->L);
}

static bool promote_f64;

void session_set_f64(bool on) { promote_f64 = on; }

bool session_load(Session *s, const char *path) {
  session_init(s);
  bool ok = lower_file(s->L, path);
  s->prog = lower_program(s->L);
  if (ok && promote_f64) {
    int before = s->diag.nerrors;
    lower_promote_f64(s->L);
    ok = s->diag.nerrors == before;
  }
  diag_finish(&s->diag);
  return ok;
}

void session_free(Session *s) {
  lower_free(s->L);
  reg_release_user_ops(s->prog);
  arena_free(&s->arena);
}
