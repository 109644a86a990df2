/* ast.c — building, measuring and printing syntax trees, and ast_parse(),
 * which runs the scanner (grammar/netrun.l) and parser (grammar/netrun.y)
 * over one source file. */
#include "front/ast.h"

#include "ir/names.h"

#include "parser.h"
#include "lexer.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static AstNode *parse(Arena *arena, Diag *diag, int file, uint32_t start, AstTokens *tokens);

/* A UTF-8 byte order mark (some editors write one) is not part of the text. */
static uint32_t text_start(const Diag *diag, int file) {
  const Source *src = &diag->files[file];
  return src->len >= 3 && memcmp(src->text, "\xEF\xBB\xBF", 3) == 0 ? 3 : 0;
}

AstNode *ast_parse(Arena *arena, Diag *diag, int file) {
  return parse(arena, diag, file, text_start(diag, file), NULL);
}

AstNode *ast_parse_tokens(Arena *arena, Diag *diag, int file, AstTokens *tokens) {
  *tokens = (AstTokens){0};
  return parse(arena, diag, file, text_start(diag, file), tokens);
}

AstNode *ast_parse_at(Arena *arena, Diag *diag, int file, uint32_t start) {
  return parse(arena, diag, file, start, NULL);
}

static AstNode *parse(Arena *arena, Diag *diag, int file, uint32_t start, AstTokens *tokens) {
  const Source *src = &diag->files[file];
  int errors_before = diag->nerrors;
  if (src->len > INT_MAX - 2) {  /* flex counts in int */
    diag_error(diag, (Span){file, 0, 0}, "file too large to parse");
    return NULL;
  }
  ParseState ps;
  memset(&ps, 0, sizeof ps);
  ps.arena = arena;
  ps.diag = diag;
  ps.file = file;
  ps.text = src->text;
  ps.len = src->len;
  ps.pos = start < src->len ? start : src->len;
  ps.tokens = tokens;

  yyscan_t scanner;
  if (yylex_init_extra(&ps, &scanner) != 0) mem_oom(sizeof(void *));
  /* yy_scan_bytes copies the text, so NUL bytes are just bad characters. */
  YY_BUFFER_STATE buf = yy_scan_bytes(src->text + ps.pos, (int)(src->len - ps.pos), scanner);
  int rc = yyparse(scanner, &ps);
  yy_delete_buffer(buf, scanner);
  yylex_destroy(scanner);

  lex_flush_pending(&ps);
  lex_flush_big(&ps);
  if (rc != 0 || diag->nerrors != errors_before) return NULL;
  return ps.root;
}

int ast_unclosed(const char *text, size_t len) {
  if (len > INT_MAX - 2) return 0;
  Arena arena;
  arena_init(&arena);
  Diag quiet;
  diag_init(&quiet, &arena);
  quiet.max_errors = 0;   /* count errors, print none: the real parse reports them */
  ParseState ps;
  memset(&ps, 0, sizeof ps);
  ps.arena = &arena;
  ps.diag = &quiet;
  ps.file = diag_add_source(&quiet, "", NULL, text, len);
  ps.text = quiet.files[ps.file].text;
  ps.len = (uint32_t)len;
  yyscan_t scanner;
  if (yylex_init_extra(&ps, &scanner) != 0) mem_oom(sizeof(void *));
  YY_BUFFER_STATE buf = yy_scan_bytes(ps.text, (int)len, scanner);
  YYSTYPE value;
  YYLTYPE where;
  while (yylex(&value, &where, scanner) != YYEOF) {
  }
  yy_delete_buffer(buf, scanner);
  yylex_destroy(scanner);
  arena_free(&arena);
  /* Nested too deeply: more input cannot help; let the parse say so. */
  return ps.fatal ? 0 : ps.nopen;
}

AstNode *ast_new(Arena *arena, AstKind kind, Span span) {
  AstNode *n = arena_alloc(arena, sizeof *n);
  n->kind = kind;
  n->depth = 1;
  n->span = span;
  n->opspan = span;
  return n;
}

void ast_push(Arena *arena, AstList *list, AstNode *item) {
  *ARENA_PUSH(arena, list->items, list->n, list->cap) = item;
}

static int list_depth(const AstList *l) {
  int d = 0;
  for (int i = 0; i < l->n; i++)
    if (l->items[i] && l->items[i]->depth > d) d = l->items[i]->depth;
  return d;
}

void ast_fix_depth(AstNode *n) {
  int d = 0;
  const AstNode *kids[3] = {n->a, n->b, n->c};
  for (int i = 0; i < 3; i++)
    if (kids[i] && kids[i]->depth > d) d = kids[i]->depth;
  int l = list_depth(&n->list);
  if (l > d) d = l;
  l = list_depth(&n->list2);
  if (l > d) d = l;
  l = list_depth(&n->list3);
  if (l > d) d = l;
  n->depth = d + 1;
}

const char *ast_op_name(int op) {
  switch (op) {
  case '+': return "+";
  case '-': return "-";
  case '*': return "*";
  case '/': return "/";
  case '@': return "@";
  case '<': return "<";
  case '>': return ">";
  case AST_OP_POW: return "**";
  case AST_OP_IDIV: return "//";
  case AST_OP_EQ: return "==";
  case AST_OP_NE: return "!=";
  case AST_OP_LE: return "<=";
  case AST_OP_GE: return ">=";
  case AST_OP_AND: return "and";
  case AST_OP_OR: return "or";
  case AST_OP_NOT: return "not";
  default: return "?";
  }
}

/* ---- printing ----------------------------------------------------------
 *
 * One S-expression per node: (KIND fields... children...).  Names and
 * numbers print bare, strings in double quotes, a missing child as ().
 * Floats print with the fewest digits that read back exactly, always with
 * a '.' or an exponent, so 2.0 and 2 differ.  The tree's depth is
 * bounded (AST_MAX_DEPTH), so the recursion is too.
 */

static void print_node(FILE *f, const AstNode *n);

static void print_float(FILE *f, double v) {
  if (!isfinite(v)) {
    fputs(isnan(v) ? "nan" : "inf", f);
    return;
  }
  /* The fewest significant digits that read back exactly... */
  char buf[48];
  int prec = 1;
  for (; prec < 17; prec++) {
    snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
    if (strtod(buf, NULL) == v) break;
  }
  snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
  /* ...printed positionally (with at least one decimal) unless the
   * exponent is extreme. */
  int exp = atoi(strchr(buf, 'e') + 1);
  if (exp >= -5 && exp < 16) {
    int decimals = prec - 1 - exp;
    fprintf(f, "%.*f", decimals > 1 ? decimals : 1, v);
  } else {
    fputs(buf, f);
  }
}

static void print_string(FILE *f, const char *s) { diag_quote(f, s, QUOTE_SCRIPT); }

/* " a b c" */
static void print_list(FILE *f, const AstList *l) {
  for (int i = 0; i < l->n; i++) {
    fputc(' ', f);
    print_node(f, l->items[i]);
  }
}

/* " (a b c)" — a list that is itself one field, e.g. assignment targets. */
static void print_group(FILE *f, const AstList *l) {
  fputs(" (", f);
  for (int i = 0; i < l->n; i++) {
    if (i) fputc(' ', f);
    print_node(f, l->items[i]);
  }
  fputc(')', f);
}

static void print_child(FILE *f, const AstNode *n) {
  fputc(' ', f);
  print_node(f, n);
}

/* " a b c": n's first `need` children (an absent one as "()"), then those
 * after them that are present (an input's default, an if's else). */
static void print_children(FILE *f, const AstNode *n, int need) {
  const AstNode *kids[3] = {n->a, n->b, n->c};
  for (int i = 0; i < 3; i++)
    if (i < need || kids[i]) print_child(f, kids[i]);
}

static void print_node(FILE *f, const AstNode *n) {
  if (!n) {
    fputs("()", f);
    return;
  }
  switch (n->kind) {
  case AST_NAME: fputs(n->name, f); return;
  case AST_GRADNAME: fprintf(f, "%s" NAME_GRAD, n->name); return;
  case AST_INT: fprintf(f, "%lld", (long long)n->ival); return;
  case AST_FLOAT: print_float(f, n->fval); return;
  case AST_STRING: print_string(f, n->name); return;
  case AST_BOOL: fputs(n->ival ? "true" : "false", f); return;
  case AST_LIST:
    fputs("(list", f);
    print_list(f, &n->list);
    break;
  case AST_UNARY:
    fprintf(f, "(unary %s", ast_op_name(n->op));
    print_children(f, n, 1);
    break;
  case AST_BINARY:
    fprintf(f, "(binary %s", ast_op_name(n->op));
    print_children(f, n, 2);
    break;
  case AST_CALL:
    fprintf(f, "(call %s", n->name);
    print_list(f, &n->list);
    print_list(f, &n->list2);
    break;
  case AST_KWARG:
    fprintf(f, "(kwarg %s", n->name);
    print_child(f, n->a);
    break;
  case AST_INDEX:
    fputs("(index", f);
    print_child(f, n->a);
    print_list(f, &n->list);
    break;
  case AST_SLICE:
    fputs("(slice", f);
    print_children(f, n, 3);
    break;
  case AST_BLOCK:
    fputs("(block", f);
    print_list(f, &n->list);
    break;
  case AST_IMPORT:
  case AST_LOAD:
    fputs(n->kind == AST_IMPORT ? "(import " : "(load ", f);
    print_string(f, n->name);
    break;
  case AST_INPUT:
  case AST_PARAM:
  case AST_STATE:
    fprintf(f, "(%s %s", n->kind == AST_INPUT ? "input" : n->kind == AST_PARAM ? "param" : "state", n->name);
    print_children(f, n, 1);
    break;
  case AST_TYPE:
    fputs("(type", f);
    if (n->name) fprintf(f, " %s", n->name);
    if (n->ival) {
      fputs(" [", f);
      for (int i = 0; i < n->list.n; i++) {
        if (i) fputc(' ', f);
        print_node(f, n->list.items[i]);
      }
      fputc(']', f);
    }
    break;
  case AST_DEF:
    fprintf(f, "(def %s", n->name);
    print_group(f, &n->list);
    print_child(f, n->a);
    break;
  case AST_OPDEF:
    fprintf(f, "(op %s (", n->name ? n->name : "()");
    for (int i = 0; i < n->list.n + n->list3.n; i++) {
      if (i) fputc(' ', f);
      print_node(f, i < n->list.n ? n->list.items[i] : n->list3.items[i - n->list.n]);
    }
    fputs(") ->", f);
    print_group(f, &n->list2);
    print_child(f, n->a);
    if (n->b) {
      fputs(" grad", f);
      print_child(f, n->b);
    }
    break;
  case AST_WHILE:
  case AST_IF:
    fputs(n->kind == AST_WHILE ? "(while" : "(if", f);
    print_children(f, n, 2);
    break;
  case AST_RETURN:
    fputs("(return", f);
    print_list(f, &n->list);
    break;
  case AST_ASSIGN:
    fputs("(assign", f);
    print_group(f, &n->list);
    print_child(f, n->a);
    break;
  case AST_EXPR:
    fputs("(expr", f);
    print_child(f, n->a);
    break;
  case AST_CONFIG:
    fprintf(f, "(config %s", n->name);
    print_child(f, n->a);
    break;
  }
  fputc(')', f);
}

void ast_print(FILE *f, const AstNode *node) {
  if (!node) return;
  if (node->kind != AST_BLOCK) {
    print_node(f, node);
    fputc('\n', f);
    return;
  }
  for (int i = 0; i < node->list.n; i++) {
    print_node(f, node->list.items[i]);
    fputc('\n', f);
  }
}
