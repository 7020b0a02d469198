/* A slow disk and a power loss, for the durability tests (tests/it/durable.rs and the
 * Jepsen-style rows): an LD_PRELOAD library for redis-server that wraps fsync(2) and
 * fdatasync(2).
 *
 *   LD_PRELOAD=slowdisk.so SLOWDISK_CTL=<file> SLOWDISK_LOG=<file> redis-server ...
 *
 * - SLOWDISK_CTL names a file holding a number of milliseconds (absent or unreadable: 0), read
 *   at every call: each fsync and fdatasync sleeps that long before it starts, as a disk whose
 *   flushes take that long would make it (what `strace -e inject=fdatasync:delay_enter=...`
 *   does, on every thread). A test turns the slow disk on and off by writing the file.
 * - SLOWDISK_LOG names a file to which each successful call on a regular file appends one line,
 *   `<path> <size>`: the file's path and its size before the call (what the call made durable:
 *   every byte written before it started). A power loss is then emulated by cutting each file
 *   back to the largest size logged for it (`tests/it/common/files.rs`, `power_loss`).
 *
 * Built by the tests with gcc (-ldl). It changes nothing else. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

static long delay_ms(void) {
    const char *ctl = getenv("SLOWDISK_CTL");
    if (!ctl) return 0;
    int fd = open(ctl, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[32] = {0};
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return 0;
    long ms = strtol(buf, NULL, 10);
    return ms > 0 && ms < 600000 ? ms : 0;
}

static void wait_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0) {
    }
}

static void log_durable(int fd, off_t size) {
    const char *path = getenv("SLOWDISK_LOG");
    if (!path) return;
    char link[64], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return;
    target[n] = 0;
    char line[PATH_MAX + 32];
    int len = snprintf(line, sizeof line, "%s %lld\n", target, (long long)size);
    if (len <= 0 || (size_t)len >= sizeof line) return;
    pthread_mutex_lock(&log_lock);
    int out = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (out >= 0) {
        ssize_t w = write(out, line, (size_t)len);
        (void)w;
        close(out);
    }
    pthread_mutex_unlock(&log_lock);
}

typedef int (*sync_fn)(int);

static int wrapped(int fd, const char *name) {
    sync_fn real = (sync_fn)dlsym(RTLD_NEXT, name);
    if (!real) return -1;
    long ms = delay_ms();
    if (ms > 0) wait_ms(ms);
    /* The size as the call starts: every byte written before then is durable once it returns. */
    struct stat st;
    int regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    int rc = real(fd);
    if (rc == 0 && regular) log_durable(fd, st.st_size);
    return rc;
}

int fsync(int fd) { return wrapped(fd, "fsync"); }

int fdatasync(int fd) { return wrapped(fd, "fdatasync"); }
