/* fuzz_lsp.c — the language server (src/cli/lsp.c) under mutated
 * documents and message sequences.  An input that starts with
 * "Content-Length" is a raw stream of framed messages (lsp_serve reads
 * it: headers, JSON, every method).  Any other input is a document and a
 * script of requests: the bytes up to the first NUL are the text opened
 * as a document; each later byte picks a request (hover, definition,
 * references, completion, symbols, formatting, inlay hints, shutdown, a
 * change to a prefix or a shuffled piece of the text, a close and
 * reopen), the two after it a position.  Answers go nowhere; the harness
 * checks that nothing crashes, leaks or hangs.
 *
 * The documents go to one server for the whole run, as a client's do:
 * what it makes once (completion's items, from the stdlib it parses)
 * stays, as it does in `netrun lsp`; made again for every input, it took
 * about 40% of the harness's time.  Each input opens the document and
 * closes it at its end, so no document outlives the input that opened
 * it.  A raw stream gets a server of its own: it may send `exit`. */
#include "fuzz.h"

#include "cli/lsp.h"

#include <jansson.h>

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  return 0;
}

static void send_json(LspServer *s, json_t *msg) {
  char *body = json_dumps(msg, JSON_COMPACT);
  json_decref(msg);
  if (body) lsp_handle(s, body, strlen(body));
  free(body);
}

static void open_doc(LspServer *s, const char *text, size_t len) {
  send_json(s, json_pack("{s:s,s:s,s:{s:{s:s,s:s,s:i,s:s%}}}", "jsonrpc", "2.0", "method", "textDocument/didOpen",
                         "params", "textDocument", "uri", "file:///fuzz/doc.net", "languageId", "netrun", "version", 1,
                         "text", text, len));
}

/* A request at a position (an inlay hint's: the range from the start to
 * there). */
static void request(LspServer *s, int id, const char *method, int line, int ch) {
  send_json(s, json_pack("{s:s,s:i,s:s,s:{s:{s:s},s:{s:i,s:i},s:{s:b},s:{s:{s:i,s:i},s:{s:i,s:i}}}}", "jsonrpc", "2.0",
                         "id", id, "method", method, "params", "textDocument", "uri", "file:///fuzz/doc.net", "position",
                         "line", line, "character", ch, "context", "includeDeclaration", 1, "range", "start", "line", 0,
                         "character", 0, "end", "line", line, "character", ch));
}

static void change(LspServer *s, const char *text, size_t len) {
  send_json(s, json_pack("{s:s,s:s,s:{s:{s:s,s:i},s:[{s:s%}]}}", "jsonrpc", "2.0", "method", "textDocument/didChange",
                         "params", "textDocument", "uri", "file:///fuzz/doc.net", "version", 2, "contentChanges",
                         "text", text, len));
}

static void close_doc(LspServer *s) {
  send_json(s, json_pack("{s:s,s:s,s:{s:{s:s}}}", "jsonrpc", "2.0", "method", "textDocument/didClose", "params",
                         "textDocument", "uri", "file:///fuzz/doc.net"));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > FUZZ_MAX_INPUT) return 0;
  if (size >= 14 && memcmp(data, "Content-Length", 14) == 0) {
    LspServer *s = lsp_new(fuzz_null());
    FILE *in = fmemopen((void *)data, size, "rb");
    if (in) {
      lsp_serve(s, in);
      fclose(in);
    }
    lsp_free(s);
    return 0;
  }
  static LspServer *s;
  if (!s) s = lsp_new(fuzz_null());
  const char *text = (const char *)data;
  const uint8_t *nul = memchr(data, 0, size);
  size_t len = nul ? (size_t)(nul - data) : size;
  /* jansson wants UTF-8: a document that is not is refused by the JSON
   * layer, as a client could never send it */
  send_json(s, json_pack("{s:s,s:i,s:s,s:{}}", "jsonrpc", "2.0", "id", 0, "method", "initialize", "params"));
  open_doc(s, text, len);
  static const char *const methods[] = {"textDocument/hover",          "textDocument/definition",
                                        "textDocument/references",     "textDocument/completion",
                                        "textDocument/documentSymbol", "textDocument/formatting",
                                        "textDocument/inlayHint",      "shutdown"};
  for (size_t i = len + 1, id = 1; i + 2 < size && id < 64; i += 3, id++) {
    int op = data[i] % 11, line = data[i + 1] % 64, ch = data[i + 2];
    if (op < 6 || op >= 9) request(s, (int)id, methods[op < 6 ? op : op - 3], line, ch);
    else if (op == 6) change(s, text, (size_t)line * len / 64);
    else if (op == 7) change(s, text + (size_t)ch % (len + 1), len - (size_t)ch % (len + 1));
    else {
      close_doc(s);
      open_doc(s, text, len);
    }
  }
  close_doc(s);
  return 0;
}
