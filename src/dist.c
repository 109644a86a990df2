/* dist.c — the ranks of an mpirun job and their collectives (dist.h).
 *
 * Open MPI's handles (MPI_Comm, MPI_Datatype) are pointers to its global
 * objects (ompi_mpi_comm_world, ompi_mpi_byte): they are looked up by name
 * like its functions, so netrun needs neither mpi.h to build nor libmpi to
 * run.  Data moves as bytes; the sums are computed here, in rank order. */
#include "dist.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Debian's Open MPI 4 (and 5): the library's soname. */
#define DIST_LIBMPI "libmpi.so.40"
#define MPI_THREAD_FUNNELED 1   /* OpenMP threads, MPI called from the main one */
/* The most bytes one MPI call moves per rank (its counts are ints). */
#define DIST_CHUNK ((size_t)1 << 28)

typedef int (*MpiGatherFn)(const void *, int, void *, void *, int, void *, void *);

static struct {
  void *lib;
  int (*init_thread)(int *, char ***, int, int *);
  int (*comm_rank)(void *, int *);
  int (*comm_size)(void *, int *);
  MpiGatherFn alltoall, allgather;
  int (*bcast)(void *, int, void *, int, void *);
  int (*abort)(void *, int);
  int (*finalize)(void);
  void *world, *byte;   /* MPI_COMM_WORLD, MPI_BYTE */
  int rank, size;
  bool running;
  double seconds;
  int64_t calls;
  float *send, *recv;   /* dist_sum_f32's scratch */
  size_t cap;
} mpi = {.size = 1};

bool dist_launched(void) { return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK"); }

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Each symbol the table needs; false after naming the first missing one. */
static bool resolve(Diag *d) {
  static const struct {
    const char *name;
    size_t offset;
  } syms[] = {
#define SYM(field, name) {name, offsetof(__typeof__(mpi), field)}
      SYM(init_thread, "MPI_Init_thread"), SYM(comm_rank, "MPI_Comm_rank"), SYM(comm_size, "MPI_Comm_size"),
      SYM(alltoall, "MPI_Alltoall"),       SYM(allgather, "MPI_Allgather"), SYM(bcast, "MPI_Bcast"),
      SYM(abort, "MPI_Abort"),             SYM(finalize, "MPI_Finalize"),   SYM(world, "ompi_mpi_comm_world"),
      SYM(byte, "ompi_mpi_byte"),
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
  /* RTLD_GLOBAL: the components Open MPI loads itself link against it. */
  mpi.lib = dlopen(DIST_LIBMPI, RTLD_NOW | RTLD_GLOBAL);
  if (!mpi.lib) {
    diag_error(d, SPAN_NONE, "mpirun started this netrun, but Open MPI's %s cannot be loaded (%s): install "
               "openmpi-bin (make deps)", DIST_LIBMPI, dlerror());
    return false;
  }
  int provided = 0;
  bool found = resolve(d);
  if (!found || mpi.init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != 0) {
    if (found) diag_error(d, SPAN_NONE, "MPI_Init_thread failed");
    dlclose(mpi.lib);
    mpi.lib = NULL;
    return false;
  }
  mpi.comm_rank(mpi.world, &mpi.rank);
  mpi.comm_size(mpi.world, &mpi.size);
  mpi.running = true;
  return true;
}

void dist_stop(void) {
  if (!mpi.running) return;
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
  mpi.abort(mpi.world, status);
}

int dist_rank(void) { return mpi.rank; }
int dist_size(void) { return mpi.size; }
double dist_reduce_seconds(void) { return mpi.seconds; }
int64_t dist_reduce_calls(void) { return mpi.calls; }

/* One slice of dist_sum_f32: n floats, at most DIST_CHUNK bytes per rank
 * after the cut in N parts of `per` floats (the last padded with zeros). */
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
  mpi.alltoall(mpi.send, bytes, mpi.byte, mpi.recv, bytes, mpi.byte, mpi.world);
  /* recv[k * per + i]: rank k's element i of this rank's part. */
  float *part = mpi.send;
  for (size_t i = 0; i < per; i++) part[i] = mpi.recv[i];
  for (size_t k = 1; k < N; k++)
    for (size_t i = 0; i < per; i++) part[i] += mpi.recv[k * per + i];
  mpi.allgather(part, bytes, mpi.byte, mpi.recv, bytes, mpi.byte, mpi.world);
  memcpy(x, mpi.recv, sizeof *x * n);
}

void dist_sum_f32(float *x, int64_t n) {
  if (!mpi.running || mpi.size < 2 || n <= 0) return;
  double t0 = now();
  size_t step = DIST_CHUNK / sizeof *x * (size_t)mpi.size / 2;   /* 2: room for the padding */
  for (size_t at = 0; at < (size_t)n; at += step) sum_slice(x + at, (size_t)n - at < step ? (size_t)n - at : step);
  mpi.seconds += now() - t0;
  mpi.calls++;
}

void dist_gather(const void *mine, size_t bytes, void *all) {
  if (!mpi.running) {
    memcpy(all, mine, bytes);
    return;
  }
  mpi.allgather(mine, (int)bytes, mpi.byte, all, (int)bytes, mpi.byte, mpi.world);
}

void dist_broadcast(void *buf, size_t bytes) {
  if (!mpi.running || mpi.size < 2) return;
  for (size_t at = 0; at < bytes; at += DIST_CHUNK)
    mpi.bcast((char *)buf + at, (int)(bytes - at < DIST_CHUNK ? bytes - at : DIST_CHUNK), mpi.byte, 0, mpi.world);
}

bool dist_agree(const DistReport *mine, DistReport *sum, DistReport *all) {
  dist_gather(mine, sizeof *mine, all);
  *sum = (DistReport){.ok = 1, .tag = all[0].tag};
  for (int k = 0; k < mpi.size; k++) {
    sum->loss += all[k].loss, sum->hits += all[k].hits, sum->n += all[k].n;
    sum->ok &= all[k].ok;
    if (all[k].sig > sum->sig) sum->sig = all[k].sig;
  }
  return sum->ok;
}

int dist_odd_rank(const DistReport *all, bool tags) {
  for (int k = 0; k < mpi.size; k++)
    if (!all[k].ok || (tags && all[k].tag != all[0].tag)) return k;
  return -1;
}
