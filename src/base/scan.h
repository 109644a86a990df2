/* scan.h — the two steps every small header reader here takes over a byte
 * range [*p, end): skipping white space and taking one expected
 * character (npy.c's Python-literal header, safetensors.c's JSON one). */
#ifndef NETRUN_SCAN_H
#define NETRUN_SCAN_H

#include <stdbool.h>

/* Moves *p past spaces, tabs and line ends. */
static inline void scan_blanks(const char **p, const char *end) {
  while (*p < end && (**p == ' ' || **p == '\t' || **p == '\n' || **p == '\r')) (*p)++;
}

/* After white space, takes c if it is next: true if it was. */
static inline bool scan_eat(const char **p, const char *end, char c) {
  scan_blanks(p, end);
  if (*p < end && **p == c) {
    (*p)++;
    return true;
  }
  return false;
}

#endif
