/* dump.c — printing a program (netrun-lang(5), THE PROGRAM).
 *
 * The text format, one line per variable or op, is stable; tests diff it:
 *
 *   block 0 (parent -1)
 *     var x : f32[B, 784] input
 *     var t.0 : f32[B, 256]
 *     {Out=[t.0]} = matmul(X=[x], Y=[W1]) {transpose_x=false, transpose_y=false}
 *   block 1 (parent 0) args=[h.1] results=[h.2, t.5]
 *
 * Variables are listed in declaration order, then ops in execution order;
 * slots in proto order; attributes sorted by name; sub-blocks by index.
 * A grad op ends in a comment naming its forward op and source line:
 *     {Out=[t.9]} = mul(X=[t.8], Y=[w])  # grad of mul at model.net:4
 * The JSON and Graphviz forms carry the same information. */
#include "ir/dump.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

bool dump_parse_format(const char *s, DumpFormat *out) {
  if (strcmp(s, "text") == 0) *out = DUMP_TEXT;
  else if (strcmp(s, "dot") == 0) *out = DUMP_DOT;
  else if (strcmp(s, "json") == 0) *out = DUMP_JSON;
  else return false;
  return true;
}

static void print_names(FILE *f, const char *const *names, int n) {
  fputc('[', f);
  for (int i = 0; i < n; i++) fprintf(f, "%s%s", i ? ", " : "", names[i]);
  fputc(']', f);
}

static void print_slots(FILE *f, const Slot *slots, int n) {
  for (int i = 0; i < n; i++) {
    fprintf(f, "%s%s=", i ? ", " : "", slots[i].name);
    print_names(f, slots[i].args, slots[i].n);
  }
}

void dump_op(FILE *f, const OpDesc *op) {
  fputc('{', f);
  print_slots(f, op->out, op->nout);
  fprintf(f, "} = %s(", op->type);
  print_slots(f, op->in, op->nin);
  fputc(')', f);
  if (op->nattrs) {
    fputs(" {", f);
    for (int i = 0; i < op->nattrs; i++) {
      fprintf(f, "%s%s=", i ? ", " : "", op->attrs[i].name);
      attr_print(f, &op->attrs[i].v);
    }
    fputc('}', f);
  }
}

static void var_type(const VarDesc *v, char *buf, size_t n) {
  char shape[512];
  snprintf(buf, n, "%s%s", dtype_name(v->dtype), shape_str(&v->shape, shape, sizeof shape));
}

static void text_var(FILE *f, const VarDesc *v) {
  char type[600];
  var_type(v, type, sizeof type);
  fprintf(f, "  var %s : %s", v->name, type);
  if (v->flags & VAR_INPUT) fputs(" input", f);
  if (v->flags & VAR_PARAM) fputs(" param", f);
  /* a script's state has no gradient by definition: it says only "state" */
  if ((v->flags & VAR_STOP_GRADIENT) && !(v->flags & VAR_KEPT)) fputs(" stop_gradient", f);
  if (v->flags & (VAR_STATE | VAR_KEPT)) fputs(" state", f);
  fputc('\n', f);
}

static void text_where(FILE *f, const Program *p, Span s) {
  if (s.file < 0 || s.file >= p->diag->nfiles) return;
  int line, col;
  diag_line_col(p->diag, s.file, s.start, &line, &col);
  fprintf(f, "  # %s:%d:%d", p->diag->files[s.file].path, line, col);
}

/* The end of phase k of a training program: where the next non-empty
 * phase starts, or block 0's end. */
static int phase_end(const Program *p, int k) {
  return k + 1 < PHASE_COUNT ? p->phase[k + 1] : p->blocks[0]->nops;
}

/* Before op i of a training program's block 0: the line of each
 * (non-empty) phase that starts there, "# phase NAME: ops A-B". */
static void text_phase(FILE *f, const Program *p, int i) {
  for (int k = 0; p->phased && k < PHASE_COUNT; k++)
    if (p->phase[k] == i && phase_end(p, k) > i)
      fprintf(f, "  # phase %s: ops %d-%d\n", prog_phase_name((Phase)k), i, phase_end(p, k) - 1);
}

static void text_block(FILE *f, const Program *p, const Block *b, const char *header,
                       const DumpOptions *opt) {
  fputs(header, f);
  if (b->nargs) {
    fputs(" args=", f);
    print_names(f, b->args, b->nargs);
  }
  if (b->nresults || b->idx > 0) {
    fputs(" results=", f);
    print_names(f, b->results, b->nresults);
  }
  fputc('\n', f);
  for (int i = 0; i < b->nvars; i++) text_var(f, b->vars[i]);
  for (int i = 0; i < b->nops; i++) {
    const OpDesc *op = b->ops[i];
    if (b->idx == 0 && b != p->startup) text_phase(f, p, i);
    fputs("  ", f);
    dump_op(f, op);
    const Block *fb = op->fwd_block >= 0 ? prog_block(p, op->fwd_block) : NULL;
    if (fb && op->fwd_op >= 0 && op->fwd_op < fb->nops) {
      /* A grad op: the forward op and the line it came from. */
      fprintf(f, "  # grad of %s", fb->ops[op->fwd_op]->type);
      if (op->span.file >= 0) {
        int line, col;
        diag_line_col(p->diag, op->span.file, op->span.start, &line, &col);
        fprintf(f, " at %s:%d", p->diag->files[op->span.file].path, line);
      }
    } else if (opt->lines) {
      text_where(f, p, op->span);
    }
    fputc('\n', f);
  }
}

static void dump_text(FILE *f, const Program *p, const DumpOptions *opt) {
  if (opt->startup) text_block(f, p, p->startup, "startup", opt);
  for (int i = 0; i < p->nblocks; i++) {
    char header[64];
    snprintf(header, sizeof header, "block %d (parent %d)", i, p->blocks[i]->parent);
    text_block(f, p, p->blocks[i], header, opt);
  }
}

/* ---- JSON ---------------------------------------------------------------- */

static void json_str(FILE *f, const char *s) { diag_quote(f, s, QUOTE_JSON); }

static void json_float(FILE *f, double x) {
  if (isnan(x)) fputs("\"nan\"", f);
  else if (isinf(x)) fputs(x < 0 ? "\"-inf\"" : "\"inf\"", f);
  else fprintf(f, "%.9g", x);
}

static void json_attr(FILE *f, const AttrValue *v) {
  switch (v->type) {
  case ATTR_INT: case ATTR_BLOCK: case ATTR_I64: fprintf(f, "%" PRId64, v->u.i); break;
  case ATTR_FLOAT: json_float(f, v->u.f); break;
  case ATTR_BOOL: fputs(v->u.i ? "true" : "false", f); break;
  case ATTR_DTYPE: json_str(f, dtype_name((DType)v->u.i)); break;
  case ATTR_STRING: json_str(f, v->u.s); break;
  case ATTR_INTS: case ATTR_FLOATS: case ATTR_STRINGS: case ATTR_I64S:
    fputc('[', f);
    for (int i = 0; i < v->n; i++) {
      if (i) fputs(", ", f);
      if (v->type == ATTR_INTS || v->type == ATTR_I64S) fprintf(f, "%" PRId64, v->u.ints[i]);
      else if (v->type == ATTR_FLOATS) json_float(f, v->u.floats[i]);
      else json_str(f, v->u.strings[i]);
    }
    fputc(']', f);
    break;
  }
}

/* `, "key": ` before a value (without the comma for an object's first). */
static void json_key(FILE *f, bool first, const char *key) {
  if (!first) fputs(", ", f);
  json_str(f, key);
  fputs(": ", f);
}

static void json_names(FILE *f, const char *const *names, int n) {
  fputc('[', f);
  for (int i = 0; i < n; i++) {
    if (i) fputs(", ", f);
    json_str(f, names[i]);
  }
  fputc(']', f);
}

static void json_slots(FILE *f, const Slot *slots, int n) {
  fputc('{', f);
  for (int i = 0; i < n; i++) {
    json_key(f, i == 0, slots[i].name);
    json_names(f, slots[i].args, slots[i].n);
  }
  fputc('}', f);
}

static void json_var(FILE *f, const VarDesc *v) {
  json_key(f, true, "name");
  json_str(f, v->name);
  json_key(f, false, "dtype");
  json_str(f, dtype_name(v->dtype));
  json_key(f, false, "shape");
  if (v->shape.rank < 0) {
    fputs("null", f);
  } else {
    fputc('[', f);
    for (int d = 0; d < v->shape.rank; d++) {
      if (d) fputs(", ", f);
      if (v->shape.d[d].n >= 0) fprintf(f, "%" PRId64, v->shape.d[d].n);
      else if (v->shape.d[d].sym) json_str(f, v->shape.d[d].sym);
      else fputs("null", f);
    }
    fputc(']', f);
  }
  fprintf(f, ", \"input\": %s, \"param\": %s, \"stop_gradient\": %s%s", v->flags & VAR_INPUT ? "true" : "false",
          v->flags & VAR_PARAM ? "true" : "false", v->flags & VAR_STOP_GRADIENT ? "true" : "false",
          v->flags & VAR_KEPT ? ", \"state\": true" : "");
}

static void json_op(FILE *f, const Program *p, const OpDesc *op) {
  json_key(f, true, "type");
  json_str(f, op->type);
  json_key(f, false, "inputs");
  json_slots(f, op->in, op->nin);
  json_key(f, false, "outputs");
  json_slots(f, op->out, op->nout);
  json_key(f, false, "attrs");
  fputc('{', f);
  for (int a = 0; a < op->nattrs; a++) {
    json_key(f, a == 0, op->attrs[a].name);
    json_attr(f, &op->attrs[a].v);
  }
  fputc('}', f);
  if (op->span.file >= 0) {
    int line, col;
    diag_line_col(p->diag, op->span.file, op->span.start, &line, &col);
    json_key(f, false, "source");
    fputs("{\"file\": ", f);
    json_str(f, p->diag->files[op->span.file].path);
    fprintf(f, ", \"line\": %d, \"col\": %d}", line, col);
  }
}

static void json_block(FILE *f, const Program *p, const Block *b) {
  fprintf(f, "{\"idx\": %d, \"parent\": %d, \"args\": ", b->idx, b->parent);
  json_names(f, b->args, b->nargs);
  fputs(", \"results\": ", f);
  json_names(f, b->results, b->nresults);
  fputs(",\n   \"vars\": [", f);
  for (int i = 0; i < b->nvars; i++) {
    fputs(i ? ",\n     {" : "\n     {", f);
    json_var(f, b->vars[i]);
    fputc('}', f);
  }
  fputs("],\n   \"ops\": [", f);
  for (int i = 0; i < b->nops; i++) {
    fputs(i ? ",\n     {" : "\n     {", f);
    json_op(f, p, b->ops[i]);
    fputc('}', f);
  }
  fputs("]}", f);
}

static void dump_json(FILE *f, const Program *p, const DumpOptions *opt) {
  fputs("{\"blocks\": [\n  ", f);
  for (int i = 0; i < p->nblocks; i++) {
    if (i) fputs(",\n  ", f);
    json_block(f, p, p->blocks[i]);
  }
  fputs("]", f);
  if (p->phased) {   /* a training program's phases: [start, end) of block 0's ops */
    fputs(",\n \"phases\": [", f);
    for (int k = 0; k < PHASE_COUNT; k++)
      fprintf(f, "%s{\"name\": \"%s\", \"start\": %d, \"end\": %d}", k ? ", " : "", prog_phase_name((Phase)k),
              p->phase[k], phase_end(p, k));
    fputc(']', f);
  }
  if (opt->startup) {
    fputs(",\n \"startup\": ", f);
    json_block(f, p, p->startup);
  }
  fputs("}\n", f);
}

/* ---- Graphviz ------------------------------------------------------------ */

static void dot_id(FILE *f, const char *prefix, const char *name) {
  fprintf(f, "\"%s", prefix);
  for (const char *s = name; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    fputc(*s, f);
  }
  fputc('"', f);
}

static void dot_block(FILE *f, const Program *p, int idx, int depth) {
  const Block *b = p->blocks[idx];
  fprintf(f, "%*ssubgraph cluster_%d {\n", depth * 2, "", idx);
  fprintf(f, "%*s  label=\"block %d\"; style=rounded;\n", depth * 2, "", idx);
  for (int i = 0; i < b->nvars; i++) {
    const VarDesc *v = b->vars[i];
    char type[600];
    var_type(v, type, sizeof type);
    fprintf(f, "%*s  ", depth * 2, "");
    dot_id(f, "v:", v->name);
    fprintf(f, " [label=\"%s\\n%s\", shape=ellipse%s];\n", v->name, type,
            v->flags & VAR_PARAM   ? ", style=filled, fillcolor=\"#ffe9a8\""
            : v->flags & VAR_INPUT ? ", style=filled, fillcolor=\"#cfe8ff\""
                                   : "");
  }
  for (int i = 0; i < b->nops; i++) {
    const OpDesc *op = b->ops[i];
    char id[32];
    snprintf(id, sizeof id, "%d.%d", idx, i);
    fprintf(f, "%*s  ", depth * 2, "");
    dot_id(f, "op:", id);
    fprintf(f, " [label=\"%s\", shape=box, style=filled, fillcolor=\"#eeeeee\"];\n", op->type);
  }
  for (int i = 0; i < p->nblocks; i++)
    if (p->blocks[i]->parent == idx) dot_block(f, p, i, depth + 1);
  fprintf(f, "%*s}\n", depth * 2, "");
}

static void dot_edges(FILE *f, const Program *p, int idx) {
  const Block *b = p->blocks[idx];
  for (int i = 0; i < b->nops; i++) {
    const OpDesc *op = b->ops[i];
    char id[32];
    snprintf(id, sizeof id, "%d.%d", idx, i);
    for (int s = 0; s < op->nin; s++)
      for (int k = 0; k < op->in[s].n; k++) {
        fputs("  ", f);
        dot_id(f, "v:", op->in[s].args[k]);
        fputs(" -> ", f);
        dot_id(f, "op:", id);
        fprintf(f, " [label=\"%s\"];\n", op->in[s].name);
      }
    for (int s = 0; s < op->nout; s++)
      for (int k = 0; k < op->out[s].n; k++) {
        fputs("  ", f);
        dot_id(f, "op:", id);
        fputs(" -> ", f);
        dot_id(f, "v:", op->out[s].args[k]);
        fprintf(f, " [label=\"%s\"];\n", op->out[s].name);
      }
    for (int a = 0; a < op->nattrs; a++)
      if (op->attrs[a].v.type == ATTR_BLOCK) {
        int sub = (int)op->attrs[a].v.u.i;
        const Block *sb = prog_block(p, sub);
        if (!sb || !sb->nops) continue;
        char first[32];
        snprintf(first, sizeof first, "%d.0", sub);
        fputs("  ", f);
        dot_id(f, "op:", id);
        fputs(" -> ", f);
        dot_id(f, "op:", first);
        fprintf(f, " [style=dashed, lhead=cluster_%d, label=\"%s\"];\n", sub, op->attrs[a].name);
      }
  }
}

static void dump_dot(FILE *f, const Program *p) {
  fputs("digraph program {\n  compound=true;\n  node [fontname=\"monospace\"];\n"
        "  edge [fontname=\"monospace\", fontsize=10];\n", f);
  dot_block(f, p, 0, 1);
  for (int i = 0; i < p->nblocks; i++) dot_edges(f, p, i);
  fputs("}\n", f);
}

void dump_program(FILE *f, const Program *p, const DumpOptions *opt) {
  switch (opt->format) {
  case DUMP_TEXT: dump_text(f, p, opt); break;
  case DUMP_JSON: dump_json(f, p, opt); break;
  case DUMP_DOT: dump_dot(f, p); break;
  }
}
