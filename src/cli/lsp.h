/* lsp.h — netrun lsp: a Language Server Protocol 3.17 server for .net
 * scripts over JSON-RPC (netrun(1), lsp).  It parses and lowers each open
 * document as it changes, with shape inference only: it runs no kernel,
 * reads no data and loads no plugin unless netrun was started with
 * --allow-load. */
#ifndef NETRUN_LSP_H
#define NETRUN_LSP_H

#include <stdbool.h>
#include <stdio.h>

/* The largest message body the server reads, in bytes. */
#define LSP_MAX_MESSAGE (64 << 20)

typedef struct LspServer LspServer;

LspServer *lsp_new(FILE *out);
void lsp_free(LspServer *s);
/* Handles one message body (a JSON-RPC request, notification or
 * response); answers go to the server's out.  False once the client has
 * sent `exit`. */
bool lsp_handle(LspServer *s, const char *body, size_t len);
/* Reads framed messages (Content-Length headers) from in until `exit` or
 * the end of input.  Returns the exit status: 0 after shutdown and exit,
 * 1 when the client left without shutting down. */
int lsp_serve(LspServer *s, FILE *in);

#endif
