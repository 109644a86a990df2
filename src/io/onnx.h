/* onnx.h — ONNX model files, read and written by a protobuf wire-format
 * reader and writer of netrun's own (doc/design.md, "ONNX").
 *
 * ---- The format ---------------------------------------------------------
 * An .onnx file is one protobuf message ModelProto.  Protobuf's wire
 * format is a sequence of fields, each a varint key (field number << 3 |
 * wire type) then its value: type 0 a varint, 1 eight bytes, 2 a varint
 * length then that many bytes (strings, bytes, sub-messages, packed
 * repeated numbers), 5 four bytes.  Only the fields netrun reads are
 * decoded; every other field is skipped by its wire type.  The field
 * numbers used (ONNX's, from its documented schema):
 *   ModelProto       1 ir_version, 7 graph, 8 opset_import
 *   OperatorSetId    1 domain, 2 version
 *   GraphProto       1 node, 2 name, 5 initializer, 11 input, 12 output
 *   NodeProto        1 input, 2 output, 3 name, 4 op_type, 5 attribute, 7 domain
 *   AttributeProto   1 name, 2 f, 3 i, 4 s, 5 t, 6 g, 7 floats, 8 ints,
 *                    9 strings, 10 tensors, 11 graphs, 20 type
 *   TensorProto      1 dims, 2 data_type, 4 float_data, 5 int32_data,
 *                    7 int64_data, 8 name, 9 raw_data, 10 double_data,
 *                    13 external_data, 14 data_location
 *   ValueInfoProto   1 name, 2 type; TypeProto 1 tensor_type;
 *   TypeProto.Tensor 1 elem_type, 2 shape; TensorShapeProto 1 dim;
 *   Dimension        1 dim_value, 2 dim_param
 *
 * ---- What is checked while reading -------------------------------------------
 * Every length against the bytes left, every count against ONNX_MAX_*,
 * every tensor's dims (none negative, the element count below 2^40 and
 * its bytes within the file) against its data: raw_data or the typed list
 * must hold exactly the elements its dims say.  Subgraphs (If, Loop
 * bodies) nest at most ONNX_MAX_DEPTH deep.  Names may not hold a NUL.
 * What a graph means (names defined once, no cycle) is checked by
 * onnx_sort.  Tensors stored outside the file (external data) are read by
 * onnx_read from the model's folder only (ext_read in onnx.c), within a
 * limit; onnx_parse, which has no folder, refuses them. */
#ifndef NETRUN_ONNX_H
#define NETRUN_ONNX_H

#include "base/mem.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ONNX_MAX_NODES 200000     /* nodes in all graphs of a model */
#define ONNX_MAX_LIST 100000      /* a node's inputs, outputs, attributes; an attribute's list */
#define ONNX_MAX_RANK 8
#define ONNX_MAX_DEPTH 8          /* graphs inside attributes inside graphs */
#define ONNX_MAX_NUMEL ((int64_t)1 << 40)

/* ONNX's TensorProto.DataType values netrun reads (others are refused). */
enum { ONNX_FLOAT = 1, ONNX_UINT8 = 2, ONNX_INT8 = 3, ONNX_INT32 = 6, ONNX_INT64 = 7, ONNX_BOOL = 9,
       ONNX_DOUBLE = 11 };
/* AttributeProto.AttributeType. */
enum { ONNX_ATTR_FLOAT = 1, ONNX_ATTR_INT = 2, ONNX_ATTR_STRING = 3, ONNX_ATTR_TENSOR = 4, ONNX_ATTR_GRAPH = 5,
       ONNX_ATTR_FLOATS = 6, ONNX_ATTR_INTS = 7, ONNX_ATTR_STRINGS = 8, ONNX_ATTR_TENSORS = 9,
       ONNX_ATTR_GRAPHS = 10 };

/* A tensor: its elements converted to double (f) or int64 (i) by its
 * data_type's kind, row-major. */
typedef struct OnnxTensor {
  const char *name;
  int data_type;
  int rank;
  int64_t dims[ONNX_MAX_RANK];
  int64_t numel;
  double *f;                   /* FLOAT, DOUBLE */
  int64_t *i;                  /* the integer types and BOOL */
} OnnxTensor;

typedef struct OnnxGraph OnnxGraph;

typedef struct OnnxAttr {
  const char *name;
  int type;
  double f;
  int64_t i;
  const char *s;
  OnnxTensor *t;
  OnnxGraph *g;                /* GRAPH, or the first of GRAPHS */
  int n;                       /* list length of the type's list: FLOATS, INTS, STRINGS */
  int nfloats, nints, nstrings;   /* each list's own length */
  double *floats;
  int64_t *ints;
  const char **strings;
} OnnxAttr;

typedef struct OnnxNode {
  const char *name, *op_type, *domain;
  const char **in, **out;      /* "" for an optional input left out */
  int nin, nout, capin, capout;
  OnnxAttr *attrs;
  int nattrs, capattrs;
} OnnxNode;

/* A graph input or output: a tensor type whose dims are each a size (sym
 * NULL, n >= 0), a name (dim_param) or unknown (sym "", n -1). */
typedef struct OnnxValue {
  const char *name;
  int elem_type;               /* 0 when not given */
  int rank;                    /* -1 when no shape is given */
  int64_t dims[ONNX_MAX_RANK];
  const char *syms[ONNX_MAX_RANK];
} OnnxValue;

struct OnnxGraph {
  const char *name;
  OnnxNode *nodes;
  int nnodes, capnodes;
  OnnxTensor *inits;
  int ninits, capinits;
  OnnxValue *inputs, *outputs;
  int ninputs, capinputs, noutputs, capoutputs;
};

typedef struct OnnxModel {
  int64_t ir_version;
  int64_t opset;               /* of the default domain ("" or "ai.onnx"); 0 if not given */
  OnnxGraph *graph;
} OnnxModel;

/* Parses the n bytes at b into *m, every allocation in arena a.  false
 * with why ("graph.node[3].attribute[0]: ..."). */
bool onnx_parse(Arena *a, const uint8_t *b, size_t n, OnnxModel *m, char *why, size_t wn);
/* Reads the file at path (at most `limit` bytes) and parses it; external
 * data, from path's folder, may take ext_limit bytes (raw and decoded). */
bool onnx_read(Arena *a, const char *path, size_t limit, int64_t ext_limit, OnnxModel *m, char *why, size_t wn);

/* The nodes of g in an order where each runs after those it reads from:
 * order[] gets indices into g->nodes.  false with why naming a node that
 * reads a name nothing defines, a name defined twice, or the nodes of a
 * cycle. */
/* How messages name node i of g: 'its name' in quotes, or #i, its index
 * in graph.node from 0, when it has none (ONNX leaves names optional).
 * buf holds n bytes (ONNX_LABEL_MAX: a long name is cut). */
enum { ONNX_LABEL_MAX = 256 };
const char *onnx_node_label(const OnnxGraph *g, int i, char *buf, size_t n);
bool onnx_sort(Arena *a, const OnnxGraph *g, int *order, char *why, size_t wn);

/* ---- writing: protobuf's wire format, a field at a time ------------------------
 * A message is built in an OnnxBuf (grown by mem_alloc); a sub-message in
 * one of its own, then appended with onnx_put_msg, which frees it. */
typedef struct OnnxBuf {
  uint8_t *b;
  size_t n, cap;
} OnnxBuf;
void onnx_put_varint(OnnxBuf *o, uint32_t field, uint64_t v);   /* int64 fields: two's complement */
void onnx_put_bytes(OnnxBuf *o, uint32_t field, const void *p, size_t n);
void onnx_put_str(OnnxBuf *o, uint32_t field, const char *s);
void onnx_put_float(OnnxBuf *o, uint32_t field, float f);
void onnx_put_msg(OnnxBuf *o, uint32_t field, OnnxBuf *sub);
void onnx_buf_free(OnnxBuf *o);

/* The element size of data_type, 0 for one netrun does not read. */
int onnx_elem_size(int data_type);
const char *onnx_type_name(int data_type);

#endif
