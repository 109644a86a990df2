/* lsp.c — netrun lsp: the language server (lsp.h; netrun(1), lsp).
 *
 * One thread reads JSON-RPC messages from standard input (jansson parses
 * and prints them) and answers each before reading the next.  An open
 * document is analysed when it opens and at every change: parsed, lowered
 * and shape-inferred as `netrun dump` would (its imports and the stdlib
 * read from disk), its errors collected through the Diag's sink and
 * published as diagnostics with the CLI's text.  Hover, definition,
 * references, symbols, completion and inlay hints read that analysis:
 * the program's variables (their spans, dtypes and shapes), the syntax
 * trees of the document and the files it imports, the registry, and the
 * train block's keys.  Formatting is netrun fmt's (fmt.h).
 *
 * Robustness: every message is checked before use; one that is not JSON,
 * not a request, or lacks what a method needs gets a JSON-RPC error and
 * the server reads on.  A client that disappears (end of input, a broken
 * pipe) ends the server. */
#include "cli/lsp.h"
#include "cli/cli.h"
#include "cli/cmd.h"
#include "cli/option.h"
#include "cli/fmt.h"
#include "front/userop.h"
#include "train/train.h"

#include "parser.h"

#include <jansson.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

enum {
  RPC_PARSE_ERROR = -32700, RPC_INVALID_REQUEST = -32600, RPC_METHOD_NOT_FOUND = -32601,
  RPC_INVALID_PARAMS = -32602, RPC_NOT_INITIALIZED = -32002, RPC_REQUEST_FAILED = -32803,
};
#define LSP_MAX_DOCS 1000

/* A diagnostic as the Diag's sink received it. */
typedef struct Msg {
  char kind;       /* 'e', 'w', 'n' */
  Span at;
  char *text;
} Msg;

/* A name bound to a variable, at a place in the document. */
typedef struct Bound {
  const char *name, *var;
  Span at;
} Bound;

/* A parsed source of the analysis: the document, or a file it imports. */
typedef struct Parsed {
  AstNode *root;
  AstTokens toks;
} Parsed;

/* One analysis of a document's text. */
typedef struct Analysis {
  Arena arena;
  Diag diag;
  Lowerer *L;
  Program *prog;
  Msg *msgs;
  int nmsgs, capmsgs;
  Bound *bound;        /* bindings in the document, declarations included */
  int nbound, capbound;
  Diag quiet;          /* the syntax trees' own Diag: one source per diag source */
  Parsed *parsed;      /* per source of diag, parsed on first use */
} Analysis;

typedef struct Doc {
  char *uri, *path, *text;
  size_t len;
  Analysis *an;
} Doc;

struct LspServer {
  FILE *out;
  /* completion's items for every callable op and stdlib function, made
   * on the first completion and shared by every list after it */
  json_t *op_items, *stdlib_items;
  char *stdlib_dir;    /* where imports of the stdlib are read, found once */
  Doc *docs;
  int ndocs;
  bool initialized, shutdown, exited, broken;
};

/* ---- text positions: LSP counts UTF-16 units within a line -------------------- */

static int utf8_units(const char *s, size_t n, size_t *adv) {
  unsigned char c = (unsigned char)s[0];
  size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (len > n) len = 1;
  *adv = len;
  return len == 4 ? 2 : 1;
}

static json_t *position(const char *text, size_t len, uint32_t off) {
  if (off > len) off = (uint32_t)len;
  int line = 0;
  size_t ls = 0;
  for (size_t i = 0; i < off; i++)
    if (text[i] == '\n') line++, ls = i + 1;
  int ch = 0;
  for (size_t i = ls; i < off;) {
    size_t adv;
    ch += utf8_units(text + i, len - i, &adv);
    i += adv;
  }
  return json_pack("{s:i,s:i}", "line", line, "character", ch);
}

static json_t *range_of(const char *text, size_t len, uint32_t a, uint32_t b) {
  return json_pack("{s:o,s:o}", "start", position(text, len, a), "end", position(text, len, b));
}

/* The byte offset of an LSP position (clamped to its line and the text). */
static uint32_t offset_of(const char *text, size_t len, json_int_t line, json_int_t ch) {
  size_t i = 0;
  for (json_int_t l = 0; l < line && i < len; i++)
    if (text[i] == '\n') l++;
  for (json_int_t c = 0; c < ch && i < len && text[i] != '\n';) {
    size_t adv;
    c += utf8_units(text + i, len - i, &adv);
    i += adv;
  }
  return (uint32_t)i;
}

/* ---- URIs ------------------------------------------------------------------------ */

static int hexval(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* file:///a%20b/c.net -> /a b/c.net; any other URI is kept as its own name. */
static char *uri_to_path(const char *uri) {
  if (strncmp(uri, "file://", 7) != 0) return mem_strdup(uri);
  const char *s = uri + 7;
  char *p = mem_alloc(NULL, strlen(s) + 1);
  size_t n = 0;
  for (; *s; s++) {
    int h, l;
    if (*s == '%' && (h = hexval(s[1])) >= 0 && (l = hexval(s[2])) >= 0 && (h || l)) {
      p[n++] = (char)(h * 16 + l);
      s += 2;
    } else {
      p[n++] = *s;
    }
  }
  p[n] = '\0';
  return p;
}

static json_t *path_to_uri(const char *path) {
  char *real = mem_realpath(path);
  const char *p = real ? real : path;
  size_t cap = strlen(p) * 3 + 8;
  char *u = mem_alloc(NULL, cap);
  size_t n = (size_t)snprintf(u, cap, "file://");
  for (; *p; p++) {
    unsigned char c = (unsigned char)*p;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("/._-~", c))
      u[n++] = (char)c;
    else
      n += (size_t)snprintf(u + n, cap - n, "%%%02X", c);
  }
  u[n] = '\0';
  json_t *j = json_string(u);
  mem_free(u);
  mem_free(real);
  return j;
}

/* ---- analysis ---------------------------------------------------------------------- */

static void collect(void *ctx, const char *kind, Span at, const char *msg) {
  Analysis *an = ctx;
  *ARENA_PUSH(&an->arena, an->msgs, an->nmsgs, an->capmsgs) =
      (Msg){kind[0], at, arena_strdup(&an->arena, msg)};
}

/* A binding lowering reports.  Its strings may live in a scratch arena
 * (an op's body is checked in one), so they are copied; a binding of a
 * variable the document's program does not hold (one of that scratch
 * program's) is not kept. */
static void on_bind(void *ctx, const char *name, const char *var, Span at) {
  Analysis *an = ctx;
  if (at.file != 0 || !prog_var(an->prog, var)) return;
  *ARENA_PUSH(&an->arena, an->bound, an->nbound, an->capbound) =
      (Bound){arena_strdup(&an->arena, name), arena_strdup(&an->arena, var), at};
}

static Analysis *analyse(const Doc *d, const char *stdlib_dir) {
  Analysis *an = mem_calloc(1, sizeof *an);
  arena_init(&an->arena);
  diag_init(&an->diag, &an->arena);
  an->diag.sink = collect;
  an->diag.sink_ctx = an;
  an->diag.max_errors = 100;
  an->L = lower_new(&an->arena, &an->diag, stdlib_dir, &uop_impl);
  an->prog = lower_program(an->L);
  lower_on_bind(an->L, on_bind, an);
  lower_text(an->L, d->path, d->text, d->len);
  an->prog = lower_program(an->L);
  for (int i = 0; i < an->prog->nallvars; i++) {
    const VarDesc *v = an->prog->allvars[i];
    if (v->user_name && v->span.file == 0 && v->flags & (VAR_INPUT | VAR_PARAM | VAR_KEPT))
      on_bind(an, v->user_name, v->name, v->span);
  }
  diag_init(&an->quiet, &an->arena);
  an->quiet.max_errors = 0;
  an->parsed = arena_alloc(&an->arena, sizeof *an->parsed * (size_t)(an->diag.nfiles + 1));
  return an;
}

static void analysis_free(Analysis *an) {
  if (!an) return;
  lower_free(an->L);
  reg_release_user_ops(an->prog);
  arena_free(&an->arena);
  mem_free(an);
}

/* The syntax tree and tokens of source i of the analysis (NULL root: it
 * does not parse). */
static const Parsed *parsed(Analysis *an, int i) {
  Parsed *p = &an->parsed[i];
  if (!p->toks.items && !p->root) {
    const Source *s = &an->diag.files[i];
    int q = diag_add_source(&an->quiet, s->path, s->realpath, s->text, s->len);
    p->root = ast_parse_tokens(&an->arena, &an->quiet, q, &p->toks);
    if (!p->toks.items) p->toks.items = arena_alloc(&an->arena, 1);
  }
  return p;
}

/* ---- JSON-RPC ------------------------------------------------------------------------- */

static void send(LspServer *s, json_t *msg) {
  json_t *full = json_pack("{s:s}", "jsonrpc", "2.0");
  json_object_update(full, msg);
  json_decref(msg);
  char *body = json_dumps(full, JSON_COMPACT);
  json_decref(full);
  if (!body) mem_oom(0);
  if (!s->broken) {
    fprintf(s->out, "Content-Length: %zu\r\n\r\n%s", strlen(body), body);
    if (fflush(s->out) != 0) s->broken = true;
  }
  free(body);
}

static void reply(LspServer *s, json_t *id, json_t *result) {
  send(s, json_pack("{s:O,s:o}", "id", id, "result", result ? result : json_null()));
}

static void reply_error(LspServer *s, json_t *id, int code, const char *msg) {
  send(s, json_pack("{s:O,s:{s:i,s:s}}", "id", id ? id : json_null(), "error", "code", code, "message", msg));
}

/* ---- documents -------------------------------------------------------------------------- */

static Doc *find_doc(LspServer *s, const char *uri) {
  for (int i = 0; i < s->ndocs; i++)
    if (strcmp(s->docs[i].uri, uri) == 0) return &s->docs[i];
  return NULL;
}

static json_t *diagnostic(const Doc *d, const Msg *m) {
  const Source *src = m->at.file >= 0 ? &d->an->diag.files[m->at.file] : NULL;
  bool here = m->at.file == 0;
  json_t *range = here ? range_of(d->text, d->len, m->at.start, m->at.end) : range_of(d->text, d->len, 0, 0);
  char *text = NULL;
  if (!here && src) {
    int line, col;
    diag_line_col(&d->an->diag, m->at.file, m->at.start, &line, &col);
    size_t n = strlen(src->path) + strlen(m->text) + 32;
    text = mem_alloc(NULL, n);
    snprintf(text, n, "%s:%d:%d: %s", src->path, line, col, m->text);
  }
  json_t *j = json_pack("{s:o,s:i,s:s,s:s}", "range", range, "severity", m->kind == 'e' ? 1 : m->kind == 'w' ? 2 : 3,
                        "source", "netrun", "message", text ? text : m->text);
  mem_free(text);
  return j;
}

static json_t *related(const Doc *d, json_t *range, const char *msg) {
  return json_pack("{s:{s:s,s:o},s:s}", "location", "uri", d->uri, "range", range, "message", msg);
}

/* Publishes the document's errors: a note after an error is its related
 * information, and so is a "did you mean" hint in its text. */
static void publish(LspServer *s, Doc *d) {
  json_t *list = json_array();
  json_t *last = NULL;
  for (int i = 0; i < d->an->nmsgs; i++) {
    const Msg *m = &d->an->msgs[i];
    if (m->kind == 'n' && last) {
      json_t *rel = json_object_get(last, "relatedInformation");
      uint32_t a = m->at.file == 0 ? m->at.start : 0, b = m->at.file == 0 ? m->at.end : 0;
      json_array_append_new(rel, related(d, range_of(d->text, d->len, a, b), m->text));
      continue;
    }
    last = diagnostic(d, m);
    json_t *rel = json_array();
    const char *mean = strstr(m->text, "(did you mean '");
    if (mean) {
      const char *end = strstr(mean, "?)");
      char hint[256];
      snprintf(hint, sizeof hint, "%.*s", end ? (int)(end - mean - 1) : (int)strlen(mean + 1), mean + 1);
      json_array_append_new(rel, related(d, json_incref(json_object_get(last, "range")), end ? strcat(hint, "?") : hint));
    }
    json_object_set_new(last, "relatedInformation", rel);
    json_array_append_new(list, last);
  }
  send(s, json_pack("{s:s,s:{s:s,s:o}}", "method", "textDocument/publishDiagnostics", "params", "uri", d->uri,
                    "diagnostics", list));
}

static void set_text(LspServer *s, Doc *d, const char *text, size_t len) {
  mem_free(d->text);
  d->text = mem_alloc(NULL, len + 1);
  memcpy(d->text, text, len);
  d->text[len] = '\0';
  d->len = len;
  analysis_free(d->an);
  d->an = analyse(d, s->stdlib_dir);
  publish(s, d);
}

static void doc_free(Doc *d) {
  mem_free(d->uri);
  mem_free(d->path);
  mem_free(d->text);
  analysis_free(d->an);
}

/* ---- what is at a position ---------------------------------------------------------------- */

/* The token of the document at offset off (or just before it), or -1. */
static int token_at(const Parsed *p, uint32_t off) {
  for (int i = 0; i < p->toks.n; i++) {
    const AstToken *t = &p->toks.items[i];
    if (t->kind != AST_TOK_COMMENT && t->start <= off && off <= t->end && t->end > t->start) {
      if (off == t->end && i + 1 < p->toks.n && p->toks.items[i + 1].start == off) continue;
      return i;
    }
  }
  return -1;
}

/* The name token i spells (a GRADNAME without its @GRAD). */
static char *token_name(const Doc *d, const AstToken *t) {
  size_t n = t->end - t->start;
  if (t->kind == GRADNAME) n -= 5;
  char *s = mem_alloc(NULL, n + 1);
  memcpy(s, d->text + t->start, n);
  s[n] = '\0';
  return s;
}

static bool is_name_token(int k) { return k == NAME || k == GRADNAME; }

/* Where the simple statement (under n) that holds off starts: what it
 * reads was bound before that; 0 when off is in none. */
static uint32_t statement_at(const AstNode *n, uint32_t off) {
  if (!n || off < n->span.start || off > n->span.end) return 0;
  switch (n->kind) {
  case AST_ASSIGN: case AST_EXPR: case AST_RETURN: case AST_INPUT: case AST_PARAM: case AST_STATE:
    return n->span.start;
  case AST_BLOCK: case AST_DEF: case AST_OPDEF: case AST_WHILE: case AST_IF: case AST_CONFIG:
    break;
  default:
    return 0;
  }
  const AstNode *kids[3] = {n->a, n->b, n->c};
  for (int i = 0; i < 3; i++) {
    uint32_t r = statement_at(kids[i], off);
    if (r) return r;
  }
  for (int i = 0; i < n->list.n; i++) {
    uint32_t r = statement_at(n->list.items[i], off);
    if (r) return r;
  }
  return 0;
}

/* The variable the script's name at offset off stands for: at a binding
 * (an assignment's target, a declaration), the variable bound there; at
 * a use, the one bound last before its statement.  (A body that several
 * calls expand binds one variable per call: the last is taken.) */
static const VarDesc *var_at(Analysis *an, const char *name, uint32_t off, Span *where) {
  uint32_t cut = statement_at(parsed(an, 0)->root, off);
  if (!cut) cut = off;
  const Bound *best = NULL;
  for (int i = 0; i < an->nbound; i++) {
    const Bound *b = &an->bound[i];
    if (strcmp(b->name, name) != 0) continue;
    if (b->at.start <= off && off <= b->at.end && (b->at.end - b->at.start == strlen(name) || b->at.start == cut)) {
      best = b;
      break;
    }
    if (b->at.start < cut && (!best || b->at.start >= best->at.start)) best = b;
  }
  if (best && where) *where = best->at;
  return best ? prog_var(an->prog, best->var) : NULL;
}

static const char *var_kind(const VarDesc *v) {
  return v->flags & VAR_INPUT ? "input" : v->flags & VAR_PARAM ? "param" : v->flags & VAR_KEPT ? "state" : "local";
}

/* A def or op named `name` in the document or a file it imports: its
 * source and node. */
static const AstNode *find_def(Analysis *an, const char *name, int *file) {
  for (int f = 0; f < an->diag.nfiles; f++) {
    const Parsed *p = parsed(an, f);
    if (!p->root) continue;
    for (int i = 0; i < p->root->list.n; i++) {
      const AstNode *n = p->root->list.items[i];
      if ((n->kind == AST_DEF || n->kind == AST_OPDEF) && n->name && strcmp(n->name, name) == 0) {
        *file = f;
        return n;
      }
    }
  }
  return NULL;
}

/* The comment lines right above offset `at` (a definition's documentation). */
static void doc_comment(FILE *m, const char *text, uint32_t at) {
  uint32_t ls = at;
  while (ls > 0 && text[ls - 1] != '\n') ls--;
  uint32_t first = ls;
  while (first > 0) {
    uint32_t p = first - 1, s = p;
    while (s > 0 && text[s - 1] != '\n') s--;
    while (s < p && (text[s] == ' ' || text[s] == '\t')) s++;
    if (text[s] != '#') break;
    first = s;
    while (first > 0 && text[first - 1] != '\n') first--;
  }
  for (uint32_t i = first; i < ls;) {
    uint32_t e = i;
    while (e < ls && text[e] != '\n') e++;
    uint32_t s = i;
    while (s < e && (text[s] == ' ' || text[s] == '\t' || text[s] == '#')) s++;
    fprintf(m, "%.*s\n", (int)(e - s), text + s);
    i = e + 1;
  }
}

/* The signature line of a def or op: "def dense(x, n)". */
static void signature(FILE *m, const AstNode *n) {
  fprintf(m, "%s %s(", n->kind == AST_DEF ? "def" : "op", n->name);
  for (int i = 0; i < n->list.n; i++) fprintf(m, "%s%s", i ? ", " : "", n->list.items[i]->name);
  for (int i = 0; i < n->list3.n; i++) fprintf(m, "%s%s=...", i || n->list.n ? ", " : "", n->list3.items[i]->name);
  fputc(')', m);
  if (n->kind == AST_OPDEF) {
    fputs(" -> (", m);
    for (int i = 0; i < n->list2.n; i++) fprintf(m, "%s%s", i ? ", " : "", n->list2.items[i]->name);
    fputc(')', m);
  }
}

/* The configuration block (train { }) whose KEY = ... statement has its
 * key at offset off: that statement's key, or NULL. */
static const char *config_key_at(const Parsed *p, uint32_t off, const AstNode **config) {
  if (!p->root) return NULL;
  for (int i = 0; i < p->root->list.n; i++) {
    const AstNode *c = p->root->list.items[i];
    if (c->kind != AST_CONFIG || off < c->span.start || off > c->span.end) continue;
    *config = c;
    for (int k = 0; c->a && k < c->a->list.n; k++) {
      const AstNode *s = c->a->list.items[k];
      if (s->kind == AST_ASSIGN && s->list.n == 1 && s->list.items[0]->span.start <= off &&
          off <= s->list.items[0]->span.end)
        return s->list.items[0]->name;
    }
    return "";
  }
  return NULL;
}

/* The param or state declaration of `name` (under n) in the document. */
static const AstNode *declaration(const AstNode *n, const char *name) {
  if (!n) return NULL;
  if ((n->kind == AST_PARAM || n->kind == AST_STATE) && strcmp(n->name, name) == 0) return n;
  if (n->kind != AST_BLOCK && n->kind != AST_DEF) return NULL;
  if (n->kind == AST_DEF) return declaration(n->a, name);
  for (int i = 0; i < n->list.n; i++) {
    const AstNode *r = declaration(n->list.items[i], name);
    if (r) return r;
  }
  return NULL;
}

static void hover_var(FILE *m, Analysis *an, const VarDesc *v, const char *name) {
  char shape[256];
  fprintf(m, "```netrun\n%s %s : %s%s\n```\n", var_kind(v), name, dtype_name(v->dtype),
          shape_str(&v->shape, shape, sizeof shape));
  if (!(v->flags & (VAR_PARAM | VAR_KEPT))) return;
  fprintf(m, "\nscoped name `%s`", v->name);
  if (v->shape.rank >= 0) {
    int64_t n = 1;
    bool known = true;
    for (int i = 0; i < v->shape.rank; i++) {
      if (v->shape.d[i].n < 0 || v->shape.d[i].sym) known = false;
      else n *= v->shape.d[i].n;
    }
    if (known) fprintf(m, ", %lld elements", (long long)n);
  }
  const Block *st = an->prog->startup;
  for (int i = 0; st && i < st->nops; i++) {
    const OpDesc *op = st->ops[i];
    for (int s = 0; s < op->nout; s++)
      for (int k = 0; k < op->out[s].n; k++)
        if (strcmp(op->out[s].args[k], v->name) == 0) {
          const AstNode *decl = declaration(parsed(an, 0)->root, name);
          const char *text = an->diag.files[0].text;
          if (decl && decl->b)
            fprintf(m, ", initializer `%.*s` (%s)", (int)(decl->b->span.end - decl->b->span.start),
                    text + decl->b->span.start, op->type);
          else
            fprintf(m, ", initializer %s", op->type);
          return;
        }
  }
}

/* The source an `import "NAME"` whose string is token t loaded, or -1. */
static int import_at(const Analysis *an, const Doc *d, const Parsed *p, int t) {
  const AstToken *tok = &p->toks.items[t];
  if (tok->kind != STRING || t == 0 || p->toks.items[t - 1].kind != IMPORT) return -1;
  size_t n = tok->end - tok->start - 2;
  for (int f = 1; f < an->diag.nfiles; f++) {
    const char *path = an->diag.files[f].path, *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (strncmp(base, d->text + tok->start + 1, n) == 0 && strcmp(base + n, ".net") == 0) return f;
  }
  return -1;
}

static json_t *hover(Doc *d, uint32_t off) {
  Analysis *an = d->an;
  const Parsed *p = parsed(an, 0);
  int t = token_at(p, off);
  if (t < 0) return NULL;
  const AstToken *tok = &p->toks.items[t];
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m) mem_oom(0);
  char *name = NULL;
  int f = import_at(an, d, p, t);
  if (f > 0) {
    fprintf(m, "import `%s`\n", an->diag.files[f].path);
  } else if (is_name_token(tok->kind)) {
    name = token_name(d, tok);
    const AstNode *config = NULL;
    const char *key = config_key_at(p, off, &config);
    const VarDesc *v;
    int file;
    const AstNode *def;
    const OpProto *op;
    if (key && *key && strcmp(config->name, "train") == 0) {
      const char *doc = NULL;
      for (int i = 0; train_key(i, &doc); i++)
        if (strcmp(train_key(i, &doc), key) == 0) {
          fprintf(m, "train key `%s`: %s\n", key, doc);
          break;
        }
    } else if ((v = var_at(an, name, off, NULL))) {
      hover_var(m, an, v, name);
    } else if ((def = find_def(an, name, &file))) {
      fputs("```netrun\n", m);
      signature(m, def);
      fprintf(m, "\n```\n");
      doc_comment(m, an->diag.files[file].text, def->span.start);
    } else if ((op = reg_find_op(an->prog, name))) {
      /* the registry's text, as `netrun ops NAME` prints it and
       * netrun-ops(7)'s OP LIST is generated from */
      fputs("```netrun\n", m);
      reg_call_signature(m, op);
      fputs("\n```\n```\n", m);
      reg_describe(m, op);
      fputs("```\n", m);
    }
  }
  fclose(m);
  json_t *r = len ? json_pack("{s:{s:s,s:s},s:o}", "contents", "kind", "markdown", "value", buf, "range",
                              range_of(d->text, d->len, tok->start, tok->end))
                  : NULL;
  free(buf);
  mem_free(name);
  return r;
}

static json_t *location(const char *path, const Source *src, uint32_t a, uint32_t b) {
  return json_pack("{s:o,s:o}", "uri", path_to_uri(path), "range", range_of(src->text, src->len, a, b));
}

static json_t *definition(Doc *d, uint32_t off) {
  Analysis *an = d->an;
  const Parsed *p = parsed(an, 0);
  int t = token_at(p, off);
  if (t < 0) return NULL;
  const AstToken *tok = &p->toks.items[t];
  int f = import_at(an, d, p, t);
  if (f > 0) return location(an->diag.files[f].path, &an->diag.files[f], 0, 0);
  if (!is_name_token(tok->kind)) return NULL;
  char *name = token_name(d, tok);
  json_t *r = NULL;
  int file;
  Span at;
  const VarDesc *v = var_at(an, name, off, &at);
  const AstNode *def = v ? NULL : find_def(an, name, &file);
  if (v) {
    r = json_pack("{s:s,s:o}", "uri", d->uri, "range", range_of(d->text, d->len, at.start, at.end));
  } else if (def) {
    const Source *src = &an->diag.files[file];
    r = file == 0 ? json_pack("{s:s,s:o}", "uri", d->uri, "range", range_of(d->text, d->len, def->span.start, def->span.start))
                  : location(src->path, src, def->span.start, def->span.start);
  }
  mem_free(name);
  return r;
}

static json_t *references(Doc *d, uint32_t off) {
  const Parsed *p = parsed(d->an, 0);
  int t = token_at(p, off);
  if (t < 0 || !is_name_token(p->toks.items[t].kind)) return json_array();
  char *name = token_name(d, &p->toks.items[t]);
  json_t *list = json_array();
  for (int i = 0; i < p->toks.n; i++) {
    const AstToken *k = &p->toks.items[i];
    if (!is_name_token(k->kind)) continue;
    char *other = token_name(d, k);
    if (strcmp(other, name) == 0)
      json_array_append_new(list, json_pack("{s:s,s:o}", "uri", d->uri, "range",
                                            range_of(d->text, d->len, k->start, k->start + (uint32_t)strlen(name))));
    mem_free(other);
  }
  mem_free(name);
  return list;
}

/* LSP SymbolKind numbers. */
enum { SK_MODULE = 2, SK_PROPERTY = 7, SK_FIELD = 8, SK_FUNCTION = 12, SK_VARIABLE = 13, SK_KEY = 20, SK_OPERATOR = 25 };

static json_t *symbol(const Doc *d, const char *name, int kind, Span at, json_t *children) {
  json_t *r = range_of(d->text, d->len, at.start, at.end);
  json_t *s = json_pack("{s:s,s:i,s:o,s:O}", "name", name, "kind", kind, "range", r, "selectionRange", r);
  if (children) json_object_set_new(s, "children", children);
  return s;
}

static json_t *symbols(Doc *d) {
  const Parsed *p = parsed(d->an, 0);
  json_t *list = json_array();
  for (int i = 0; p->root && i < p->root->list.n; i++) {
    const AstNode *n = p->root->list.items[i];
    switch (n->kind) {
    case AST_INPUT: json_array_append_new(list, symbol(d, n->name, SK_VARIABLE, n->span, NULL)); break;
    case AST_PARAM: json_array_append_new(list, symbol(d, n->name, SK_FIELD, n->span, NULL)); break;
    case AST_STATE: json_array_append_new(list, symbol(d, n->name, SK_PROPERTY, n->span, NULL)); break;
    case AST_DEF: json_array_append_new(list, symbol(d, n->name, SK_FUNCTION, n->span, NULL)); break;
    case AST_OPDEF: json_array_append_new(list, symbol(d, n->name, SK_OPERATOR, n->span, NULL)); break;
    case AST_CONFIG: {
      json_t *keys = json_array();
      for (int k = 0; n->a && k < n->a->list.n; k++) {
        const AstNode *s = n->a->list.items[k];
        if (s->kind == AST_ASSIGN && s->list.n == 1 && s->list.items[0]->name)
          json_array_append_new(keys, symbol(d, s->list.items[0]->name, SK_KEY, s->span, NULL));
      }
      json_array_append_new(list, symbol(d, n->name, SK_MODULE, n->span, keys));
      break;
    }
    default: break;
    }
  }
  return list;
}

/* ---- inlay hints: the shape after each assignment ---------------------------------- */

/* The hint after each name an assignment under n binds, between offsets
 * a and b: ": f32[B, 64]", the variable bound at that very place (in a
 * body several calls expand, the last call's; none where no binding was
 * recorded, as in an op's body, which is checked apart). */
static void hints_under(const Doc *d, const AstNode *n, uint32_t a, uint32_t b, json_t *list) {
  if (!n || n->span.end < a || n->span.start > b) return;
  if (n->kind == AST_ASSIGN) {
    for (int k = 0; k < n->list.n; k++) {
      const AstNode *t = n->list.items[k];
      if (t->kind != AST_NAME || strcmp(t->name, "_") == 0 || t->span.end < a || t->span.end > b) continue;
      const Bound *at = NULL;
      for (int i = 0; i < d->an->nbound; i++)
        if (d->an->bound[i].at.start == t->span.start && strcmp(d->an->bound[i].name, t->name) == 0)
          at = &d->an->bound[i];
      const VarDesc *v = at ? prog_var(d->an->prog, at->var) : NULL;
      if (!v) continue;
      char shape[256], label[300];
      snprintf(label, sizeof label, ": %s%s", dtype_name(v->dtype), shape_str(&v->shape, shape, sizeof shape));
      json_array_append_new(list, json_pack("{s:o,s:s,s:i}", "position", position(d->text, d->len, t->span.end),
                                            "label", label, "kind", 1));
    }
    return;
  }
  switch (n->kind) {
  case AST_BLOCK: case AST_DEF: case AST_OPDEF: case AST_WHILE: case AST_IF: break;
  default: return;
  }
  hints_under(d, n->a, a, b, list);
  hints_under(d, n->b, a, b, list);
  hints_under(d, n->c, a, b, list);
  for (int i = 0; i < n->list.n; i++) hints_under(d, n->list.items[i], a, b, list);
}

static json_t *inlay_hints(Doc *d, uint32_t a, uint32_t b) {
  json_t *list = json_array();
  hints_under(d, parsed(d->an, 0)->root, a, b, list);
  return list;
}

/* LSP CompletionItemKind numbers. */
enum { CK_FUNCTION = 3, CK_VARIABLE = 6, CK_PROPERTY = 10, CK_KEYWORD = 14 };

static void add_item(json_t *list, const char *label, int kind, const char *detail, const char *doc) {
  json_t *it = json_pack("{s:s,s:i}", "label", label, "kind", kind);
  if (detail) json_object_set_new(it, "detail", json_string(detail));
  if (doc) json_object_set_new(it, "documentation", json_string(doc));
  json_array_append_new(list, it);
}

static const char *const keywords[] = {"input", "param", "state", "def", "op", "grad", "return", "while", "if",
                                       "else", "import", "load", "and", "or", "not", "true", "false", NULL};

/* An item for every stdlib function, with its signature and the import
 * that brings it. */
static json_t *stdlib_items(const char *dir) {
  json_t *items = json_array();
  Arena arena;
  arena_init(&arena);
  Diag q;
  diag_init(&q, &arena);
  q.max_errors = 0;
  int n;
  StdlibDef *defs = cli_stdlib_defs(&arena, &n);
  for (int i = 0; dir && i < n; i++) {
    bool seen = false;
    for (int f = 0; f < q.nfiles; f++) seen |= strcmp(strrchr(q.files[f].path, '/') + 1, defs[i].file) == 0;
    if (seen) continue;
    int f = diag_load_file(&q, arena_printf(&arena, "%s/%s", dir, defs[i].file));
    const AstNode *root = f >= 0 ? ast_parse(&arena, &q, f) : NULL;
    const char *file = defs[i].file;
    for (int k = 0; root && k < root->list.n; k++) {
      const AstNode *d = root->list.items[k];
      if (d->kind != AST_DEF) continue;
      char *sig = NULL, *doc = NULL;
      size_t sn = 0, dn = 0;
      FILE *m = open_memstream(&sig, &sn), *dm = open_memstream(&doc, &dn);
      if (!m || !dm) mem_oom(0);
      signature(m, d);
      fprintf(m, "  (import \"%.*s\")", (int)strlen(file) - 4, file);
      doc_comment(dm, q.files[f].text, d->span.start);
      fclose(m);
      fclose(dm);
      add_item(items, d->name, CK_FUNCTION, sig, doc);
      free(sig);
      free(doc);
    }
  }
  arena_free(&arena);
  return items;
}

/* An item for every op a script may call, with its call signature. */
static json_t *op_items(void) {
  json_t *items = json_array();
  int n;
  const OpProto *const *ops = reg_all(reg_default(), &n);
  for (int i = 0; i < n; i++) {
    if (ops[i]->flags & OP_INTERNAL) continue;
    char *sig = NULL;
    size_t sn = 0;
    FILE *m = open_memstream(&sig, &sn);
    if (!m) mem_oom(0);
    reg_call_signature(m, ops[i]);
    fclose(m);
    add_item(items, ops[i]->type, CK_FUNCTION, sig, ops[i]->doc);
    free(sig);
  }
  return items;
}

static json_t *completion(LspServer *s, Doc *d, uint32_t off) {
  Analysis *an = d->an;
  json_t *list = json_array();
  const AstNode *config = NULL;
  /* inside a train block: its keys */
  const Parsed *p = parsed(an, 0);
  if (config_key_at(p, off, &config) && strcmp(config->name, "train") == 0) {
    const char *doc, *key;
    for (int i = 0; (key = train_key(i, &doc)); i++) add_item(list, key, CK_PROPERTY, "train key", doc);
  }
  char shape[256];
  for (int i = 0; i < lower_nglobals(an->L); i++) {
    const char *var, *name = lower_global(an->L, i, &var);
    if (!name || !*name) continue;
    const VarDesc *v = var ? prog_var(an->prog, var) : NULL;  /* its last binding */
    char detail[300];
    if (v) snprintf(detail, sizeof detail, "%s %s%s", var_kind(v), dtype_name(v->dtype), shape_str(&v->shape, shape, sizeof shape));
    int file;
    const AstNode *def = v ? NULL : find_def(an, name, &file);
    char *sig = NULL;
    size_t sn = 0;
    if (def) {
      FILE *m = open_memstream(&sig, &sn);
      if (!m) mem_oom(0);
      signature(m, def);
      fclose(m);
    }
    add_item(list, name, v ? CK_VARIABLE : CK_FUNCTION, v ? detail : sig, NULL);
    free(sig);
  }
  if (!s->op_items) s->op_items = op_items(), s->stdlib_items = stdlib_items(s->stdlib_dir);
  size_t k;
  json_t *it;
  json_array_foreach(s->op_items, k, it) json_array_append(list, it);
  /* the stdlib functions the document does not import yet (those it does
   * are among its names) */
  json_array_foreach(s->stdlib_items, k, it) {
    int file;
    if (!find_def(an, json_string_value(json_object_get(it, "label")), &file)) json_array_append(list, it);
  }
  for (int i = 0; keywords[i]; i++) add_item(list, keywords[i], CK_KEYWORD, NULL, NULL);
  return list;
}

static json_t *formatting(LspServer *s, json_t *id, Doc *d) {
  Arena arena;
  arena_init(&arena);
  Diag q;
  diag_init(&q, &arena);
  q.max_errors = 0;
  int idx = diag_add_source(&q, d->path, NULL, d->text, d->len);
  size_t len;
  bool parsed_ok;
  char *out = fmt_source(&q, idx, &len, &parsed_ok);
  arena_free(&arena);
  if (!out) {
    reply_error(s, id, RPC_REQUEST_FAILED, "the document has syntax errors: it cannot be formatted");
    return NULL;
  }
  json_t *edits = json_array();
  if (len != d->len || memcmp(out, d->text, len) != 0) {
    json_t *all = range_of(d->text, d->len, 0, (uint32_t)d->len);
    json_array_append_new(edits, json_pack("{s:o,s:s%}", "range", all, "newText", out, len));
  }
  mem_free(out);
  return edits;
}

/* ---- dispatch ----------------------------------------------------------------------------- */

static json_t *capabilities(void) {
  return json_pack("{s:{s:{s:b,s:i},s:b,s:b,s:b,s:b,s:{s:b},s:b,s:b},s:{s:s,s:s}}", "capabilities",
                   "textDocumentSync", "openClose", 1, "change", 1, "hoverProvider", 1, "definitionProvider", 1,
                   "referencesProvider", 1, "documentSymbolProvider", 1, "completionProvider", "resolveProvider", 0,
                   "documentFormattingProvider", 1, "inlayHintProvider", 1, "serverInfo", "name", "netrun", "version",
                   NETRUN_VERSION);
}

/* The document a request names, or NULL with the error sent. */
static Doc *doc_of(LspServer *s, json_t *id, json_t *params) {
  const char *uri = NULL;
  if (json_unpack(params, "{s:{s:s}}", "textDocument", "uri", &uri) != 0) {
    if (id) reply_error(s, id, RPC_INVALID_PARAMS, "params.textDocument.uri is missing");
    return NULL;
  }
  Doc *d = find_doc(s, uri);
  if (!d && id) reply_error(s, id, RPC_INVALID_PARAMS, "the document is not open");
  return d;
}

static bool position_of(LspServer *s, json_t *id, json_t *params, const Doc *d, uint32_t *off) {
  json_int_t line, ch;
  if (json_unpack(params, "{s:{s:I,s:I}}", "position", "line", &line, "character", &ch) != 0 || line < 0 || ch < 0) {
    reply_error(s, id, RPC_INVALID_PARAMS, "params.position is missing or not a position");
    return false;
  }
  *off = offset_of(d->text, d->len, line, ch);
  return true;
}

static void did_open(LspServer *s, json_t *params) {
  const char *uri, *text;
  size_t len;
  if (json_unpack(params, "{s:{s:s,s:s%}}", "textDocument", "uri", &uri, "text", &text, &len) != 0) return;
  if (len > DIAG_MAX_SOURCE) return;
  Doc *d = find_doc(s, uri);
  if (!d) {
    if (s->ndocs == LSP_MAX_DOCS) return;
    s->docs = mem_alloc(s->docs, sizeof *s->docs * (size_t)(s->ndocs + 1));
    d = &s->docs[s->ndocs++];
    *d = (Doc){.uri = mem_strdup(uri), .path = uri_to_path(uri)};
  }
  set_text(s, d, text, len);
}

/* Full synchronisation: the last change holds the whole text. */
static void did_change(LspServer *s, json_t *params) {
  Doc *d = doc_of(s, NULL, params);
  json_t *changes = json_object_get(params, "contentChanges");
  size_t n = json_array_size(changes);
  const char *text;
  size_t len;
  if (!d || n == 0 || json_unpack(json_array_get(changes, n - 1), "{s:s%}", "text", &text, &len) != 0) return;
  if (len <= DIAG_MAX_SOURCE) set_text(s, d, text, len);
}

static void did_close(LspServer *s, json_t *params) {
  Doc *d = doc_of(s, NULL, params);
  if (!d) return;
  send(s, json_pack("{s:s,s:{s:s,s:[]}}", "method", "textDocument/publishDiagnostics", "params", "uri", d->uri,
                    "diagnostics"));
  doc_free(d);
  *d = s->docs[--s->ndocs];
}

static void request(LspServer *s, const char *method, json_t *id, json_t *params) {
  if (strcmp(method, "initialize") == 0) {
    s->initialized = true;
    reply(s, id, capabilities());
    return;
  }
  if (!s->initialized) {
    reply_error(s, id, RPC_NOT_INITIALIZED, "the server is not initialized");
    return;
  }
  if (strcmp(method, "shutdown") == 0) {
    s->shutdown = true;
    reply(s, id, NULL);
    return;
  }
  static const char *const doc_methods[] = {"textDocument/hover", "textDocument/definition", "textDocument/references",
                                            "textDocument/documentSymbol", "textDocument/completion",
                                            "textDocument/formatting", "textDocument/inlayHint", NULL};
  int which = -1;
  for (int i = 0; doc_methods[i]; i++)
    if (strcmp(method, doc_methods[i]) == 0) which = i;
  if (which < 0) {
    reply_error(s, id, RPC_METHOD_NOT_FOUND, "unknown method");
    return;
  }
  Doc *d = doc_of(s, id, params);
  if (!d) return;
  uint32_t off = 0;
  if (which <= 2 || which == 4)
    if (!position_of(s, id, params, d, &off)) return;
  switch (which) {
  case 0: reply(s, id, hover(d, off)); break;
  case 1: reply(s, id, definition(d, off)); break;
  case 2: reply(s, id, references(d, off)); break;
  case 3: reply(s, id, symbols(d)); break;
  case 4: reply(s, id, completion(s, d, off)); break;
  case 6: {
    json_int_t l0, c0, l1, c1;
    if (json_unpack(params, "{s:{s:{s:I,s:I},s:{s:I,s:I}}}", "range", "start", "line", &l0, "character", &c0, "end",
                    "line", &l1, "character", &c1) != 0 || l0 < 0 || c0 < 0 || l1 < 0 || c1 < 0) {
      reply_error(s, id, RPC_INVALID_PARAMS, "params.range is missing or not a range");
      return;
    }
    reply(s, id, inlay_hints(d, offset_of(d->text, d->len, l0, c0), offset_of(d->text, d->len, l1, c1)));
    break;
  }
  default: {
    json_t *edits = formatting(s, id, d);
    if (edits) reply(s, id, edits);
  }
  }
}

static void notification(LspServer *s, const char *method, json_t *params) {
  if (strcmp(method, "exit") == 0) s->exited = true;
  if (!s->initialized) return;
  if (strcmp(method, "textDocument/didOpen") == 0) did_open(s, params);
  else if (strcmp(method, "textDocument/didChange") == 0) did_change(s, params);
  else if (strcmp(method, "textDocument/didClose") == 0) did_close(s, params);
}

bool lsp_handle(LspServer *s, const char *body, size_t len) {
  json_error_t err;
  json_t *msg = json_loadb(body, len, JSON_REJECT_DUPLICATES, &err);
  if (!msg) {
    char why[256];
    snprintf(why, sizeof why, "parse error: %s", err.text);
    reply_error(s, NULL, RPC_PARSE_ERROR, why);
    return true;
  }
  json_t *id = json_object_get(msg, "id");
  json_t *method = json_object_get(msg, "method");
  json_t *params = json_object_get(msg, "params");
  bool bad_id = id && !json_is_string(id) && !json_is_integer(id) && !json_is_null(id);
  if (bad_id) id = NULL;
  if (!json_is_object(msg) || (method && !json_is_string(method)) || bad_id) {
    reply_error(s, id, RPC_INVALID_REQUEST, "not a JSON-RPC request or notification");
  } else if (!method) {
    /* a response to a request of ours: the server sends none */
  } else if (params && !json_is_object(params) && !json_is_array(params) && !json_is_null(params)) {
    if (id) reply_error(s, id, RPC_INVALID_PARAMS, "params must be an object or an array");
  } else if (id) {
    request(s, json_string_value(method), id, params);
  } else {
    notification(s, json_string_value(method), params);
  }
  json_decref(msg);
  return !s->exited && !s->broken;
}

LspServer *lsp_new(FILE *out) {
  LspServer *s = mem_calloc(1, sizeof *s);
  s->out = out;
  const char *dir = session_stdlib_dir();
  s->stdlib_dir = dir ? mem_strdup(dir) : NULL;
  return s;
}

void lsp_free(LspServer *s) {
  for (int i = 0; i < s->ndocs; i++) doc_free(&s->docs[i]);
  mem_free(s->docs);
  json_decref(s->op_items);
  json_decref(s->stdlib_items);
  mem_free(s->stdlib_dir);
  mem_free(s);
}

/* Reads one header block; the body's length, or -1 at the end of input,
 * -2 for a header block without a usable Content-Length. */
static long long read_headers(FILE *in) {
  char line[1024];
  long long len = -2;
  bool any = false;
  while (fgets(line, sizeof line, in)) {
    any = true;
    if (strcmp(line, "\r\n") == 0 || strcmp(line, "\n") == 0) return len;
    if (strncasecmp(line, "Content-Length:", 15) == 0) {
      char *end;
      errno = 0;
      long long n = strtoll(line + 15, &end, 10);
      while (*end == ' ' || *end == '\r' || *end == '\n') end++;
      len = errno || *end || n < 0 ? -2 : n;
    }
  }
  (void)any;
  return -1;
}

int lsp_serve(LspServer *s, FILE *in) {
  while (!s->exited && !s->broken) {
    long long n = read_headers(in);
    if (n == -1) break;
    if (n < 0 || n > LSP_MAX_MESSAGE) {
      reply_error(s, NULL, RPC_PARSE_ERROR, n < 0 ? "a message without a valid Content-Length header"
                                                  : "a message larger than 64 MB");
      for (long long i = 0; n > 0 && i < n && fgetc(in) != EOF; i++) {}
      continue;
    }
    char *body = mem_alloc(NULL, (size_t)n + 1);
    size_t got = fread(body, 1, (size_t)n, in);
    if (got == (size_t)n) lsp_handle(s, body, got);
    mem_free(body);
    if (got != (size_t)n) break;
  }
  return s->exited && s->shutdown ? 0 : 1;
}

/* ---- the verb ------------------------------------------------------------------------------- */

enum { O_STDIO = 1 };
static const Option lsp_options[] = {
    {"--stdio", OPTION_FLAG, NULL, NULL, O_STDIO, 0},
    {NULL, OPTION_FLAG, NULL, NULL, 0, 0},
};

int cmd_lsp(int argc, char **argv) {
  OptionParser p;
  option_init(&p, argc, argv, (const Option *const[]){lsp_options, NULL}, "");
  for (int id; (id = option_next(&p)) != OPTION_END;) {
    if (id == OPTION_ERROR) return EXIT_USAGE;
    if (id == OPTION_ARG) return diag_usage("lsp takes no FILE (it talks over standard input and output): '%s'", p.value);
  }
  signal(SIGPIPE, SIG_IGN);
  LspServer *s = lsp_new(stdout);
  int status = lsp_serve(s, stdin);
  lsp_free(s);
  return status;
}
