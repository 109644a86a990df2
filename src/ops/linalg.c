/* linalg.c — matrix products.
 *
 * matmul follows NumPy's matmul: 2-D operands multiply as matrices; higher
 * ranks are stacks of matrices whose batch dimensions broadcast; a 1-D X is
 * a row vector and a 1-D Y a column vector, and the dimension added for
 * that is removed from the result.  transpose_x / transpose_y swap the last
 * two dimensions of an operand of rank 2 or more first. */
#include "../registry.h"

static bool infer_matmul(InferCtx *c) {
  const VarDesc *x = infer_in(c, "X", 0), *y = infer_in(c, "Y", 0);
  if (!x || !y) return infer_fail(c, "needs both X and Y");
  DType t = infer_promote(x->dtype, y->dtype);
  char a[128], b[128];
  if (x->shape.rank == 0 || y->shape.rank == 0)
    return infer_fail(c, "%s must have at least one dimension, got a scalar",
                      x->shape.rank == 0 ? "X" : "Y");
  if (x->shape.rank < 0 || y->shape.rank < 0) {
    Shape u = shape_unknown();
    infer_set(c, "Out", 0, t, &u);
    return true;
  }
  Shape xs = x->shape, ys = y->shape;
  bool tx = infer_attr_b(c, "transpose_x"), ty = infer_attr_b(c, "transpose_y");
  bool xvec = xs.rank == 1, yvec = ys.rank == 1;
  if (xvec) {   /* [K] -> [1, K] */
    xs.rank = 2;
    xs.d[1] = xs.d[0];
    xs.d[0] = dim_n(1);
    tx = false;
  }
  if (yvec) {   /* [K] -> [K, 1] */
    ys.rank = 2;
    ys.d[1] = dim_n(1);
    ty = false;
  }
  int rx = xs.rank, ry = ys.rank;
  Dim m = xs.d[tx ? rx - 1 : rx - 2], kx = xs.d[tx ? rx - 2 : rx - 1];
  Dim ky = ys.d[ty ? ry - 1 : ry - 2], n = ys.d[ty ? ry - 2 : ry - 1];
  if (dim_known(kx) && dim_known(ky) && kx.n != ky.n)
    return infer_fail(c, "X has shape %s%s and Y has shape %s%s: inner dimensions %lld and %lld differ",
                      shape_str(&x->shape, a, sizeof a), tx ? " (transposed)" : "",
                      shape_str(&y->shape, b, sizeof b), ty ? " (transposed)" : "",
                      (long long)kx.n, (long long)ky.n);
  Shape bx = xs, by = ys, s;
  bx.rank -= 2;
  by.rank -= 2;
  bool quiet = c->quiet;
  c->quiet = true;
  bool ok = infer_broadcast(c, &bx, &by, &s);
  c->quiet = quiet;
  if (!ok) {
    char ba[128], bb[128];
    return infer_fail(c, "X has shape %s and Y has shape %s: batch dimensions %s and %s do not broadcast",
                      shape_str(&x->shape, a, sizeof a), shape_str(&y->shape, b, sizeof b),
                      shape_str(&bx, ba, sizeof ba), shape_str(&by, bb, sizeof bb));
  }
  if (!xvec) s.d[s.rank++] = m;
  if (!yvec) s.d[s.rank++] = n;
  infer_set(c, "Out", 0, t, &s);
  return true;
}

OpProto op_table_linalg[] = {
    {.type = "matmul", .doc = "Out = X @ Y, NumPy matmul: batched, broadcasting, 1-D promoted",
     .in = {{"X", 0, "left operand [..., M, K] (or [K])"},
            {"Y", 0, "right operand [..., K, N] (or [K])"}},
     .out = {{"Out", 0, "the product [..., M, N], promoted dtype"}},
     .attrs = {{"transpose_x", ATTR_BOOL, "false", NULL, "use X's last two axes swapped"},
               {"transpose_y", ATTR_BOOL, "false", NULL, "use Y's last two axes swapped"}},
     .infer = infer_matmul, .grad_kind = GRAD_COMPOSITE},
    {0},
};
