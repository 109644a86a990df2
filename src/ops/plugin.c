/* plugin.c — loading plugins, and the NetrunApi table they call.
 *
 * A plugin op becomes an OpProto like a built-in's.  Its infer, kernel and
 * grad fields are the adapters below: each finds the plugin's definition
 * through proto->user and calls the plugin's callback with a NetrunCtx, a
 * handle on whichever phase is running (an InferCtx, an ExecCtx or a
 * GradCtx).  The api functions translate the public types of
 * include/netrun/plugin.h to the internal ones and back, so the public
 * header does not depend on netrun's internal layout.
 *
 * A script's load passes --allow-load first (plugin_load_for_script, at
 * the end, without opening the file).  Loading opens the file once and
 * checks, in order, on that descriptor: it opened without blocking and is
 * a regular file, a script's lies inside its allowed folder (the
 * descriptor's real path), it is an ELF shared library for this machine whose
 * segments lie within it (elf_check: dlopen would fault on a truncated
 * one), dlopen takes the same descriptor (/proc/self/fd/N), it defines netrun_plugin_init and
 * netrun_plugin_api_version, the version is ours, init succeeds, and each
 * dedicated gradient left to the default maker has its NAME_grad op.  Ops are registered only when all of that
 * held; until then register_op keeps them aside, so a plugin that fails
 * leaves nothing behind. */
#include "ops/plugin.h"

#include "autodiff/backward.h"
#include "exec/exec.h"
#include "ir/names.h"
#include "netrun/plugin.h"

#include "base/file.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The public enums are the internal ones, value for value. */
_Static_assert(NETRUN_F32 == (int)DT_F32 && NETRUN_I64 == (int)DT_I64 && NETRUN_BOOL == (int)DT_BOOL,
               "dtypes");
_Static_assert(NETRUN_ATTR_INT == (int)ATTR_INT && NETRUN_ATTR_FLOAT == (int)ATTR_FLOAT &&
                   NETRUN_ATTR_BOOL == (int)ATTR_BOOL && NETRUN_ATTR_STRING == (int)ATTR_STRING &&
                   NETRUN_ATTR_DTYPE == (int)ATTR_DTYPE && NETRUN_ATTR_INTS == (int)ATTR_INTS &&
                   NETRUN_ATTR_FLOATS == (int)ATTR_FLOATS && NETRUN_ATTR_STRINGS == (int)ATTR_STRINGS,
               "attribute types");
_Static_assert(NETRUN_GRAD_NONE == (int)GRAD_NONE && NETRUN_GRAD_COMPOSITE == (int)GRAD_COMPOSITE &&
                   NETRUN_GRAD_DEDICATED == (int)GRAD_DEDICATED,
               "grad kinds");
_Static_assert((int)NETRUN_SLOT_LIST == (int)SLOT_LIST && (int)NETRUN_SLOT_OPTIONAL == (int)SLOT_OPTIONAL &&
                   (int)NETRUN_SLOT_NO_GRAD == (int)SLOT_NO_GRAD,
               "slot flags");
_Static_assert(NETRUN_MAX_SLOTS == REG_MAX_SLOTS && NETRUN_MAX_ATTRS == REG_MAX_ATTRS &&
                   NETRUN_MAX_RANK == SHAPE_MAX_RANK,
               "limits");

typedef struct Plugin Plugin;

typedef struct PluginOp {
  NetrunOpDef def;         /* the plugin's definition, strings copied */
  OpProto proto;           /* what the registry holds; proto.user points back here */
} PluginOp;

struct Plugin {
  void *handle;
  char *path;
  char *mapped;            /* the name dlopen mapped it by: /proc/self/fd/N */
  dev_t dev;               /* the file, to know it again by another path */
  ino_t ino;
  Arena arena;             /* its PluginOps and their strings */
  PluginOp **ops;
  int nops, capops;
};

static Plugin **plugins;
static int nplugins, capplugins;

/* The plugin whose init function is running, and its first error. */
static struct {
  Plugin *pl;
  const Registry *also;
  char error[1024];
  bool from_register;
} loading;

/* Reports a plugin that cannot be loaded through d at `at`; false. */
static bool say(Diag *d, Span at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool say(Diag *d, Span at, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  diag_verror(d, at, fmt, ap);
  va_end(ap);
  return false;
}

static void plugin_free(Plugin *pl) {
  arena_free(&pl->arena);
  mem_free(pl->ops);
  if (pl->handle) dlclose(pl->handle);
  mem_free(pl->path);
  mem_free(pl->mapped);
  mem_free(pl);
}

void plugin_unload_all(void) {
  for (int i = nplugins - 1; i >= 0; i--) plugin_free(plugins[i]);
  mem_free(plugins);
  plugins = NULL;
  nplugins = capplugins = 0;
}

/* ---- the context handed to callbacks ------------------------------------------------ */

struct NetrunCtx {
  const PluginOp *op;
  InferCtx *ic;            /* exactly one of these three is set */
  ExecCtx *ec;
  GradCtx *gc;
  bool failed;             /* the plugin called api->fail */
};

static int api_fail(NetrunCtx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int api_fail(NetrunCtx *c, const char *fmt, ...) {
  char msg[1024];
  DIAG_FORMAT(msg, sizeof msg, fmt);
  c->failed = true;
  if (c->ic) reg_infer_fail(c->ic, "%s", msg);
  else if (c->ec) exec_ctx_fail(c->ec, "%s", msg);
  else diag_error(bwd_prog(c->gc)->diag, bwd_op_fwd(c->gc)->span, "%s: %s", c->op->def.type, msg);
  return -1;
}

enum { INFER, KERNEL, GRAD };
static const char *const phase_names[] = {"shape inference", "a kernel", "a grad maker"};

/* Whether c is in phase `want`; a call made in another is the plugin's
 * bug, reported. */
static bool in_phase(NetrunCtx *c, int want, const char *fn) {
  int now = c->ic ? INFER : c->ec ? KERNEL : GRAD;
  if (now == want) return true;
  api_fail(c, "the plugin called %s in %s, not in %s", fn, phase_names[now], phase_names[want]);
  return false;
}

static const OpProto *proto_of(NetrunCtx *c) { return &c->op->proto; }

static const char *api_op_type(NetrunCtx *c) { return c->op->def.type; }

static int api_in_count(NetrunCtx *c, const char *slot) {
  if (c->ic) return reg_infer_count(c->ic, slot);
  if (c->gc) return bwd_op_nin(c->gc, slot);
  int k = reg_slot_index(proto_of(c)->in, proto_of(c)->nin, slot);
  return k < 0 ? 0 : exec_ctx_in_count(c->ec, k);
}

static int api_out_count(NetrunCtx *c, const char *slot) {
  if (c->ic) return reg_infer_out_count(c->ic, slot);
  if (c->gc) return bwd_op_nout(c->gc, slot);
  int k = reg_slot_index(proto_of(c)->out, proto_of(c)->nout, slot);
  return k < 0 ? 0 : exec_ctx_out_count(c->ec, k);
}

/* ---- attributes ---------------------------------------------------------------------- */

static NetrunAttrValue to_public(const AttrValue *v) {
  NetrunAttrValue o = {.type = (NetrunAttrType)v->type, .n = v->n};
  switch (v->type) {
  /* A float attribute's exact integer: the nearest double, as declared. */
  case ATTR_I64: o.type = NETRUN_ATTR_FLOAT, o.u.f = (double)v->u.i; break;
  case ATTR_I64S: o.type = NETRUN_ATTR_INTS, o.u.ints = v->u.ints; break;
  case ATTR_FLOAT: o.u.f = v->u.f; break;
  case ATTR_STRING: o.u.s = v->u.s; break;
  case ATTR_INTS: o.u.ints = v->u.ints; break;
  case ATTR_FLOATS: o.u.floats = v->u.floats; break;
  case ATTR_STRINGS: o.u.strings = v->u.strings; break;
  default: o.u.i = v->u.i; break;
  }
  return o;
}

/* A copy of a public value in program p's arena. */
static AttrValue to_internal(Program *p, const NetrunAttrValue *v) {
  switch (v->type) {
  case NETRUN_ATTR_FLOAT: return attr_float(v->u.f);
  case NETRUN_ATTR_STRING: return attr_string(p, v->u.s ? v->u.s : "");
  case NETRUN_ATTR_INTS: return attr_ints(p, v->u.ints, v->n);
  case NETRUN_ATTR_FLOATS: return attr_floats(p, v->u.floats, v->n);
  case NETRUN_ATTR_STRINGS: {
    AttrValue a = {.type = ATTR_STRINGS, .n = v->n};
    a.u.strings = arena_alloc(p->arena, sizeof(char *) * (size_t)(v->n ? v->n : 1));
    for (int i = 0; i < v->n; i++) a.u.strings[i] = arena_strdup(p->arena, v->u.strings[i]);
    return a;
  }
  default: return (AttrValue){.type = (AttrType)v->type, .u.i = v->u.i};
  }
}

static const AttrValue *find_attr(NetrunCtx *c, const char *name) {
  if (c->ic) return reg_infer_attr(c->ic, name);
  if (c->ec) return exec_ctx_attr(c->ec, name);
  return bwd_op_attr(c->gc, name);
}

static int api_attr(NetrunCtx *c, const char *name, NetrunAttrValue *out) {
  const AttrValue *v = find_attr(c, name);
  if (!v) return -1;
  *out = to_public(v);
  return 0;
}

static int64_t api_attr_int(NetrunCtx *c, const char *name) {
  const AttrValue *v = find_attr(c, name);
  if (!v) return 0;
  return v->type == ATTR_FLOAT ? (int64_t)v->u.f : v->u.i;
}

static double api_attr_float(NetrunCtx *c, const char *name) {
  const AttrValue *v = find_attr(c, name);
  if (!v) return 0;
  return v->type == ATTR_FLOAT ? v->u.f : (double)v->u.i;
}

/* ---- shape inference ------------------------------------------------------------------ */

static NetrunShape shape_to_public(const Shape *s) {
  NetrunShape o = {.rank = s->rank};
  for (int i = 0; i < s->rank && i < SHAPE_MAX_RANK; i++) o.d[i] = (NetrunDim){s->d[i].n, s->d[i].sym};
  return o;
}

static Shape shape_to_internal(const NetrunShape *s) {
  Shape o = shape_unknown();
  o.rank = s->rank;
  for (int i = 0; i < s->rank; i++) {
    bool known = s->d[i].n >= 0;
    o.d[i] = (Dim){known ? s->d[i].n : -1, known ? NULL : s->d[i].sym};
  }
  return o;
}

static int api_var_in(NetrunCtx *c, const char *slot, int i, NetrunVar *out) {
  if (!in_phase(c, INFER, "var_in")) return -1;
  const VarDesc *v = reg_infer_in(c->ic, slot, i);
  if (!v) return -1;
  out->dtype = (NetrunDType)v->dtype;
  out->shape = shape_to_public(&v->shape);
  return 0;
}

static void api_var_out(NetrunCtx *c, const char *slot, int i, NetrunDType t, const NetrunShape *s) {
  if (!in_phase(c, INFER, "var_out")) return;
  if (reg_slot_index(proto_of(c)->out, proto_of(c)->nout, slot) < 0) {
    api_fail(c, "the plugin set output %s, which the op does not have", slot);
    return;
  }
  if ((unsigned)t > NETRUN_BOOL || s->rank < -1 || s->rank > SHAPE_MAX_RANK) {
    api_fail(c, "the plugin gave output %s an invalid dtype or rank", slot);
    return;
  }
  Shape sh = shape_to_internal(s);
  reg_infer_set(c->ic, slot, i, (DType)t, &sh);
}

static int api_broadcast(NetrunCtx *c, const NetrunShape *a, const NetrunShape *b, NetrunShape *out) {
  if (!in_phase(c, INFER, "broadcast")) return -1;
  if (a->rank > SHAPE_MAX_RANK || b->rank > SHAPE_MAX_RANK)
    return api_fail(c, "the plugin broadcast a shape of more than %d dimensions", SHAPE_MAX_RANK);
  Shape x = shape_to_internal(a), y = shape_to_internal(b), s;
  if (!reg_infer_broadcast(c->ic, &x, &y, &s)) {
    c->failed = true;
    return -1;
  }
  *out = shape_to_public(&s);
  return 0;
}

/* ---- kernels --------------------------------------------------------------------------- */

static void view(const Tensor *t, NetrunTensor *out) {
  out->dtype = (NetrunDType)t->dtype;
  out->rank = t->rank;
  memset(out->shape, 0, sizeof out->shape);
  memcpy(out->shape, t->shape, sizeof(int64_t) * (size_t)t->rank);
  out->numel = t->numel;
  out->data = t->data;
}

/* A view of input (or output) slot[i]: 0, or -1 if there is none. */
static int tensor_at(NetrunCtx *c, bool output, const char *slot, int i, NetrunTensor *out) {
  if (!in_phase(c, KERNEL, output ? "tensor_out" : "tensor_in")) return -1;
  const OpProto *p = proto_of(c);
  int k = output ? reg_slot_index(p->out, p->nout, slot) : reg_slot_index(p->in, p->nin, slot);
  Tensor *t = k < 0 ? NULL : output ? exec_ctx_out_at(c->ec, k, i) : exec_ctx_in_at(c->ec, k, i);
  if (!t) return -1;
  view(t, out);
  return 0;
}

static int api_tensor_in(NetrunCtx *c, const char *slot, int i, NetrunTensor *out) {
  return tensor_at(c, false, slot, i, out);
}

static int api_tensor_out(NetrunCtx *c, const char *slot, int i, NetrunTensor *out) {
  return tensor_at(c, true, slot, i, out);
}

static int api_tensor_new_out(NetrunCtx *c, const char *slot, int i, NetrunDType dt, int rank,
                              const int64_t *shape, NetrunTensor *out) {
  if (!in_phase(c, KERNEL, "tensor_new_out")) return -1;
  int k = reg_slot_index(proto_of(c)->out, proto_of(c)->nout, slot);
  if (k < 0 || i < 0 || i >= exec_ctx_out_count(c->ec, k))
    return api_fail(c, "the plugin made output %s[%d], which this op does not have", slot, i);
  if ((unsigned)dt > NETRUN_BOOL || rank < 0 || rank > SHAPE_MAX_RANK)
    return api_fail(c, "the plugin made output %s with an invalid dtype or rank", slot);
  char why[TENSOR_WHY_MAX];
  Tensor *t = tensor_try_new((DType)dt, rank, shape, why);
  if (!t) return api_fail(c, "cannot make output %s: %s", slot, why);
  exec_ctx_set_out(c->ec, k, i, t);
  view(t, out);
  return 0;
}

static void *api_alloc(size_t bytes) { return mem_alloc(NULL, bytes ? bytes : 1); }
static void api_free(void *p) { mem_free(p); }

static double api_uniform(NetrunCtx *c) {
  if (!in_phase(c, KERNEL, "uniform")) return 0;
  return rng_uniform(exec_ctx_rng(c->ec));
}

/* ---- grad makers ----------------------------------------------------------------------- */

static const char *api_fwd_in(NetrunCtx *c, const char *slot, int i) {
  return in_phase(c, GRAD, "fwd_in") ? bwd_op_in(c->gc, slot, i) : NULL;
}
static const char *api_fwd_out(NetrunCtx *c, const char *slot, int i) {
  return in_phase(c, GRAD, "fwd_out") ? bwd_op_out(c->gc, slot, i) : NULL;
}
static const char *api_grad_in(NetrunCtx *c, const char *slot, int i) {
  return in_phase(c, GRAD, "grad_in") ? bwd_op_in_grad(c->gc, slot, i) : NULL;
}
static const char *api_grad_out(NetrunCtx *c, const char *slot, int i) {
  return in_phase(c, GRAD, "grad_out") ? bwd_op_out_grad(c->gc, slot, i) : NULL;
}

static NetrunOp *api_emit(NetrunCtx *c, const char *type) {
  if (!in_phase(c, GRAD, "emit")) return NULL;
  if (!reg_find_op(bwd_prog(c->gc), type)) {
    api_fail(c, "its grad maker emits unknown op '%s'", type);
    return NULL;
  }
  return (NetrunOp *)bwd_emit(c->gc, type);
}

/* The proto of an emitted op, or NULL (after reporting) if `name` is not
 * one of its slots (in or out) or attributes (attr). */
static const OpProto *emitted_has(NetrunCtx *c, NetrunOp *op, const char *what, const char *name) {
  if (!op || !in_phase(c, GRAD, "emit")) return NULL;
  const OpProto *p = reg_find_op(bwd_prog(c->gc), ((OpDesc *)op)->type);
  bool found = strcmp(what, "input") == 0    ? reg_slot_index(p->in, p->nin, name) >= 0
               : strcmp(what, "output") == 0 ? reg_slot_index(p->out, p->nout, name) >= 0
                                             : reg_attr_index(p, name) >= 0;
  if (found) return p;
  api_fail(c, "its grad maker gives op '%s' %s '%s', which it does not have", p->type, what, name);
  return NULL;
}

static void api_emit_in(NetrunCtx *c, NetrunOp *op, const char *slot, const char *var) {
  if (emitted_has(c, op, "input", slot)) bwd_emit_in(c->gc, (OpDesc *)op, slot, var);
}

static void api_emit_out(NetrunCtx *c, NetrunOp *op, const char *slot, const char *var) {
  if (emitted_has(c, op, "output", slot)) bwd_emit_out(c->gc, (OpDesc *)op, slot, var);
}

static void api_emit_attr(NetrunCtx *c, NetrunOp *op, const char *name, const NetrunAttrValue *v) {
  const OpProto *p = emitted_has(c, op, "attribute", name);
  if (!p) return;
  AttrType want = p->attrs[reg_attr_index(p, name)].type;
  if ((int)v->type != (int)want) {
    api_fail(c, "its grad maker gives attribute '%s' of op '%s' a value that is not a %s", name, p->type,
             attr_type_name(want));
    return;
  }
  bwd_emit_attr(c->gc, (OpDesc *)op, name, to_internal(bwd_prog(c->gc), v));
}

static const char *api_temp(NetrunCtx *c) { return in_phase(c, GRAD, "temp") ? bwd_temp(c->gc) : NULL; }

/* ---- the adapters the registry calls ------------------------------------------------------ */

/* A callback's result: a failure the plugin gave no reason for is reported
 * with `what`. */
static int outcome(NetrunCtx *c, int rc, const char *what) {
  if (rc == 0 && !c->failed) return 0;
  if (!c->failed) api_fail(c, "%s failed (the plugin gave no reason)", what);
  return -1;
}

/* Whether inference gave output slot k, variable i, a dtype. */
static bool output_set(InferCtx *ic, int k, int i) {
  if (ic->rt) return ic->rt->out[k][i].dtype != DT_UNKNOWN;
  const VarDesc *v = prog_var(ic->prog, op_output(ic->op, ic->proto->out[k].name)->args[i]);
  return !v || v->dtype != DT_UNKNOWN;
}

static bool infer_plugin(InferCtx *ic) {
  NetrunCtx c = {.op = ic->proto->user, .ic = ic};
  if (outcome(&c, c.op->def.infer(&c), "shape inference") < 0 || ic->failed) return false;
  for (int k = 0; k < ic->proto->nout; k++)
    for (int i = 0; i < reg_infer_out_count(ic, ic->proto->out[k].name); i++)
      if (!output_set(ic, k, i)) {
        api_fail(&c, "its shape inference did not set output %s", ic->proto->out[k].name);
        return false;
      }
  return true;
}

static int kernel_plugin(ExecCtx *ec) {
  NetrunCtx c = {.op = reg_find(reg_default(), exec_ctx_op(ec)->type)->user, .ec = ec};
  return outcome(&c, c.op->def.kernel(&c), "the kernel");
}

static bool grad_plugin(GradCtx *gc) {
  NetrunCtx c = {.op = reg_find_op(bwd_prog(gc), bwd_op_fwd(gc)->type)->user, .gc = gc};
  return outcome(&c, c.op->def.grad(&c), "the grad maker") == 0;
}

static const char *check_plugin(const OpProto *p, int attr, const AttrValue *v) {
  const PluginOp *op = p->user;
  NetrunAttrCheck check = op->def.attrs[attr].check;
  if (!check) return NULL;
  NetrunAttrValue pv = to_public(v);
  return check(&pv);
}

/* ---- registration -------------------------------------------------------------------------- */

/* The first error of an init function: one register_op gave (reg), or one
 * the plugin gave through init_error. */
static void record(bool reg, const char *msg) {
  if (loading.error[0]) return;
  snprintf(loading.error, sizeof loading.error, "%s", msg[0] ? msg : "(no reason given)");
  loading.from_register = reg;
}

static int init_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int init_error(const char *fmt, ...) {
  char msg[1024];
  DIAG_FORMAT(msg, sizeof msg, fmt);
  record(false, msg);
  return -1;
}

/* The longest op, slot or attribute name a plugin may register. */
enum { PLUGIN_MAX_NAME = 64 };

static bool is_identifier(const char *s) {
  if (!s || strlen(s) > PLUGIN_MAX_NAME || !(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z'))) return false;
  for (; *s; s++)
    if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
      return false;
  return true;
}

/* NAME, or NAME@GRAD (the slots of grad ops). */
static bool is_slot_name(const char *s) {
  if (strlen(s) > PLUGIN_MAX_NAME) return false;
  size_t stem = name_stem_len(s);
  if (!s[stem]) return is_identifier(s);
  char base[64];
  snprintf(base, sizeof base, "%.*s", (int)stem, s);
  return name_is_plain_grad(s, stem) && stem < sizeof base && is_identifier(base);
}

static const char *copy(Arena *a, const char *s) { return s ? arena_strdup(a, s) : NULL; }

static bool name_taken(const char *type) {
  if (reg_find(reg_default(), type) || (loading.also && reg_find(loading.also, type))) return true;
  for (int i = 0; i < loading.pl->nops; i++)
    if (strcmp(loading.pl->ops[i]->def.type, type) == 0) return true;
  return false;
}

/* Whether slot i of def's inputs (o 0) or outputs (o 1) shares its name
 * with an earlier slot of the same list, or with an attribute (a call's
 * keyword would name both): which, or NULL. */
static const char *named_twice(const NetrunOpDef *def, int o, int i) {
  const NetrunSlot *list = o ? def->out : def->in;
  for (int j = 0; j < i; j++)
    if (strcmp(list[j].name, list[i].name) == 0) return o ? "two outputs" : "two inputs";
  for (int j = 0; j < NETRUN_MAX_ATTRS && def->attrs[j].name; j++)
    if (strcmp(def->attrs[j].name, list[i].name) == 0) return o ? "an output and an attribute" : "an input and an attribute";
  return NULL;
}

/* Whether attribute i shares its name with an earlier attribute. */
static bool attr_named_twice(const NetrunOpDef *def, int i) {
  for (int j = 0; j < i; j++)
    if (strcmp(def->attrs[j].name, def->attrs[i].name) == 0) return true;
  return false;
}

/* Whether def can be registered; if not, buf says why. */
static bool def_ok(const NetrunOpDef *def, char *buf, size_t n) {
  const char *why = NULL;
  if (!def || !is_identifier(def->type)) {
    const char *t = def && def->type ? def->type : "(null)";
    if (strlen(t) > PLUGIN_MAX_NAME)
      snprintf(buf, n, "op name '%.*s...' is longer than %d characters", PLUGIN_MAX_NAME, t, PLUGIN_MAX_NAME);
    else
      snprintf(buf, n, "op name '%s' is not a name", t);
    return false;
  }
  if (name_taken(def->type)) why = "is already registered";
  else if (!def->infer) why = ": it has no shape inference";
  else if (!def->kernel) why = ": it has no kernel";
  else if ((unsigned)def->grad_kind > NETRUN_GRAD_DEDICATED) why = ": its grad_kind is not a NetrunGradKind";
  else if (def->grad_kind == NETRUN_GRAD_COMPOSITE && !def->grad)
    why = ": it declares a composite gradient but has no grad maker";
  else if (def->flags & ~(unsigned)(NETRUN_OP_SIDE_EFFECT | NETRUN_OP_RANDOM | NETRUN_OP_ZERO_GRAD |
                                     NETRUN_OP_NO_PREALLOC))
    why = ": its flags hold unknown bits";
  if (why) {
    snprintf(buf, n, "op '%s'%s%s", def->type, why[0] == ':' ? "" : " ", why);
    return false;
  }
  int k = snprintf(buf, n, "op '%s': ", def->type);
  char *rest = buf + k;
  size_t left = n - (size_t)k;
  for (int o = 0; o < 2; o++)
    for (int i = 0; i < NETRUN_MAX_SLOTS && (o ? def->out : def->in)[i].name; i++) {
      const char *name = (o ? def->out : def->in)[i].name;
      if (!is_slot_name(name)) {
        if (strlen(name) > PLUGIN_MAX_NAME)
          snprintf(rest, left, "slot name '%.*s...' is longer than %d characters", PLUGIN_MAX_NAME, name,
                   PLUGIN_MAX_NAME);
        else
          snprintf(rest, left, "slot name '%s' is not NAME or NAME@GRAD", name);
        return false;
      }
      unsigned flags = (o ? def->out : def->in)[i].flags;
      if (flags & ~(unsigned)(NETRUN_SLOT_LIST | NETRUN_SLOT_OPTIONAL | NETRUN_SLOT_NO_GRAD)) {
        snprintf(rest, left, "the flags of slot '%s' hold unknown bits", name);
        return false;
      }
      const char *twin = named_twice(def, o, i);
      if (twin) {
        snprintf(rest, left, "the name '%s' is given to two of its slots and attributes (%s)", name, twin);
        return false;
      }
    }
  if (!def->in[0].name && !def->out[0].name) {
    snprintf(rest, left, "it has no slots: an op needs an input or an output");
    return false;
  }
  Arena scratch;
  arena_init(&scratch);
  bool ok = true;
  for (int i = 0; i < NETRUN_MAX_ATTRS && def->attrs[i].name && ok; i++) {
    const NetrunAttr *a = &def->attrs[i];
    AttrValue v;
    ok = false;
    if (strlen(a->name) > PLUGIN_MAX_NAME)
      snprintf(rest, left, "attribute name '%.*s...' is longer than %d characters", PLUGIN_MAX_NAME, a->name,
               PLUGIN_MAX_NAME);
    else if (!is_identifier(a->name))
      snprintf(rest, left, "attribute name '%s' is not a name", a->name);
    else if (attr_named_twice(def, i))
      snprintf(rest, left, "the name '%s' is given to two of its slots and attributes (two attributes)", a->name);
    else if ((unsigned)a->type > NETRUN_ATTR_STRINGS)
      snprintf(rest, left, "attribute '%s' has no valid type", a->name);
    else if (a->dflt && !reg_parse_attr(&scratch, (AttrType)a->type, a->dflt, &v))
      snprintf(rest, left, "the default '%s' of attribute '%s' is not a %s", a->dflt, a->name,
               attr_type_name((AttrType)a->type));
    else
      ok = true;
  }
  arena_free(&scratch);
  return ok;
}

static unsigned op_flags(unsigned f) {
  return (f & NETRUN_OP_SIDE_EFFECT ? OP_SIDE_EFFECT : 0u) | (f & NETRUN_OP_RANDOM ? OP_RANDOM : 0u) |
         (f & NETRUN_OP_ZERO_GRAD ? OP_ZERO_GRAD : 0u) | (f & NETRUN_OP_NO_PREALLOC ? OP_NO_PREALLOC : 0u);
}

static int api_register_op(const NetrunOpDef *def) {
  if (!loading.pl) {
    diag_error(NULL, SPAN_NONE, "a plugin called register_op after its init function returned");
    return -1;
  }
  char why[512];
  if (!def_ok(def, why, sizeof why)) {
    record(true, why);
    return -1;
  }
  Arena *a = &loading.pl->arena;
  PluginOp *op = arena_alloc(a, sizeof *op);
  op->def = *def;
  NetrunOpDef *d = &op->def;
  OpProto *p = &op->proto;
  d->type = p->type = copy(a, def->type);
  d->doc = p->doc = copy(a, def->doc ? def->doc : "");
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < REG_MAX_SLOTS && (k ? d->out : d->in)[i].name; i++) {
      NetrunSlot *s = &(k ? d->out : d->in)[i];
      s->name = copy(a, s->name);
      s->doc = copy(a, s->doc);
      (k ? p->out : p->in)[i] = (SlotProto){s->name, s->flags, s->doc};
    }
  for (int i = 0; i < REG_MAX_ATTRS && d->attrs[i].name; i++) {
    NetrunAttr *at = &d->attrs[i];
    at->name = copy(a, at->name);
    at->dflt = copy(a, at->dflt);
    at->doc = copy(a, at->doc);
    p->attrs[i] = (AttrProto){.name = at->name, .type = (AttrType)at->type, .dflt = at->dflt, .doc = at->doc};
  }
  p->infer = infer_plugin;
  p->kernel = kernel_plugin;
  p->grad_kind = (GradKind)d->grad_kind;
  p->grad = d->grad ? grad_plugin : NULL;
  p->check_attr = check_plugin;
  p->flags = op_flags(d->flags);
  p->user = op;
  VEC_RESERVE(loading.pl->ops, loading.pl->capops, loading.pl->nops + 1);
  loading.pl->ops[loading.pl->nops++] = op;
  return 0;
}

static const NetrunApi api = {
    .version = NETRUN_PLUGIN_API_VERSION,
    .register_op = api_register_op,
    .init_error = init_error,
    .op_type = api_op_type,
    .in_count = api_in_count,
    .out_count = api_out_count,
    .attr = api_attr,
    .attr_int = api_attr_int,
    .attr_float = api_attr_float,
    .fail = api_fail,
    .var_in = api_var_in,
    .var_out = api_var_out,
    .broadcast = api_broadcast,
    .tensor_in = api_tensor_in,
    .tensor_out = api_tensor_out,
    .tensor_new_out = api_tensor_new_out,
    .alloc = api_alloc,
    .free = api_free,
    .uniform = api_uniform,
    .fwd_in = api_fwd_in,
    .fwd_out = api_fwd_out,
    .grad_in = api_grad_in,
    .grad_out = api_grad_out,
    .emit = api_emit,
    .emit_in = api_emit_in,
    .emit_out = api_emit_out,
    .emit_attr = api_emit_attr,
    .temp = api_temp,
};

/* ---- loading --------------------------------------------------------------------------------- */

/* The machine netrun runs on, as an ELF header names it. */
#if defined(__x86_64__)
#define ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define ELF_MACHINE EM_AARCH64
#endif

/* Whether [off, off + size) lies within a file of `len` bytes. */
static bool within(uint64_t off, uint64_t size, uint64_t len) { return off <= len && size <= len - off; }

/* Whether the open file fd (of len bytes) is a shared library dlopen can
 * map: NULL, or why not.  dlopen maps each PT_LOAD segment from the file,
 * and touching a page past the end of a truncated file raises SIGBUS. */
static const char *elf_check(int fd, uint64_t len) {
  Elf64_Ehdr h;
  if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h || memcmp(h.e_ident, ELFMAG, SELFMAG) != 0)
    return len >= SELFMAG && pread(fd, &h, SELFMAG, 0) == SELFMAG && memcmp(h.e_ident, ELFMAG, SELFMAG) == 0
               ? "a truncated ELF file (its header is cut short)"
               : "not a shared library";
  if (h.e_ident[EI_CLASS] != ELFCLASS64 || h.e_ident[EI_DATA] != ELFDATA2LSB) return "not a 64-bit little-endian ELF file";
#ifdef ELF_MACHINE
  if (h.e_machine != ELF_MACHINE) return "an ELF file for another machine";
#endif
  if (h.e_type != ET_DYN) return "an ELF file that is not a shared library";
  if (h.e_phentsize != sizeof(Elf64_Phdr) || h.e_phnum == 0 ||
      !within(h.e_phoff, (uint64_t)h.e_phnum * sizeof(Elf64_Phdr), len))
    return "a damaged ELF file (its program headers lie outside it)";
  for (int i = 0; i < h.e_phnum; i++) {
    Elf64_Phdr ph;
    if (pread(fd, &ph, sizeof ph, (off_t)(h.e_phoff + (uint64_t)i * sizeof ph)) != (ssize_t)sizeof ph)
      return "an ELF file that cannot be read";
    if ((ph.p_type == PT_LOAD || ph.p_type == PT_DYNAMIC) && !within(ph.p_offset, ph.p_filesz, len))
      return "a truncated ELF file (a segment lies past its end)";
  }
  return NULL;
}

/* Whether the file open at fd is a shared library dlopen can map: NULL,
 * or why not (in why[n]). */
static const char *not_loadable(int fd, char *why, size_t n) {
  struct stat st;
  if (fstat(fd, &st) != 0) return snprintf(why, n, "%s", strerror(errno)), why;
  return elf_check(fd, (uint64_t)st.st_size);
}

/* A dedicated gradient without a grad maker gets the default one
 * (bwd_default_grad), which emits NAME_grad: that op must be registered,
 * by this plugin or before it.  False (reported) if it is not. */
static bool default_grad_ok(Diag *diag, Span at, const Plugin *pl, const char *path) {
  for (int i = 0; i < pl->nops; i++) {
    const NetrunOpDef *d = &pl->ops[i]->def;
    if (d->grad_kind != NETRUN_GRAD_DEDICATED || d->grad) continue;
    char name[PLUGIN_MAX_NAME + 8];
    name_grad_op(name, sizeof name, d->type);   /* fits: the type's length is checked */
    const OpProto *gp = reg_find(reg_default(), name);
    for (int j = 0; j < pl->nops && !gp; j++)
      if (strcmp(pl->ops[j]->def.type, name) == 0) gp = &pl->ops[j]->proto;
    if (!gp)
      return say(diag, at, "plugin '%s': op '%s' has no grad maker, and no op '%s' for the default one", path,
                 d->type, name);
    for (int k = 0; k < REG_MAX_SLOTS && gp->out[k].name; k++)
      if (gp->out[k].flags & SLOT_LIST)
        return say(diag, at, "plugin '%s': op '%s' has no grad maker, and the default one cannot fill the list %s of '%s'",
                   path, d->type, gp->out[k].name, name);
  }
  return true;
}

/* dlsym's result as a pointer to `size` bytes of code or data. */
static bool lookup(void *handle, const char *sym, void *out, size_t size) {
  void *p = dlsym(handle, sym);
  memcpy(out, &p, size);
  return p != NULL;
}

static bool inside_fd(Diag *d, Span at, const char *path, int fd, const char *root);

/* The descriptor (fd or a dup of it) whose name /proc/self/fd/N, in
 * self[n], no loaded plugin was mapped by: glibc knows a library again by
 * its name before its file, so a plugin mapped as /proc/self/fd/3 would be
 * handed back for another file opened as fd 3 later. */
static int mapping_fd(int fd, char *self, size_t n) {
  int use = fd;
  for (;;) {
    snprintf(self, n, "/proc/self/fd/%d", use);
    bool taken = false;
    for (int i = 0; i < nplugins && !taken; i++) taken = strcmp(plugins[i]->mapped, self) == 0;
    if (!taken) return use;
    int next = fcntl(fd, F_DUPFD_CLOEXEC, use + 1);
    if (use != fd) close(use);
    if (next < 0) return -1;   /* no descriptor left */
    use = next;
  }
}

/* Loads the plugin at path; a script's (root: the folder it must lie in)
 * only from inside root.  The file is opened once, without blocking (a
 * FIFO is refused, file_open_regular), and everything is checked on that
 * descriptor: its real path (/proc/self/fd/N) inside root, its ELF
 * header.  dlopen then maps the same descriptor through /proc/self/fd/N,
 * never the path again: a symbolic link flipped after the checks cannot
 * make it load another file. */
static bool load(Diag *d, Span at, const char *path, const char *root, const Registry *also) {
  char buf[512];
  int fd = file_open_regular(path, buf, sizeof buf);
  if (fd < 0) return say(d, at, "cannot load plugin '%s': %s", path, buf);
  const char *why = NULL;
  if (root && !inside_fd(d, at, path, fd, root)) {
    close(fd);
    return false;
  }
  if ((why = not_loadable(fd, buf, sizeof buf))) {
    close(fd);
    return say(d, at, "cannot load plugin '%s': %s", path, why);
  }
  struct stat st;
  bool known = fstat(fd, &st) == 0;
  char self[64];
  int use = mapping_fd(fd, self, sizeof self);
  if (use < 0) {
    close(fd);
    return say(d, at, "cannot load plugin '%s': %s", path, strerror(EMFILE));
  }
  void *h = dlopen(self, RTLD_NOW | RTLD_LOCAL);
  if (use != fd) close(use);
  close(fd);
  if (!h) {
    /* dlerror names the descriptor's path: name the user's instead */
    const char *e = dlerror();
    size_t k = strlen(self);
    if (e && strncmp(e, self, k) == 0 && e[k] == ':') e += k + 1 + (e[k + 1] == ' ');
    return say(d, at, "cannot load plugin '%s': %s", path, e ? e : "dlopen failed");
  }
  for (int i = 0; i < nplugins; i++)
    if (plugins[i]->handle == h) {   /* loaded already: drop the new reference */
      dlclose(h);
      return true;
    }
  int (*init)(const NetrunApi *) = NULL;
  const int *version = NULL;
  _Static_assert(sizeof init == sizeof(void *), "function pointers are data pointers on POSIX");
  if (!lookup(h, "netrun_plugin_init", &init, sizeof init)) {
    dlclose(h);
    return say(d, at, "'%s' is not a netrun plugin: it defines no netrun_plugin_init", path);
  }
  if (!lookup(h, "netrun_plugin_api_version", &version, sizeof version)) {
    dlclose(h);
    return say(d, at, "'%s' is not a netrun plugin: it defines no netrun_plugin_api_version", path);
  }
  if (*version != NETRUN_PLUGIN_API_VERSION) {
    int v = *version;
    dlclose(h);
    return say(d, at, "plugin '%s' was built against API version %d, netrun has %d", path, v,
               NETRUN_PLUGIN_API_VERSION);
  }
  Plugin *pl = mem_calloc(1, sizeof *pl);
  pl->handle = h;
  pl->path = mem_strdup(path);
  pl->mapped = mem_strdup(self);
  if (known) pl->dev = st.st_dev, pl->ino = st.st_ino;
  arena_init(&pl->arena);
  loading.pl = pl;
  loading.also = also;
  loading.error[0] = 0;
  int rc = init(&api);
  loading.pl = NULL;
  bool ok = true;
  if (loading.error[0] && loading.from_register) ok = say(d, at, "plugin '%s': %s", path, loading.error);
  else if (loading.error[0] && rc != 0) ok = say(d, at, "plugin '%s' failed to initialize: %s", path, loading.error);
  else if (rc != 0) ok = say(d, at, "plugin '%s' failed to initialize", path);
  if (ok) ok = default_grad_ok(d, at, pl, path);
  if (!ok) {
    plugin_free(pl);
    return false;
  }
  for (int i = 0; i < pl->nops; i++) reg_add(reg_default(), &pl->ops[i]->proto);
  VEC_RESERVE(plugins, capplugins, nplugins + 1);
  plugins[nplugins++] = pl;
  return true;
}

bool plugin_load(Diag *d, Span at, const char *path, const Registry *also) { return load(d, at, path, NULL, also); }

/* ---- what a script may load ------------------------------------------------------------
 * Loading a plugin runs its native code (its constructors run inside
 * dlopen), so a script, which may come from anywhere, loads none unless
 * the command line says so: --plugin PATH names one, --allow-load lets a
 * script load those inside one folder. */

static struct {
  bool allowed;
  char *dir;               /* --allow-load=DIR; NULL: the script's folder */
} script_loads;

void plugin_allow_script_loads(const char *dir) {
  script_loads.allowed = true;
  mem_free(script_loads.dir);
  script_loads.dir = dir ? mem_strdup(dir) : NULL;
}

void plugin_forget_script_loads(void) {
  mem_free(script_loads.dir);
  script_loads.dir = NULL;
  script_loads.allowed = false;
}

/* Whether path names a plugin loaded already (by --plugin, or another
 * path): stat reads no byte of the file. */
static bool loaded_already(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return false;
  for (int i = 0; i < nplugins; i++)
    if (plugins[i]->dev == st.st_dev && plugins[i]->ino == st.st_ino) return true;
  return false;
}

/* Whether the file open at fd (named path) lies inside folder `root`, by
 * the real path of the descriptor itself; false (reported through d at
 * `at`) if not. */
static bool inside_fd(Diag *d, Span at, const char *path, int fd, const char *root) {
  char self[64], rpath[PATH_MAX + 1];
  snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
  ssize_t k = readlink(self, rpath, sizeof rpath - 1);
  char *rroot = mem_realpath(root);
  bool ok = true;
  if (!rroot) ok = say(d, at, "cannot load plugin '%s': cannot resolve the folder %s: %s", path, root, strerror(errno));
  else if (k < 0 || k >= (ssize_t)sizeof rpath - 1)
    ok = say(d, at, "cannot load plugin '%s': cannot tell where it lies: %s", path, k < 0 ? strerror(errno) : "too long");
  else {
    rpath[k] = 0;
    size_t n = strlen(rroot);
    bool in = strcmp(rroot, "/") == 0 || (strncmp(rpath, rroot, n) == 0 && rpath[n] == '/');
    if (!in && script_loads.dir)
      ok = say(d, at, "cannot load plugin '%s': it lies outside %s, the folder --allow-load= allows (links followed)",
               path, root);
    else if (!in)
      ok = say(d, at,
               "cannot load plugin '%s': it lies outside the script's folder %s (links followed); "
               "--allow-load=DIR allows another folder",
               path, root);
  }
  mem_free(rroot);
  return ok;
}

bool plugin_load_for_script(Diag *d, Span at, const char *path, const char *script_dir, const Registry *also) {
  if (loaded_already(path)) return true;
  if (!script_loads.allowed)
    return say(d, at,
               "cannot load plugin '%s': a script loads plugins only with --allow-load (a plugin runs native "
               "code), or name it with --plugin",
               path);
  return load(d, at, path, script_loads.dir ? script_loads.dir : script_dir, also);
}
