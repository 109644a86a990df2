/* file.h — how netrun writes files: atomically, or (logs) a whole line at
 * a time.
 *
 * Every file netrun writes (dumps with -o, plots, checkpoints) is written
 * to a temporary file PATH.tmp.PID.XXXXXX in the same folder, flushed and
 * fsync'ed, renamed over PATH, and the folder is fsync'ed: a reader sees
 * the old file or the new one, never a part, and an error (disk full,
 * permission denied, out of memory) leaves the old file as it was.  The new
 * file gets the mode of the file it replaces, else 0666 less the umask.  A
 * symbolic link stays a link: the file it names is replaced (made, when the
 * link dangles).  A target that
 * is not a regular file (/dev/null, a pipe) cannot be replaced and is
 * written in place.
 * The temporary files of writes not finished when the process exits (out
 * of memory exits through exit()) are removed by an atexit handler; those
 * of a writer that was killed are removed by the next writer of PATH,
 * once it is sure they are stale: their process (PID) is gone and nobody
 * holds the flock(2) a writer keeps on its temporary file.
 *
 * A training log (netrun train --log) grows while training runs, so it is
 * appended instead: each line goes out whole in one write(2), a line that
 * cannot be written whole is cut off again, and the file is fsync'ed at
 * each file_log_sync (the trainer syncs every epoch).  A crash loses at most
 * the lines since the last sync and never damages earlier ones.  A fresh
 * log replaces an old one atomically when its first line is written, so a
 * run that fails before (or a full disk) leaves the old log intact.
 *
 * Errors are returned in err as what failed and the OS error, without the
 * path: "cannot create a temporary file in DIR: Permission denied",
 * "cannot write it: No space left on device".
 */
#ifndef NETRUN_FILE_H
#define NETRUN_FILE_H

#include <stdbool.h>
#include <stdio.h>
#include <stddef.h>

typedef struct AtomicFile {
  const char *path;       /* the target: the caller's, or real */
  char *real;             /* the file a symbolic link target names */
  char *tmp;              /* the temporary file's name, while it exists */
  char *dir;              /* the folder holding both */
  int fd;                 /* the temporary file, open for writing */
} AtomicFile;

/* Creates the temporary file beside path. */
bool file_begin(AtomicFile *a, const char *path, char *err, size_t errlen);
/* Once everything is written to a->fd (werr: an errno the caller's writes
 * met, or 0): syncs, closes, renames over the target, syncs the folder. */
bool file_commit(AtomicFile *a, int werr, char *err, size_t errlen);
/* Closes and removes the temporary file; the target is untouched. */
void file_abort(AtomicFile *a);
/* Writes all n bytes to fd (retrying short writes); 0 or the errno. */
int file_write_all(int fd, const void *buf, size_t n);

/* An advisory lock on writing a file again and again (train --save): an
 * flock(2) on PATH.lock beside the file PATH's links name, holding the
 * writer's process id.  The file itself cannot carry the lock, since every
 * atomic write renames a new file over it.  The lock file is removed when
 * the lock is released (and at exit); one left by a killed writer is
 * simply locked again. */
typedef struct FileLock {
  char *path;             /* PATH.lock, or NULL when none is held */
  int fd;
} FileLock;

/* Takes the lock, or says who holds it: "process 1234 is writing it (it
 * holds PATH.lock)".  In a folder where no file can be created, no lock is
 * needed (nor taken): no write there can succeed. */
bool file_lock(FileLock *l, const char *path, char *err, size_t errlen);
void file_unlock(FileLock *l);

typedef struct LogFile {
  AtomicFile a;           /* a fresh log, until its first line */
  int fd;                 /* -1 when closed */
  long long size;         /* bytes written whole */
  const char *path;
} LogFile;

/* Opens a log: appending to path (resuming), or replacing it (fresh). */
bool file_log_open(LogFile *l, const char *path, bool append, char *err, size_t errlen);
/* Appends line (without its newline) and a newline, whole or not at all. */
bool file_log_line(LogFile *l, const char *line, char *err, size_t errlen);
bool file_log_sync(LogFile *l, char *err, size_t errlen);
/* Syncs and closes (a fresh log without lines replaces the old one now). */
bool file_log_close(LogFile *l, char *err, size_t errlen);

/* Reading: a file netrun reads whole (a CSV file, a plugin) must be a
 * regular file.  A FIFO without a writer would block the open, a device
 * could stream forever: both are refused, before anything is read, with
 * "not a regular file" ("Is a directory" for a folder).  Returns an fd open
 * for reading (blocking), or -1 with why in err. */
int file_open_regular(const char *path, char *err, size_t errlen);
/* file_open_regular as a stdio stream ("rb"), or NULL with why in err. */
FILE *file_fopen_regular(const char *path, char *err, size_t errlen);
/* Whether path names a regular file it can open; if not, why in err. */
bool file_check_regular(const char *path, char *err, size_t errlen);

/* Output to `path` written atomically (as above), or to stdout when path is
 * NULL or "-": the verbs' -o.  Errors are reported ("netrun: error: PATH:
 * ..."). */
typedef struct OutFile {
  FILE *f;
  const char *path;
  AtomicFile file;
} OutFile;
bool file_out_open(OutFile *o, const char *path);
bool file_out_close(OutFile *o);

#endif
