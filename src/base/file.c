/* file.c — atomic writes and append-only logs (file.h). */
#include "base/file.h"

#include "base/diag.h"
#include "base/mem.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
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

/* The file path names after following its symbolic links, as a shell's
 * redirection would, though the last one dangles (its target is then
 * created); NULL (errno set) when the links loop or cannot be read. */
static char *follow_links(const char *path) {
  char *cur = mem_strdup(path);
  for (int hops = 0;; hops++) {
    struct stat st;
    if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode)) return cur;
    char target[PATH_MAX];
    ssize_t n = hops < 40 ? readlink(cur, target, sizeof target - 1) : -1;
    if (n < 0 || (size_t)n >= sizeof target - 1) {
      if (hops >= 40) errno = ELOOP;
      else if (n >= 0) errno = ENAMETOOLONG;
      mem_free(cur);
      return NULL;
    }
    target[n] = 0;
    char *dir = folder_of(cur), *next;
    if (target[0] == '/' || !strchr(cur, '/')) {
      next = mem_strdup(target);
    } else {
      size_t k = strlen(dir), m = (size_t)n;
      next = mem_alloc(NULL, k + m + 2);
      memcpy(next, dir, k);
      next[k] = '/';
      memcpy(next + k + 1, target, m + 1);
    }
    mem_free(dir);
    mem_free(cur);
    cur = next;
  }
}

/* Is the temporary file dir/name, which a writer with process id pid made,
 * left by a writer that is gone?  Its process is not running, and nobody
 * holds its lock (a live writer holds it from creation to rename, also on
 * another machine sharing the folder, where pid means nothing).  Then it
 * is removed, under that lock. */
static void remove_if_stale(const char *dir, const char *name, long pid) {
  if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) return;
  char path[PATH_MAX];
  if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, name) >= sizeof path) return;
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return;
  if (flock(fd, LOCK_EX | LOCK_NB) == 0) unlink(path);
  close(fd);
}

/* The temporary files PATH.tmp.PID.XXXXXX of earlier writers of path that
 * were killed before renaming theirs are removed by the next writer. */
static void remove_stale(const char *dir, const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t n = strlen(base);
  DIR *d = opendir(dir);
  if (!d) return;
  for (struct dirent *e; (e = readdir(d));) {
    const char *s = e->d_name;
    if (strncmp(s, base, n) != 0 || strncmp(s + n, ".tmp.", 5) != 0) continue;
    char *end;
    long pid = strtol(s + n + 5, &end, 10);
    if (end > s + n + 5 && *end == '.' && strlen(end + 1) == 6) remove_if_stale(dir, s, pid);
  }
  closedir(d);
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
  /* A symbolic link stays one: the file it names is replaced, or made
   * when the link dangles. */
  if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) {
    if (!(a->real = follow_links(path))) {
      snprintf(err, errlen, "cannot follow its symbolic link: %s", strerror(errno));
      return false;
    }
    a->path = a->real;
  }
  path = a->path;
  /* Everything is allocated now: committing allocates nothing, so running
   * out of memory cannot strike between the rename and the folder's sync. */
  a->dir = folder_of(path);
  remove_stale(a->dir, path);
  char suffix[48];
  int k = snprintf(suffix, sizeof suffix, ".tmp.%ld.XXXXXX", (long)getpid());
  size_t n = strlen(path);
  a->tmp = mem_alloc(NULL, n + (size_t)k + 1);
  memcpy(a->tmp, path, n);
  memcpy(a->tmp + n, suffix, (size_t)k + 1);
  a->fd = mkostemp(a->tmp, O_CLOEXEC);
  if (a->fd < 0) {
    snprintf(err, errlen, "cannot create a temporary file in %s: %s", a->dir, strerror(errno));
    mem_free(a->tmp);
    mem_free(a->dir);
    mem_free(a->real);
    a->tmp = a->dir = a->real = NULL;
    return false;
  }
  (void)flock(a->fd, LOCK_EX | LOCK_NB);   /* ours until renamed: see remove_if_stale */
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

/* ---- locks ------------------------------------------------------------------------- */

/* Who holds the lock file fd: the process id it holds, as text. */
static void holder(int fd, char *buf, size_t n) {
  ssize_t k = pread(fd, buf, n - 1, 0);
  buf[k > 0 ? k : 0] = 0;
  buf[strcspn(buf, "\n")] = 0;
}

bool file_lock(FileLock *l, const char *path, char *err, size_t errlen) {
  l->path = NULL;
  l->fd = -1;
  char *real = follow_links(path);
  if (!real) {
    snprintf(err, errlen, "cannot follow its symbolic link: %s", strerror(errno));
    return false;
  }
  size_t n = strlen(real);
  char *lock = mem_alloc(NULL, n + sizeof ".lock");
  memcpy(lock, real, n);
  memcpy(lock + n, ".lock", sizeof ".lock");
  mem_free(real);
  for (;;) {
    int fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0 && (errno == EACCES || errno == EROFS || errno == EPERM || errno == ENOENT)) {
      mem_free(lock);   /* nothing can be written there: no lock needed */
      return true;
    }
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
      char pid[32] = "";
      if (fd >= 0 && errno == EWOULDBLOCK) {
        holder(fd, pid, sizeof pid);
        snprintf(err, errlen, "process %s is writing it (it holds %s)", *pid ? pid : "?", lock);
      } else {
        snprintf(err, errlen, "cannot lock %s: %s", lock, strerror(errno));
      }
      if (fd >= 0) close(fd);
      mem_free(lock);
      return false;
    }
    /* The file locked must still be the one at that path: its last holder
     * may have removed it between our open and our lock. */
    struct stat a, b;
    if (fstat(fd, &a) == 0 && stat(lock, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
      char pid[32];
      int k = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
      if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)k, 0) != k) {}   /* only says who holds it */
      l->path = lock;
      l->fd = fd;
      track(lock, true);
      return true;
    }
    close(fd);
  }
}

void file_unlock(FileLock *l) {
  if (!l->path) return;
  track(l->path, false);
  unlink(l->path);   /* still held: nobody can have locked it since */
  close(l->fd);
  mem_free(l->path);
  l->path = NULL;
  l->fd = -1;
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

FILE *file_fopen_regular(const char *path, char *err, size_t errlen) {
  int fd = file_open_regular(path, err, errlen);
  FILE *f = fd >= 0 ? fdopen(fd, "rb") : NULL;
  if (fd >= 0 && !f) {
    snprintf(err, errlen, "%s", strerror(errno));
    close(fd);
  }
  return f;
}

bool file_check_regular(const char *path, char *err, size_t errlen) {
  int fd = file_open_regular(path, err, errlen);
  if (fd >= 0) close(fd);
  return fd >= 0;
}

/* ---- output to a file or stdout ------------------------------------------------ */

bool file_out_open(OutFile *o, const char *path) {
  o->path = path;
  if (!path || strcmp(path, "-") == 0) {
    o->f = stdout;
    o->path = NULL;
    return true;
  }
  char err[4200];
  if (!file_begin(&o->file, path, err, sizeof err)) {
    diag_error(NULL, SPAN_NONE, "%s: %s", path, err);
    return false;
  }
  if (!(o->f = fdopen(o->file.fd, "w"))) {
    diag_error(NULL, SPAN_NONE, "%s: %s", path, strerror(errno));
    file_abort(&o->file);
    return false;
  }
  return true;
}

bool file_out_close(OutFile *o) {
  if (!o->path) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return true;
    diag_error(NULL, SPAN_NONE, "standard output: %s", errno ? strerror(errno) : "write error");
    clearerr(stdout);
    return false;
  }
  /* The stream flushes to the descriptor the atomic file syncs and
   * closes; fclose would close it first. */
  errno = 0;
  int werr = fflush(o->f) != 0 || ferror(o->f) ? (errno ? errno : EIO) : 0;
  o->file.fd = dup(o->file.fd);
  if (o->file.fd < 0 && !werr) werr = errno;
  fclose(o->f);
  char err[4200];
  if (o->file.fd < 0) {
    file_abort(&o->file);
    diag_error(NULL, SPAN_NONE, "%s: %s", o->path, strerror(werr));
    return false;
  }
  if (file_commit(&o->file, werr, err, sizeof err)) return true;
  diag_error(NULL, SPAN_NONE, "%s: %s", o->path, err);
  return false;
}
