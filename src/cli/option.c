/* option.c — the one command-line option parser (option.h): finds each
 * argument's option in the verb's tables, takes its value, and reports
 * usage errors through diag_usage. */
#include "cli/option.h"

#include "base/diag.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void option_init(OptionParser *p, int argc, char **argv, const Option *const *tables, const char *prefix) {
  memset(p, 0, sizeof *p);
  p->argc = argc;
  p->argv = argv;
  p->next = 1;
  p->tables = tables;
  p->prefix = prefix ? prefix : "";
}

void option_init_groups(OptionParser *p, int argc, char **argv, const Option *table, unsigned groups,
                        const char *prefix) {
  option_init(p, argc, argv, p->one, prefix);
  p->one[0] = table;
  p->groups = groups;
}

/* The option called name (its first len bytes) that p sees, or NULL. */
static const Option *find(const OptionParser *p, const char *name, size_t len) {
  for (const Option *const *t = p->tables; *t; t++)
    for (const Option *o = *t; o->name; o++)
      if ((!o->groups || (o->groups & p->groups)) && strlen(o->name) == len && strncmp(o->name, name, len) == 0)
        return o;
  return NULL;
}

/* The option p sees nearest to the misspelt name (its first len bytes). */
static const char *nearest(const OptionParser *p, const char *name, size_t len) {
  const char *cands[512];
  int n = 0;
  for (const Option *const *t = p->tables; *t; t++)
    for (const Option *o = *t; o->name && n < 512; o++)
      if (!o->groups || (o->groups & p->groups)) cands[n++] = o->name;
  char typed[64];
  if (len >= sizeof typed) return NULL;
  memcpy(typed, name, len);
  typed[len] = 0;
  return diag_nearest(typed, cands, n);
}

int option_next(OptionParser *p) {
  p->opt = NULL;
  p->value = NULL;
  if (p->next >= p->argc) return OPTION_END;
  const char *arg = p->argv[p->next++];
  if (arg[0] != '-' || !arg[1]) {
    p->value = arg;
    return OPTION_ARG;
  }
  /* Only a long option (--name) takes its value after '='. */
  const char *eq = arg[1] == '-' ? strchr(arg, '=') : NULL;
  const Option *o = find(p, arg, eq ? (size_t)(eq - arg) : strlen(arg));
  if (!o && p->keep_unknown) {
    p->value = arg;
    return OPTION_ARG;
  }
  if (!o) {
    const char *near = nearest(p, arg, eq ? (size_t)(eq - arg) : strlen(arg));
    diag_usage("%s: unknown option '%s'%s%s%s", p->argv[0], arg, DIAG_MEAN(near));
    return OPTION_ERROR;
  }
  p->opt = o;
  if (o->arg == OPTION_FLAG && eq) {
    diag_usage("%s%s takes no value", p->prefix, o->name);
    return OPTION_ERROR;
  }
  if (o->arg == OPTION_EQ_VALUE && eq && !eq[1]) {
    diag_usage("%s%s=%s needs %s", p->prefix, o->name, o->metavar, o->needs);
    return OPTION_ERROR;
  }
  if (o->arg == OPTION_VALUE) {
    p->value = eq ? eq + 1 : p->next < p->argc ? p->argv[p->next++] : NULL;
    if (!p->value) {
      option_bad(p);
      return OPTION_ERROR;
    }
  } else if (eq) {
    p->value = eq + 1;
  }
  return o->id;
}

int option_bad(const OptionParser *p) {
  if (!p->value) return diag_usage("%s%s needs %s", p->prefix, p->opt->name, p->opt->needs);
  return diag_usage("%s%s needs %s, not '%s'", p->prefix, p->opt->name, p->opt->needs, p->value);
}

bool option_int(const OptionParser *p, int64_t lo, int64_t *out) {
  const char *v = p->value;
  char *end;
  errno = 0;
  long long n = v ? strtoll(v, &end, 10) : 0;
  if (!v || !*v || *end || errno || n < lo) {
    option_bad(p);
    return false;
  }
  *out = n;
  return true;
}

bool option_real(const OptionParser *p, bool zero_ok, double *out) {
  const char *v = p->value;
  char *end;
  double x = v ? strtod(v, &end) : 0;
  if (!v || !*v || *end || !isfinite(x) || !(x > 0 || (zero_ok && x == 0))) {
    option_bad(p);
    return false;
  }
  *out = x;
  return true;
}
