/* A wall clock the test moves: LD_PRELOAD it into redis-server and every CLOCK_REALTIME reading
 * (clock_gettime, gettimeofday, time) is shifted by the signed 64-bit ms offset in the first
 * eight bytes of ECHOMQ_CLOCK_FILE, read through a shared mapping so a write by the test takes
 * effect at once. Monotonic clocks are left alone: a real step moves only the wall clock. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile int64_t *offset_ms;
static int (*real_clock_gettime)(clockid_t, struct timespec *);

__attribute__((constructor)) static void shim_init(void) {
  const char *path = getenv("ECHOMQ_CLOCK_FILE");
  if (!path) return;
  int fd = open(path, O_RDONLY);
  if (fd < 0) return;
  void *m = mmap(NULL, sizeof(int64_t), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (m != MAP_FAILED) offset_ms = (volatile int64_t *)m;
}

static int64_t offset(void) { return offset_ms ? *offset_ms : 0; }

static void shift(struct timespec *ts) {
  int64_t ns = (int64_t)ts->tv_sec * 1000000000LL + ts->tv_nsec + offset() * 1000000LL;
  ts->tv_sec = (time_t)(ns / 1000000000LL);
  ts->tv_nsec = (long)(ns % 1000000000LL);
}

int clock_gettime(clockid_t id, struct timespec *ts) {
  /* Resolved on first use: the allocator's own constructors read the clock before ours runs. */
  if (!real_clock_gettime)
    real_clock_gettime = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
  int r = real_clock_gettime(id, ts);
  if (r == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) shift(ts);
  return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
  (void)tz;
  struct timespec ts;
  int r = clock_gettime(CLOCK_REALTIME, &ts);
  if (r == 0 && tv) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return r;
}

time_t time(time_t *t) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (t) *t = ts.tv_sec;
  return ts.tv_sec;
}
