/* shape.c — ops that move elements without changing them: reshape,
 * transpose, flatten, squeeze, unsqueeze, broadcast_to, concat, split,
 * slice, gather, one_hot; and their gradients, which move the gradient
 * back (the dedicated ones: concat_grad, slice_grad, gather_grad).
 *
 * Their inference keeps symbolic dimensions (B) wherever the result is
 * provably the same size, and writes "?" where only run time can tell. */
#include "autodiff/backward.h"
#include "exec/exec.h"
#include "exec/par.h"

#include <assert.h>
#include <string.h>

_Static_assert(SHAPE_MAX_RANK == 8, "the messages below say 8");

/* ---- helpers ----------------------------------------------------------------- */

/* Out gets dtype t and shape *s; inference is done. */
static bool set_out(InferCtx *c, DType t, const Shape *s) {
  reg_infer_set(c, "Out", 0, t, s);
  return true;
}

/* Reads an int-list attribute; *n gets its length. */
static const int64_t *ints_attr(InferCtx *c, const char *name, int *n) {
  const AttrValue *v = reg_infer_attr(c, name);
  *n = 0;
  if (!v || v->type != ATTR_INTS) {
    reg_infer_fail(c, "attribute '%s' must be an int list", name);
    return NULL;
  }
  static const int64_t none[1];
  *n = v->n;
  return v->u.ints ? v->u.ints : none;
}

/* Writes an int list as "[4, -1]". */
static const char *ints_str(const int64_t *v, int n, char *buf, size_t size) {
  size_t k = 0;
  k += (size_t)snprintf(buf, size, "[");
  for (int i = 0; i < n && k < size; i++)
    k += (size_t)snprintf(buf + k, size - k, "%s%lld", i ? ", " : "", (long long)v[i]);
  if (k < size) snprintf(buf + k, size - k, "]");
  return buf;
}

/* A shape attribute of known sizes; `hole` allows one -1 (reshape). */
static const char *check_dims(const AttrValue *v, bool hole) {
  if (v->type != ATTR_INTS) return NULL;
  if (v->n > SHAPE_MAX_RANK) return "must have at most 8 dimensions";
  int64_t n = 1;
  int holes = 0;
  for (int i = 0; i < v->n; i++) {
    int64_t d = v->u.ints[i];
    if (hole && d == -1) {
      if (++holes > 1) return "may hold only one -1";
      continue;
    }
    if (d < 0) return hole ? "must hold sizes >= 0 and at most one -1" : "must not hold negative sizes";
    if (d && n > INT64_MAX / d) return "has too many elements (more than 2^63)";
    n *= d;
  }
  return NULL;
}

static const char *check_shape(const AttrValue *v) { return check_dims(v, false); }
static const char *check_reshape(const AttrValue *v) { return check_dims(v, true); }

static const char *check_perm(const AttrValue *v) {
  if (v->type != ATTR_INTS) return NULL;
  if (v->n > SHAPE_MAX_RANK) return "must have at most 8 entries";
  bool seen[SHAPE_MAX_RANK] = {false};
  for (int i = 0; i < v->n; i++) {
    int64_t p = v->u.ints[i];
    if (p < 0 || p >= v->n || seen[p]) return "must be a permutation of 0, 1, ..., n-1";
    seen[p] = true;
  }
  return NULL;
}

/* Re-runs an attribute's checker (ops made by netrun itself, such as grad
 * ops, do not pass through the script's attribute checks). */
static bool recheck(InferCtx *c, const char *name, AttrCheckFn fn) {
  const AttrValue *v = reg_infer_attr(c, name);
  const char *why = v ? fn(v) : NULL;
  if (why) return reg_infer_fail(c, "attribute '%s' %s", name, why);
  return true;
}

/* Input X with its int list attribute `name`, rechecked by fn (when not
 * NULL) as a value set at run time may need. */
typedef struct XInts {
  const VarDesc *x;
  const Shape *xs;     /* X's shape */
  const int64_t *v;    /* the list */
  int n;               /* its length */
} XInts;

static bool x_ints(InferCtx *c, const char *name, AttrCheckFn fn, XInts *q) {
  q->x = reg_infer_input(c, "X");
  q->v = ints_attr(c, name, &q->n);
  if (!q->x || !q->v || (fn && !recheck(c, name, fn))) return false;
  q->xs = &q->x->shape;
  return true;
}

/* ---- reshape, transpose, flatten --------------------------------------------- */

static bool infer_reshape(InferCtx *c) {
  XInts q;
  if (!x_ints(c, "shape", check_reshape, &q)) return false;
  int hole = -1;
  int64_t known = 1;   /* product of the target without its -1 */
  Shape s = shape_scalar();
  s.rank = q.n;
  for (int i = 0; i < q.n; i++) {
    if (q.v[i] == -1) {
      hole = i;
      s.d[i] = dim_unknown();
    } else {
      s.d[i] = dim_n(q.v[i]);
      known *= q.v[i];
    }
  }
  int64_t numel = shape_numel(q.xs);
  char a[128], b[128];
  if (numel >= 0) {
    if (hole < 0 ? known != numel : known == 0 || numel % known != 0)
      return reg_infer_fail(c, "cannot reshape X of shape %s (%lld elements) into %s", shape_str(q.xs, a, sizeof a),
                            (long long)numel, ints_str(q.v, q.n, b, sizeof b));
    if (hole >= 0) s.d[hole] = dim_n(numel / known);
  } else if (hole >= 0 && q.xs->rank >= 0 && known > 0) {
    /* [B, 784] -> [-1, 28, 28]: the -1 is B when the rest matches exactly */
    int nsym = 0, isym = -1;
    int64_t rest = 1;
    bool ok = true;
    for (int i = 0; i < q.xs->rank && ok; i++) {
      if (dim_known(q.xs->d[i])) {
        if (q.xs->d[i].n && rest > INT64_MAX / q.xs->d[i].n) ok = false;
        else rest *= q.xs->d[i].n;
      } else if (q.xs->d[i].sym) {
        nsym++;
        isym = i;
      } else {
        ok = false;
      }
    }
    if (ok && nsym == 1 && rest == known) s.d[hole] = q.xs->d[isym];
  }
  return set_out(c, q.x->dtype, &s);
}

static bool infer_transpose(InferCtx *c) {
  XInts q;
  if (!x_ints(c, "perm", check_perm, &q)) return false;
  Shape s = shape_scalar();
  s.rank = q.n;
  if (q.x->shape.rank < 0) {
    for (int i = 0; i < q.n; i++) s.d[i] = dim_unknown();
  } else if (q.x->shape.rank != q.n) {
    char a[128], b[128];
    return reg_infer_fail(c, "perm %s has %d entries but X has shape %s", ints_str(q.v, q.n, a, sizeof a),
                          q.n, shape_str(&q.x->shape, b, sizeof b));
  } else {
    for (int i = 0; i < q.n; i++) s.d[i] = q.x->shape.d[q.v[i]];
  }
  return set_out(c, q.x->dtype, &s);
}

/* The product of dims [from, rank) of s as one dimension: a size when all
 * are known, the symbol when it is the only factor besides 1s, else "?". */
static Dim dims_product(const Shape *s, int from) {
  int64_t p = 1;
  int nsym = 0, isym = -1;
  bool unknown = false;
  for (int i = from; i < s->rank; i++) {
    Dim d = s->d[i];
    if (d.n == 0) return dim_n(0);
    if (!dim_known(d)) {
      if (!d.sym) {
        unknown = true;
      } else {
        nsym++;
        isym = i;
      }
    } else if (p > INT64_MAX / d.n) {
      unknown = true;
    } else {
      p *= d.n;
    }
  }
  if (unknown) return dim_unknown();
  if (nsym == 0) return dim_n(p);
  return nsym == 1 && p == 1 ? s->d[isym] : dim_unknown();
}

static bool infer_flatten(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  if (!x) return false;
  int64_t start = reg_infer_attr_i(c, "start_axis");
  Shape s = shape_unknown();
  if (x->shape.rank == 0) {   /* a scalar flattens to [1] */
    if (start != 0 && start != -1)
      return reg_infer_fail(c, "start_axis %lld is out of range for X of shape []", (long long)start);
    s = shape_scalar();
    s.rank = 1;
    s.d[0] = dim_n(1);
  } else if (x->shape.rank > 0) {
    int k;
    if (!reg_infer_norm_axis(c, "start_axis", start, "X", &x->shape, &k)) return false;
    s = x->shape;
    s.d[k] = dims_product(&x->shape, k);
    s.rank = k + 1;
  }
  return set_out(c, x->dtype, &s);
}

/* ---- squeeze, unsqueeze, broadcast_to ------------------------------------------ */

/* squeeze and unsqueeze: X and its int list `axes`; Out's shape is unknown
 * when X's rank is, else what `make` gives (false after an error). */
typedef bool (*AxesShapeFn)(InferCtx *c, const Shape *xs, const int64_t *axes, int n, Shape *s);
static bool infer_by_axes(InferCtx *c, AxesShapeFn make) {
  XInts q;
  if (!x_ints(c, "axes", NULL, &q)) return false;
  Shape s = shape_unknown();
  if (q.xs->rank >= 0 && !make(c, q.xs, q.v, q.n, &s)) return false;
  return set_out(c, q.x->dtype, &s);
}

static bool squeeze_shape(InferCtx *c, const Shape *xs, const int64_t *axes, int n, Shape *s) {
  bool drop[SHAPE_MAX_RANK] = {false};
  char buf[128];
  for (int i = 0; i < xs->rank; i++) drop[i] = n == 0 && xs->d[i].n == 1;
  for (int i = 0; i < n; i++) {
    int k;
    if (!reg_infer_norm_axis(c, "axis", axes[i], "X", xs, &k)) return false;
    if (drop[k])
      return reg_infer_fail(c, "axes names dimension %d of X (shape %s) twice", k,
                            shape_str(xs, buf, sizeof buf));
    if (dim_known(xs->d[k]) && xs->d[k].n != 1)
      return reg_infer_fail(c, "cannot squeeze axis %d of X (shape %s): its size is %lld, not 1", k,
                            shape_str(xs, buf, sizeof buf), (long long)xs->d[k].n);
    drop[k] = true;   /* a symbol is checked to be 1 at run time */
  }
  *s = shape_scalar();
  for (int i = 0; i < xs->rank; i++)
    if (!drop[i]) s->d[s->rank++] = xs->d[i];
  return true;
}
static bool infer_squeeze(InferCtx *c) { return infer_by_axes(c, squeeze_shape); }

/* unsqueeze: axes are positions in the result, as in NumPy's expand_dims. */
static bool unsqueeze_shape(InferCtx *c, const Shape *xs, const int64_t *axes, int n, Shape *s) {
  char a[128], b[128];
  int r = xs->rank + n;
  if (n > SHAPE_MAX_RANK || r > SHAPE_MAX_RANK)
    return reg_infer_fail(c, "X of shape %s with axes %s would have rank %d, more than 8",
                          shape_str(xs, a, sizeof a), ints_str(axes, n, b, sizeof b), r);
  bool ins[SHAPE_MAX_RANK] = {false};
  for (int i = 0; i < n; i++) {
    int64_t k = axes[i] < 0 ? axes[i] + r : axes[i];
    if (k < 0 || k >= r)
      return reg_infer_fail(c, "axis %lld is out of range for a result of rank %d (X has shape %s)",
                            (long long)axes[i], r, shape_str(xs, a, sizeof a));
    if (ins[k])
      return reg_infer_fail(c, "axes %s names position %lld twice", ints_str(axes, n, b, sizeof b),
                            (long long)k);
    ins[k] = true;
  }
  *s = shape_scalar();
  s->rank = r;
  for (int i = 0, j = 0; i < r; i++) s->d[i] = ins[i] ? dim_n(1) : xs->d[j++];
  return true;
}
static bool infer_unsqueeze(InferCtx *c) { return infer_by_axes(c, unsqueeze_shape); }

static bool infer_broadcast_to(InferCtx *c) {
  XInts q;
  if (!x_ints(c, "shape", check_shape, &q)) return false;
  Shape s = shape_of(q.n, q.v);
  char a[128], b[128];
  bool ok = q.xs->rank <= q.n;
  for (int i = 0; ok && i < q.xs->rank; i++) {
    Dim d = q.xs->d[i];   /* a symbol is checked at run time */
    if (dim_known(d) && d.n != 1 && d.n != q.v[q.n - q.xs->rank + i]) ok = false;
  }
  if (!ok)
    return reg_infer_fail(c, "X of shape %s cannot be broadcast to %s", shape_str(q.xs, a, sizeof a),
                          shape_str(&s, b, sizeof b));
  return set_out(c, q.x->dtype, &s);
}

/* ---- concat, split ---------------------------------------------------------- */

static bool infer_concat(InferCtx *c) {
  InferList l;
  if (!reg_infer_list(c, "X", "Out", &l)) return false;
  if (!l.ref) return true;
  char sa[128], sb[128];
  if (l.ref->shape.rank == 0)
    return reg_infer_fail(c, "X[%d] is a scalar; concat needs tensors of rank 1 or more", l.iref);
  int axis;
  if (!reg_infer_norm_axis(c, "axis", reg_infer_attr_i(c, "axis"), "X", &l.ref->shape, &axis)) return false;
  Shape s = l.ref->shape;
  int64_t total = 0;
  bool total_known = l.all_ranked;
  for (int i = 0; i < l.n; i++) {
    const Shape *vs = &reg_infer_in(c, "X", i)->shape;
    if (vs->rank < 0) continue;
    if (vs->rank != s.rank)
      return reg_infer_fail(c, "X[%d] has shape %s but X[%d] has shape %s: ranks differ", i,
                            shape_str(vs, sa, sizeof sa), l.iref, shape_str(&l.ref->shape, sb, sizeof sb));
    for (int k = 0; k < s.rank; k++) {
      if (k == axis) continue;
      if (dims_clash(vs->d[k], s.d[k])) {
        int j = l.iref;   /* name an earlier input that disagrees */
        for (int q = 0; q < i; q++) {
          const Shape *qs = &reg_infer_in(c, "X", q)->shape;
          if (qs->rank == s.rank && dims_clash(qs->d[k], vs->d[k])) {
            j = q;
            break;
          }
        }
        return reg_infer_fail(c, "X[%d] has shape %s but X[%d] has shape %s: dimension %d differs "
                              "(only axis %d may)", i, shape_str(vs, sa, sizeof sa), j,
                              shape_str(&reg_infer_in(c, "X", j)->shape, sb, sizeof sb), k, axis);
      }
      s.d[k] = dim_merge(s.d[k], vs->d[k]);
    }
    Dim d = vs->d[axis];
    if (!dim_known(d)) total_known = false;
    else if (total_known && !mem_add_size(total, d.n, &total))
      return reg_infer_fail(c, "the sizes of axis %d (X[%d] has shape %s) add up past 2^63 - 1", axis, i,
                            shape_str(vs, sa, sizeof sa));
  }
  s.d[axis] = total_known ? dim_n(total) : dim_unknown();
  if (l.n == 1) s.d[axis] = l.ref->shape.d[axis];
  return set_out(c, l.t, &s);
}

/* split: `num` equal parts, or parts of the sizes in `sections`; exactly
 * one of the two is given, and the outputs bound must match it. */
static bool infer_split(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  int ns;
  const int64_t *sec = ints_attr(c, "sections", &ns);
  if (!x || !sec) return false;
  int64_t num = reg_infer_attr_i(c, "num");
  int m = reg_infer_out_count(c, "Out");
  char a[128], b[128];
  if (num < 0) return reg_infer_fail(c, "num must not be negative, got %lld", (long long)num);
  if ((num > 0) == (ns > 0)) return reg_infer_fail(c, "give exactly one of num and sections");
  const char *are = m == 1 ? "output is" : "outputs are";
  if (num > 0 && num != m)
    return reg_infer_fail(c, "num=%lld but %d %s bound", (long long)num, m, are);
  if (ns > 0 && ns != m)
    return reg_infer_fail(c, "sections has %d entries but %d %s bound", ns, m, are);
  int64_t sum = 0;
  for (int i = 0; i < ns; i++) {
    if (sec[i] < 0)
      return reg_infer_fail(c, "sections %s must not hold negative sizes", ints_str(sec, ns, a, sizeof a));
    if (sum > INT64_MAX - sec[i])
      return reg_infer_fail(c, "sections %s sum to more than any dimension", ints_str(sec, ns, a, sizeof a));
    sum += sec[i];
  }
  const Shape *xs = &x->shape;
  if (xs->rank < 0) {
    Shape u = shape_unknown();
    for (int i = 0; i < m; i++) reg_infer_set(c, "Out", i, x->dtype, &u);
    return true;
  }
  int axis;
  if (xs->rank == 0) return reg_infer_fail(c, "X is a scalar; split needs a tensor of rank 1 or more");
  if (!reg_infer_norm_axis(c, "axis", reg_infer_attr_i(c, "axis"), "X", xs, &axis)) return false;
  Dim d = xs->d[axis];
  if (num > 0 && dim_known(d) && d.n % num != 0)
    return reg_infer_fail(c, "axis %d of X (shape %s) has size %lld, which does not split into %lld "
                          "equal parts", axis, shape_str(xs, a, sizeof a), (long long)d.n, (long long)num);
  if (ns > 0 && dim_known(d) && d.n != sum)
    return reg_infer_fail(c, "sections %s sum to %lld but axis %d of X (shape %s) has size %lld",
                          ints_str(sec, ns, a, sizeof a), (long long)sum, axis,
                          shape_str(xs, b, sizeof b), (long long)d.n);
  for (int i = 0; i < m; i++) {
    Shape s = *xs;
    if (ns > 0) s.d[axis] = dim_n(sec[i]);
    else if (num == 1) s.d[axis] = d;
    else s.d[axis] = dim_known(d) ? dim_n(d.n / num) : dim_unknown();
    reg_infer_set(c, "Out", i, x->dtype, &s);
  }
  return true;
}

/* ---- slice, gather, one_hot ------------------------------------------------- */

/* slice: Python's x[start:end] along each of `axes` (step 1): negative
 * indices count from the end and out-of-range ones are clamped. */
static bool infer_slice(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  int na, nb, ne;
  const int64_t *axes = ints_attr(c, "axes", &na);
  const int64_t *starts = ints_attr(c, "starts", &nb);
  const int64_t *ends = ints_attr(c, "ends", &ne);
  if (!x || !axes || !starts || !ends) return false;
  if (na != nb || na != ne)
    return reg_infer_fail(c, "axes, starts and ends must have one length, got %d, %d and %d", na, nb, ne);
  const Shape *xs = &x->shape;
  Shape s = *xs;
  if (xs->rank >= 0) {
    bool seen[SHAPE_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
      int k;
      if (!reg_infer_norm_axis(c, "axis", axes[i], "X", xs, &k)) return false;
      if (seen[k]) {
        char buf[128];
        return reg_infer_fail(c, "axes names dimension %d of X (shape %s) twice", k,
                              shape_str(xs, buf, sizeof buf));
      }
      seen[k] = true;
      Dim d = xs->d[k];
      if (dim_known(d)) {
        int64_t n = d.n, b = starts[i], e = ends[i];
        b = b < 0 ? (b + n < 0 ? 0 : b + n) : (b > n ? n : b);
        e = e < 0 ? (e + n < 0 ? 0 : e + n) : (e > n ? n : e);
        s.d[k] = dim_n(e > b ? e - b : 0);
      } else if (!(starts[i] == 0 && ends[i] == INT64_MAX)) {   /* [0:] keeps B */
        s.d[k] = dim_unknown();
      }
    }
  }
  return set_out(c, x->dtype, &s);
}

static bool infer_gather(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X"), *idx = reg_infer_input(c, "Index");
  if (!x || !idx) return false;
  if (idx->dtype != DT_I64) return reg_infer_fail(c, "Index must be i64, got %s", dtype_name(idx->dtype));
  const Shape *xs = &x->shape, *is = &idx->shape;
  char a[128], b[128];
  if (xs->rank == 0) return reg_infer_fail(c, "X is a scalar; gather needs a tensor of rank 1 or more");
  Shape s = shape_unknown();
  int axis = 0;
  if (xs->rank > 0 && !reg_infer_norm_axis(c, "axis", reg_infer_attr_i(c, "axis"), "X", xs, &axis)) return false;
  if (xs->rank > 0 && is->rank >= 0) {
    int r = xs->rank - 1 + is->rank;
    if (r > SHAPE_MAX_RANK)
      return reg_infer_fail(c, "X of shape %s gathered with Index of shape %s would have rank %d, "
                            "more than 8", shape_str(xs, a, sizeof a), shape_str(is, b, sizeof b), r);
    s = shape_scalar();
    for (int i = 0; i < axis; i++) s.d[s.rank++] = xs->d[i];
    for (int i = 0; i < is->rank; i++) s.d[s.rank++] = is->d[i];
    for (int i = axis + 1; i < xs->rank; i++) s.d[s.rank++] = xs->d[i];
  }
  return set_out(c, x->dtype, &s);
}

static bool infer_one_hot(InferCtx *c) {
  const VarDesc *x = reg_infer_input(c, "X");
  if (!x) return false;
  if (x->dtype != DT_I64) return reg_infer_fail(c, "X must be i64, got %s", dtype_name(x->dtype));
  int64_t depth = reg_infer_attr_i(c, "depth");
  if (depth <= 0) return reg_infer_fail(c, "depth must be positive, got %lld", (long long)depth);
  Shape s = x->shape;
  if (s.rank >= SHAPE_MAX_RANK) {
    char buf[128];
    return reg_infer_fail(c, "X of shape %s would give a result of rank %d, more than 8",
                          shape_str(&s, buf, sizeof buf), s.rank + 1);
  }
  if (s.rank >= 0) s.d[s.rank++] = dim_n(depth);
  return set_out(c, DT_F32, &s);
}

/* ---- kernels ------------------------------------------------------------------
 *
 * reshape, flatten, squeeze and unsqueeze keep the element order, so their
 * result is a view sharing X's storage (OP_NO_PREALLOC), in the shape
 * inference gave on the concrete input shapes.  The others copy: each finds
 * the longest contiguous run it can and moves it with memcpy, walking the
 * dimensions outside it with an odometer. */

static int axis_of(int64_t a, int rank) { return (int)(a < 0 ? a + rank : a); }

/* The op's attribute `axis` normalized against t's rank, with the element
 * counts of t's dimensions before it (*outer) and after it (*inner). */
static int split_at_axis(ExecCtx *c, const Tensor *t, int64_t *outer, int64_t *inner) {
  int axis = axis_of(exec_ctx_attr_i(c, "axis"), t->rank);
  *outer = *inner = 1;
  for (int i = 0; i < t->rank; i++) {
    if (i < axis) *outer *= t->shape[i];
    else if (i > axis) *inner *= t->shape[i];
  }
  return axis;
}

/* An odometer over up to 8 dimensions, moving two element offsets (e.g. in
 * X and in Out) by a step per dimension.  Its `count` positions are visited
 * by: for (k = 0; k < w.count; k++, walk_next(&w)) ... w.off[0] ... */
typedef struct Walk {
  int rank;
  int64_t size[SHAPE_MAX_RANK], idx[SHAPE_MAX_RANK];
  int64_t step[2][SHAPE_MAX_RANK];
  int64_t off[2];
  int64_t count;
} Walk;

static void walk_init(Walk *w) {
  memset(w, 0, sizeof *w);
  w->count = 1;
}

static void walk_add(Walk *w, int64_t size, int64_t step0, int64_t step1) {
  w->size[w->rank] = size;
  w->step[0][w->rank] = step0;
  w->step[1][w->rank] = step1;
  w->rank++;
  w->count *= size;
}

static void walk_next(Walk *w) {
  for (int i = w->rank - 1; i >= 0; i--) {
    w->off[0] += w->step[0][i];
    w->off[1] += w->step[1][i];
    if (++w->idx[i] < w->size[i]) return;
    w->off[0] -= w->step[0][i] * w->size[i];
    w->off[1] -= w->step[1][i] * w->size[i];
    w->idx[i] = 0;
  }
}

/* Moves a fresh walk to its k-th position (0 <= k < count), as k calls
 * of walk_next would. */
static void walk_seek(Walk *w, int64_t k) {
  for (int i = w->rank - 1; i >= 0; i--) {
    w->idx[i] = k % w->size[i];
    k /= w->size[i];
    w->off[0] += w->idx[i] * w->step[0][i];
    w->off[1] += w->idx[i] * w->step[1][i];
  }
}

/* Appends a dimension of size s and stride t to the n merged ones
 * (size[], st[]): into the last when it continues it; none when s is 1. */
static void merge_dim(int64_t *size, int64_t *st, int *n, int64_t s, int64_t t) {
  if (s == 1) return;
  if (*n > 0 && st[*n - 1] == t * s) {
    size[*n - 1] *= s;
    st[*n - 1] = t;
  } else {
    size[*n] = s;
    st[(*n)++] = t;
  }
}

/* Row-major element strides of t. */
static void strides_of(const Tensor *t, int64_t *st) {
  int64_t s = 1;
  for (int i = t->rank - 1; i >= 0; i--) {
    st[i] = s;
    s *= t->shape[i];
  }
}

/* Out's dimensions as (size, step in X) pairs, merged (merge_dim): X read
 * through perm (transpose) or broadcast to Out (perm NULL).  Returns how
 * many. */
static int out_dims(const Tensor *x, const Tensor *out, const int64_t *perm, int64_t *size, int64_t *st) {
  int64_t xst[SHAPE_MAX_RANK];
  strides_of(x, xst);
  int n = 0, lead = out->rank - x->rank;
  for (int i = 0; i < out->rank; i++) {
    int xi = perm ? (int)perm[i] : i - lead;
    int64_t s = perm ? x->shape[xi] : out->shape[i];
    int64_t t = xi >= 0 && (perm || x->shape[xi] != 1) ? xst[xi] : 0;
    merge_dim(size, st, &n, s, t);
  }
  return n;
}

/* Fills n elements of size es at dst with copies of the one at src. */
static void fill_repeat(char *dst, const char *src, size_t es, int64_t n) {
  if (n <= 0) return;
  memcpy(dst, src, es);
  for (int64_t done = 1; done < n;) {   /* doubling copies */
    int64_t k = done < n - done ? done : n - done;
    memcpy(dst + (size_t)done * es, dst, (size_t)k * es);
    done += k;
  }
}

static int k_view(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0);
  const VarDesc *d = exec_ctx_out_desc(c, 0, 0);
  int64_t shape[SHAPE_MAX_RANK], n = 1;
  assert(d && d->shape.rank >= 0);
  for (int i = 0; i < d->shape.rank; i++) {
    assert(dim_known(d->shape.d[i]));   /* inference ran on concrete shapes */
    shape[i] = d->shape.d[i].n;
    n *= shape[i];
  }
  assert(n == x->numel);
  (void)n;
  exec_ctx_set_out(c, 0, 0, tensor_view(x, d->shape.rank, shape));
  return 0;
}

/* out[p * orow + j] = x[p + j * xcol] for p < rows, j < cols, in tiles so
 * that both sides stay in cache. */
#define TILE 32
#define TRANSPOSE_2D(NAME, T)                                                   \
  static void NAME(void *outv, const void *xv, int64_t rows, int64_t cols,      \
                   int64_t orow, int64_t xcol) {                                \
    T *out = outv;                                                              \
    const T *x = xv;                                                            \
    for (int64_t pb = 0; pb < rows; pb += TILE)                                 \
      for (int64_t jb = 0; jb < cols; jb += TILE) {                             \
        int64_t pe = pb + TILE < rows ? pb + TILE : rows;                       \
        int64_t je = jb + TILE < cols ? jb + TILE : cols;                       \
        for (int64_t p = pb; p < pe; p++)                                       \
          for (int64_t j = jb; j < je; j++) out[p * orow + j] = x[p + j * xcol]; \
      }                                                                         \
  }
TRANSPOSE_2D(transpose_2d_f32, float)
TRANSPOSE_2D(transpose_2d_i64, int64_t)
TRANSPOSE_2D(transpose_2d_f64, double)
TRANSPOSE_2D(transpose_2d_u8, uint8_t)

/* Rows of `row` bytes from X to Out where a walk over the other
 * dimensions puts them: part p copies the walk's rows p * per onwards
 * (par_parts), each from a copy of the walk moved there. */
typedef struct RowCopy {
  const Walk *w;
  const char *x;
  char *out;
  size_t es, row;
  int64_t per;
} RowCopy;

static void row_copy(void *arg, int64_t p) {
  const RowCopy *r = arg;
  Walk w = *r->w;
  int64_t k0 = p * r->per, k1 = k0 + r->per < w.count ? k0 + r->per : w.count;
  walk_seek(&w, k0);
  for (int64_t k = k0; k < k1; k++, walk_next(&w))
    memcpy(r->out + (size_t)w.off[1] * r->es, r->x + (size_t)w.off[0] * r->es, r->row);
}

/* transpose: Out's dimension j is X's perm[j].  Dimensions of size 1 are
 * dropped and neighbours that stay neighbours in X are merged; then either
 * Out's last dimension is contiguous in X (rows are copied whole) or X's
 * contiguous dimension lands elsewhere in Out and the pair is copied in
 * tiles. */
static int k_transpose(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_out(c, 0);
  const AttrValue *perm = exec_ctx_attr(c, "perm");
  size_t es = dtype_size(x->dtype);
  const char *xd = x->data;
  char *od = out->data;
  if (out->numel == 0) return 0;
  int64_t size[SHAPE_MAX_RANK], st[SHAPE_MAX_RANK];
  int n = out_dims(x, out, perm->u.ints, size, st);
  if (n <= 1) {   /* the element order is X's */
    memcpy(od, xd, (size_t)x->numel * es);
    return 0;
  }
  int64_t ost[SHAPE_MAX_RANK], s = 1;   /* Out's strides over the merged dims */
  for (int j = n - 1; j >= 0; j--) {
    ost[j] = s;
    s *= size[j];
  }
  Walk w;
  walk_init(&w);
  if (st[n - 1] == 1) {
    for (int j = 0; j < n - 1; j++) walk_add(&w, size[j], st[j], ost[j]);
    RowCopy copy = {&w, xd, od, es, (size_t)size[n - 1] * es, 1};
    if (out->numel >= 2 * PAR_MIN_WORK) {   /* on the pool, as the binary ops */
      copy.per = (PAR_MIN_WORK + size[n - 1] - 1) / size[n - 1];
      par_parts((w.count + copy.per - 1) / copy.per, row_copy, &copy);
    } else {
      copy.per = w.count;
      row_copy(&copy, 0);
    }
    return 0;
  }
  int p = 0;   /* the dimension contiguous in X */
  while (st[p] != 1) p++;
  for (int j = 0; j < n - 1; j++)
    if (j != p) walk_add(&w, size[j], st[j], ost[j]);
  for (int64_t k = 0; k < w.count; k++, walk_next(&w)) {
    void *o = od + (size_t)w.off[1] * es;
    const void *xp = xd + (size_t)w.off[0] * es;
    if (x->dtype == DT_F32) transpose_2d_f32(o, xp, size[p], size[n - 1], ost[p], st[n - 1]);
    else if (x->dtype == DT_F64) transpose_2d_f64(o, xp, size[p], size[n - 1], ost[p], st[n - 1]);
    else if (x->dtype == DT_I64) transpose_2d_i64(o, xp, size[p], size[n - 1], ost[p], st[n - 1]);
    else transpose_2d_u8(o, xp, size[p], size[n - 1], ost[p], st[n - 1]);
  }
  return 0;
}

/* broadcast_to: a real copy (it is an explicit op; elementwise ops broadcast
 * without one).  X's step is 0 along broadcast dimensions; after merging,
 * the innermost run is either copied (step 1) or filled with one element
 * (step 0). */
static int k_broadcast_to(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_out(c, 0);
  size_t es = dtype_size(x->dtype);
  const char *xd = x->data;
  char *od = out->data;
  if (out->numel == 0) return 0;
  int64_t size[SHAPE_MAX_RANK], st[SHAPE_MAX_RANK];
  int n = out_dims(x, out, NULL, size, st);
  if (n == 0) {
    memcpy(od, xd, es);
    return 0;
  }
  Walk w;
  walk_init(&w);
  for (int j = 0; j < n - 1; j++) walk_add(&w, size[j], st[j], 0);
  int64_t last = size[n - 1];
  for (int64_t k = 0; k < w.count; k++, walk_next(&w)) {
    char *o = od + (size_t)(k * last) * es;
    const char *xp = xd + (size_t)w.off[0] * es;
    if (st[n - 1] == 1) memcpy(o, xp, (size_t)last * es);
    else fill_repeat(o, xp, es, last);
  }
  return 0;
}

/* concat and split move, per index of the dimensions before axis, one
 * contiguous chunk per part: part p of the job (par_parts) the rows p *
 * per onwards, every part's chunk of each. */
typedef struct CatRows {
  char *whole;
  Tensor **parts;
  int n, axis;
  size_t es;
  int64_t inner, row, outer, per;
  bool concat;
} CatRows;

static void cat_rows(void *arg, int64_t p) {
  const CatRows *r = arg;
  int64_t o0 = p * r->per, o1 = o0 + r->per < r->outer ? o0 + r->per : r->outer, at = 0;
  for (int i = 0; i < r->n; i++) {
    int64_t chunk = r->parts[i]->shape[r->axis] * r->inner;
    for (int64_t o = o0; o < o1; o++) {
      char *w = r->whole + (size_t)(o * r->row + at) * r->es, *q = (char *)r->parts[i]->data + (size_t)(o * chunk) * r->es;
      memcpy(r->concat ? w : q, r->concat ? q : w, (size_t)chunk * r->es);
    }
    at += chunk;
  }
}

/* Many rows go to the pool in blocks of at least PAR_MIN_WORK elements,
 * as the binary ops and transpose (a copy: the same bytes on any thread
 * count; on 2 threads char_lm's split and concat took 0.5-0.74x the
 * time); with one thread, or few rows, they are copied in order here, in
 * blocks of 65536 rows between which Ctrl-C is seen (blocks of the pool's
 * size took 1.08x the time on one thread). */
static int concat_split(ExecCtx *c, bool concat) {
  Tensor *whole = concat ? exec_ctx_out(c, 0) : exec_ctx_in(c, 0);
  int64_t outer, inner;
  int axis = split_at_axis(c, whole, &outer, &inner);
  int n = concat ? exec_ctx_in_count(c, 0) : exec_ctx_out_count(c, 0);
  CatRows r = {.whole = whole->data, .parts = mem_alloc(NULL, sizeof(Tensor *) * (size_t)(n > 0 ? n : 1)), .n = n,
               .axis = axis, .es = dtype_size(whole->dtype), .inner = inner, .row = whole->shape[axis] * inner,
               .outer = outer, .concat = concat};
  for (int i = 0; i < n; i++)
    r.parts[i] = concat ? tensor_cast(exec_ctx_in_at(c, 0, i), whole->dtype)   /* inference promoted */
                        : tensor_ref(exec_ctx_out_at(c, 0, i));
  int rc = 0;
  if (whole->numel >= 2 * PAR_MIN_WORK && outer > 1 && par_max_threads() > 1) {
    r.per = r.row >= PAR_MIN_WORK ? 1 : (PAR_MIN_WORK + r.row - 1) / r.row;
    par_parts((outer + r.per - 1) / r.per, cat_rows, &r);
  } else {
    r.per = 0x10000;
    for (int64_t p = 0; p * r.per < outer; p++) {
      if (p > 0 && exec_interrupted()) {   /* many small rows: Ctrl-C is seen */
        rc = exec_ctx_fail(c, "interrupted");
        break;
      }
      cat_rows(&r, p);
    }
  }
  for (int i = 0; i < n; i++) tensor_unref(r.parts[i]);
  mem_free(r.parts);
  return rc;
}
static int k_concat(ExecCtx *c) { return concat_split(c, true); }
static int k_split(ExecCtx *c) { return concat_split(c, false); }

/* slice: Out's shape comes from inference (the same clamping); here only
 * the starts are needed.  Past the last sliced dimension everything is
 * kept, so from there on each piece is one contiguous run of X.  The same
 * walk serves the gradient, copying the other way (into_x: X's slice =
 * Out). */
static void slice_move(ExecCtx *c, Tensor *x, Tensor *out, bool into_x) {
  const AttrValue *axes = exec_ctx_attr(c, "axes"), *starts = exec_ctx_attr(c, "starts");
  size_t es = dtype_size(x->dtype);
  if (out->numel == 0) return;
  int64_t xst[SHAPE_MAX_RANK], base = 0;
  strides_of(x, xst);
  for (int i = 0; i < axes->n; i++) {
    int k = axis_of(axes->u.ints[i], x->rank);
    int64_t n = x->shape[k], b = starts->u.ints[i];
    b = b < 0 ? (b + n < 0 ? 0 : b + n) : (b > n ? n : b);
    base += b * xst[k];
  }
  int last = x->rank - 1;   /* the last dimension sliced */
  while (last >= 0 && out->shape[last] == x->shape[last]) last--;
  if (last < 0) {
    memcpy(into_x ? x->data : out->data, into_x ? out->data : x->data, (size_t)x->numel * es);
    return;
  }
  int64_t chunk = 1;
  for (int i = last; i < x->rank; i++) chunk *= out->shape[i];
  Walk w;
  walk_init(&w);
  for (int i = 0; i < last; i++) walk_add(&w, out->shape[i], xst[i], 0);
  char *xd = (char *)x->data + (size_t)base * es, *od = out->data;
  for (int64_t k = 0; k < w.count; k++, walk_next(&w)) {
    char *xp = xd + (size_t)w.off[0] * es, *op = od + (size_t)(k * chunk) * es;
    if (into_x) memcpy(xp, op, (size_t)chunk * es);
    else memcpy(op, xp, (size_t)chunk * es);
  }
}

static int k_slice(ExecCtx *c) {
  slice_move(c, exec_ctx_in(c, 0), exec_ctx_out(c, 0), false);
  return 0;
}

/* Every index in [-n, n) for an axis of size n; else an error naming the
 * first that is not. */
static int check_indices(ExecCtx *c, const Tensor *index, int axis, int64_t n) {
  const int64_t *id = tensor_i64(index);
  for (int64_t j = 0; j < index->numel; j++)
    if (id[j] < -n || id[j] >= n)
      return exec_ctx_fail(c, "index %lld is out of range for axis %d of size %lld", (long long)id[j],
                           axis, (long long)n);
  return 0;
}

/* gather and its grad: X (or X@GRAD) viewed as [outer, n, inner] around
 * axis, Index's ni entries checked. */
typedef struct Gather {
  int64_t outer, n, inner, ni;
  const int64_t *id;
} Gather;

static int gather_plan(ExecCtx *c, const Tensor *x, const Tensor *index, Gather *g) {
  int axis = split_at_axis(c, x, &g->outer, &g->inner);
  g->n = x->shape[axis];
  g->ni = index->numel;
  g->id = tensor_i64(index);
  return check_indices(c, index, axis, g->n);
}

/* The row of X that Index entry j names. */
static int64_t gather_row(const Gather *g, int64_t j) { return g->id[j] < 0 ? g->id[j] + g->n : g->id[j]; }

/* gather_grad's sums for element type T: each row of dout added into d
 * at its index. */
#define GATHER_ADD(NAME, T)                                                     \
  static void NAME(const Gather *g, T *d, const T *gv) {                        \
    for (int64_t o = 0; o < g->outer; o++)                                      \
      for (int64_t j = 0; j < g->ni; j++) {                                     \
        T *dr = d + (o * g->n + gather_row(g, j)) * g->inner;                   \
        const T *gr = gv + (o * g->ni + j) * g->inner;                          \
        for (int64_t t = 0; t < g->inner; t++) dr[t] += gr[t];                  \
      }                                                                         \
  }
GATHER_ADD(gather_add_f32, float)
GATHER_ADD(gather_add_f64, double)

/* gather follows NumPy's take: an index in [-n, n) is valid, a negative one
 * counting from the end (x[-1] is the last row, as in Python); anything
 * else is an error naming the index. */
static int k_gather(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *index = exec_ctx_in(c, 1), *out = exec_ctx_out(c, 0);
  Gather g;
  int rc = gather_plan(c, x, index, &g);
  if (rc) return rc;
  size_t es = dtype_size(x->dtype), row = (size_t)g.inner * es;
  const char *xd = x->data;
  char *od = out->data;
  for (int64_t o = 0; o < g.outer; o++)
    for (int64_t j = 0; j < g.ni; j++)
      memcpy(od + (size_t)((o * g.ni + j) * g.inner) * es, xd + (size_t)((o * g.n + gather_row(&g, j)) * g.inner) * es,
             row);
  return 0;
}

static int k_one_hot(ExecCtx *c) {
  Tensor *x = exec_ctx_in(c, 0), *out = exec_ctx_out(c, 0);
  int64_t depth = exec_ctx_attr_i(c, "depth");
  const int64_t *lab = tensor_i64(x);
  float *o = tensor_f32(out);
  memset(o, 0, (size_t)out->numel * sizeof *o);
  for (int64_t i = 0; i < x->numel; i++) {
    if (lab[i] < 0 || lab[i] >= depth)
      return exec_ctx_fail(c, "label %lld is out of range [0, %lld)", (long long)lab[i], (long long)depth);
    o[i * depth + lab[i]] = 1.0f;
  }
  return 0;
}

/* ---- gradients ------------------------------------------------------------------
 *
 * Composite where the inverse move is an op: reshape, flatten, squeeze and
 * unsqueeze view dOut in X's shape (reshape_like, which takes the shape at
 * run time, so symbolic dimensions need nothing); transpose transposes
 * back; broadcast_to sums back (sum_like); split concatenates its outputs'
 * gradients (an unused output's is zeros, made by the builder).  Dedicated
 * where the pieces' sizes are only known at run time (concat_grad) or the
 * gradient is mostly zeros (slice_grad, gather_grad). */

#define DOUT bwd_op_out_grad(g, "Out", 0)
#define X0 bwd_op_in(g, "X", 0)

/* reshape, flatten, squeeze, unsqueeze: dX = dOut viewed in X's shape. */
static bool g_view(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0);
  if (dx) bwd_emit2(g, "reshape_like", DOUT, X0, dx);
  return true;
}

/* transpose: dX = transpose(dOut) by the inverse permutation. */
static bool g_transpose(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0);
  if (!dx) return true;
  const AttrValue *perm = bwd_op_attr(g, "perm");
  int64_t inv[SHAPE_MAX_RANK];
  for (int i = 0; i < perm->n; i++) inv[perm->u.ints[i]] = i;
  bwd_emit_attr(g, bwd_emit1(g, "transpose", DOUT, dx), "perm", attr_ints(bwd_prog(g), inv, perm->n));
  return true;
}

/* broadcast_to: dX = dOut summed over the broadcast dimensions. */
static bool g_broadcast_to(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0);
  if (dx) bwd_reduce_like(g, DOUT, bwd_op_out(g, "Out", 0), X0, dx);
  return true;
}

/* split: dX = concat of the outputs' gradients along axis. */
static bool g_split(GradCtx *g) {
  const char *dx = bwd_op_in_grad(g, "X", 0);
  if (!dx) return true;
  OpDesc *op = bwd_emit(g, "concat");
  for (int i = 0; i < bwd_op_nout(g, "Out"); i++) bwd_emit_in(g, op, "X", bwd_op_out_grad(g, "Out", i));
  bwd_emit_out(g, op, "Out", dx);
  bwd_emit_attr(g, op, "axis", *bwd_op_attr(g, "axis"));
  return true;
}

/* concat: one concat_grad op cutting dOut back into the pieces whose
 * gradients are needed; its attribute `inputs` says which.  Hand-written:
 * the default maker wires no list of gradients (which were needed would be
 * lost) and knows no `inputs`. */
static bool g_concat(GradCtx *g) {
  int n = bwd_op_nin(g, "X"), m = 0;
  int64_t *which = arena_alloc(bwd_prog(g)->arena, sizeof *which * (size_t)(n + 1));
  for (int i = 0; i < n; i++)
    if (bwd_op_in_grad(g, "X", i)) which[m++] = i;
  if (m == 0) return true;
  OpDesc *op = bwd_emit(g, "concat_grad");
  for (int i = 0; i < n; i++) bwd_emit_in(g, op, "X", bwd_op_in(g, "X", i));
  bwd_emit_in(g, op, "Out@GRAD", DOUT);
  for (int k = 0; k < m; k++) bwd_emit_out(g, op, "X@GRAD", bwd_op_in_grad(g, "X", (int)which[k]));
  bwd_emit_attr(g, op, "axis", *bwd_op_attr(g, "axis"));
  bwd_emit_attr(g, op, "inputs", attr_ints(bwd_prog(g), which, m));
  return true;
}

static bool infer_concat_grad(InferCtx *c) {
  int n = reg_infer_count(c, "X"), m = reg_infer_out_count(c, "X@GRAD");
  const AttrValue *which = reg_infer_attr(c, "inputs");
  if (!which || which->type != ATTR_INTS || which->n != m)
    return reg_infer_fail(c, "attribute 'inputs' must list one input per X@GRAD");
  for (int k = 0; k < m; k++) {
    int64_t i = which->u.ints[k];
    if (i < 0 || i >= n) return reg_infer_fail(c, "inputs[%d] = %lld is not an input", k, (long long)i);
    const VarDesc *x = reg_infer_in(c, "X", (int)i);
    reg_infer_set(c, "X@GRAD", k, x->dtype, &x->shape);
  }
  return true;
}

/* X@GRAD[k] = the piece of Out@GRAD that X[inputs[k]] filled. */
static int k_concat_grad(ExecCtx *c) {
  Tensor *dout = exec_ctx_in(c, 1);
  const AttrValue *which = exec_ctx_attr(c, "inputs");
  int n = exec_ctx_in_count(c, 0);
  int64_t outer, inner;
  int axis = split_at_axis(c, dout, &outer, &inner);
  size_t es = dtype_size(dout->dtype);
  int64_t orow = dout->shape[axis] * inner;
  const char *gd = dout->data;
  for (int k = 0; k < exec_ctx_out_count(c, 0); k++) {
    int i = (int)which->u.ints[k];
    int64_t at = 0;   /* where X[i]'s piece starts in a row of Out */
    for (int j = 0; j < i && j < n; j++) at += exec_ctx_in_at(c, 0, j)->shape[axis] * inner;
    Tensor *dx = exec_ctx_out_at(c, 0, k);
    if (dx->dtype != dout->dtype) return exec_ctx_fail(c, "internal error: X@GRAD and Out@GRAD differ in dtype");
    int64_t chunk = dx->shape[axis] * inner;
    char *od = dx->data;
    for (int64_t o = 0; o < outer; o++)
      memcpy(od + (size_t)(o * chunk) * es, gd + (size_t)(o * orow + at) * es, (size_t)chunk * es);
  }
  return 0;
}

/* X@GRAD (slot 0 of slice_grad and gather_grad) has X's shape and dtype. */
static bool infer_x_grad(InferCtx *c) { return reg_infer_same_as(c, "X@GRAD", "X"); }

/* slice: X@GRAD is zeros with Out@GRAD in the slice. */
static int k_slice_grad(ExecCtx *c) {
  if (exec_ctx_out_count(c, 0) == 0) return 0;
  Tensor *dout = exec_ctx_in(c, 1), *dx = exec_ctx_out(c, 0);
  memset(dx->data, 0, (size_t)dx->numel * dtype_size(dx->dtype));
  slice_move(c, dx, dout, true);
  return 0;
}

/* gather: X@GRAD is zeros with each row of Out@GRAD added at its index, so
 * a repeated index accumulates. */
static int k_gather_grad(ExecCtx *c) {
  if (exec_ctx_out_count(c, 0) == 0) return 0;
  Tensor *index = exec_ctx_in(c, 1), *dout = exec_ctx_in(c, 2), *dx = exec_ctx_out(c, 0);
  bool dbl = dx->dtype == DT_F64 && dout->dtype == DT_F64;
  if (!dbl && (dx->dtype != DT_F32 || dout->dtype != DT_F32))
    return exec_ctx_fail(c, "internal error: X@GRAD and Out@GRAD must be f32");
  Gather g;
  int rc = gather_plan(c, dx, index, &g);
  if (rc) return rc;
  memset(dx->data, 0, dtype_size(dx->dtype) * (size_t)dx->numel);
  if (dbl) gather_add_f64(&g, tensor_f64(dx), tensor_f64(dout));   /* f64: the same sums in double */
  else gather_add_f32(&g, tensor_f32(dx), tensor_f32(dout));
  return 0;
}

#undef DOUT
#undef X0

/* ---- the table --------------------------------------------------------------- */

#define X_IN {{"X", 0, "input"}}
#define OUT(DOC) {{"Out", 0, DOC}}

/* ---- gradients of the grad ops ----
 * Composite: slice_grad, gather_grad and concat_grad are linear in
 * Out@GRAD and do not depend on X's values, so Out@GRAD's gradient is the
 * forward op run on the gradient G of their output: slice(G), gather(G,
 * Index), and the concat of the X@GRAD gradients (zeros for an input whose
 * gradient the grad op did not make). */

/* out = TYPE(X=x [, Index]) with the grad op's attributes. */
static OpDesc *emit_fwd(GradCtx *g, const char *type, const char *x, const char *out) {
  OpDesc *op = bwd_emit1(g, type, x, out);
  bwd_emit_attrs(g, op);
  return op;
}

static bool g_slice_grad(GradCtx *g) {
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0);
  if (dd) emit_fwd(g, "slice", bwd_op_out_grad(g, "X@GRAD", 0), dd);
  return true;
}

static bool g_gather_grad(GradCtx *g) {
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0);
  if (dd) bwd_emit_in(g, emit_fwd(g, "gather", bwd_op_out_grad(g, "X@GRAD", 0), dd), "Index", bwd_op_in(g, "Index", 0));
  return true;
}

static bool g_concat_grad(GradCtx *g) {
  const char *dd = bwd_op_in_grad(g, "Out@GRAD", 0);
  if (!dd) return true;
  const AttrValue *which = bwd_op_attr(g, "inputs");
  int n = bwd_op_nin(g, "X");
  const char **parts = arena_alloc(bwd_prog(g)->arena, sizeof *parts * (size_t)(n + 1));
  for (int i = 0; i < n; i++) {
    parts[i] = NULL;
    for (int k = 0; which && k < which->n && !parts[i]; k++)
      if (which->u.ints[k] == i) parts[i] = bwd_op_out_grad(g, "X@GRAD", k);
    if (!parts[i]) {
      parts[i] = bwd_temp(g);
      bwd_emit1(g, "fill_zeros_like", bwd_op_in(g, "X", i), parts[i]);
    }
  }
  OpDesc *op = bwd_emit(g, "concat");
  for (int i = 0; i < n; i++) bwd_emit_in(g, op, "X", parts[i]);
  bwd_emit_out(g, op, "Out", dd);
  bwd_emit_attr(g, op, "axis", *bwd_op_attr(g, "axis"));
  return true;
}

/* An op from X to Out with a composite gradient; the attributes last. */
#define SHAPE_OP(NAME, DOC, OUT_DOC, INFER, KERNEL, GRAD, FLAGS, ...)                         \
  {.type = NAME, .doc = DOC, .in = X_IN, .out = OUT(OUT_DOC), .attrs = {__VA_ARGS__},         \
   .infer = INFER, .kernel = KERNEL, .grad_kind = GRAD_COMPOSITE, .grad = GRAD, .flags = (FLAGS) | OP_F64}
/* One whose Out is a view of X (k_view), its gradient the reverse view. */
#define VIEW_OP(NAME, DOC, OUT_DOC, INFER, ...) \
  SHAPE_OP(NAME, DOC, OUT_DOC, INFER, k_view, g_view, OP_NO_PREALLOC, __VA_ARGS__)

OpProto op_table_shape[] = {
    VIEW_OP("reshape", "Out = X's elements in a new shape (one -1 is inferred)", "the result, dtype of X",
            infer_reshape,
            {"shape", ATTR_INTS, NULL, check_reshape, "the new shape; one entry may be -1"}),
    SHAPE_OP("transpose", "Out = X with its axes permuted: Out.shape[i] = X.shape[perm[i]]", "the result",
             infer_transpose, k_transpose, g_transpose, 0,
             {"perm", ATTR_INTS, NULL, check_perm, "a permutation of 0 .. rank-1"}),
    VIEW_OP("flatten", "Out = X with axes start_axis.. merged into one", "the result, rank start_axis + 1",
            infer_flatten,
            {"start_axis", ATTR_INT, "1", NULL, "the first axis merged"}),
    VIEW_OP("squeeze", "Out = X without the given axes of size 1", "the result", infer_squeeze,
            {"axes", ATTR_INTS, "[]", NULL, "the axes to remove; [] means every axis of size 1"}),
    VIEW_OP("unsqueeze", "Out = X with axes of size 1 inserted", "the result", infer_unsqueeze,
            {"axes", ATTR_INTS, NULL, NULL, "the new axes' positions in Out"}),
    SHAPE_OP("broadcast_to", "Out = X broadcast to shape, as NumPy does", "the result, of the given shape",
             infer_broadcast_to, k_broadcast_to, g_broadcast_to, 0,
             {"shape", ATTR_INTS, NULL, check_shape, "the target shape"}),
    {.type = "concat", .doc = "Out = the tensors in X joined along axis",
     .in = {{"X", SLOT_LIST, "the tensors, equal in shape except along axis"}},
     .out = OUT("the result"),
     .attrs = {{"axis", ATTR_INT, "0", NULL, "the axis to join along"}},
     .infer = infer_concat, .kernel = k_concat, .grad_kind = GRAD_DEDICATED, .grad = g_concat, .flags = OP_F64},
    {.type = "concat_grad", .doc = "X@GRAD = the pieces of Out@GRAD that the inputs listed in inputs filled",
     .in = {{"X", SLOT_LIST | SLOT_NO_GRAD, "the forward inputs (their shapes)"},
            {"Out@GRAD", 0, "the result's gradient"}},
     .out = {{"X@GRAD", SLOT_LIST, "the gradients of X[inputs[0]], X[inputs[1]], ..."}},
     .attrs = {{"axis", ATTR_INT, "0", NULL, "the axis joined along"},
               {"inputs", ATTR_INTS, "[]", NULL, "the positions in X of the gradients wanted"}},
     .infer = infer_concat_grad, .kernel = k_concat_grad, .grad_kind = GRAD_COMPOSITE,
     .grad = g_concat_grad, .flags = OP_INTERNAL | OP_F64},
    {.type = "split", .doc = "Out = X cut along axis into num equal parts or parts of sizes sections",
     .in = X_IN, .out = {{"Out", SLOT_LIST, "the parts, in order"}},
     .attrs = {{"num", ATTR_INT, "0", reg_check_nonnegative, "the number of equal parts (or 0)"},
               {"sections", ATTR_INTS, "[]", reg_check_nonnegative, "the parts' sizes (or [])"},
               {"axis", ATTR_INT, "0", NULL, "the axis to cut"}},
     .infer = infer_split, .kernel = k_split, .grad_kind = GRAD_COMPOSITE, .grad = g_split, .flags = OP_F64},
    {.type = "slice", .doc = "Out = X[starts:ends] along each of axes, Python-style",
     .in = X_IN, .out = OUT("the result"),
     .attrs = {{"axes", ATTR_INTS, NULL, NULL, "the axes sliced"},
               {"starts", ATTR_INTS, NULL, NULL, "first index per axis; negative counts from the end"},
               {"ends", ATTR_INTS, NULL, NULL, "end index (excluded) per axis; clamped"}},
     .infer = infer_slice, .kernel = k_slice, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},
    {.type = "slice_grad", .doc = "X@GRAD = zeros of X's shape with Out@GRAD in the slice",
     .in = {{"X", SLOT_NO_GRAD, "the forward input (its shape)"}, {"Out@GRAD", 0, "the slice's gradient"}},
     .out = {{"X@GRAD", 0, "X's gradient"}},
     .attrs = {{"axes", ATTR_INTS, NULL, NULL, "the axes sliced"},
               {"starts", ATTR_INTS, NULL, NULL, "first index per axis"},
               {"ends", ATTR_INTS, NULL, NULL, "end index (excluded) per axis"}},
     .infer = infer_x_grad, .kernel = k_slice_grad, .grad_kind = GRAD_COMPOSITE, .grad = g_slice_grad,
     .flags = OP_INTERNAL | OP_F64},
    {.type = "gather", .doc = "Out = the entries of X at Index along axis",
     .in = {{"X", 0, "input"}, {"Index", SLOT_NO_GRAD, "i64 indices into axis"}},
     .out = OUT("X.shape[:axis] + Index.shape + X.shape[axis+1:]"),
     .attrs = {{"axis", ATTR_INT, "0", NULL, "the axis indexed"}},
     .infer = infer_gather, .kernel = k_gather, .grad_kind = GRAD_DEDICATED, .flags = OP_F64},
    {.type = "gather_grad", .doc = "X@GRAD = zeros of X's shape with Out@GRAD's entries added at Index",
     .in = {{"X", SLOT_NO_GRAD, "the forward input (its shape)"}, {"Index", SLOT_NO_GRAD, "i64 indices into axis"},
            {"Out@GRAD", 0, "the result's gradient"}},
     .out = {{"X@GRAD", 0, "X's gradient; repeated indices accumulate"}},
     .attrs = {{"axis", ATTR_INT, "0", NULL, "the axis indexed"}},
     .infer = infer_x_grad, .kernel = k_gather_grad, .grad_kind = GRAD_COMPOSITE, .grad = g_gather_grad,
     .flags = OP_INTERNAL | OP_F64},
    {.type = "one_hot", .doc = "Out = f32 one-hot vectors of length depth for the i64 labels X",
     .in = {{"X", SLOT_NO_GRAD, "i64 labels in [0, depth)"}},
     .out = OUT("f32, X.shape + [depth]"),
     .attrs = {{"depth", ATTR_INT, NULL, reg_check_positive, "the number of classes"}},
     .infer = infer_one_hot, .kernel = k_one_hot, .grad_kind = GRAD_NONE},
    {0},
};
