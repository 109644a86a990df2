/* control.c — ops that own sub-blocks: while and conditional_block.
 *
 * Their bodies are blocks of the program (lower.c builds them):
 *
 *   {Out=[h.3, i.3]} = while(Cond=[c], X=[h, i], Input=[W]) {sub_block=1}
 *
 * runs block 1 while the condition holds.  A turn starts with the block's
 * args (one per carried value, X the first turn's) and yields its results:
 * one per carried value, then the condition for the next turn.  Out is the
 * carried values after the last turn; Input lists every outer variable the
 * body reads, so dependency walks need not enter the block.
 *
 *   {Out=[y.1]} = conditional_block(Cond=[c], Input=[x]) {sub_block=2, else_block=3}
 *
 * runs block 2 if Cond holds, else block 3; Out[k] is the taken block's
 * result k.  Every if gets an else block (empty when the script has none,
 * its results then being the values from before the if). */
#include "../registry.h"

#include <string.h>

/* The shape both a and b fit: equal dims stay, others become unknown. */
static Shape join(const Shape *a, const Shape *b) {
  if (a->rank != b->rank) return shape_unknown();
  Shape s = *a;
  for (int i = 0; i < a->rank; i++)
    if (!dim_eq(a->d[i], b->d[i])) s.d[i] = dim_unknown();
  return s;
}

static bool check_cond(InferCtx *c) {
  const VarDesc *cond = infer_in(c, "Cond", 0);
  char buf[128];
  if (cond->dtype != DT_BOOL)
    return infer_fail(c, "the condition must be a bool scalar, got %s", dtype_name(cond->dtype));
  int64_t n = shape_numel(&cond->shape);
  if (cond->shape.rank >= 0 && n >= 0 && n != 1)
    return infer_fail(c, "the condition must be a scalar, got shape %s",
                      shape_str(&cond->shape, buf, sizeof buf));
  return true;
}

static const VarDesc *result(InferCtx *c, const char *attr, int k) {
  const Block *b = prog_block(c->prog, (int)infer_attr_i(c, attr));
  if (!b || k >= b->nresults) return NULL;
  return prog_var(c->prog, b->results[k]);
}

static bool infer_while(InferCtx *c) {
  if (!check_cond(c)) return false;
  for (int k = 0; k < infer_out_count(c, "Out"); k++) {
    const VarDesc *init = infer_in(c, "X", k), *last = result(c, "sub_block", k);
    if (!init || !last) return infer_fail(c, "malformed loop (carried value %d)", k);
    Shape s = join(&init->shape, &last->shape);
    infer_set(c, "Out", k, init->dtype, &s);
  }
  return true;
}

static bool infer_conditional(InferCtx *c) {
  if (!check_cond(c)) return false;
  for (int k = 0; k < infer_out_count(c, "Out"); k++) {
    const VarDesc *a = result(c, "sub_block", k), *b = result(c, "else_block", k);
    if (!a || !b) return infer_fail(c, "malformed branch (result %d)", k);
    Shape s = join(&a->shape, &b->shape);
    infer_set(c, "Out", k, a->dtype, &s);
  }
  return true;
}

/* while_grad and conditional_block_grad: each gradient has its value's shape. */
static bool infer_control_grad(InferCtx *c) {
  for (int k = 0; k < infer_out_count(c, "X@GRAD"); k++) {
    const VarDesc *x = infer_in(c, "X", k);
    if (x) infer_set(c, "X@GRAD", k, x->dtype, &x->shape);
  }
  for (int j = 0; j < infer_out_count(c, "Input@GRAD"); j++) {
    const VarDesc *x = infer_in(c, "Input", j);
    if (x) infer_set(c, "Input@GRAD", j, x->dtype, &x->shape);
  }
  return true;
}

OpProto op_table_control[] = {
    {.type = "while", .doc = "runs sub_block while Cond holds, carrying X from turn to turn",
     .in = {{"Cond", 0, "the condition before the first turn (bool scalar)"},
            {"X", SLOT_LIST | SLOT_OPTIONAL, "initial values of the carried variables"},
            {"Input", SLOT_LIST | SLOT_OPTIONAL, "outer variables the body reads"}},
     .out = {{"Out", SLOT_LIST, "carried values after the last turn"}},
     .attrs = {{"sub_block", ATTR_BLOCK, NULL, NULL, "the loop body"}},
     .infer = infer_while, .grad_kind = GRAD_DEDICATED, .flags = OP_CONTROL | OP_INTERNAL},
    {.type = "conditional_block", .doc = "runs sub_block if Cond holds, else else_block",
     .in = {{"Cond", 0, "the condition (bool scalar)"},
            {"Input", SLOT_LIST | SLOT_OPTIONAL, "outer variables the branches read"}},
     .out = {{"Out", SLOT_LIST, "the taken branch's results"}},
     .attrs = {{"sub_block", ATTR_BLOCK, NULL, NULL, "the branch run when Cond holds"},
               {"else_block", ATTR_BLOCK, NULL, NULL, "the branch run otherwise"}},
     .infer = infer_conditional, .grad_kind = GRAD_DEDICATED, .flags = OP_CONTROL | OP_INTERNAL},
    {.type = "while_grad",
     .doc = "runs sub_block (the body's grad block) over the loop's saved turns, last turn first",
     .in = {{"Out@GRAD", SLOT_LIST, "gradients of the loop's outputs"},
            {"X", SLOT_LIST | SLOT_OPTIONAL, "the loop's initial carried values"},
            {"Input", SLOT_LIST | SLOT_OPTIONAL, "the outer values the body read"}},
     .out = {{"X@GRAD", SLOT_LIST, "gradients of the initial carried values"},
             {"Input@GRAD", SLOT_LIST, "gradients of the outer values, summed over turns"}},
     .attrs = {{"sub_block", ATTR_BLOCK, NULL, NULL, "the body's grad block"}},
     .infer = infer_control_grad, .grad_kind = GRAD_NONE, .flags = OP_CONTROL | OP_INTERNAL},
    {.type = "conditional_block_grad",
     .doc = "runs the grad block of the branch its conditional_block took",
     .in = {{"Cond", 0, "the forward condition"},
            {"Input", SLOT_LIST | SLOT_OPTIONAL, "the outer values the branches read"},
            {"Out@GRAD", SLOT_LIST, "gradients of the branch results"}},
     .out = {{"Input@GRAD", SLOT_LIST, "gradients of the outer values (zero from the branch not taken)"}},
     .attrs = {{"sub_block", ATTR_BLOCK, NULL, NULL, "the then branch's grad block"},
               {"else_block", ATTR_BLOCK, NULL, NULL, "the else branch's grad block"}},
     .infer = infer_control_grad, .grad_kind = GRAD_NONE, .flags = OP_CONTROL | OP_INTERNAL},
    {0},
};
