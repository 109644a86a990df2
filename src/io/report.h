/* report.h — what `predict` and `eval` hand back to the user beyond their
 * text: predictions written as CSV, JSON or NumPy files (--format, -o), and
 * the confusion matrix of a classifier (eval --confusion).
 *
 * ---- predict --format ------------------------------------------------------
 * The values named by --output (in order) are collected batch by batch and
 * joined along their first dimension (a scalar per batch becomes one row);
 * a value computed once (fed inputs) is written as it is.  Nothing is cut
 * short.
 *   csv   one row per example (the first dimension; a scalar is one row), a
 *         header naming the columns: first `id`, then NAME for a value with
 *         one element per example, NAME[i] for element i of an example
 *         flattened in C order.  Every value must have the same number of
 *         rows.  A row's id is ids[i] when given and the rows are the
 *         nexamples examples, else its number from 1 (a CSV file's data
 *         row, or the row of fed inputs).  A text field holding a comma,
 *         a quote or a line break is quoted, quotes doubled (RFC 4180).
 *   json  one document {"NAME": {"dtype": "f32", "shape": [...], "data":
 *         [...]}, ...}, data flattened in C order; f32 in 9 significant
 *         digits (f64 in 17), NaN and infinities as "nan", "inf", "-inf".
 *   npy   one value: a .npy file; several: a .npz archive of NAME.npy
 *         members.  Needs -o FILE (the bytes are not for a terminal).
 * In csv an f32 is written as in json (non-finite as nan, inf, -inf,
 * unquoted), an i64 exactly, a bool as 0 or 1.  With class_names, value 0
 * is class numbers written as their names (json: dtype "str", the names
 * as strings; a number without a name stays a number); npy keeps numbers.
 *
 * ---- eval --confusion -------------------------------------------------------
 * Counts (true class, predicted class) over every example; the classes are
 * 0 .. K-1, K the logits' width (2 for one logit per example) or more when
 * a label is larger.  Per class: precision TP/(TP+FP), recall TP/(TP+FN)
 * (undefined when the denominator is 0: "-" in text, null in JSON), and
 * accuracy (TP+TN)/N, the class taken one against the rest. */
#ifndef NETRUN_REPORT_H
#define NETRUN_REPORT_H

#include "ir/tensor.h"
#include <stdio.h>

typedef enum ReportFormat { REPORT_TEXT, REPORT_CSV, REPORT_JSON, REPORT_NPY } ReportFormat;
#define REPORT_FORMATS "text, csv, json or npy"
#define REPORT_MAX_OUTPUTS 16

/* The format named s; false when s names none. */
bool report_format(const char *s, ReportFormat *f);

/* The values of --output collected for one of the files above. */
typedef struct ReportValues {
  ReportFormat format;
  int n;
  const char *names[REPORT_MAX_OUTPUTS];
  Tensor **parts[REPORT_MAX_OUTPUTS];   /* each value's batches, in order */
  int nparts[REPORT_MAX_OUTPUTS];
  /* Set after report_values_init, else none: */
  const char *const *class_names;       /* value 0's classes' names, nclasses of them */
  int nclasses;
  const char *const *ids;               /* csv: the examples' ids, nexamples of them */
  int64_t nexamples;
} ReportValues;

void report_values_init(ReportValues *r, ReportFormat f, int n, const char *const *names);
/* Keeps a copy of value k's next batch v. */
void report_values_add(ReportValues *r, int k, const Tensor *v);
/* Writes the values to path (NULL or "-": standard output); false,
 * reported, on error. */
bool report_values_write(ReportValues *r, const char *path);
void report_values_free(ReportValues *r);
/* Class c's name (class_names), or NULL when it has none. */
const char *report_class_name(const ReportValues *r, int64_t c);

/* s as a JSON string (quotes, backslashes and control bytes escaped). */
void report_json_string(FILE *f, const char *s);

/* eval --confusion's counts. */
typedef struct Confusion {
  int64_t k;        /* classes */
  int64_t *m;       /* k*k: m[true*k + predicted] */
} Confusion;

/* Counts one example; classes is the logits' count of classes.  A
 * negative class is not counted (false). */
bool report_confusion_add(Confusion *c, int64_t classes, int64_t truth, int64_t pred);
/* The matrix and the per-class figures as text, or the members of a JSON
 * object ("classes", "confusion", "per_class": a fragment, no braces). */
void report_confusion_text(FILE *f, const Confusion *c);
void report_confusion_json(FILE *f, const Confusion *c);
void report_confusion_free(Confusion *c);

#endif
