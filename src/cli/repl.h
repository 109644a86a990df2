/* repl.h — the interactive session: netrun repl [OPTIONS] [FILE]. */
#ifndef NETRUN_REPL_H
#define NETRUN_REPL_H

/* The verb (argv[0] is "repl").  On a terminal: line editing, history in
 * ~/.netrun_history, completion, prompts; otherwise statements and
 * commands are read from standard input without prompts.  Exit status:
 * 0; when standard input is not a terminal, 1 if any input failed and 130
 * after Ctrl-C; 2 for a usage error. */
int repl_main(int argc, char **argv);

#endif
