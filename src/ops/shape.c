/* shape.c — ops that move elements without changing them: reshape,
 * transpose, flatten, squeeze, unsqueeze, broadcast_to, concat, split,
 * slice, gather, one_hot.
 *
 * Their inference keeps symbolic dimensions (B) wherever the result is
 * provably the same size, and writes "?" where only run time can tell. */
#include "../registry.h"

#include <string.h>

_Static_assert(SHAPE_MAX_RANK == 8, "the messages below say 8");

/* ---- helpers ----------------------------------------------------------------- */

static const VarDesc *input(InferCtx *c, const char *slot) {
  const VarDesc *v = infer_in(c, slot, 0);
  if (!v) infer_fail(c, "input %s is missing", slot);
  return v;
}

/* Reads an int-list attribute; *n gets its length. */
static const int64_t *ints_attr(InferCtx *c, const char *name, int *n) {
  const AttrValue *v = infer_attr(c, name);
  *n = 0;
  if (!v || v->type != ATTR_INTS) {
    infer_fail(c, "attribute '%s' must be an int list", name);
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

/* Normalizes axis `a`, the value of attribute `attr`, against the shape of
 * input `slot`. */
static bool norm_axis(InferCtx *c, const char *attr, int64_t a, const char *slot, const Shape *s,
                      int *out) {
  int64_t k = a < 0 ? a + s->rank : a;
  *out = 0;
  if (k < 0 || k >= s->rank) {
    char buf[128];
    return infer_fail(c, "%s %lld is out of range for %s of shape %s", attr, (long long)a, slot,
                      shape_str(s, buf, sizeof buf));
  }
  *out = (int)k;
  return true;
}

/* Two dimensions that must be equal provably differ: two sizes, or two
 * symbols of different names. */
static bool dims_clash(Dim a, Dim b) {
  if (dim_known(a) && dim_known(b)) return a.n != b.n;
  return a.sym && b.sym && strcmp(a.sym, b.sym) != 0;
}

/* Of two dimensions that must be equal, the more precise. */
static Dim dim_merge(Dim a, Dim b) {
  if (dim_known(a)) return a;
  if (dim_known(b) || !a.sym) return b;
  return a;
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
    if (d && n > INT64_MAX / d) return "has too many elements";
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
  const AttrValue *v = infer_attr(c, name);
  const char *why = v ? fn(v) : NULL;
  if (why) return infer_fail(c, "attribute '%s' %s", name, why);
  return true;
}

/* ---- reshape, transpose, flatten --------------------------------------------- */

static bool infer_reshape(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  int n;
  const int64_t *t = ints_attr(c, "shape", &n);
  if (!x || !t || !recheck(c, "shape", check_reshape)) return false;
  const Shape *xs = &x->shape;
  int hole = -1;
  int64_t known = 1;   /* product of the target without its -1 */
  Shape s = shape_scalar();
  s.rank = n;
  for (int i = 0; i < n; i++) {
    if (t[i] == -1) {
      hole = i;
      s.d[i] = dim_unknown();
    } else {
      s.d[i] = dim_n(t[i]);
      known *= t[i];
    }
  }
  int64_t numel = shape_numel(xs);
  char a[128], b[128];
  if (numel >= 0) {
    if (hole < 0 ? known != numel : known == 0 || numel % known != 0)
      return infer_fail(c, "cannot reshape X of shape %s (%lld elements) into %s", shape_str(xs, a, sizeof a),
                        (long long)numel, ints_str(t, n, b, sizeof b));
    if (hole >= 0) s.d[hole] = dim_n(numel / known);
  } else if (hole >= 0 && xs->rank >= 0 && known > 0) {
    /* [B, 784] -> [-1, 28, 28]: the -1 is B when the rest matches exactly */
    int nsym = 0, isym = -1;
    int64_t rest = 1;
    bool ok = true;
    for (int i = 0; i < xs->rank && ok; i++) {
      if (dim_known(xs->d[i])) {
        if (xs->d[i].n && rest > INT64_MAX / xs->d[i].n) ok = false;
        else rest *= xs->d[i].n;
      } else if (xs->d[i].sym) {
        nsym++;
        isym = i;
      } else {
        ok = false;
      }
    }
    if (ok && nsym == 1 && rest == known) s.d[hole] = xs->d[isym];
  }
  infer_set(c, "Out", 0, x->dtype, &s);
  return true;
}

static bool infer_transpose(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  int n;
  const int64_t *perm = ints_attr(c, "perm", &n);
  if (!x || !perm || !recheck(c, "perm", check_perm)) return false;
  Shape s = shape_scalar();
  s.rank = n;
  if (x->shape.rank < 0) {
    for (int i = 0; i < n; i++) s.d[i] = dim_unknown();
  } else if (x->shape.rank != n) {
    char a[128], b[128];
    return infer_fail(c, "perm %s has %d entries but X has shape %s", ints_str(perm, n, a, sizeof a),
                      n, shape_str(&x->shape, b, sizeof b));
  } else {
    for (int i = 0; i < n; i++) s.d[i] = x->shape.d[perm[i]];
  }
  infer_set(c, "Out", 0, x->dtype, &s);
  return true;
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
  const VarDesc *x = input(c, "X");
  if (!x) return false;
  int64_t start = infer_attr_i(c, "start_axis");
  Shape s = shape_unknown();
  if (x->shape.rank == 0) {   /* a scalar flattens to [1] */
    if (start != 0 && start != -1)
      return infer_fail(c, "start_axis %lld is out of range for X of shape []", (long long)start);
    s = shape_scalar();
    s.rank = 1;
    s.d[0] = dim_n(1);
  } else if (x->shape.rank > 0) {
    int k;
    if (!norm_axis(c, "start_axis", start, "X", &x->shape, &k)) return false;
    s = x->shape;
    s.d[k] = dims_product(&x->shape, k);
    s.rank = k + 1;
  }
  infer_set(c, "Out", 0, x->dtype, &s);
  return true;
}

/* ---- squeeze, unsqueeze, broadcast_to ------------------------------------------ */

static bool infer_squeeze(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  int n;
  const int64_t *axes = ints_attr(c, "axes", &n);
  if (!x || !axes) return false;
  const Shape *xs = &x->shape;
  Shape s = shape_unknown();
  if (xs->rank >= 0) {
    bool drop[SHAPE_MAX_RANK] = {false};
    char buf[128];
    for (int i = 0; i < xs->rank; i++) drop[i] = n == 0 && xs->d[i].n == 1;
    for (int i = 0; i < n; i++) {
      int k;
      if (!norm_axis(c, "axis", axes[i], "X", xs, &k)) return false;
      if (drop[k])
        return infer_fail(c, "axes names dimension %d of X (shape %s) twice", k,
                          shape_str(xs, buf, sizeof buf));
      if (dim_known(xs->d[k]) && xs->d[k].n != 1)
        return infer_fail(c, "cannot squeeze axis %d of X (shape %s): its size is %lld, not 1", k,
                          shape_str(xs, buf, sizeof buf), (long long)xs->d[k].n);
      drop[k] = true;   /* a symbol is checked to be 1 at run time */
    }
    s = shape_scalar();
    for (int i = 0; i < xs->rank; i++)
      if (!drop[i]) s.d[s.rank++] = xs->d[i];
  }
  infer_set(c, "Out", 0, x->dtype, &s);
  return true;
}

/* unsqueeze: axes are positions in the result, as in NumPy's expand_dims. */
static bool infer_unsqueeze(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  int n;
  const int64_t *axes = ints_attr(c, "axes", &n);
  if (!x || !axes) return false;
  const Shape *xs = &x->shape;
  char a[128], b[128];
  Shape s = shape_unknown();
  if (xs->rank >= 0) {
    int r = xs->rank + n;
    if (n > SHAPE_MAX_RANK || r > SHAPE_MAX_RANK)
      return infer_fail(c, "X of shape %s with axes %s would have rank %d, more than 8",
                        shape_str(xs, a, sizeof a), ints_str(axes, n, b, sizeof b), r);
    bool ins[SHAPE_MAX_RANK] = {false};
    for (int i = 0; i < n; i++) {
      int64_t k = axes[i] < 0 ? axes[i] + r : axes[i];
      if (k < 0 || k >= r)
        return infer_fail(c, "axis %lld is out of range for a result of rank %d (X has shape %s)",
                          (long long)axes[i], r, shape_str(xs, a, sizeof a));
      if (ins[k])
        return infer_fail(c, "axes %s names position %lld twice", ints_str(axes, n, b, sizeof b),
                          (long long)k);
      ins[k] = true;
    }
    s = shape_scalar();
    s.rank = r;
    for (int i = 0, j = 0; i < r; i++) s.d[i] = ins[i] ? dim_n(1) : xs->d[j++];
  }
  infer_set(c, "Out", 0, x->dtype, &s);
  return true;
}

static bool infer_broadcast_to(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  int n;
  const int64_t *t = ints_attr(c, "shape", &n);
  if (!x || !t || !recheck(c, "shape", check_shape)) return false;
  const Shape *xs = &x->shape;
  Shape s = shape_of(n, t);
  char a[128], b[128];
  bool ok = xs->rank <= n;
  for (int i = 0; ok && i < xs->rank; i++) {
    Dim d = xs->d[i];   /* a symbol is checked at run time */
    if (dim_known(d) && d.n != 1 && d.n != t[n - xs->rank + i]) ok = false;
  }
  if (!ok)
    return infer_fail(c, "X of shape %s cannot be broadcast to %s", shape_str(xs, a, sizeof a),
                      shape_str(&s, b, sizeof b));
  infer_set(c, "Out", 0, x->dtype, &s);
  return true;
}

/* ---- concat, split ---------------------------------------------------------- */

static bool infer_concat(InferCtx *c) {
  int n = infer_count(c, "X");
  if (n == 0) return infer_fail(c, "X must hold at least one tensor");
  const VarDesc *ref = NULL;   /* the first input of known rank */
  int iref = -1;
  DType t = DT_UNKNOWN;
  bool all_ranked = true;
  for (int i = 0; i < n; i++) {
    const VarDesc *v = infer_in(c, "X", i);
    if (!v) return infer_fail(c, "input X[%d] is missing", i);
    t = i == 0 || v->dtype == t ? v->dtype : infer_promote(t, v->dtype);
    if (v->shape.rank < 0) {
      all_ranked = false;
    } else if (!ref) {
      ref = v;
      iref = i;
    }
  }
  if (!ref) {
    Shape u = shape_unknown();
    infer_set(c, "Out", 0, t, &u);
    return true;
  }
  char sa[128], sb[128];
  if (ref->shape.rank == 0)
    return infer_fail(c, "X[%d] is a scalar; concat needs tensors of rank 1 or more", iref);
  int axis;
  if (!norm_axis(c, "axis", infer_attr_i(c, "axis"), "X", &ref->shape, &axis)) return false;
  Shape s = ref->shape;
  int64_t total = 0;
  bool total_known = all_ranked;
  for (int i = 0; i < n; i++) {
    const Shape *vs = &infer_in(c, "X", i)->shape;
    if (vs->rank < 0) continue;
    if (vs->rank != s.rank)
      return infer_fail(c, "X[%d] has shape %s but X[%d] has shape %s: ranks differ", i,
                        shape_str(vs, sa, sizeof sa), iref, shape_str(&ref->shape, sb, sizeof sb));
    for (int k = 0; k < s.rank; k++) {
      if (k == axis) continue;
      if (dims_clash(vs->d[k], s.d[k])) {
        int j = iref;   /* name an earlier input that disagrees */
        for (int q = 0; q < i; q++) {
          const Shape *qs = &infer_in(c, "X", q)->shape;
          if (qs->rank == s.rank && dims_clash(qs->d[k], vs->d[k])) {
            j = q;
            break;
          }
        }
        return infer_fail(c, "X[%d] has shape %s but X[%d] has shape %s: dimension %d differs "
                          "(only axis %d may)", i, shape_str(vs, sa, sizeof sa), j,
                          shape_str(&infer_in(c, "X", j)->shape, sb, sizeof sb), k, axis);
      }
      s.d[k] = dim_merge(s.d[k], vs->d[k]);
    }
    Dim d = vs->d[axis];
    if (!dim_known(d) || total > INT64_MAX - d.n) total_known = false;
    else total += d.n;
  }
  s.d[axis] = total_known ? dim_n(total) : dim_unknown();
  if (n == 1) s.d[axis] = ref->shape.d[axis];
  infer_set(c, "Out", 0, t, &s);
  return true;
}

/* split: `num` equal parts, or parts of the sizes in `sections`; exactly
 * one of the two is given, and the outputs bound must match it. */
static bool infer_split(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  int ns;
  const int64_t *sec = ints_attr(c, "sections", &ns);
  if (!x || !sec) return false;
  int64_t num = infer_attr_i(c, "num");
  int m = infer_out_count(c, "Out");
  char a[128], b[128];
  if (num < 0) return infer_fail(c, "num must not be negative, got %lld", (long long)num);
  if ((num > 0) == (ns > 0)) return infer_fail(c, "give exactly one of num and sections");
  const char *are = m == 1 ? "output is" : "outputs are";
  if (num > 0 && num != m)
    return infer_fail(c, "num=%lld but %d %s bound", (long long)num, m, are);
  if (ns > 0 && ns != m)
    return infer_fail(c, "sections has %d entries but %d %s bound", ns, m, are);
  int64_t sum = 0;
  for (int i = 0; i < ns; i++) {
    if (sec[i] < 0)
      return infer_fail(c, "sections %s must not hold negative sizes", ints_str(sec, ns, a, sizeof a));
    if (sum > INT64_MAX - sec[i])
      return infer_fail(c, "sections %s sum to more than any dimension", ints_str(sec, ns, a, sizeof a));
    sum += sec[i];
  }
  const Shape *xs = &x->shape;
  if (xs->rank < 0) {
    Shape u = shape_unknown();
    for (int i = 0; i < m; i++) infer_set(c, "Out", i, x->dtype, &u);
    return true;
  }
  int axis;
  if (xs->rank == 0) return infer_fail(c, "X is a scalar; split needs a tensor of rank 1 or more");
  if (!norm_axis(c, "axis", infer_attr_i(c, "axis"), "X", xs, &axis)) return false;
  Dim d = xs->d[axis];
  if (num > 0 && dim_known(d) && d.n % num != 0)
    return infer_fail(c, "axis %d of X (shape %s) has size %lld, which does not split into %lld "
                      "equal parts", axis, shape_str(xs, a, sizeof a), (long long)d.n, (long long)num);
  if (ns > 0 && dim_known(d) && d.n != sum)
    return infer_fail(c, "sections %s sum to %lld but axis %d of X (shape %s) has size %lld",
                      ints_str(sec, ns, a, sizeof a), (long long)sum, axis,
                      shape_str(xs, b, sizeof b), (long long)d.n);
  for (int i = 0; i < m; i++) {
    Shape s = *xs;
    if (ns > 0) s.d[axis] = dim_n(sec[i]);
    else if (num == 1) s.d[axis] = d;
    else s.d[axis] = dim_known(d) ? dim_n(d.n / num) : dim_unknown();
    infer_set(c, "Out", i, x->dtype, &s);
  }
  return true;
}

/* ---- slice, gather, one_hot ------------------------------------------------- */

/* slice: Python's x[start:end] along each of `axes` (step 1): negative
 * indices count from the end and out-of-range ones are clamped. */
static bool infer_slice(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  int na, nb, ne;
  const int64_t *axes = ints_attr(c, "axes", &na);
  const int64_t *starts = ints_attr(c, "starts", &nb);
  const int64_t *ends = ints_attr(c, "ends", &ne);
  if (!x || !axes || !starts || !ends) return false;
  if (na != nb || na != ne)
    return infer_fail(c, "axes, starts and ends must have one length, got %d, %d and %d", na, nb, ne);
  const Shape *xs = &x->shape;
  Shape s = *xs;
  if (xs->rank >= 0) {
    bool seen[SHAPE_MAX_RANK] = {false};
    for (int i = 0; i < na; i++) {
      int k;
      if (!norm_axis(c, "axis", axes[i], "X", xs, &k)) return false;
      if (seen[k]) {
        char buf[128];
        return infer_fail(c, "axes names dimension %d of X (shape %s) twice", k,
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
  infer_set(c, "Out", 0, x->dtype, &s);
  return true;
}

static bool infer_gather(InferCtx *c) {
  const VarDesc *x = input(c, "X"), *idx = input(c, "Index");
  if (!x || !idx) return false;
  if (idx->dtype != DT_I64) return infer_fail(c, "Index must be i64, got %s", dtype_name(idx->dtype));
  const Shape *xs = &x->shape, *is = &idx->shape;
  char a[128], b[128];
  if (xs->rank == 0) return infer_fail(c, "X is a scalar; gather needs a tensor of rank 1 or more");
  Shape s = shape_unknown();
  int axis = 0;
  if (xs->rank > 0 && !norm_axis(c, "axis", infer_attr_i(c, "axis"), "X", xs, &axis)) return false;
  if (xs->rank > 0 && is->rank >= 0) {
    int r = xs->rank - 1 + is->rank;
    if (r > SHAPE_MAX_RANK)
      return infer_fail(c, "X of shape %s gathered with Index of shape %s would have rank %d, "
                        "more than 8", shape_str(xs, a, sizeof a), shape_str(is, b, sizeof b), r);
    s = shape_scalar();
    for (int i = 0; i < axis; i++) s.d[s.rank++] = xs->d[i];
    for (int i = 0; i < is->rank; i++) s.d[s.rank++] = is->d[i];
    for (int i = axis + 1; i < xs->rank; i++) s.d[s.rank++] = xs->d[i];
  }
  infer_set(c, "Out", 0, x->dtype, &s);
  return true;
}

static bool infer_one_hot(InferCtx *c) {
  const VarDesc *x = input(c, "X");
  if (!x) return false;
  if (x->dtype != DT_I64) return infer_fail(c, "X must be i64, got %s", dtype_name(x->dtype));
  int64_t depth = infer_attr_i(c, "depth");
  if (depth <= 0) return infer_fail(c, "depth must be positive, got %lld", (long long)depth);
  Shape s = x->shape;
  if (s.rank >= SHAPE_MAX_RANK) {
    char buf[128];
    return infer_fail(c, "X of shape %s would give a result of rank %d, more than 8",
                      shape_str(&s, buf, sizeof buf), s.rank + 1);
  }
  if (s.rank >= 0) s.d[s.rank++] = dim_n(depth);
  infer_set(c, "Out", 0, DT_F32, &s);
  return true;
}

/* ---- the table --------------------------------------------------------------- */

#define X_IN {{"X", 0, "input"}}
#define OUT(DOC) {{"Out", 0, DOC}}

OpProto op_table_shape[] = {
    {.type = "reshape", .doc = "Out = X's elements in a new shape (one -1 is inferred)",
     .in = X_IN, .out = OUT("the result, dtype of X"),
     .attrs = {{"shape", ATTR_INTS, NULL, check_reshape, "the new shape; one entry may be -1"}},
     .infer = infer_reshape, .grad_kind = GRAD_COMPOSITE},
    {.type = "transpose", .doc = "Out = X with its axes permuted: Out.shape[i] = X.shape[perm[i]]",
     .in = X_IN, .out = OUT("the result"),
     .attrs = {{"perm", ATTR_INTS, NULL, check_perm, "a permutation of 0 .. rank-1"}},
     .infer = infer_transpose, .grad_kind = GRAD_COMPOSITE},
    {.type = "flatten", .doc = "Out = X with axes start_axis.. merged into one",
     .in = X_IN, .out = OUT("the result, rank start_axis + 1"),
     .attrs = {{"start_axis", ATTR_INT, "1", NULL, "the first axis merged"}},
     .infer = infer_flatten, .grad_kind = GRAD_COMPOSITE},
    {.type = "squeeze", .doc = "Out = X without the given axes of size 1",
     .in = X_IN, .out = OUT("the result"),
     .attrs = {{"axes", ATTR_INTS, "[]", NULL, "the axes to remove; [] means every axis of size 1"}},
     .infer = infer_squeeze, .grad_kind = GRAD_COMPOSITE},
    {.type = "unsqueeze", .doc = "Out = X with axes of size 1 inserted",
     .in = X_IN, .out = OUT("the result"),
     .attrs = {{"axes", ATTR_INTS, NULL, NULL, "the new axes' positions in Out"}},
     .infer = infer_unsqueeze, .grad_kind = GRAD_COMPOSITE},
    {.type = "broadcast_to", .doc = "Out = X broadcast to shape, as NumPy does",
     .in = X_IN, .out = OUT("the result, of the given shape"),
     .attrs = {{"shape", ATTR_INTS, NULL, check_shape, "the target shape"}},
     .infer = infer_broadcast_to, .grad_kind = GRAD_DEDICATED},
    {.type = "concat", .doc = "Out = the tensors in X joined along axis",
     .in = {{"X", SLOT_LIST, "the tensors, equal in shape except along axis"}},
     .out = OUT("the result"),
     .attrs = {{"axis", ATTR_INT, "0", NULL, "the axis to join along"}},
     .infer = infer_concat, .grad_kind = GRAD_DEDICATED},
    {.type = "split", .doc = "Out = X cut along axis into num equal parts or parts of sizes sections",
     .in = X_IN, .out = {{"Out", SLOT_LIST, "the parts, in order"}},
     .attrs = {{"num", ATTR_INT, "0", check_nonnegative, "the number of equal parts (or 0)"},
               {"sections", ATTR_INTS, "[]", check_nonnegative, "the parts' sizes (or [])"},
               {"axis", ATTR_INT, "0", NULL, "the axis to cut"}},
     .infer = infer_split, .grad_kind = GRAD_COMPOSITE},
    {.type = "slice", .doc = "Out = X[starts:ends] along each of axes, Python-style",
     .in = X_IN, .out = OUT("the result"),
     .attrs = {{"axes", ATTR_INTS, NULL, NULL, "the axes sliced"},
               {"starts", ATTR_INTS, NULL, NULL, "first index per axis; negative counts from the end"},
               {"ends", ATTR_INTS, NULL, NULL, "end index (excluded) per axis; clamped"}},
     .infer = infer_slice, .grad_kind = GRAD_DEDICATED},
    {.type = "gather", .doc = "Out = the entries of X at Index along axis",
     .in = {{"X", 0, "input"}, {"Index", SLOT_NO_GRAD, "i64 indices into axis"}},
     .out = OUT("X.shape[:axis] + Index.shape + X.shape[axis+1:]"),
     .attrs = {{"axis", ATTR_INT, "0", NULL, "the axis indexed"}},
     .infer = infer_gather, .grad_kind = GRAD_DEDICATED},
    {.type = "one_hot", .doc = "Out = f32 one-hot vectors of length depth for the i64 labels X",
     .in = {{"X", SLOT_NO_GRAD, "i64 labels in [0, depth)"}},
     .out = OUT("f32, X.shape + [depth]"),
     .attrs = {{"depth", ATTR_INT, NULL, check_positive, "the number of classes"}},
     .infer = infer_one_hot, .grad_kind = GRAD_NONE},
    {0},
};
