/* option.h — the one command-line option parser.  Options are declared in
 * tables (getopt_long's idea): a name, whether it takes a value, and what
 * the value must be, which is also what its usage error says.  The verbs
 * of cli.h share one table whose rows say which groups of options have
 * them (--batch: train, eval, predict, lr-find, summary, data); plot,
 * export, checkpoint and the global options have small tables of their
 * own (groups 0: always seen).  option_next() walks argv and returns the
 * options one at a time; the verb's own code only stores the values.
 *
 * The forms accepted:
 *   --name value    --name=value    (an option that takes a value)
 *   -o value                        (a one-letter option: no '=' form)
 *   --name                          (a flag; --name=value is refused)
 *   --name[=value]                  (OPTION_EQ_VALUE: a value only after '=')
 * Anything else that starts with '-' (but '-' alone) is an unknown option;
 * the rest are arguments, in their order.  There are no abbreviations and
 * no bundled one-letter flags.
 *
 * Every usage error goes through diag_usage (diag.h):
 *   VERB: unknown option '--x'
 *   PREFIX--name needs NEEDS            (missing, or bad with option_bad)
 *   PREFIX--name=METAVAR needs NEEDS    (an OPTION_EQ_VALUE given '=' and nothing)
 *   PREFIX--name takes no value         (a flag given '=value')
 * PREFIX is the parser's: "" for most verbs, "data: " for netrun data. */
#ifndef NETRUN_OPTION_H
#define NETRUN_OPTION_H

#include <stdbool.h>
#include <stdint.h>

typedef enum OptionArg {
  OPTION_FLAG,       /* no value */
  OPTION_VALUE,      /* a value: the next argument, or after '=' */
  OPTION_EQ_VALUE,   /* a value only after '=', which may be left out */
} OptionArg;

typedef struct Option {
  const char *name;      /* "--seed", "-o"; NULL ends a table */
  OptionArg arg;
  const char *metavar;   /* the value's name in help and messages: "N", "PATH" */
  const char *needs;     /* what the value must be: "a whole number of at least 0" */
  int id;                /* what option_next returns for it: > 0 */
  unsigned groups;       /* 0, or the groups that have it: then a parser
                            whose groups share none does not see it (cli.h) */
} Option;

/* What option_next returns besides an option's id. */
enum { OPTION_END = 0, OPTION_ARG = -1, OPTION_ERROR = -2 };

typedef struct OptionParser {
  int argc;
  char **argv;                  /* argv[0] is the verb */
  int next;                     /* the index option_next reads next */
  const Option *const *tables;  /* NULL-terminated; the first table that names an option wins */
  const char *prefix;           /* before a value's message: "" or "data: " */
  unsigned groups;              /* which options of grouped tables it sees */
  const Option *one[2];         /* option_init_groups's table, NULL */
  bool keep_unknown;            /* an unknown option comes back as an argument */
  const Option *opt;            /* the option just returned */
  const char *value;            /* its value (NULL for a flag), or the argument */
} OptionParser;

void option_init(OptionParser *p, int argc, char **argv, const Option *const *tables, const char *prefix);
/* The same over one table whose rows say their groups: only the options
 * of the groups named are seen. */
void option_init_groups(OptionParser *p, int argc, char **argv, const Option *table, unsigned groups,
                        const char *prefix);
/* The id of the next option, with p->value; OPTION_ARG with the argument
 * in p->value; OPTION_END; or OPTION_ERROR, the usage error reported. */
int option_next(OptionParser *p);

/* Reports that the value of the option just returned is not what it needs
 * ("--seed needs a whole number of at least 0, not 'x'"); returns EXIT_USAGE. */
int option_bad(const OptionParser *p);
/* The value as a whole number >= lo, or as a finite number > 0 (>= 0 with
 * zero_ok); false with the error reported (option_bad). */
bool option_int(const OptionParser *p, int64_t lo, int64_t *out);
bool option_real(const OptionParser *p, bool zero_ok, double *out);

#endif
