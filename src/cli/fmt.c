/* fmt.c — netrun fmt: the canonical layout of a script (netrun-lang(5),
 * LAYOUT), and the verb that applies it.
 *
 * The formatter reads the scanner's tokens and comments (ast_parse_tokens)
 * and writes them again with white space of its own; it never adds,
 * drops or reorders a token, save a trailing comma before a closing
 * bracket, which the grammar ignores.  So:
 *   - statements end at their separators (a ';' becomes a new line), a
 *     '{' ends its line, a '}' starts one; a line break inside ( ) or [ ]
 *     is white space, so any may be added or taken away there;
 *   - a comment after a token on its line stays after it; a comment on a
 *     line of its own stays on a line of its own, above what followed it;
 *   - the layout depends only on the tokens, the comments' places and
 *     where blank lines were, so formatting the output changes nothing.
 * The result is parsed again and its syntax tree compared with the
 * original's before anything is written (fmt_source). */
#include "cli/fmt.h"
#include "cli/cli.h"
#include "cli/cmd.h"
#include "cli/option.h"
#include "front/ast.h"

#include "parser.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define INDENT 2   /* spaces per block level and per broken bracket */

/* One output line: its indentation, code and trailing comment. */
typedef struct Line {
  int indent;
  char *code;
  size_t len, cap;
  const char *comment;     /* into the source; NULL: none */
  int clen;
  bool blank_before;
  int colon_at, eq_at;     /* offsets in code of the first ':' and '=' outside brackets, or -1 */
  enum { ALIGN_NONE, ALIGN_DECL, ALIGN_KEY } align;
  bool def_start, def_end; /* the first line of a top-level def or op; its last */
} Line;

enum { BLOCK_PLAIN, BLOCK_CONFIG, BLOCK_DEF };

typedef struct Fmt {
  const char *text;
  const AstToken *tok;
  int n;
  int *match;       /* a bracket's partner */
  char *inner;      /* the innermost ( or [ around each token, or 0 */
  bool *unary;      /* a '-' that negates */
  bool *drop;       /* a trailing comma */
  int *ncomment;    /* comments among tok[0..i) */
  Line *lines;
  int nlines, cap;
  int cur;          /* the line being written, or -1 at the start of a new one */
  int indent;
  int prev;         /* the token written last on the current line */
} Fmt;

static bool is_sep(int k) { return k == NEWLINE || k == ';'; }
static bool is_open(int k) { return k == '(' || k == '['; }
static bool is_close(int k) { return k == ')' || k == ']'; }

/* Newlines in the source between tokens a and b (a = -1: the file's start). */
static int newlines_between(const Fmt *f, int a, int b) {
  uint32_t from = a < 0 ? 0 : f->tok[a].end;
  int nl = 0;
  for (uint32_t i = from; i < f->tok[b].start; i++) nl += f->text[i] == '\n';
  return nl;
}

/* The previous token or comment that is no separator, or -1. */
static int prev_item(const Fmt *f, int i) {
  for (i--; i >= 0; i--)
    if (!is_sep(f->tok[i].kind)) return i;
  return -1;
}

/* A '-' is a negation after nothing, a separator, a bracket, a comma, an
 * operator or a keyword that takes an expression. */
static bool negates_after(int k) {
  switch (k) {
  case -1: case NEWLINE: case ';': case '(': case '[': case '{': case ',': case '=': case ':':
  case '+': case '-': case '*': case '/': case '@': case '<': case '>':
  case POW: case IDIV: case EQ: case NE: case LE: case GE: case ARROW:
  case AND: case OR: case NOT: case RETURN: case IF: case WHILE: case ELSE:
    return true;
  default:
    return false;
  }
}

/* Spaces between token p and token t written after it on one line. */
static int gap(const Fmt *f, int p, int t) {
  int kp = f->tok[p].kind, kt = f->tok[t].kind;
  if (is_open(kp) || is_close(kt) || kt == ',') return 0;
  if (kt == '(' && (kp == NAME || kp == GRAD || is_close(kp))) return 0;
  if (kt == '[' && (kp == NAME || kp == GRADNAME || is_close(kp))) return 0;
  /* slices x[1:2], keyword arguments f(x, axis=1) */
  if ((kt == ':' && f->inner[t] == '[') || (kp == ':' && f->inner[p] == '[')) return 0;
  if ((kt == '=' && f->inner[t]) || (kp == '=' && f->inner[p])) return 0;
  if (kp == '-' && f->unary[p]) return 0;
  if (kp == '{' && kt == '}') return 0;
  return 1;
}

static int tok_len(const Fmt *f, int i) { return (int)(f->tok[i].end - f->tok[i].start); }
static bool has_comment(const Fmt *f, int a, int b) { return f->ncomment[b] > f->ncomment[a]; }

/* Width of tokens a..b-1 on one line (no comment among them). */
static int flat_width(const Fmt *f, int a, int b) {
  int w = 0, p = -1;
  for (int i = a; i < b; i++) {
    if (f->drop[i]) continue;
    w += (p >= 0 ? gap(f, p, i) : 0) + tok_len(f, i);
    p = i;
  }
  return w;
}

/* ---- output lines ---------------------------------------------------------- */

static Line *new_line(Fmt *f) {
  if (f->nlines == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 64;
    f->lines = mem_alloc(f->lines, sizeof *f->lines * (size_t)f->cap);
  }
  Line *l = &f->lines[f->nlines++];
  *l = (Line){.indent = f->indent, .colon_at = -1, .eq_at = -1};
  return l;
}

static void put(Line *l, const char *s, size_t n) {
  if (l->len + n + 1 > l->cap) {
    l->cap = (l->len + n + 1) * 2;
    l->code = mem_alloc(l->code, l->cap);
  }
  memcpy(l->code + l->len, s, n);
  l->len += n;
  l->code[l->len] = '\0';
}

static int column(const Fmt *f) {
  return f->cur < 0 ? f->indent : f->lines[f->cur].indent + (int)f->lines[f->cur].len;
}

static void emit_tok(Fmt *f, int i) {
  if (f->drop[i]) return;
  if (f->cur < 0) {
    new_line(f);
    f->cur = f->nlines - 1;
  } else if (gap(f, f->prev, i)) {
    put(&f->lines[f->cur], " ", 1);
  }
  Line *l = &f->lines[f->cur];
  int k = f->tok[i].kind;
  if (!f->inner[i] && k == ':' && l->colon_at < 0) l->colon_at = (int)l->len;
  if (!f->inner[i] && k == '=' && l->eq_at < 0) l->eq_at = (int)l->len;
  put(l, f->text + f->tok[i].start, (size_t)tok_len(f, i));
  f->prev = i;
}

static void newline(Fmt *f) { f->cur = -1; }

/* A comment after a token on its line stays there; one on a line of its
 * own gets a line of its own.  Either way the next token starts a line. */
static void emit_comment(Fmt *f, int i) {
  const char *s = f->text + f->tok[i].start;
  int n = tok_len(f, i);
  while (n > 1 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r' || s[n - 1] == '\f' ||
                   s[n - 1] == '\v'))
    n--;
  int p = prev_item(f, i);
  Line *l;
  if (p >= 0 && newlines_between(f, p, i) == 0 && f->nlines > 0 && !f->lines[f->nlines - 1].comment) {
    l = &f->lines[f->nlines - 1];
  } else {
    l = new_line(f);
    l->blank_before = p >= 0 && f->tok[p].kind != '{' && newlines_between(f, p, i) >= 2;
  }
  l->comment = s;
  l->clen = n;
  newline(f);
}

/* The end of the element that starts at token a, inside a bracket group
 * that ends at b: the next ',' at this level, or b. */
static int element_end(const Fmt *f, int a, int b) {
  int x = a;
  while (x < b && f->tok[x].kind != ',') x = is_open(f->tok[x].kind) ? f->match[x] + 1 : x + 1;
  return x;
}

/* Writes tokens a..b-1, breaking a bracket whose contents do not fit on
 * the line (or hold a comment) into one element a line. */
static void emit_range(Fmt *f, int a, int b) {
  for (int k = a; k < b; k++) {
    int kind = f->tok[k].kind;
    if (kind == AST_TOK_COMMENT) {
      emit_comment(f, k);
      continue;
    }
    if (!is_open(kind)) {
      emit_tok(f, k);
      continue;
    }
    int m = f->match[k];
    /* what must fit after it: the rest of its element up to a comment */
    int e = element_end(f, m + 1, b), c = m + 1;
    while (c < e && f->tok[c].kind != AST_TOK_COMMENT) c++;
    int w = flat_width(f, k, c) + (c == e && e < b ? 1 : 0);
    int col = column(f) + (f->cur >= 0 ? gap(f, f->prev, k) : 0);
    if (m == k + 1 || (!has_comment(f, k, m) && col + w <= FMT_WIDTH)) {
      for (int x = k; x <= m; x++) emit_tok(f, x);
      k = m;
      continue;
    }
    emit_tok(f, k);
    f->indent += INDENT;
    newline(f);
    for (int x = k + 1; x < m;) {
      int y = element_end(f, x, m);
      emit_range(f, x, y);
      if (y < m) emit_tok(f, y++);
      /* a comment after the comma stays on the element's line */
      if (y < m && f->tok[y].kind == AST_TOK_COMMENT && newlines_between(f, y - 1, y) == 0)
        emit_comment(f, y++);
      newline(f);
      x = y;
    }
    f->indent -= INDENT;
    newline(f);
    emit_tok(f, m);
    k = m;
  }
}

/* One statement (or its head up to '{', or a '}' and what follows it on
 * its line): tokens a..b-1. */
static void emit_statement(Fmt *f, int a, int b, int block) {
  int first = f->nlines;
  int last = b - 1;
  bool trailing = f->tok[last].kind == AST_TOK_COMMENT && newlines_between(f, last - 1, last) == 0;
  int code_end = trailing ? last : b;
  if (!has_comment(f, a, code_end) && f->indent + flat_width(f, a, code_end) <= FMT_WIDTH) {
    for (int k = a; k < code_end; k++) emit_tok(f, k);
    if (trailing) emit_comment(f, last);
  } else {
    emit_range(f, a, b);
  }
  newline(f);
  if (first >= f->nlines) return;
  Line *l = &f->lines[first];
  int p = prev_item(f, a);
  l->blank_before = p >= 0 && f->tok[p].kind != '{' && f->tok[a].kind != '}' && newlines_between(f, p, a) >= 2;
  if (f->nlines == first + 1) {
    int k0 = f->tok[a].kind;
    if ((k0 == INPUT || k0 == PARAM || k0 == STATE) && l->colon_at >= 0) l->align = ALIGN_DECL;
    else if (block == BLOCK_CONFIG && k0 == NAME && b - a > 1 && f->tok[a + 1].kind == '=') l->align = ALIGN_KEY;
  }
}

/* Pads the code of line l by n spaces at offset at. */
static void pad_at(Line *l, int at, int n) {
  if (n <= 0) return;
  char sp[FMT_WIDTH];
  memset(sp, ' ', sizeof sp);
  size_t tail = l->len - (size_t)at;
  for (int left = n; left > 0; left -= FMT_WIDTH)   /* the line grows by n, however large */
    put(l, sp, (size_t)(left < FMT_WIDTH ? left : FMT_WIDTH));
  memmove(l->code + at + n, l->code + at, tail);
  memset(l->code + at, ' ', (size_t)n);
  if (l->eq_at >= at) l->eq_at += n;
}

/* Runs of input/param/state lines align their ':'; runs of a config
 * block's KEY = VALUE lines their '='; runs of lines with code and a
 * trailing comment their comments.  A run is unbroken by blank lines. */
static void align(Fmt *f) {
  for (int i = 0; i < f->nlines;) {
    Line *l = &f->lines[i];
    int j = i + 1;
    if (l->align != ALIGN_NONE) {
      while (j < f->nlines && f->lines[j].align == l->align && f->lines[j].indent == l->indent &&
             !f->lines[j].blank_before)
        j++;
      if (l->align == ALIGN_DECL) {
        int col = 0;
        for (int k = i; k < j; k++) col = f->lines[k].colon_at > col ? f->lines[k].colon_at : col;
        for (int k = i; k < j; k++) {
          Line *m = &f->lines[k];
          int n = col - m->colon_at;
          pad_at(m, m->colon_at, n);
          m->colon_at += n;
        }
      } else {
        int col = 0;
        for (int k = i; k < j; k++) col = f->lines[k].eq_at > col ? f->lines[k].eq_at : col;
        for (int k = i; k < j; k++)
          if (f->lines[k].eq_at >= 0) pad_at(&f->lines[k], f->lines[k].eq_at, col - f->lines[k].eq_at);
      }
    }
    i = j;
  }
}

/* Trailing comments line up in a run of code lines of one indentation
 * (unbroken by a blank line or a line of comment only), two spaces after the longest line of
 * the run that has one. */
static void write_out(Fmt *f, FILE *out) {
  for (int i = 0; i < f->nlines;) {
    int j = i, col = 0;
    while (j < f->nlines && f->lines[j].len && f->lines[j].comment &&
           (j == i || (!f->lines[j].blank_before && f->lines[j].indent == f->lines[i].indent))) {
      int w = f->lines[j].indent + (int)f->lines[j].len + 2;
      col = w > col ? w : col;
      j++;
    }
    if (j == i) j = i + 1;
    for (int k = i; k < j; k++) {
      Line *l = &f->lines[k];
      if (l->blank_before && k > 0) fputc('\n', out);
      fprintf(out, "%*s%s", l->len || l->comment ? l->indent : 0, "", l->code ? l->code : "");
      if (l->comment) {
        int pad = l->len ? col - l->indent - (int)l->len : 0;
        fprintf(out, "%*s%.*s", pad, "", l->clen, l->comment);
      }
      fputc('\n', out);
    }
    i = j;
  }
}

/* Blank lines around a top-level def or op: before it (and the comments
 * right above it) and after its closing brace. */
static void space_defs(Fmt *f) {
  for (int i = 0; i < f->nlines; i++) {
    Line *l = &f->lines[i];
    if (l->def_start) {
      int m = i;
      while (m > 0 && !f->lines[m].blank_before && !f->lines[m - 1].len && f->lines[m - 1].comment &&
             f->lines[m - 1].indent == 0)
        m--;
      if (m > 0) f->lines[m].blank_before = true;
    }
    if (l->def_end && i + 1 < f->nlines) f->lines[i + 1].blank_before = true;
  }
}

/* The token tables the layout reads: bracket partners, the bracket
 * around each token, negations, trailing commas, comment counts. */
static void analyse(Fmt *f) {
  int n = f->n;
  f->match = mem_calloc((size_t)n + 1, sizeof *f->match);
  f->inner = mem_calloc((size_t)n + 1, 1);
  f->unary = mem_calloc((size_t)n + 1, sizeof *f->unary);
  f->drop = mem_calloc((size_t)n + 1, sizeof *f->drop);
  f->ncomment = mem_calloc((size_t)n + 1, sizeof *f->ncomment);
  int *stack = mem_calloc((size_t)n + 1, sizeof *stack);
  int sp = 0, prevk = -1;
  for (int i = 0; i < n; i++) {
    int k = f->tok[i].kind;
    f->ncomment[i + 1] = f->ncomment[i] + (k == AST_TOK_COMMENT);
    if (k == AST_TOK_COMMENT) continue;
    if (is_close(k) && sp > 0) {
      int o = stack[--sp];
      f->match[o] = i;
      f->match[i] = o;
    }
    f->inner[i] = sp > 0 ? (char)f->tok[stack[sp - 1]].kind : 0;
    if (is_open(k)) stack[sp++] = i;
    f->unary[i] = k == '-' && negates_after(prevk);
    if (is_close(k) && prevk == ',') {
      for (int j = i - 1; j >= 0; j--)
        if (f->tok[j].kind == ',') {
          f->drop[j] = true;
          break;
        }
    }
    prevk = k;
  }
  mem_free(stack);
}

/* Where the line that starts at token i ends: at a separator, after a
 * '{' that opens a block with something in it, before a '}' (but the one
 * it starts with). */
static int line_end(const Fmt *f, int i) {
  int j = i;
  for (; j < f->n; j++) {
    int k = f->tok[j].kind;
    if (is_sep(k)) break;
    if (k == '}' && j > i) break;
    if (k == '{') {
      if (j + 1 < f->n && f->tok[j + 1].kind == '}') {
        j++;
        continue;
      }
      j++;
      break;
    }
  }
  return j;
}

static void layout(Fmt *f) {
  char blocks[LEX_MAX_NEST + 1];
  int depth = 0;
  blocks[0] = BLOCK_PLAIN;
  for (int i = 0; i < f->n;) {
    int k = f->tok[i].kind;
    if (is_sep(k)) {
      i++;
      continue;
    }
    if (k == '}' && depth > 0) depth--;
    f->indent = depth * INDENT;
    if (k == AST_TOK_COMMENT) {
      emit_comment(f, i++);
      continue;
    }
    int j = line_end(f, i);
    int first = f->nlines;
    emit_statement(f, i, j, blocks[depth]);
    bool opens = f->tok[j - 1].kind == '{' ||
                 (j >= 2 && f->tok[j - 1].kind == AST_TOK_COMMENT && f->tok[j - 2].kind == '{');
    if (first < f->nlines) {
      if (depth == 0 && (k == DEF || k == OP)) f->lines[first].def_start = true;
      if (depth == 0 && k == '}' && blocks[1] == BLOCK_DEF && !opens) f->lines[f->nlines - 1].def_end = true;
    }
    if (opens && depth < LEX_MAX_NEST) {
      int kind = BLOCK_PLAIN;
      if (depth == 0 && (k == DEF || k == OP || (k == '}' && blocks[1] == BLOCK_DEF))) kind = BLOCK_DEF;
      else if (k == NAME && j - i >= 2 && f->tok[i + 1].kind == '{') kind = BLOCK_CONFIG;
      blocks[++depth] = (char)kind;
    }
    i = j;
  }
  space_defs(f);
  align(f);
}

/* ---- the check: the result parses to the same tree, with the same comments */

static char *tree_text(const AstNode *root, const char *text, const AstTokens *t) {
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m) mem_oom(0);
  ast_print(m, root);
  for (int i = 0; i < t->n; i++)
    if (t->items[i].kind == AST_TOK_COMMENT) {
      const char *s = text + t->items[i].start;
      int n = (int)(t->items[i].end - t->items[i].start);
      while (n > 1 && strchr(" \t\r\f\v", s[n - 1])) n--;
      fprintf(m, "%.*s\n", n, s);
    }
  fclose(m);
  return buf;
}

static bool same_meaning(Diag *d, int file, const AstNode *root, const AstTokens *toks, const char *out,
                         size_t len) {
  Arena arena;
  arena_init(&arena);
  Diag quiet;
  diag_init(&quiet, &arena);
  quiet.max_errors = 0;
  int idx = diag_add_source(&quiet, d->files[file].path, NULL, out, len);
  AstTokens t2;
  AstNode *root2 = ast_parse_tokens(&arena, &quiet, idx, &t2);
  bool same = false;
  if (root2) {
    char *a = tree_text(root, d->files[file].text, toks);
    char *b = tree_text(root2, quiet.files[idx].text, &t2);
    same = strcmp(a, b) == 0;
    free(a);
    free(b);
  }
  arena_free(&arena);
  return same;
}

char *fmt_source(Diag *d, int file, size_t *len, bool *parsed) {
  Arena arena;
  arena_init(&arena);
  AstTokens toks;
  AstNode *root = ast_parse_tokens(&arena, d, file, &toks);
  *parsed = root != NULL;
  if (!root) {
    arena_free(&arena);
    return NULL;
  }
  Fmt f = {.text = d->files[file].text, .tok = toks.items, .n = toks.n, .cur = -1};
  analyse(&f);
  layout(&f);
  char *buf = NULL;
  size_t n = 0;
  FILE *m = open_memstream(&buf, &n);
  if (!m) mem_oom(0);
  write_out(&f, m);
  fclose(m);
  for (int i = 0; i < f.nlines; i++) mem_free(f.lines[i].code);
  mem_free(f.lines);
  mem_free(f.match);
  mem_free(f.inner);
  mem_free(f.unary);
  mem_free(f.drop);
  mem_free(f.ncomment);
  char *out = mem_alloc(NULL, n + 1);
  memcpy(out, buf, n + 1);
  free(buf);
  if (!same_meaning(d, file, root, &toks, out, n)) {
    diag_error(d, SPAN_NONE, "%s: internal error: the formatted text would not parse to the same program; "
               "the file is left as it is", d->files[file].path);
    mem_free(out);
    out = NULL;
  }
  arena_free(&arena);
  *len = n;
  return out;
}

/* ---- the verb ------------------------------------------------------------------ */

enum { O_CHECK = 1 };
static const Option fmt_options[] = {
    {"--check", OPTION_FLAG, NULL, NULL, O_CHECK, 0},
    {NULL, OPTION_FLAG, NULL, NULL, 0, 0},
};

/* Reads standard input whole into a new source of d; -1 on failure. */
static int read_stdin(Diag *d) {
  size_t len = 0, cap = 1 << 16;
  char *buf = mem_alloc(NULL, cap);
  for (size_t got; (got = fread(buf + len, 1, cap - len, stdin)) > 0;) {
    len += got;
    if (len > DIAG_MAX_SOURCE) {
      mem_free(buf);
      diag_error(NULL, SPAN_NONE, "standard input is larger than %d MB", DIAG_MAX_SOURCE >> 20);
      return -1;
    }
    if (len == cap) buf = mem_alloc(buf, cap *= 2);
  }
  if (ferror(stdin)) {
    mem_free(buf);
    diag_error(NULL, SPAN_NONE, "cannot read standard input: %s", strerror(errno));
    return -1;
  }
  int idx = diag_add_source(d, "<stdin>", NULL, buf, len);
  mem_free(buf);
  return idx;
}

static bool write_file(const char *path, const char *text, size_t len) {
  AtomicFile a;
  char err[256];
  if (!file_begin(&a, path, err, sizeof err) || !file_commit(&a, file_write_all(a.fd, text, len), err, sizeof err)) {
    diag_error(NULL, SPAN_NONE, "cannot write %s: %s", path, err);
    return false;
  }
  return true;
}

/* fmt FILE...: 0 done (with --check: nothing would change), 1 with
 * --check when a file would change (or the formatter failed its own
 * check), 2 a usage error or a file that cannot be read or parsed (left
 * untouched). */
int cmd_fmt(int argc, char **argv) {
  OptionParser p;
  option_init(&p, argc, argv, (const Option *const[]){fmt_options, NULL}, "");
  bool check = false;
  const char **files = mem_calloc((size_t)argc + 1, sizeof *files);
  int nfiles = 0, id;
  while ((id = option_next(&p)) != OPTION_END) {
    if (id == OPTION_ERROR) {
      mem_free(files);
      return EXIT_USAGE;
    }
    if (id == O_CHECK) check = true;
    else files[nfiles++] = p.value;
  }
  if (nfiles == 0) {
    mem_free(files);
    return diag_usage("%s", "fmt needs a FILE (or - for standard input)");
  }
  int status = 0;
  for (int i = 0; i < nfiles; i++) {
    Arena arena;
    arena_init(&arena);
    Diag d;
    diag_init(&d, &arena);
    bool from_stdin = strcmp(files[i], "-") == 0;
    int idx = from_stdin ? read_stdin(&d) : diag_load_file(&d, files[i]);
    size_t len = 0;
    bool parsed = false;
    char *out = idx >= 0 ? fmt_source(&d, idx, &len, &parsed) : NULL;
    if (!out) {
      status = idx >= 0 && parsed ? EXIT_SCRIPT : EXIT_USAGE;
    } else {
      const Source *src = &d.files[idx];
      bool same = len == src->len && memcmp(out, src->text, len) == 0;
      if (check) {
        if (!same) {
          printf("%s\n", src->path);
          if (status == 0) status = EXIT_SCRIPT;
        }
      } else if (from_stdin) {
        fwrite(out, 1, len, stdout);
      } else if (!same && !write_file(files[i], out, len)) {
        status = EXIT_USAGE;
      }
    }
    mem_free(out);
    diag_finish(&d);
    arena_free(&arena);
  }
  mem_free(files);
  fflush(stdout);
  return status;
}
