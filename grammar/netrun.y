/* netrun.y — the grammar of .net scripts (netrun-lang(5), DECLARATIONS to USER-DEFINED OPS).
 *
 * A pure LALR(1) parser fed by the reentrant scanner of netrun.l.  Each
 * action builds AST nodes (ast.h) in the parse's arena and gives every node
 * its depth; a node deeper than AST_MAX_DEPTH aborts the parse, so later
 * recursive walks of the tree are bounded.
 *
 * Error handling, in one place:
 *   - Syntax errors are reported by yyreport_syntax_error below, in words
 *     ("unexpected ')', expecting an expression").
 *   - Recovery is per statement: `stmt_opt: error` resynchronises at the
 *     statement's end.  The scanner helps (lex_recover): it drops the rest
 *     of the broken statement, braces included, so a block opened or closed
 *     inside it cannot shift the parser's idea of nesting.
 *   - An error the scanner already explained (a bad character, a mismatched
 *     or unclosed bracket) is not reported a second time by the parser.
 */

%code requires {
#include "front/ast.h"

/* The deepest bracket nesting the scanner accepts. */
#define LEX_MAX_NEST 256

/* An open bracket on the scanner's stack: its character and offset. */
typedef struct LexBracket {
  char ch;
  uint32_t at;
} LexBracket;

/* A literal 2^63 waiting for its minus (ParseState.big). */
struct LexBig {
  Span at;
  struct LexBig *next;
};

/* Everything one parse needs, shared by scanner (as yyextra) and parser
 * (as %parse-param); it lives on ast_parse's stack, so there are no
 * globals. */
typedef struct ParseState {
  Arena *arena;
  Diag *diag;
  int file;
  const char *text;          /* the source, text[0..len) */
  uint32_t len;
  uint32_t pos;              /* scanner: offset of the next byte */

  LexBracket open[LEX_MAX_NEST];  /* scanner's bracket stack */
  int nopen;
  int nbrace;                /* how many of open[] are '{' */

  /* Recovery (see lex_recover): the brace depth at which the current
   * statement started, that value before the last token, and whether the
   * scanner is dropping tokens up to the end of a broken statement. */
  int stmt_level, stmt_level_before;
  bool skipping;
  int skip_level;

  /* A syntax error at offset quiet_at follows from an error the scanner
   * already reported at that token; so does one at end of file after an
   * unclosed bracket (eof_quiet). */
  bool quiet;
  uint32_t quiet_at;
  bool eof_quiet;
  bool eof_seen;
  bool fatal;                /* nesting too deep: the scanner stops */
  bool bad_in_stmt;          /* a bad character was reported in this statement */
  uint32_t peek_at;          /* scanner: next byte after white space and comments */

  /* A syntax error inside ( ) or [ ] waits here until its bracket closes:
   * if the bracket is never closed (or is mismatched) that is the error
   * to report, and this one is a consequence. */
  const char *pend_msg;
  Span pend_at;
  int pend_depth;

  /* The literal 9223372036854775808 (2^63) is an i64 only when negated:
   * the scanner hands it over as INT64_MIN and lists it here; a unary
   * minus over it takes it off (the literal -9223372036854775808); any
   * left at the end is too large (lex_flush_big). */
  struct LexBig *big;

  /* Where the last 'grad' keyword ends: a syntax error right after it
   * says that grad is a value only as grad(...). */
  uint32_t grad_end;
  bool grad_seen;

  /* When not NULL, every token handed to the parser and every comment
   * is appended here (ast_parse_tokens): the formatter and the language
   * server read the source through it.  Recording changes nothing the
   * parser sees. */
  AstTokens *tokens;

  AstNode *root;
} ParseState;
}

%code provides {
/* Called from the `error` rule: let the scanner skip the broken statement. */
void lex_recover(ParseState *ps, int lookahead);
/* Prints a pending syntax error (the bracket it waited for was closed). */
void lex_flush_pending(ParseState *ps);
/* Takes the literal 2^63 at `at` off ps->big: false if it is not there. */
bool lex_negate_big(ParseState *ps, Span at);
/* Reports every 2^63 literal no minus negated. */
void lex_flush_big(ParseState *ps);
}

%code {
#include "lexer.h"

#include <string.h>

/* Spans join: a rule covers its first non-empty symbol's start to its last
 * one's end (so `x[:]` does not begin at the white space before the ':');
 * an empty rule is an empty span where the previous symbol ended. */
#define YYLLOC_DEFAULT(Cur, Rhs, N)                                       \
  do {                                                                    \
    if (N) {                                                              \
      int first_ = 1, last_ = (N);                                        \
      while (first_ < last_ && YYRHSLOC(Rhs, first_).start ==             \
                                   YYRHSLOC(Rhs, first_).end)             \
        first_++;                                                         \
      while (last_ > first_ && YYRHSLOC(Rhs, last_).start ==              \
                                   YYRHSLOC(Rhs, last_).end)              \
        last_--;                                                          \
      (Cur).file = YYRHSLOC(Rhs, first_).file;                            \
      (Cur).start = YYRHSLOC(Rhs, first_).start;                          \
      (Cur).end = YYRHSLOC(Rhs, last_).end;                               \
    } else {                                                              \
      (Cur).file = YYRHSLOC(Rhs, 0).file;                                 \
      (Cur).start = (Cur).end = YYRHSLOC(Rhs, 0).end;                     \
    }                                                                     \
  } while (0)

/* The parser stack grows by at most a few entries per level of the tree,
 * so a stack this deep means a tree far deeper than AST_MAX_DEPTH; running
 * out of it is reported as such (yyerror).  Its memory, like all of
 * netrun's, comes from mem_alloc. */
#define YYMAXDEPTH (20 * AST_MAX_DEPTH)
#define YYMALLOC(size) mem_alloc(NULL, (size))
#define YYFREE mem_free

static void yyerror(YYLTYPE *loc, void *scanner, ParseState *ps, const char *msg);

#define NODE(kind, loc) ast_new(ps->arena, (kind), (loc))
/* Every finished node goes through DONE: it gets its depth, and a tree
 * deeper than AST_MAX_DEPTH stops the parse. */
#define DONE(n)                          \
  do {                                   \
    if (!finish(ps, (n))) YYABORT;       \
  } while (0)

static bool finish(ParseState *ps, AstNode *n);
static AstNode *binary(ParseState *ps, int op, AstNode *a, AstNode *b, Span opspan, Span span);
static AstNode *unary(ParseState *ps, int op, AstNode *a, Span opspan, Span span);
static void add_stmt(ParseState *ps, AstNode *block, AstNode *stmt);
static void add_arg(ParseState *ps, AstNode *call, AstNode *arg);
static void add_op_param(ParseState *ps, AstNode *op, AstNode *param);
static void check_targets(ParseState *ps, AstNode *assign);
}

%define api.pure full
%define api.location.type {Span}
%define parse.error custom
%define parse.lac full
%locations
%expect 0

%parse-param {void *scanner} {ParseState *ps}
%lex-param {void *scanner}

%initial-action {
  @$ = (Span){ps->file, 0, 0};
}

%union {
  AstNode *node;
  const char *str;
  int64_t ival;
  double fval;
}

/* Human names: they appear in messages ("unexpected end of line"). */
%token NEWLINE "end of line"
%token <str> NAME "name"
%token <str> GRADNAME "gradient name"
%token <ival> INT "integer"
%token <fval> FLOAT "number"
%token <str> STRING "string"
%token INPUT "'input'" PARAM "'param'" STATE "'state'" DEF "'def'" OP "'op'" GRAD "'grad'"
%token RETURN "'return'" WHILE "'while'" IF "'if'" ELSE "'else'"
%token IMPORT "'import'" LOAD "'load'" AND "'and'" OR "'or'" NOT "'not'"
%token TRUE "'true'" FALSE "'false'"
%token POW "'**'" IDIV "'//'" EQ "'=='" NE "'!='" LE "'<='" GE "'>='" ARROW "'->'"
/* Bytes the scanner rejected (it has reported them). */
%token LEXERROR "bad character"

%type <node> stmt_list stmt_opt stmt simple_stmt targets if_stmt else_tail
%type <node> block type dims dims_opt dim names names_opt
%type <node> op_params op_params_opt op_param grad_opt return_values
%type <node> expr or_expr and_expr not_expr cmp_expr comparison cmp_chain add_expr
%type <node> mul_expr unary_expr power_expr postfix primary
%type <node> args args_opt arg subscripts subscript expr_opt elems elems_opt

%%

/* ---- statements ------------------------------------------------------- */

/* program: { [stmt] (NEWLINE | ';') } [stmt] EOF */
program:
    stmt_list stmt_opt {
      add_stmt(ps, $1, $2);
      $1->span = (Span){ps->file, 0, ps->len};
      $1->opspan = $1->span;
      DONE($1);
      ps->root = $1;
    }
  ;

/* The statements of a file or block so far, each ended by a separator.
 * Left recursive, so the parser stack stays flat however long the list;
 * and the `error` alternative of stmt_opt sits right after it, so
 * recovery never pops the statements already parsed. */
stmt_list:
    %empty { $$ = NODE(AST_BLOCK, @$); }
  | stmt_list stmt_opt sep {
      add_stmt(ps, $1, $2);
      $$ = $1;
      yyerrok;  /* a new statement may hold a new mistake: report it */
    }
  ;

sep: NEWLINE | ';' ;

stmt_opt:
    %empty { $$ = NULL; }
  | stmt
  | error {
      $$ = NULL;
      lex_recover(ps, yychar);
    }
  ;

/* block: '{' { [stmt] sep } [stmt] '}' */
block:
    '{' stmt_list stmt_opt '}' {
      add_stmt(ps, $2, $3);
      $2->span = $2->opspan = @$;
      DONE($2);
      $$ = $2;
    }
  ;

stmt:
    /* import "NAME" */
    IMPORT STRING {
      $$ = NODE(AST_IMPORT, @$);
      $$->name = $2;
      DONE($$);
    }
    /* load "PATH.so" */
  | LOAD STRING {
      $$ = NODE(AST_LOAD, @$);
      $$->name = $2;
      DONE($$);
    }
    /* input NAME : TYPE [= EXPR] */
  | INPUT NAME ':' type {
      $$ = NODE(AST_INPUT, @$);
      $$->name = $2;
      $$->a = $4;
      DONE($$);
    }
  | INPUT NAME ':' type '=' expr {
      $$ = NODE(AST_INPUT, @$);
      $$->name = $2;
      $$->a = $4;
      $$->b = $6;
      DONE($$);
    }
    /* param NAME : TYPE = EXPR */
  | PARAM NAME ':' type '=' expr {
      $$ = NODE(AST_PARAM, @$);
      $$->name = $2;
      $$->a = $4;
      $$->b = $6;
      DONE($$);
    }
    /* state NAME : TYPE = EXPR */
  | STATE NAME ':' type '=' expr {
      $$ = NODE(AST_STATE, @$);
      $$->name = $2;
      $$->a = $4;
      $$->b = $6;
      DONE($$);
    }
    /* def NAME ( [NAME {, NAME} [,]] ) BLOCK */
  | DEF NAME '(' names_opt ')' block {
      $$ = NODE(AST_DEF, @$);
      $$->name = $2;
      $$->list = $4->list;
      $$->a = $6;
      DONE($$);
    }
    /* op NAME ( INPUTS [, ATTR = CONST ...] ) -> ( OUTPUTS ) BLOCK [grad BLOCK] */
  | OP NAME '(' op_params_opt ')' ARROW '(' names_opt ')' block grad_opt {
      $$ = $4;
      $$->span = $$->opspan = @$;
      $$->name = $2;
      $$->list2 = $8->list;
      $$->a = $10;
      $$->b = $11;
      DONE($$);
    }
    /* while EXPR BLOCK */
  | WHILE expr block {
      $$ = NODE(AST_WHILE, @$);
      $$->a = $2;
      $$->b = $3;
      DONE($$);
    }
  | if_stmt
    /* NAME BLOCK: a configuration block such as train { epochs = 5 } */
  | NAME block {
      $$ = NODE(AST_CONFIG, @$);
      $$->name = $1;
      $$->opspan = @1;
      $$->a = $2;
      DONE($$);
    }
    /* return [EXPR {, EXPR}] */
  | RETURN {
      $$ = NODE(AST_RETURN, @$);
      DONE($$);
    }
  | RETURN return_values {
      $$ = $2;
      $$->span = $$->opspan = @$;
      DONE($$);
    }
  | simple_stmt
    /* "else" or "grad" starting a line: a misplaced clause of the if or op
     * before it.  Parsed so that it can be attached there and reported once
     * (add_stmt); a marker node (no condition / no name) carries it. */
  | ELSE else_tail {
      $$ = NODE(AST_IF, @$);
      $$->opspan = @1;
      $$->c = $2;
      DONE($$);
    }
  | GRAD block {
      $$ = NODE(AST_OPDEF, @$);
      $$->opspan = @1;
      $$->b = $2;
      DONE($$);
    }
  ;

/* if EXPR BLOCK [else (BLOCK | if ...)] — "else" on the line of the '}' */
if_stmt:
    IF expr block {
      $$ = NODE(AST_IF, @$);
      $$->a = $2;
      $$->b = $3;
      DONE($$);
    }
  | IF expr block ELSE else_tail {
      $$ = NODE(AST_IF, @$);
      $$->a = $2;
      $$->b = $3;
      $$->c = $5;
      DONE($$);
    }
  ;

else_tail: block | if_stmt ;

grad_opt:
    %empty { $$ = NULL; }
  | GRAD block { $$ = $2; }
  ;

/* EXPR | TARGET {, TARGET} = EXPR */
simple_stmt:
    expr {
      $$ = NODE(AST_EXPR, @$);
      $$->a = $1;
      DONE($$);
    }
  | targets '=' expr {
      $$ = $1;
      $$->span = $$->opspan = @$;
      $$->a = $3;
      check_targets(ps, $$);
      DONE($$);
    }
  ;

/* Targets are parsed as expressions, then checked (check_targets). */
targets:
    expr {
      $$ = NODE(AST_ASSIGN, @$);
      ast_push(ps->arena, &$$->list, $1);
    }
  | targets ',' expr {
      $$ = $1;
      ast_push(ps->arena, &$$->list, $3);
    }
  ;

return_values:
    expr {
      $$ = NODE(AST_RETURN, @$);
      ast_push(ps->arena, &$$->list, $1);
    }
  | return_values ',' expr {
      $$ = $1;
      ast_push(ps->arena, &$$->list, $3);
    }
  ;

/* [NAME {, NAME} [,]] — function parameters and op outputs; an AST_LIST
 * whose list the caller takes over. */
names_opt:
    %empty { $$ = NODE(AST_LIST, @$); }
  | names
  | names ','
  ;

names:
    NAME {
      $$ = NODE(AST_LIST, @$);
      AstNode *n = NODE(AST_NAME, @1);
      n->name = $1;
      DONE(n);
      ast_push(ps->arena, &$$->list, n);
    }
  | names ',' NAME {
      $$ = $1;
      AstNode *n = NODE(AST_NAME, @3);
      n->name = $3;
      DONE(n);
      ast_push(ps->arena, &$$->list, n);
    }
  ;

/* op inputs: NAME ..., then attributes NAME = CONST ... (built into the
 * AST_OPDEF node itself: list = inputs, list3 = attributes). */
op_params_opt:
    %empty { $$ = NODE(AST_OPDEF, @$); }
  | op_params
  | op_params ','
  ;

op_params:
    op_param {
      $$ = NODE(AST_OPDEF, @$);
      add_op_param(ps, $$, $1);
    }
  | op_params ',' op_param {
      $$ = $1;
      add_op_param(ps, $$, $3);
    }
  ;

op_param:
    NAME {
      $$ = NODE(AST_NAME, @$);
      $$->name = $1;
      DONE($$);
    }
  | NAME '=' expr {
      $$ = NODE(AST_KWARG, @$);
      $$->name = $1;
      $$->a = $3;
      DONE($$);
    }
  ;

/* ---- types: DTYPE | DTYPE [DIMS] | [DIMS] ------------------------------ */

type:
    NAME {
      $$ = NODE(AST_TYPE, @$);
      $$->name = $1;
      DONE($$);
    }
  | NAME '[' dims_opt ']' {
      $$ = $3;
      $$->span = $$->opspan = @$;
      $$->name = $1;
      $$->ival = 1;
      DONE($$);
    }
  | '[' dims_opt ']' {
      $$ = $2;
      $$->span = $$->opspan = @$;
      $$->ival = 1;
      DONE($$);
    }
  ;

/* [DIM {, DIM} [,]], DIM = an expression: an integer, a name, dim(x, 1), n * 2
 * (built into an AST_TYPE; lowering evaluates it) */
dims_opt:
    %empty { $$ = NODE(AST_TYPE, @$); }
  | dims
  | dims ','
  ;

dims:
    dim {
      $$ = NODE(AST_TYPE, @$);
      ast_push(ps->arena, &$$->list, $1);
    }
  | dims ',' dim {
      $$ = $1;
      ast_push(ps->arena, &$$->list, $3);
    }
  ;

dim: add_expr ;

/* ---- expressions, lowest precedence first ------------------------------ */

expr: or_expr ;

/* or_expr: or_expr 'or' and_expr */
or_expr:
    and_expr
  | or_expr OR and_expr { $$ = binary(ps, AST_OP_OR, $1, $3, @2, @$); DONE($$); }
  ;

/* and_expr: and_expr 'and' not_expr */
and_expr:
    not_expr
  | and_expr AND not_expr { $$ = binary(ps, AST_OP_AND, $1, $3, @2, @$); DONE($$); }
  ;

/* not_expr: 'not' not_expr */
not_expr:
    cmp_expr
  | NOT not_expr { $$ = unary(ps, AST_OP_NOT, $2, @1, @$); DONE($$); }
  ;

/* cmp_expr: add_expr [CMP add_expr] — comparisons do not associate. */
cmp_expr:
    add_expr
  | comparison
  | cmp_chain {
      diag_error(ps->diag, $1->opspan,
                 "syntax error: comparisons cannot be chained (write 'a < b and b < c')");
      $$ = $1;
    }
  ;

comparison:
    add_expr EQ add_expr { $$ = binary(ps, AST_OP_EQ, $1, $3, @2, @$); DONE($$); }
  | add_expr NE add_expr { $$ = binary(ps, AST_OP_NE, $1, $3, @2, @$); DONE($$); }
  | add_expr '<' add_expr { $$ = binary(ps, '<', $1, $3, @2, @$); DONE($$); }
  | add_expr LE add_expr { $$ = binary(ps, AST_OP_LE, $1, $3, @2, @$); DONE($$); }
  | add_expr '>' add_expr { $$ = binary(ps, '>', $1, $3, @2, @$); DONE($$); }
  | add_expr GE add_expr { $$ = binary(ps, AST_OP_GE, $1, $3, @2, @$); DONE($$); }
  ;

/* a < b < c: parsed only to be reported once, at the second operator. */
cmp_chain:
    comparison cmp_op add_expr {
      $$ = $1;
      $$->opspan = @2;
    }
  | cmp_chain cmp_op add_expr { $$ = $1; }
  ;

cmp_op: EQ | NE | '<' | LE | '>' | GE ;

/* add_expr: add_expr ('+' | '-') mul_expr */
add_expr:
    mul_expr
  | add_expr '+' mul_expr { $$ = binary(ps, '+', $1, $3, @2, @$); DONE($$); }
  | add_expr '-' mul_expr { $$ = binary(ps, '-', $1, $3, @2, @$); DONE($$); }
  ;

/* mul_expr: mul_expr ('*' | '/' | '@' | '//') unary_expr */
mul_expr:
    unary_expr
  | mul_expr '*' unary_expr { $$ = binary(ps, '*', $1, $3, @2, @$); DONE($$); }
  | mul_expr '/' unary_expr { $$ = binary(ps, '/', $1, $3, @2, @$); DONE($$); }
  | mul_expr '@' unary_expr { $$ = binary(ps, '@', $1, $3, @2, @$); DONE($$); }
  | mul_expr IDIV unary_expr { $$ = binary(ps, AST_OP_IDIV, $1, $3, @2, @$); DONE($$); }
  ;

/* unary_expr: '-' unary_expr — binds looser than '**': -2 ** 2 is -(2 ** 2) */
unary_expr:
    power_expr
  | '-' unary_expr { $$ = unary(ps, '-', $2, @1, @$); DONE($$); }
  ;

/* power_expr: postfix '**' unary_expr — right associative, and the
 * exponent may be negated: 2 ** -1 */
power_expr:
    postfix
  | postfix POW unary_expr { $$ = binary(ps, AST_OP_POW, $1, $3, @2, @$); DONE($$); }
  ;

/* postfix: NAME '(' ARGS ')' | postfix '[' SUBSCRIPTS ']' */
postfix:
    primary
  | postfix '(' args_opt ')' {
      if ($1->kind != AST_NAME) {
        diag_error(ps->diag, @1, "only a name can be called");
        $$ = $1;
      } else {
        $$ = $3;
        $$->span = @$;
        $$->opspan = @1;
        $$->name = $1->name;
        DONE($$);
      }
    }
    /* grad ( ARGS ): the built-in gradient (netrun-lang(5) GRADIENTS IN
     * SCRIPTS); 'grad' stays a keyword, so only this form is a value */
  | GRAD '(' args_opt ')' {
      $$ = $3;
      $$->span = @$;
      $$->opspan = @1;
      $$->name = "grad";
      DONE($$);
    }
  | postfix '[' subscripts ']' {
      $$ = $3;
      $$->span = @$;
      $$->opspan = span_join(@2, @4);
      $$->a = $1;
      DONE($$);
    }
  ;

/* [ARG {, ARG} [,]], ARG = EXPR | NAME = EXPR; positional arguments
 * first (built into an AST_CALL). */
args_opt:
    %empty { $$ = NODE(AST_CALL, @$); }
  | args
  | args ','
  ;

args:
    arg {
      $$ = NODE(AST_CALL, @$);
      add_arg(ps, $$, $1);
    }
  | args ',' arg {
      $$ = $1;
      add_arg(ps, $$, $3);
    }
  ;

arg:
    expr
  | NAME '=' expr {
      $$ = NODE(AST_KWARG, @$);
      $$->name = $1;
      $$->a = $3;
      DONE($$);
    }
  ;

/* SUBSCRIPT {, SUBSCRIPT}, SUBSCRIPT = EXPR | [EXPR] ':' [EXPR] [':' [EXPR]]
 * (built into an AST_INDEX) */
subscripts:
    subscript {
      $$ = NODE(AST_INDEX, @$);
      ast_push(ps->arena, &$$->list, $1);
    }
  | subscripts ',' subscript {
      $$ = $1;
      ast_push(ps->arena, &$$->list, $3);
    }
  ;

subscript:
    expr
  | expr_opt ':' expr_opt {
      $$ = NODE(AST_SLICE, @$);
      $$->a = $1;
      $$->b = $3;
      DONE($$);
    }
  | expr_opt ':' expr_opt ':' expr_opt {
      $$ = NODE(AST_SLICE, @$);
      $$->a = $1;
      $$->b = $3;
      $$->c = $5;
      DONE($$);
    }
  ;

expr_opt:
    %empty { $$ = NULL; }
  | expr
  ;

primary:
    NAME {
      $$ = NODE(AST_NAME, @$);
      $$->name = $1;
      DONE($$);
    }
  | GRADNAME {
      $$ = NODE(AST_GRADNAME, @$);
      $$->name = $1;
      DONE($$);
    }
  | INT {
      $$ = NODE(AST_INT, @$);
      $$->ival = $1;
      DONE($$);
    }
  | FLOAT {
      $$ = NODE(AST_FLOAT, @$);
      $$->fval = $1;
      DONE($$);
    }
  | STRING {
      $$ = NODE(AST_STRING, @$);
      $$->name = $1;
      DONE($$);
    }
  | TRUE {
      $$ = NODE(AST_BOOL, @$);
      $$->ival = 1;
      DONE($$);
    }
  | FALSE {
      $$ = NODE(AST_BOOL, @$);
      DONE($$);
    }
  | '(' expr ')' { $$ = $2; }
    /* '[' [EXPR {, EXPR} [,]] ']' */
  | '[' elems_opt ']' {
      $$ = $2;
      $$->span = $$->opspan = @$;
      DONE($$);
    }
  ;

elems_opt:
    %empty { $$ = NODE(AST_LIST, @$); }
  | elems
  | elems ','
  ;

elems:
    expr {
      $$ = NODE(AST_LIST, @$);
      ast_push(ps->arena, &$$->list, $1);
    }
  | elems ',' expr {
      $$ = $1;
      ast_push(ps->arena, &$$->list, $3);
    }
  ;

%%

/* ---- building ------------------------------------------------------------ */

static bool is_statement(const AstNode *n) {
  switch (n->kind) {
  case AST_BLOCK: case AST_IMPORT: case AST_LOAD: case AST_INPUT: case AST_PARAM: case AST_STATE: case AST_DEF:
  case AST_OPDEF: case AST_WHILE: case AST_IF: case AST_RETURN: case AST_ASSIGN: case AST_EXPR:
    return true;
  default:
    return false;
  }
}

static const AstNode *deepest_in(const AstList *l, const AstNode *best) {
  for (int i = 0; i < l->n; i++)
    if (l->items[i] && (!best || l->items[i]->depth > best->depth)) best = l->items[i];
  return best;
}

static const AstNode *deepest_child(const AstNode *n) {
  const AstNode *best = NULL;
  const AstNode *kids[3] = {n->a, n->b, n->c};
  for (int i = 0; i < 3; i++)
    if (kids[i] && (!best || kids[i]->depth > best->depth)) best = kids[i];
  best = deepest_in(&n->list, best);
  best = deepest_in(&n->list2, best);
  return deepest_in(&n->list3, best);
}

/* Where to report a tree that is too deep: through blocks and statements
 * down to the outermost expression on the deepest path; where a statement
 * holds the next one directly (an else-if chain), the start of the
 * outermost of those. */
static Span too_deep_at(const AstNode *n) {
  while (is_statement(n)) {
    const AstNode *next = deepest_child(n);
    if (!next || (n->kind != AST_BLOCK && next->kind != AST_BLOCK && is_statement(next))) break;
    n = next;
  }
  if (!is_statement(n)) return n->opspan;
  return (Span){n->span.file, n->span.start, n->span.start + 1};
}

static bool finish(ParseState *ps, AstNode *n) {
  ast_fix_depth(n);
  if (n->depth <= AST_MAX_DEPTH) return true;
  diag_error(ps->diag, too_deep_at(n), "expression too deeply nested (more than %d levels)",
             AST_MAX_DEPTH);
  return false;
}

static AstNode *binary(ParseState *ps, int op, AstNode *a, AstNode *b, Span opspan, Span span) {
  AstNode *n = NODE(AST_BINARY, span);
  n->op = op;
  n->opspan = opspan;
  n->a = a;
  n->b = b;
  return n;
}

static AstNode *unary(ParseState *ps, int op, AstNode *a, Span opspan, Span span) {
  if (op == '-' && a->kind == AST_INT && a->ival == INT64_MIN && lex_negate_big(ps, a->span)) {
    a->span = span;   /* -9223372036854775808: the literal INT64_MIN */
    return a;
  }
  AstNode *n = NODE(AST_UNARY, span);
  n->op = op;
  n->opspan = opspan;
  n->a = a;
  return n;
}

/* Re-derives the depths along an else-if chain after its tail changed. */
static void refix_chain(AstNode *n) {
  if (n->c && n->c->kind == AST_IF) refix_chain(n->c);
  ast_fix_depth(n);
}

/* Appends a statement to a block.  A misplaced "else" or "grad" clause
 * (see stmt) is attached to the if or op it follows, and reported. */
static void add_stmt(ParseState *ps, AstNode *block, AstNode *s) {
  if (!s) return;
  AstNode *prev = block->list.n ? block->list.items[block->list.n - 1] : NULL;
  if (s->kind == AST_IF && !s->a) {
    AstNode *open_if = prev && prev->kind == AST_IF ? prev : NULL;
    while (open_if && open_if->c) open_if = open_if->c->kind == AST_IF ? open_if->c : NULL;
    if (open_if) {
      diag_error(ps->diag, s->opspan,
                 "'else' must be on the same line as the '}' that closes the if body");
      open_if->c = s->c;
      refix_chain(prev);
    } else {
      diag_error(ps->diag, s->opspan, "'else' without an 'if' before it");
    }
    return;
  }
  if (s->kind == AST_OPDEF && !s->name) {
    if (prev && prev->kind == AST_OPDEF && !prev->b) {
      diag_error(ps->diag, s->opspan,
                 "'grad' must be on the same line as the '}' that closes the op body");
      prev->b = s->b;
      ast_fix_depth(prev);
    } else {
      diag_error(ps->diag, s->opspan, "'grad' without an 'op' before it");
    }
    return;
  }
  ast_push(ps->arena, &block->list, s);
}

/* Positional arguments go to list, keyword arguments to list2. */
static void add_arg(ParseState *ps, AstNode *call, AstNode *arg) {
  if (arg->kind == AST_KWARG) {
    ast_push(ps->arena, &call->list2, arg);
    return;
  }
  if (call->list2.n)
    diag_error(ps->diag, arg->span, "positional argument follows keyword argument");
  ast_push(ps->arena, &call->list, arg);
}

/* Inputs go to list, attributes (NAME = CONST) to list3. */
static void add_op_param(ParseState *ps, AstNode *op, AstNode *param) {
  if (param->kind == AST_KWARG) {
    ast_push(ps->arena, &op->list3, param);
    return;
  }
  if (op->list3.n)
    diag_error(ps->diag, param->span, "op input '%s' follows an attribute (inputs come first)",
               param->name);
  ast_push(ps->arena, &op->list, param);
}

static void check_targets(ParseState *ps, AstNode *assign) {
  for (int i = 0; i < assign->list.n; i++) {
    AstNode *t = assign->list.items[i];
    if (t->kind != AST_NAME && t->kind != AST_GRADNAME)
      diag_error(ps->diag, t->span, "cannot assign to this expression");
  }
}

/* The only call bison makes to yyerror with parse.error custom: the parser
 * stack is exhausted (see YYMAXDEPTH). */
static void yyerror(YYLTYPE *loc, void *scanner, ParseState *ps, const char *msg) {
  (void)scanner;
  (void)msg;
  diag_error(ps->diag, *loc, "expression too deeply nested (more than %d levels)", AST_MAX_DEPTH);
}

/* ---- syntax error messages ---------------------------------------------- */

/* Is k one of these one-character tokens? */
static bool one_of(yysymbol_kind_t k, const char *chars) {
  for (; *chars; chars++)
    if (k == YYTRANSLATE((int)(unsigned char)*chars)) return true;
  return false;
}

/* Tokens that start an expression: listed together as "an expression". */
static bool starts_expr(yysymbol_kind_t k) {
  switch (k) {
  case YYSYMBOL_NAME: case YYSYMBOL_GRADNAME: case YYSYMBOL_INT: case YYSYMBOL_FLOAT:
  case YYSYMBOL_STRING: case YYSYMBOL_TRUE: case YYSYMBOL_FALSE: case YYSYMBOL_NOT: case YYSYMBOL_GRAD:
    return true;
  default:
    return one_of(k, "([-");
  }
}

/* Binary operators: listed together as "an operator". */
static bool is_operator(yysymbol_kind_t k) {
  switch (k) {
  case YYSYMBOL_OR: case YYSYMBOL_AND: case YYSYMBOL_EQ: case YYSYMBOL_NE:
  case YYSYMBOL_LE: case YYSYMBOL_GE: case YYSYMBOL_POW: case YYSYMBOL_IDIV:
    return true;
  default:
    return one_of(k, "<>+-*/@");
  }
}

static bool is_keyword(yysymbol_kind_t k) {
  switch (k) {
  case YYSYMBOL_INPUT: case YYSYMBOL_PARAM: case YYSYMBOL_STATE: case YYSYMBOL_DEF: case YYSYMBOL_OP:
  case YYSYMBOL_GRAD: case YYSYMBOL_RETURN: case YYSYMBOL_WHILE: case YYSYMBOL_IF:
  case YYSYMBOL_ELSE: case YYSYMBOL_IMPORT: case YYSYMBOL_LOAD: case YYSYMBOL_AND: case YYSYMBOL_OR:
  case YYSYMBOL_NOT: case YYSYMBOL_TRUE: case YYSYMBOL_FALSE:
    return true;
  default:
    return false;
  }
}

static const char *token_name(yysymbol_kind_t k) {
  switch (k) {
  case YYSYMBOL_YYEOF: return "end of file";
  case YYSYMBOL_INT: case YYSYMBOL_FLOAT: return "number";
  default: return yysymbol_name(k);
  }
}

/* Appends to a message buffer, truncating silently. */
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void put(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
  if (*len >= cap) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *len, cap - *len, fmt, ap);
  va_end(ap);
  if (n > 0) *len = *len + (size_t)n < cap ? *len + (size_t)n : cap;
}

/* "unexpected name 'W'": names and numbers are quoted from the source. */
static void put_unexpected(char *buf, size_t cap, size_t *len, const ParseState *ps,
                           yysymbol_kind_t k, Span at) {
  put(buf, cap, len, "unexpected %s", token_name(k));
  if (k == YYSYMBOL_NAME || k == YYSYMBOL_GRADNAME || k == YYSYMBOL_INT || k == YYSYMBOL_FLOAT) {
    uint32_t n = at.end - at.start;
    if (n > 40) put(buf, cap, len, " '%.37s...'", ps->text + at.start);
    else put(buf, cap, len, " '%.*s'", (int)n, ps->text + at.start);
  }
}

static bool is_quiet(const ParseState *ps, yysymbol_kind_t k, Span at) {
  if (ps->fatal || k == YYSYMBOL_LEXERROR) return true;
  if (k == YYSYMBOL_YYEOF) return ps->eof_quiet;
  return ps->quiet && at.start == ps->quiet_at;
}

/* Whether the token at `at` follows a 'grad' keyword, with only white
 * space between. */
static bool grad_just_before(const ParseState *ps, Span at) {
  if (ps->grad_end > at.start) return false;
  for (uint32_t i = ps->grad_end; i < at.start; i++)
    if (ps->text[i] != ' ' && ps->text[i] != '\t') return false;
  return true;
}

/* "syntax error: unexpected X, expecting A, B or C".  Expected tokens are
 * grouped ("an expression", "an operator", "end of line"); when there are
 * too many choices to help, the list is left out. */
static int yyreport_syntax_error(const yypcontext_t *ctx, void *scanner, ParseState *ps) {
  (void)scanner;
  yysymbol_kind_t got = yypcontext_token(ctx);
  Span at = *yypcontext_location(ctx);
  if (is_quiet(ps, got, at)) return 0;

  yysymbol_kind_t exp[YYNTOKENS];
  int nexp = yypcontext_expected_tokens(ctx, exp, YYNTOKENS);
  if (nexp < 0) nexp = 0;
  /* Where a name, a number and a '(' may come, any expression may (a
   * dimension list takes only names and numbers). */
  bool has_name = false, has_int = false, has_paren = false;
  int nops = 0;
  for (int i = 0; i < nexp; i++) {
    has_name |= exp[i] == YYSYMBOL_NAME;
    has_int |= exp[i] == YYSYMBOL_INT;
    has_paren |= one_of(exp[i], "(");
    nops += is_operator(exp[i]);
  }
  bool group_expr = has_name && has_int && has_paren, group_ops = nops >= 3;
  const char *items[YYNTOKENS + 2];
  int nitems = 0;
  bool any_end = false;
  if (group_ops) items[nitems++] = "an operator";
  for (int i = 0; i < nexp; i++) {
    yysymbol_kind_t k = exp[i];
    if (group_expr && starts_expr(k)) continue;
    if (group_ops && (is_operator(k) || one_of(k, "(["))) continue;
    /* One "end of line" stands for every way to end a statement. */
    if (k == YYSYMBOL_NEWLINE || k == YYSYMBOL_YYEOF || one_of(k, ";")) {
      if (!any_end) items[nitems++] = "end of line";
      any_end = true;
      continue;
    }
    items[nitems++] = token_name(k);
  }
  if (group_expr) items[nitems++] = "an expression";

  char msg[512];
  size_t len = 0;
  put(msg, sizeof msg, &len, "syntax error: ");
  put_unexpected(msg, sizeof msg, &len, ps, got, at);
  if (nitems > 0 && nitems <= 4) {
    put(msg, sizeof msg, &len, ", expecting ");
    for (int i = 0; i < nitems; i++)
      put(msg, sizeof msg, &len, "%s%s", i == 0 ? "" : i == nitems - 1 ? " or " : ", ", items[i]);
  }
  /* grad = 1, grad + 1: 'grad' is a value only as the built-in's call. */
  if (ps->grad_seen && !one_of(got, "({") && grad_just_before(ps, at))
    put(msg, sizeof msg, &len, " ('grad' is a reserved word: as a value it is only the built-in grad(Y, X, ...))");
  /* def if(): say why a word that looks like a name is not one. */
  if (has_name && is_keyword(got))
    put(msg, sizeof msg, &len, " (%s is a reserved word)", token_name(got));

  /* Inside ( ) or [ ], wait: an unclosed bracket may be the real cause.
   * While one error waits, later ones inside its bracket are its echoes.
   * (An opening bracket as the lookahead is already on the stack: the
   * error is in the brackets around it.) */
  if (ps->pend_msg) return 0;
  int depth = ps->nopen;
  if (depth > 0 && ps->open[depth - 1].at == at.start) depth--;
  if (depth > 0 && ps->open[depth - 1].ch != '{') {
    ps->pend_msg = arena_strdup(ps->arena, msg);
    ps->pend_at = at;
    ps->pend_depth = depth;
    return 0;
  }
  diag_error(ps->diag, at, "%s", msg);
  return 0;
}
