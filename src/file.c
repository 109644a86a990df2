/* file.c — atomic writes and append-only logs (file.h). */
#include "file.h"

#include "mem.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- temporary files left when the process exits ------------------------------- */

/* The temporary files that exist now.  A fixed table, so registering one
 * cannot fail or allocate: netrun writes one or two files at a time. */
static const char *pending[16];

static void remove_pending(void) {
  for (size_t i = 0; i < sizeof pending / sizeof *pending; i++)
    if (pending[i]) unlink(pending[i]), pending[i] = NULL;
}

/* A signal that ends the process (Ctrl-C while a dump is written) removes
 * them too; a verb that handles signals itself (train, run) keeps its own
 * handlers and ends through exit(). */
static void on_signal(int sig) {
  remove_pending();
  signal(sig, SIG_DFL);
  raise(sig);
}

static void track(const char *tmp, bool on) {
  static bool registered;
  if (!registered) {
    registered = atexit(remove_pending) == 0;
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++) {
      struct sigaction old;
      if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler == SIG_DFL) signal(sigs[i], on_signal);
    }
  }
  for (size_t i = 0; i < sizeof pending / sizeof *pending; i++)
    if (on ? !pending[i] : pending[i] == tmp) {
      pending[i] = on ? tmp : NULL;
      return;
    }
}

/* ---- atomic files ------------------------------------------------------------------ */

/* The folder holding path: "dir" of "dir/file", "." of "file". */
static char *folder_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return mem_strdup(".");
  size_t n = slash == path ? 1 : (size_t)(slash - path);
  char *d = mem_alloc(NULL, n + 1);
  memcpy(d, path, n);
  d[n] = 0;
  return d;
}

/* The mode the new file gets: the old file's, or what creat() would give. */
static mode_t new_file_mode(const char *path) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) return st.st_mode & 07777;
  mode_t mask = umask(022);
  umask(mask);
  return 0666 & ~mask;
}

bool file_begin(AtomicFile *a, const char *path, char *err, size_t errlen) {
  memset(a, 0, sizeof *a);
  a->path = path;
  struct stat st;
  if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
    /* A device or a pipe (/dev/null, /dev/stdout) cannot be replaced: it
     * is written in place, as a shell's redirection would. */
    a->fd = open(path, O_WRONLY | O_CLOEXEC);
    if (a->fd < 0) snprintf(err, errlen, "cannot write: %s", strerror(errno));
    return a->fd >= 0;
  }
  /* A symbolic link stays one: the file it names is replaced. */
  if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
    char *real = realpath(path, NULL);
    if (real) a->path = a->real = mem_strdup(real);
    free(real);
  }
  path = a->path;
  /* Everything is allocated now: committing allocates nothing, so running
   * out of memory cannot strike between the rename and the folder's sync. */
  size_t n = strlen(path);
  a->dir = folder_of(path);
  a->tmp = mem_alloc(NULL, n + sizeof ".tmp.XXXXXX");
  memcpy(a->tmp, path, n);
  memcpy(a->tmp + n, ".tmp.XXXXXX", sizeof ".tmp.XXXXXX");
  a->fd = mkostemp(a->tmp, O_CLOEXEC);
  if (a->fd < 0) {
    snprintf(err, errlen, "cannot create a temporary file in %s: %s", a->dir, strerror(errno));
    mem_free(a->tmp);
    mem_free(a->dir);
    mem_free(a->real);
    a->tmp = a->dir = a->real = NULL;
    return false;
  }
  track(a->tmp, true);
  (void)fchmod(a->fd, new_file_mode(path));   /* mkostemp makes 0600 */
  return true;
}

static void forget(AtomicFile *a) {
  track(a->tmp, false);
  mem_free(a->tmp);
  mem_free(a->dir);
  mem_free(a->real);
  a->tmp = a->dir = a->real = NULL;
  a->fd = -1;
}

void file_abort(AtomicFile *a) {
  if (a->fd >= 0) close(a->fd);
  if (a->tmp) unlink(a->tmp);
  forget(a);
}

/* The rename is durable once the folder is synced.  Some file systems
 * cannot sync a folder (EINVAL); the rename stands there anyway. */
static bool sync_folder(const char *dir, char *err, size_t errlen) {
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  bool ok = dfd >= 0 && (fsync(dfd) == 0 || errno == EINVAL);
  if (!ok) snprintf(err, errlen, "written, but syncing its folder %s failed: %s", dir, strerror(errno));
  if (dfd >= 0) close(dfd);
  return ok;
}

bool file_commit(AtomicFile *a, int werr, char *err, size_t errlen) {
  if (!a->tmp) {   /* written in place */
    if (close(a->fd) != 0 && !werr) werr = errno;
    a->fd = -1;
    if (werr) snprintf(err, errlen, "cannot write: %s", strerror(werr));
    return !werr;
  }
  const char *stage = "cannot write";
  if (!werr && fsync(a->fd) != 0) werr = errno, stage = "cannot sync";
  if (close(a->fd) != 0 && !werr) werr = errno, stage = "cannot close";
  a->fd = -1;
  if (!werr && rename(a->tmp, a->path) != 0) werr = errno, stage = "cannot rename the temporary file over it";
  if (werr) {
    unlink(a->tmp);
    forget(a);
    snprintf(err, errlen, "%s: %s", stage, strerror(werr));
    return false;
  }
  track(a->tmp, false);   /* renamed: nothing to remove at exit */
  bool ok = sync_folder(a->dir, err, errlen);
  forget(a);
  return ok;
}

int file_write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t k = write(fd, p, n);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return errno;
    if (k == 0) return EIO;
    p += k, n -= (size_t)k;
  }
  return 0;
}

/* ---- logs ----------------------------------------------------------------------------- */

bool file_log_open(LogFile *l, const char *path, bool append, char *err, size_t errlen) {
  memset(l, 0, sizeof *l);
  l->path = path;
  l->fd = -1;
  if (!append) {
    if (!file_begin(&l->a, path, err, errlen)) return false;
    if (!l->a.tmp) l->fd = l->a.fd;   /* a device or a pipe */
    return true;
  }
  l->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
  if (l->fd < 0) {
    snprintf(err, errlen, "cannot open: %s", strerror(errno));
    return false;
  }
  struct stat st;
  l->size = fstat(l->fd, &st) == 0 ? (long long)st.st_size : 0;
  return true;
}

/* A fresh log's first line is in its temporary file: put it in place. */
static bool log_replace(LogFile *l, char *err, size_t errlen) {
  int fd = dup(l->a.fd);
  if (fd < 0 || !file_commit(&l->a, fd < 0 ? errno : 0, err, errlen)) {
    if (fd >= 0) close(fd);
    else file_abort(&l->a);
    return false;
  }
  l->fd = fd;
  return true;
}

bool file_log_line(LogFile *l, const char *line, char *err, size_t errlen) {
  size_t n = strlen(line);
  char stack[1024];
  char *buf = n + 1 <= sizeof stack ? stack : mem_alloc(NULL, n + 1);
  memcpy(buf, line, n);
  buf[n] = '\n';
  int fd = l->a.tmp ? l->a.fd : l->fd;
  int e = fd < 0 ? EBADF : file_write_all(fd, buf, n + 1);
  if (buf != stack) mem_free(buf);
  if (e) {
    /* A part of a line would spoil the log for its readers: cut it off
     * (a pipe or a device cannot be, and needs not). */
    if (fd >= 0 && ftruncate(fd, (off_t)l->size) != 0) {}
    if (l->a.tmp) file_abort(&l->a);
    snprintf(err, errlen, "cannot write: %s", strerror(e));
    return false;
  }
  l->size += (long long)n + 1;
  return !l->a.tmp || log_replace(l, err, errlen);
}

bool file_log_sync(LogFile *l, char *err, size_t errlen) {
  if (l->fd < 0 || fsync(l->fd) == 0 || errno == EINVAL) return true;
  snprintf(err, errlen, "cannot sync: %s", strerror(errno));
  return false;
}

bool file_log_close(LogFile *l, char *err, size_t errlen) {
  bool ok = true;
  if (l->a.tmp) ok = log_replace(l, err, errlen);
  if (l->fd >= 0) {
    ok = file_log_sync(l, err, errlen) && ok;
    close(l->fd);
    l->fd = -1;
  }
  return ok;
}

/* ---- reading --------------------------------------------------------------------- */

/* Opened with O_NONBLOCK, so a FIFO without a writer cannot block the
 * open; fstat then tells what was opened. */
int file_open_regular(const char *path, char *err, size_t errlen) {
  int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(err, errlen, "%s", strerror(errno));
    return -1;
  }
  struct stat st;
  const char *why = fstat(fd, &st) != 0     ? strerror(errno)
                    : S_ISDIR(st.st_mode)  ? strerror(EISDIR)
                    : !S_ISREG(st.st_mode) ? "not a regular file"
                                           : NULL;
  if (why) {
    snprintf(err, errlen, "%s", why);
    close(fd);
    return -1;
  }
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

bool file_check_regular(const char *path, char *err, size_t errlen) {
  int fd = file_open_regular(path, err, errlen);
  if (fd >= 0) close(fd);
  return fd >= 0;
}
