/* dist.c — the ranks of an mpirun job and their collectives (dist.h).
 *
 * Open MPI's handles (MPI_Comm, MPI_Datatype) are pointers to its global
 * objects (ompi_mpi_comm_world, ompi_mpi_byte): they are looked up by name
 * like its functions, so netrun needs neither mpi.h to build nor libmpi to
 * run.  Data moves as bytes; the sums are computed here, in rank order. */
#include "exec/dist.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Debian's Open MPI 4 (and 5): the library's soname. */
#define DIST_LIBMPI "libmpi.so.40"
#define MPI_THREAD_SERIALIZED 2 /* one thread calls MPI at a time: no heartbeat thread */
#define MPI_THREAD_MULTIPLE 3   /* the heartbeat thread calls MPI beside the main one */
/* The least seconds between two tests of the sums in flight: with more
 * processes than cores (mpirun --oversubscribe) each test that finds
 * nothing to do yields the core (sched_yield), which a busy machine may
 * not give back for milliseconds; ops shorter than this are not worth a
 * test each. */
#define DIST_POLL 1e-3
/* Finished sums whose buffers are kept (a training step's buckets reuse
 * the last step's: no fresh pages to fault in every step). */
#define DIST_SPARE 64
/* The most bytes one MPI call moves per rank (its counts are ints). */
#define DIST_CHUNK ((size_t)1 << 28)
/* The seconds a collective may wait before netrun ends the job
 * (NETRUN_COLLECTIVE_TIMEOUT): a host whose link is down stalls TCP
 * without a reset, and neither MPI nor the kernel would end the wait. */
#define DIST_TIMEOUT 60.0
/* Every rank sends every other a heartbeat each DIST_BEAT seconds (a
 * quarter of the timeout when that is shorter), from a thread of its own
 * that runs while the main one works or waits: a rank not heard from for
 * the timeout is gone, whatever its main thread was doing.  The heartbeat
 * says whether the main thread works or waits in a collective: a wait
 * that every rank shares past the timeout is stopped too. */
#define DIST_BEAT 1.0
#define BEAT_WORKING 1
#define BEAT_WAITING 2
/* Seconds MPI_Abort gets to end the job before the rank ends itself (it
 * can wait for a daemon it cannot reach). */
#define DIST_ABORT_GRACE 10

typedef int (*MpiIGatherFn)(const void *, int, void *, void *, int, void *, void *, void **);

/* A sum in flight (dist_sum_start): the caller's vector, cut in slices as
 * dist_sum_f32 cuts it; each slice's all-to-all, then its all-gather. */
typedef struct Pending {
  int64_t id;
  float *x;                 /* the caller's, summed into by dist_sum_finish */
  size_t n, nslices;
  float *send, *recv;       /* slice s at s * the padded slice's floats */
  size_t cap;               /* the floats each holds */
  void **req;               /* a request per slice: the all-to-all's, then the all-gather's */
  bool gathering, done;
  double started;           /* when its start returned */
} Pending;

static struct {
  void *lib;
  int (*init_thread)(int *, char ***, int, int *);
  int (*comm_rank)(void *, int *);
  int (*comm_size)(void *, int *);
  MpiIGatherFn ialltoall, iallgather;
  int (*testall)(int, void **, int *, void *);
  int (*comm_dup)(void *, void **);
  int (*comm_free)(void **);
  int (*abort)(void *, int);
  int (*finalize)(void);
  int (*ibcast)(void *, int, void *, int, void *, void **);
  int (*igatherv)(const void *, int, void *, void *, const int *, const int *, void *, int, void *, void **);
  int (*isend)(const void *, int, void *, int, int, void *, void **);
  int (*irecv)(void *, int, void *, int, int, void *, void **);
  int (*test)(void **, int *, void *);
  int (*cancel)(void **);
  int (*request_free)(void **);
  void *world, *byte;   /* MPI_COMM_WORLD, MPI_BYTE */
  void *beats;          /* another copy: the heartbeats of long waits */
  void **beat_req;      /* per rank: the heartbeat it may send (received) */
  char *beat_in;        /* per rank: where it lands */
  _Atomic double *heard;    /* per rank: when its last heartbeat was seen */
  _Atomic double *worked;   /* per rank: when its last heartbeat saying BEAT_WORKING was seen */
  atomic_int state;     /* this rank's main thread: BEAT_WORKING or BEAT_WAITING */
  atomic_bool beat_quit;
  _Atomic double mute_at;   /* NETRUN_TEST_CUT: when the heartbeats stop (0: never) */
  pthread_t beat_thread;
  bool beating;         /* the heartbeat thread runs (MPI_THREAD_MULTIPLE provided) */
  double period;        /* seconds between two heartbeats */
  double timeout;       /* seconds (0: none) */
  void *gathers;        /* a copy of MPI_COMM_WORLD: the all-gathers of sums in flight */
  int rank, size;
  bool running;
  double seconds;
  int64_t calls;
  float *send, *recv;   /* dist_sum_f32's scratch */
  size_t cap;
  Pending **queue;      /* the sums in flight, in the order they started */
  int nqueue, capqueue;
  int64_t next_id;
  Pending *spare[DIST_SPARE];   /* finished sums, their buffers kept for the next step's */
  int nspare;
  double overlapped;    /* seconds sums were in flight while the caller worked */
  double waited;        /* seconds in dist_sum_finish */
  double polled;        /* when dist_progress last called MPI */
} mpi = {.size = 1};

bool dist_launched(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK"); }

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- waiting with a deadline --------------------------------------------------------- */

/* The heartbeat of rank k (its receive posted again after it arrived). */
static void beat_listen(int k) {
  mpi.irecv(&mpi.beat_in[k], 1, mpi.byte, k, 0, mpi.beats, &mpi.beat_req[k]);
}

/* Every heartbeat that arrived: its rank heard at t. */
static void beat_drain(double t) {
  for (int k = 0; k < mpi.size; k++)
    for (int flag = 1; k != mpi.rank && flag;) {
      mpi.test(&mpi.beat_req[k], &flag, NULL);
      if (!flag) break;
      atomic_store(&mpi.heard[k], t);
      if (mpi.beat_in[k] == BEAT_WORKING) atomic_store(&mpi.worked[k], t);
      beat_listen(k);
    }
}

/* A heartbeat to every other rank, saying what this rank's main thread
 * does (sent as it can: never waited for). */
static void beat_send(void) {
  static const char working = BEAT_WORKING, waiting = BEAT_WAITING;
  const char *what = atomic_load(&mpi.state) == BEAT_WAITING ? &waiting : &working;
  for (int k = 0; k < mpi.size; k++) {
    if (k == mpi.rank) continue;
    void *req;
    mpi.isend(what, 1, mpi.byte, k, 0, mpi.beats, &req);
    mpi.request_free(&req);
  }
}

/* The heartbeat thread: sends, and notes what it hears, until dist_stop
 * (after dist_test_cut's moment, one heartbeat more and then none). */
static void *beat_main(void *unused) {
  (void)unused;
  double sent = 0;
  bool muted = false;
  struct timespec nap = {0, (long)(mpi.period / 4 * 1e9)};
  while (!atomic_load(&mpi.beat_quit)) {
    double t = now(), mute = atomic_load(&mpi.mute_at);
    beat_drain(t);
    if (!muted && mute > 0 && t >= mute) beat_send(), muted = true;
    if (!muted && t - sent >= mpi.period) beat_send(), sent = t;
    nanosleep(&nap, NULL);
  }
  return NULL;
}

/* The heartbeat thread started, every signal blocked in it (the main
 * thread handles them); false when it could not be. */
static bool beat_start(void) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  atomic_store(&mpi.beat_quit, false);
  mpi.beating = pthread_create(&mpi.beat_thread, NULL, beat_main, NULL) == 0;
  if (mpi.beating) pthread_setname_np(mpi.beat_thread, "netrun-beat");   /* top -H, /proc/PID/task */
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return mpi.beating;
}

/* The ranks not heard from since `since`, as "rank J" or "ranks J, K". */
static void silent_ranks(double since, char *out, size_t size) {
  int n = 0;
  size_t len = 0;
  out[0] = 0;
  for (int k = 0; k < mpi.size; k++)
    if (k != mpi.rank && atomic_load(&mpi.heard[k]) < since) n++;
  for (int k = 0, i = 0; k < mpi.size && len < size; k++)
    if (k != mpi.rank && atomic_load(&mpi.heard[k]) < since) {
      int w = snprintf(out + len, size - len, "%s%d", i ? ", " : n > 1 ? "ranks " : "rank ", k);
      len += w > 0 ? (size_t)w : 0;
      i++;
    }
}

/* Whether some other rank's main thread worked since `since`. */
static bool someone_worked(double since) {
  for (int k = 0; k < mpi.size; k++)
    if (k != mpi.rank && atomic_load(&mpi.worked[k]) >= since) return true;
  return false;
}

/* Whether every other rank was heard from since `since`. */
static bool all_heard(double since) {
  for (int k = 0; k < mpi.size; k++)
    if (k != mpi.rank && atomic_load(&mpi.heard[k]) < since) return false;
  return true;
}

/* The job ended from a wait of `waited` seconds: the ranks not heard
 * from since `quiet` named (none: every rank answers, and none works). */
static void timed_out(double quiet, double waited) {
  char who[256];
  silent_ranks(quiet, who, sizeof who);
  if (who[0]) {
    diag_error(NULL, SPAN_NONE, "rank %d: no answer from %s for %.0f s (its host unreachable?); stopping",
               mpi.rank, who, mpi.beating ? mpi.timeout : waited);
    if (!mpi.beating)
      diag_note(NULL, SPAN_NONE, "without MPI_THREAD_MULTIPLE a rank answers only while it waits: one at work "
                "that long is named too");
  } else
    diag_error(NULL, SPAN_NONE, "rank %d: a collective operation waited %.0f s, though every rank "
               "answers; stopping", mpi.rank, waited);
  diag_note(NULL, SPAN_NONE, "NETRUN_COLLECTIVE_TIMEOUT=%.0f is the limit; raise it (0: none) when a rank may "
            "not answer that long", mpi.timeout);
  dist_abort(EXIT_SCRIPT);
}

/* Waits for the n requests.  A rank not heard from for the timeout ends
 * the job (named), and so does a wait past the timeout in which every
 * rank answers but none works (a collective that cannot complete).  A
 * rank that works, however long, is waited for.  A rank that was itself
 * stopped during the wait begins it again.  Without the heartbeat
 * thread, the wait itself exchanges heartbeats past DIST_BEAT seconds,
 * and a rank at work answers none. */
static void wait_all(int n, void **req) {
  int flag = 0;
  mpi.testall(n, req, &flag, NULL);
  if (flag) return;
  atomic_store(&mpi.state, BEAT_WAITING);
  double t0 = now(), since = 0, beat = 0, last = t0;
  while (!flag) {
    double t = now();
    /* A look at the clock more than a beat after the last one: this rank
     * did not run in between (stopped with the job, Ctrl-Z and fg, or its
     * host suspended), and the others' silence over that time is no sign
     * of theirs.  The wait starts again, as if it began now. */
    if (t - last > fmax(mpi.period, 0.05)) t0 = t, since = 0;
    last = t;
    if (t - t0 > DIST_BEAT) {
      if (!mpi.beating) {
        if (!since) {
          beat_drain(0);   /* heartbeats of earlier waits are not answers to this one */
          since = t;
        }
        beat_drain(t);
        if (t - beat >= mpi.period) beat_send(), beat = t;
      }
      if (mpi.timeout > 0 && t - t0 > mpi.timeout) {
        double quiet = t - mpi.timeout;
        /* Without the thread, only this wait's heartbeats answer.  With
         * it, a rank silent for the timeout is gone; and a wait in which
         * no rank worked is stopped as one that cannot complete only
         * while every rank still answers (heard within three beats): a
         * rank that went silent during the wait is waited for until its
         * silence reaches the timeout, and then named. */
        if (!mpi.beating || !all_heard(quiet) || (!someone_worked(quiet) && all_heard(t - 3 * mpi.period)))
          timed_out(mpi.beating ? quiet : since, t - t0);
      }
      struct timespec nap = {0, 1000000};
      nanosleep(&nap, NULL);
    } else if (t - t0 > 1e-2) {
      sched_yield();
    }
    mpi.testall(n, req, &flag, NULL);
  }
  atomic_store(&mpi.state, BEAT_WORKING);
}

void dist_test_cut(double s) {
  if (!mpi.running || mpi.size < 2) return;
  atomic_store(&mpi.state, BEAT_WAITING);
  atomic_store(&mpi.mute_at, now() + s);
  struct timespec day = {86400, 0};
  for (;;) nanosleep(&day, NULL);
}

/* NETRUN_COLLECTIVE_TIMEOUT: seconds >= 0 (0: no limit); false after an
 * error reported to d. */
static bool read_timeout(Diag *d) {
  const char *v = getenv("NETRUN_COLLECTIVE_TIMEOUT");
  mpi.timeout = DIST_TIMEOUT;
  if (!v) return true;
  char *end;
  errno = 0;
  double t = strtod(v, &end);
  if (end == v || *end || errno || !isfinite(t) || t < 0 || t > 1e6) {
    diag_error(d, SPAN_NONE, "NETRUN_COLLECTIVE_TIMEOUT=%s: expected a number of seconds from 0 (no limit) to 1000000", v);
    return false;
  }
  mpi.timeout = t;
  return true;
}

/* Each symbol the table needs; false after naming the first missing one. */
static bool resolve(Diag *d) {
  static const struct {
    const char *name;
    size_t offset;
  } syms[] = {
#define SYM(field, name) {name, offsetof(__typeof__(mpi), field)}
      SYM(init_thread, "MPI_Init_thread"), SYM(comm_rank, "MPI_Comm_rank"), SYM(comm_size, "MPI_Comm_size"),
      SYM(abort, "MPI_Abort"),             SYM(finalize, "MPI_Finalize"),   SYM(world, "ompi_mpi_comm_world"),
      SYM(byte, "ompi_mpi_byte"),          SYM(ialltoall, "MPI_Ialltoall"), SYM(iallgather, "MPI_Iallgather"),
      SYM(testall, "MPI_Testall"),         SYM(comm_dup, "MPI_Comm_dup"),   SYM(comm_free, "MPI_Comm_free"),
      SYM(ibcast, "MPI_Ibcast"),
      SYM(igatherv, "MPI_Igatherv"),       SYM(isend, "MPI_Isend"),         SYM(irecv, "MPI_Irecv"),
      SYM(test, "MPI_Test"),               SYM(cancel, "MPI_Cancel"),       SYM(request_free, "MPI_Request_free"),
#undef SYM
  };
  for (size_t i = 0; i < sizeof syms / sizeof *syms; i++) {
    void *f = dlsym(mpi.lib, syms[i].name);
    if (!f) {
      diag_error(d, SPAN_NONE, "%s has no %s: netrun needs Open MPI's libmpi", DIST_LIBMPI, syms[i].name);
      return false;
    }
    memcpy((char *)&mpi + syms[i].offset, &f, sizeof f);
  }
  return true;
}

bool dist_start(Diag *d) {
  if (mpi.running) return true;
  if (!read_timeout(d)) return false;
  /* RTLD_GLOBAL: the components Open MPI loads itself link against it. */
  mpi.lib = dlopen(DIST_LIBMPI, RTLD_NOW | RTLD_GLOBAL);
  if (!mpi.lib) {
    diag_error(d, SPAN_NONE, "mpirun started this netrun, but Open MPI's %s cannot be loaded (%s): install "
               "openmpi-bin (make deps)", DIST_LIBMPI, dlerror());
    return false;
  }
  int provided = 0;
  bool found = resolve(d);
  /* NETRUN_TEST_NO_THREAD_MULTIPLE=1, for netrun's own tests: the level
   * of an Open MPI built without MPI_THREAD_MULTIPLE */
  const char *single = getenv("NETRUN_TEST_NO_THREAD_MULTIPLE");
  int level = single && !strcmp(single, "1") ? MPI_THREAD_SERIALIZED : MPI_THREAD_MULTIPLE;
  if (!found || mpi.init_thread(NULL, NULL, level, &provided) != 0) {
    if (found) diag_error(d, SPAN_NONE, "MPI_Init_thread failed");
    dlclose(mpi.lib);
    mpi.lib = NULL;
    return false;
  }
  mpi.comm_rank(mpi.world, &mpi.rank);
  mpi.comm_size(mpi.world, &mpi.size);
  mpi.comm_dup(mpi.world, &mpi.gathers);
  mpi.comm_dup(mpi.world, &mpi.beats);
  mpi.beat_req = mem_calloc((size_t)mpi.size, sizeof *mpi.beat_req);
  mpi.beat_in = mem_calloc((size_t)mpi.size, 1);
  mpi.heard = mem_calloc((size_t)mpi.size, sizeof *mpi.heard);
  mpi.worked = mem_calloc((size_t)mpi.size, sizeof *mpi.worked);
  double t = now();
  for (int k = 0; k < mpi.size; k++) {
    atomic_store(&mpi.heard[k], t);
    atomic_store(&mpi.worked[k], t);
    if (k != mpi.rank) beat_listen(k);
  }
  atomic_store(&mpi.state, BEAT_WORKING);
  atomic_store(&mpi.mute_at, 0.0);
  mpi.period = mpi.timeout > 0 && mpi.timeout / 4 < DIST_BEAT ? mpi.timeout / 4 : DIST_BEAT;
  /* Open MPI built without MPI_THREAD_MULTIPLE: heartbeats only while
   * waiting (a rank at work answers none). */
  if (mpi.size > 1 && mpi.timeout > 0 && provided >= MPI_THREAD_MULTIPLE) beat_start();
  mpi.running = true;
  return true;
}

void dist_stop(void) {
  if (!mpi.running) return;
  while (mpi.nqueue) dist_sum_finish(mpi.queue[0]->id);
  if (mpi.beating) {
    atomic_store(&mpi.beat_quit, true);
    pthread_join(mpi.beat_thread, NULL);
    mpi.beating = false;
  }
  while (mpi.nspare) {
    Pending *p = mpi.spare[--mpi.nspare];
    mem_free(p->send);
    mem_free(p->recv);
    mem_free(p);
  }
  mem_free(mpi.queue);
  mpi.queue = NULL;
  mpi.capqueue = 0;
  for (int k = 0; k < mpi.size; k++)
    if (k != mpi.rank) {
      mpi.cancel(&mpi.beat_req[k]);
      mpi.request_free(&mpi.beat_req[k]);
    }
  mem_free(mpi.beat_req);
  mem_free(mpi.beat_in);
  mem_free((void *)mpi.heard);
  mem_free((void *)mpi.worked);
  mpi.beat_req = NULL, mpi.beat_in = NULL, mpi.heard = NULL, mpi.worked = NULL;
  mpi.comm_free(&mpi.beats);
  mpi.comm_free(&mpi.gathers);
  mpi.finalize();
  mpi.running = false;
  mpi.rank = 0, mpi.size = 1;
  mem_free(mpi.send);
  mem_free(mpi.recv);
  mpi.send = mpi.recv = NULL;
  mpi.cap = 0;
  /* libmpi stays loaded: its atexit handlers may still run. */
}

void dist_abort(int status) {
  if (!mpi.running) return;
  fflush(stdout);
  fflush(stderr);
  /* MPI_Abort may wait for a daemon it cannot reach: the rank ends
   * anyway, by SIGALRM's default action. */
  signal(SIGALRM, SIG_DFL);
  alarm(DIST_ABORT_GRACE);
  mpi.abort(mpi.world, status);
  _exit(status);
}

int dist_rank(void) { return mpi.rank; }
int dist_size(void) { return mpi.size; }
double dist_reduce_seconds(void) { return mpi.seconds; }
int64_t dist_reduce_calls(void) { return mpi.calls; }
double dist_overlap_seconds(void) { return mpi.overlapped; }
double dist_wait_seconds(void) { return mpi.waited; }

/* The floats of one slice of a sum: at most DIST_CHUNK bytes per rank
 * after the cut in N parts (the last padded with zeros). */
static size_t slice_floats(void) { return DIST_CHUNK / sizeof(float) * (size_t)mpi.size / 2; }   /* 2: the padding */

/* part[0..per) := the sum over the ranks k = 0, 1, ... of recv[k * per ...],
 * in that order (the order every sum here takes). */
static void sum_ranks(float *part, const float *recv, size_t per) {
  for (size_t i = 0; i < per; i++) part[i] = recv[i];
  for (size_t k = 1; k < (size_t)mpi.size; k++)
    for (size_t i = 0; i < per; i++) part[i] += recv[k * per + i];
}

/* One slice of dist_sum_f32: n floats, cut in N parts of `per` floats. */
static void sum_slice(float *x, size_t n) {
  size_t N = (size_t)mpi.size, per = (n + N - 1) / N;
  if (per * N > mpi.cap) {
    mpi.cap = per * N;
    mpi.send = mem_alloc(mpi.send, sizeof *mpi.send * mpi.cap);
    mpi.recv = mem_alloc(mpi.recv, sizeof *mpi.recv * mpi.cap);
  }
  memcpy(mpi.send, x, sizeof *x * n);
  memset(mpi.send + n, 0, sizeof *x * (per * N - n));
  int bytes = (int)(per * sizeof *x);
  void *req;
  mpi.ialltoall(mpi.send, bytes, mpi.byte, mpi.recv, bytes, mpi.byte, mpi.world, &req);
  wait_all(1, &req);
  /* recv[k * per + i]: rank k's element i of this rank's part. */
  sum_ranks(mpi.send, mpi.recv, per);
  mpi.iallgather(mpi.send, bytes, mpi.byte, mpi.recv, bytes, mpi.byte, mpi.world, &req);
  wait_all(1, &req);
  memcpy(x, mpi.recv, sizeof *x * n);
}

void dist_sum_f32(float *x, int64_t n) {
  if (!mpi.running || mpi.size < 2 || n <= 0) return;
  double t0 = now();
  size_t step = slice_floats();
  for (size_t at = 0; at < (size_t)n; at += step) sum_slice(x + at, (size_t)n - at < step ? (size_t)n - at : step);
  mpi.seconds += now() - t0;
  mpi.calls++;
}

/* ---- sums in flight ------------------------------------------------------------------ */

/* Slice s of pending p: its floats *len from x + *at, its part *per. */
static void slice_of(const Pending *p, size_t s, size_t *at, size_t *len, size_t *per) {
  size_t step = slice_floats();
  *at = s * step;
  *len = p->n - *at < step ? p->n - *at : step;
  *per = (*len + (size_t)mpi.size - 1) / (size_t)mpi.size;
}

/* p's all-to-alls done: each slice's part summed in rank order, and its
 * all-gather started (on the second communicator, in the order the sums
 * started: every rank starts its all-gathers in the same order). */
static void gather(Pending *p) {
  size_t stride = (slice_floats() + (size_t)mpi.size - 1) / (size_t)mpi.size * (size_t)mpi.size;
  for (size_t s = 0; s < p->nslices; s++) {
    size_t at, len, per;
    slice_of(p, s, &at, &len, &per);
    float *send = p->send + s * stride, *recv = p->recv + s * stride;
    sum_ranks(send, recv, per);
    int bytes = (int)(per * sizeof *send);
    mpi.iallgather(send, bytes, mpi.byte, recv, bytes, mpi.byte, mpi.gathers, &p->req[s]);
  }
  p->gathering = true;
}

/* A sum of n floats, its buffers a spare's when one is large enough. */
static Pending *new_pending(size_t n) {
  size_t nslices = (n + slice_floats() - 1) / slice_floats();
  size_t stride = (slice_floats() + (size_t)mpi.size - 1) / (size_t)mpi.size * (size_t)mpi.size;
  size_t floats = nslices ? (nslices - 1) * stride + (n - (nslices - 1) * slice_floats()) : 0;
  floats += (size_t)mpi.size;   /* the last slice's padding */
  Pending *p = NULL;
  for (int i = 0; i < mpi.nspare && !p; i++)
    if (mpi.spare[i]->cap >= floats) p = mpi.spare[i], mpi.spare[i] = mpi.spare[--mpi.nspare];
  if (!p) {
    p = mem_calloc(1, sizeof *p);
    p->send = mem_alloc(NULL, sizeof *p->send * floats);
    p->recv = mem_alloc(NULL, sizeof *p->recv * floats);
    p->cap = floats;
  }
  p->n = n, p->nslices = nslices;
  p->gathering = p->done = false;
  p->req = mem_calloc(nslices + 1, sizeof *p->req);
  return p;
}

/* A finished sum: kept as a spare, or freed. */
static void free_pending(Pending *p) {
  mem_free(p->req);
  p->req = NULL;
  if (mpi.nspare < DIST_SPARE && mpi.running) {
    mpi.spare[mpi.nspare++] = p;
    return;
  }
  mem_free(p->send);
  mem_free(p->recv);
  mem_free(p);
}

int64_t dist_sum_start(float *x, int64_t n) {
  double t0 = now();
  Pending *p = new_pending(n > 0 && mpi.running && mpi.size > 1 ? (size_t)n : 0);
  p->id = mpi.next_id++;
  p->x = x;
  size_t stride = (slice_floats() + (size_t)mpi.size - 1) / (size_t)mpi.size * (size_t)mpi.size;
  for (size_t s = 0; s < p->nslices; s++) {
    size_t at, len, per;
    slice_of(p, s, &at, &len, &per);
    float *send = p->send + s * stride;
    memcpy(send, x + at, sizeof *x * len);
    memset(send + len, 0, sizeof *x * (per * (size_t)mpi.size - len));
    int bytes = (int)(per * sizeof *x);
    mpi.ialltoall(send, bytes, mpi.byte, p->recv + s * stride, bytes, mpi.byte, mpi.world, &p->req[s]);
  }
  p->done = p->nslices == 0;
  if (mpi.nqueue == mpi.capqueue) {
    mpi.capqueue = mpi.capqueue ? 2 * mpi.capqueue : 8;
    mpi.queue = mem_alloc(mpi.queue, sizeof *mpi.queue * (size_t)mpi.capqueue);
  }
  mpi.queue[mpi.nqueue++] = p;
  p->started = now();
  mpi.seconds += p->started - t0;
  return p->id;
}

void dist_progress(void) {
  if (!mpi.nqueue) return;
  double t0 = now();
  if (t0 - mpi.polled < DIST_POLL) return;
  mpi.polled = t0;
  for (int i = 0; i < mpi.nqueue; i++) {
    Pending *p = mpi.queue[i];
    int flag = 1;
    if (!p->gathering && p->nslices) {
      mpi.testall((int)p->nslices, p->req, &flag, NULL);
      if (!flag) break;   /* the later ones gather after it */
      gather(p);
    }
    if (!p->done) mpi.testall((int)p->nslices, p->req, &flag, NULL);
    if (flag) p->done = true;
  }
  mpi.seconds += now() - t0;
}

float *dist_sum_finish(int64_t id) {
  double t0 = now();
  int i = 0;
  while (i < mpi.nqueue && mpi.queue[i]->id != id) i++;
  if (i == mpi.nqueue) return NULL;
  Pending *p = mpi.queue[i];
  /* the sums started before it start their all-gathers before it does */
  for (int k = 0; k <= i; k++)
    if (!mpi.queue[k]->gathering && mpi.queue[k]->nslices) {
      wait_all((int)mpi.queue[k]->nslices, mpi.queue[k]->req);
      gather(mpi.queue[k]);
    }
  if (p->nslices) wait_all((int)p->nslices, p->req);
  size_t stride = (slice_floats() + (size_t)mpi.size - 1) / (size_t)mpi.size * (size_t)mpi.size;
  for (size_t s = 0; s < p->nslices; s++) {
    size_t at, len, per;
    slice_of(p, s, &at, &len, &per);
    memcpy(p->x + at, p->recv + s * stride, sizeof *p->x * len);
  }
  mpi.overlapped += t0 - p->started;
  memmove(mpi.queue + i, mpi.queue + i + 1, sizeof *mpi.queue * (size_t)(mpi.nqueue - i - 1));
  mpi.nqueue--;
  float *x = p->x;
  free_pending(p);
  mpi.seconds += now() - t0;
  mpi.waited += now() - t0;
  mpi.calls++;
  return x;
}

void dist_gather(const void *mine, size_t bytes, void *all) {
  if (!mpi.running) {
    memcpy(all, mine, bytes);
    return;
  }
  void *req;
  mpi.iallgather(mine, (int)bytes, mpi.byte, all, (int)bytes, mpi.byte, mpi.world, &req);
  wait_all(1, &req);
}

bool dist_gather_bytes(const void *mine, size_t bytes, void **all, size_t *sizes) {
  int n = mpi.size;
  int64_t me = (int64_t)bytes, *lens = mem_alloc(NULL, sizeof *lens * (size_t)n);
  dist_gather(&me, sizeof me, lens);
  int64_t total = 0;
  for (int k = 0; k < n; k++) total += lens[k];
  *all = NULL;
  if (total > INT32_MAX) {
    mem_free(lens);
    return false;
  }
  int *counts = mem_alloc(NULL, sizeof *counts * (size_t)n), *at = mem_alloc(NULL, sizeof *at * (size_t)n);
  for (int k = 0, off = 0; k < n; k++) counts[k] = (int)lens[k], at[k] = off, off += counts[k];
  if (mpi.rank == 0) {
    *all = mem_alloc(NULL, (size_t)total + 1);
    for (int k = 0; k < n; k++) sizes[k] = (size_t)lens[k];
  }
  if (!mpi.running) memcpy(*all, mine, bytes);
  else {
    void *req;
    mpi.igatherv(mine, (int)bytes, mpi.byte, *all, counts, at, mpi.byte, 0, mpi.world, &req);
    wait_all(1, &req);
  }
  mem_free(counts);
  mem_free(at);
  mem_free(lens);
  return true;
}

void dist_broadcast(void *buf, size_t bytes) {
  if (!mpi.running || mpi.size < 2) return;
  for (size_t at = 0; at < bytes; at += DIST_CHUNK) {
    void *req;
    mpi.ibcast((char *)buf + at, (int)(bytes - at < DIST_CHUNK ? bytes - at : DIST_CHUNK), mpi.byte, 0, mpi.world, &req);
    wait_all(1, &req);
  }
}

bool dist_agree(const DistReport *mine, DistReport *sum, DistReport *all) {
  DistReport me = *mine;
  memset(me.why, 0, sizeof me.why);
  if (!me.ok) snprintf(me.why, sizeof me.why, "%s", diag_first_error());
  dist_gather(&me, sizeof me, all);
  *sum = (DistReport){.ok = 1, .tag = all[0].tag};
  for (int k = 0; k < mpi.size; k++) {
    sum->loss += all[k].loss, sum->hits += all[k].hits, sum->n += all[k].n;
    sum->ok &= all[k].ok;
    if (all[k].sig > sum->sig) sum->sig = all[k].sig;
  }
  return sum->ok;
}

int dist_odd_rank(const DistReport *all, bool tags, char why[DIAG_FIRST_MAX + 2]) {
  if (why) why[0] = 0;
  for (int k = 0; k < mpi.size; k++)
    if (!all[k].ok || (tags && all[k].tag != all[0].tag)) {
      if (why && !all[k].ok && all[k].why[0])
        snprintf(why, DIAG_FIRST_MAX + 2, ": %.*s", DIAG_FIRST_MAX - 1, all[k].why);
      return k;
    }
  return -1;
}
