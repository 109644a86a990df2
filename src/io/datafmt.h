/* datafmt.h — inside src/io: the dataset readers data_formats' rows call
 * (formats.c), each in its own file.  Not for code outside src/io: the
 * rest of netrun asks data.h. */
#ifndef NETRUN_DATAFMT_H
#define NETRUN_DATAFMT_H

#include "io/data.h"

/* Columns chosen by name (opt->columns, opt->labels) are a CSV file's:
 * with other data, an error (reported), not ignored. */
bool data_only_csv_columns(Diag *d, const char *spec, const DataOptions *opt);

/* idx.c: IMAGES:LABELS (p->spec split at its colon), and Fashion-MNIST's
 * files (opt->split). */
bool data_idx_open(Diag *d, DataProbe *p, Dataset *ds);
bool data_fashion_open(Diag *d, DataProbe *p, Dataset *ds);
/* Whether p->head starts like an IDX file of unsigned bytes. */
bool data_idx_sniff(const DataProbe *p);

/* csv.c: a CSV file read from p->fd (closed here), and --feed's reader. */
bool data_csv_open(Diag *d, DataProbe *p, Dataset *ds);
Tensor *data_csv_feed(Diag *d, int fd, const char *path, const VarDesc *decl);

#endif
