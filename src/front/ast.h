/* ast.h — the syntax tree a script parses to.
 *
 * Every node keeps the source span it was parsed from.  Nodes live in the
 * arena given to ast_parse(); nothing here is freed alone.
 * Which fields a kind uses is written beside the kind below; unused fields
 * are zero.  `depth` is 1 + the largest depth of a child: the parser refuses
 * trees deeper than AST_MAX_DEPTH, so every later recursive walk is bounded.
 */
#ifndef NETRUN_AST_H
#define NETRUN_AST_H

#include "base/diag.h"

#define AST_MAX_DEPTH 1000

typedef enum AstKind {
  /* expressions */
  AST_NAME,      /* name                                   x              */
  AST_GRADNAME,  /* name (without "@GRAD")                 x@GRAD         */
  AST_INT,       /* ival                                   42             */
  AST_FLOAT,     /* fval                                   1.5            */
  AST_STRING,    /* name = the unescaped text              "nn"           */
  AST_BOOL,      /* ival = 0 or 1                          true           */
  AST_LIST,      /* list = elements                        [1, 2]         */
  AST_UNARY,     /* op ('-' or AST_OP_NOT), a              -x, not x      */
  AST_BINARY,    /* op, a, b                               a + b          */
  AST_CALL,      /* name, list = positional args, list2 = keyword args
                    (AST_KWARG nodes)                      f(x, axis=1)   */
  AST_KWARG,     /* name, a = value                        axis=1         */
  AST_INDEX,     /* a = base, list = subscripts (exprs or AST_SLICE)  x[i, 1:2] */
  AST_SLICE,     /* a = start, b = stop, c = step; each may be NULL   1:2  */
  /* statements */
  AST_BLOCK,     /* list = statements                      { ... }        */
  AST_IMPORT,    /* name = the string                      import "nn"    */
  AST_LOAD,      /* name = the string                      load "x.so"    */
  AST_INPUT,     /* name, a = AST_TYPE, b = default or NULL               */
  AST_PARAM,     /* name, a = AST_TYPE, b = initializer                   */
  AST_STATE,     /* name, a = AST_TYPE, b = initializer    state n : [1] = zeros() */
  AST_TYPE,      /* name = dtype ("f32", "i64", "bool") or NULL, list = dims
                    (expressions: AST_INT, AST_NAME, dim(x, 1), n * 2 ...);
                    ival = 1 if written with [ ]                          */
  AST_DEF,       /* name, list = params (AST_NAME), a = body (AST_BLOCK)  */
  AST_OPDEF,     /* name, list = inputs, list2 = outputs (AST_NAME),
                    list3 = attributes (AST_KWARG with default), a = body,
                    b = grad body or NULL                                 */
  AST_WHILE,     /* a = condition, b = body                               */
  AST_IF,        /* a = condition, b = then body, c = else (AST_BLOCK, an
                    AST_IF for "else if", or NULL)                        */
  AST_RETURN,    /* list = values                                         */
  AST_ASSIGN,    /* list = targets (AST_NAME, "_" included, or AST_GRADNAME),
                    a = value                                             */
  AST_EXPR,      /* a = expression                                        */
  AST_CONFIG,    /* name, a = AST_BLOCK of settings (KEY = VALUE)  train { } */
} AstKind;

/* Operator codes for AST_UNARY / AST_BINARY: the character for single-char
 * operators ('+', '-', '*', '/', '@', '<', '>'), else one of these. */
enum {
  AST_OP_POW = 256, AST_OP_EQ, AST_OP_NE, AST_OP_LE, AST_OP_GE,
  AST_OP_AND, AST_OP_OR, AST_OP_NOT, AST_OP_IDIV,
};

typedef struct AstNode AstNode;
typedef struct AstList {
  AstNode **items;
  int n, cap;
} AstList;

struct AstNode {
  AstKind kind;
  int op;
  int depth;
  Span span;     /* the whole construct */
  Span opspan;   /* AST_BINARY/AST_UNARY: the operator token; AST_CALL: the
                    callee name; AST_INDEX: from '[' to ']'; else = span */
  const char *name;
  int64_t ival;
  double fval;
  AstNode *a, *b, *c;
  AstList list, list2, list3;
};

/* A token of the source as the scanner handed it to the parser (kind: the
 * parser's token number, parser.h, or a character for one-character
 * tokens), or a comment (AST_TOK_COMMENT, "#" to the end of the line).
 * Newlines inside ( ) and [ ] are white space, not tokens. */
#define AST_TOK_COMMENT (-2)
typedef struct AstToken {
  int kind;
  uint32_t start, end;
} AstToken;
typedef struct AstTokens {
  AstToken *items;   /* in the parse's arena */
  int n, cap;
} AstTokens;

/* Parses source `file` of `diag`.  Errors are reported through the Diag;
 * returns the root block, or NULL when there were syntax errors. */
AstNode *ast_parse(Arena *arena, Diag *diag, int file);
/* The same from byte `start` on: the REPL parses the statement after a
 * command (:time x = f(y)) in the line as typed, so carets line up. */
AstNode *ast_parse_at(Arena *arena, Diag *diag, int file, uint32_t start);
/* ast_parse, and every token and comment in *tokens (emptied first): the
 * side table netrun fmt and netrun lsp read comments and layout from. */
AstNode *ast_parse_tokens(Arena *arena, Diag *diag, int file, AstTokens *tokens);

/* How many brackets ( [ { are still open at the end of text, as the
 * scanner sees it (strings and comments skipped): the REPL reads another
 * line while this is not 0.  Reports nothing. */
int ast_unclosed(const char *text, size_t len);

AstNode *ast_new(Arena *arena, AstKind kind, Span span);
void ast_push(Arena *arena, AstList *list, AstNode *item);
/* Recomputes node->depth from its children. */
void ast_fix_depth(AstNode *node);
const char *ast_op_name(int op);   /* "+", "**", "and", ... */
/* Prints the tree as S-expressions, one statement a line (netrun dump --ast). */
void ast_print(FILE *f, const AstNode *node);

#endif
