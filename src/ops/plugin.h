/* plugin.h — native plugins: shared libraries whose init function registers
 * ops (the interface plugins see is include/netrun/plugin.h).
 *
 * Plugins are process-wide: their ops join the default registry, so every
 * program sees them; a plugin loaded twice is loaded once; all of them are
 * closed at exit, after the registry that points into them is freed. */
#ifndef NETRUN_PLUGIN_INTERNAL_H
#define NETRUN_PLUGIN_INTERNAL_H

#include "base/diag.h"
#include "ir/registry.h"

/* Loads the plugin at `path` and registers its ops.  `also` (may be NULL)
 * is a program's own registry, whose op names are taken too.  Returns
 * false if it cannot, the error reported through d at `at` (diag.h), e.g.
 * "plugin 'x.so' was built against API version 2, netrun has 1". */
bool plugin_load(Diag *d, Span at, const char *path, const Registry *also);
/* The trust model (netrun(1), SECURITY): a script's `load "PATH"` loads a
 * plugin only if the command line allowed it.  plugin_allow_script_loads
 * (--allow-load[=DIR]) allows plugins whose real path (links followed)
 * lies inside DIR, or (dir NULL) inside the folder of the script named on
 * the command line.  plugin_load_for_script checks that, then loads; a
 * plugin loaded already (by --plugin) is always fine, as loading it again
 * runs nothing.  The checks open no file. */
void plugin_allow_script_loads(const char *dir);
void plugin_forget_script_loads(void);
bool plugin_load_for_script(Diag *d, Span at, const char *path, const char *script_dir, const Registry *also);
/* Closes every plugin; call reg_free_default() first. */
void plugin_unload_all(void);

#endif
