/* builtin.c — the op families the registry starts with: one table per
 * line of ops.list (reg_builtin_tables, registry.h). */
#include "ir/registry.h"

#define OPS(fam) extern OpProto op_table_##fam[];
#include "ops/ops.list"
#undef OPS

OpProto *const reg_builtin_tables[] = {
#define OPS(fam) op_table_##fam,
#include "ops/ops.list"
#undef OPS
    NULL,
};
