/* LD_PRELOAD library of tests/hostile/faults/test_restore_faults.py, compiled by the test: fsync and
 * fdatasync sleep SHIM_FSYNC_SECONDS (a slow disk); CLOCK_REALTIME is shifted by the seconds
 * written in the file SHIM_CLOCK_OFFSET_FILE (a wall clock that steps), read at every call; while
 * the file SHIM_ENOSPC_FLAG exists, write() to a temporary state file (`.restore-state.json.*`)
 * fails with ENOSPC (a full disk, for the state writes only). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void slow(void) {
    const char *s = getenv("SHIM_FSYNC_SECONDS");
    double d = s ? atof(s) : 0.0;
    if (d > 0) {
        struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
        nanosleep(&ts, NULL);
    }
}
int fsync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    slow();
    return real(fd);
}
int fdatasync(int fd) {
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    slow();
    return real(fd);
}
static long long offset_ns(void) {
    const char *path = getenv("SHIM_CLOCK_OFFSET_FILE");
    char buf[64];
    if (!path) return 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = 0;
    return (long long)(atof(buf) * 1e9);
}
int clock_gettime(clockid_t id, struct timespec *tp) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, tp);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
        long long t = (long long)tp->tv_sec * 1000000000LL + tp->tv_nsec + offset_ns();
        tp->tv_sec = (time_t)(t / 1000000000LL);
        tp->tv_nsec = (long)(t % 1000000000LL);
    }
    return rc;
}
static int disk_full_for(int fd) {
    const char *flag = getenv("SHIM_ENOSPC_FLAG");
    char link[64], target[4096];
    if (!flag || access(flag, F_OK) != 0) return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return 0;
    target[n] = 0;
    return strstr(target, "/.restore-state.json.") != NULL;
}
ssize_t write(int fd, const void *buf, size_t count) {
    static ssize_t (*real)(int, const void *, size_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    if (disk_full_for(fd)) {
        errno = ENOSPC;
        return -1;
    }
    return real(fd, buf, count);
}
