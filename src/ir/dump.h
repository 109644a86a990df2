/* dump.h — printing a program: the stable text format, Graphviz, JSON. */
#ifndef NETRUN_DUMP_H
#define NETRUN_DUMP_H

#include "ir/program.h"

typedef enum DumpFormat { DUMP_TEXT, DUMP_DOT, DUMP_JSON } DumpFormat;

typedef struct DumpOptions {
  DumpFormat format;
  bool startup;     /* also print the startup block (initializers, defaults) */
  bool lines;       /* annotate each op with its source position */
} DumpOptions;

bool dump_parse_format(const char *s, DumpFormat *out);
void dump_program(FILE *f, const Program *p, const DumpOptions *opt);
/* One op in the text format, without indentation or newline. */
void dump_op(FILE *f, const OpDesc *op);

#endif
