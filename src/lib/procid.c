/* procid.c — see procid.h. */
#include "procid.h"

#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#ifndef PIDFD_NONBLOCK
#define PIDFD_NONBLOCK O_NONBLOCK
#endif

const char *lz_boot_id(void) {
    static char id[37];
    static bool done;
    if (done)
        return id;
    _cleanup_close_ int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    char b[64];
    ssize_t n = fd >= 0 ? read(fd, b, sizeof b - 1) : -1;
    if (n >= 36) {
        memcpy(id, b, 36);
        id[36] = '\0';
    }
    /* Tests simulate a reboot by pointing at another boot ID. */
    const char *fake = lz_test_hook("LAZARET_TEST_BOOT_ID");
    if (fake && strlen(fake) == 36)
        memcpy(id, fake, 37);
    done = true;
    return id;
}

static int64_t start_time_of(pid_t pid) {
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char b[1024];
    ssize_t n = read(fd, b, sizeof b - 1);
    if (n <= 0)
        return -1;
    b[n] = '\0';
    /* comm may hold spaces and parentheses: fields restart after the last ')'. */
    char *s = strrchr(b, ')');
    if (!s)
        return -1;
    s++;
    /* field 3 (state) is first after ')'; start time is field 22. */
    for (int f = 3; f < 22; f++) {
        s = strchr(s + 1, ' ');
        if (!s)
            return -1;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s + 1, &end, 10);
    if (errno || end == s + 1)
        return -1;
    return v;
}

int lz_procid_from_pidfd(int pidfd, pid_t pid, struct lz_procid *ret) {
    struct stat st;
    if (fstat(pidfd, &st) < 0)
        return -errno;
    struct lz_procid id = {
        .dev = (uint64_t)st.st_dev, .ino = (uint64_t)st.st_ino, .pid = pid, .start_time = start_time_of(pid)
    };
    snprintf(id.boot_id, sizeof id.boot_id, "%s", lz_boot_id());
    if (!id.boot_id[0])
        return -ENOENT;
    *ret = id;
    return 0;
}

int lz_procid_self(struct lz_procid *ret) {
    int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (fd < 0)
        return -errno;
    int r = lz_procid_from_pidfd(fd, getpid(), ret);
    close(fd);
    return r;
}

int lz_procid_open(const struct lz_procid *id) {
    if (!id->boot_id[0] || strcmp(id->boot_id, lz_boot_id()) != 0)
        return -ESRCH; /* another boot: that process cannot be alive */
    if (id->pid <= 0 || id->pid > INT32_MAX)
        return -ESRCH;
    int fd = (int)syscall(SYS_pidfd_open, (pid_t)id->pid, 0);
    if (fd < 0)
        return errno == ESRCH || errno == EINVAL ? -ESRCH : -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if ((uint64_t)st.st_dev != id->dev || (uint64_t)st.st_ino != id->ino) {
        close(fd);
        return -ESRCH;
    }
    /* The pidfd may refer to a process that exited but is not reaped. */
    struct pollfd p = { .fd = fd, .events = POLLIN };
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP))) {
        close(fd);
        return -ESRCH;
    }
    return fd;
}

int lz_pidfd_wait_gone(int pidfd, int timeout_ms) {
    long deadline = lz_now_ms() + timeout_ms;
    for (;;) {
        long left = deadline - lz_now_ms();
        if (left < 0)
            left = 0;
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
        if (r == 0)
            return -ETIMEDOUT;
    }
}

int lz_procid_kill(const struct lz_procid *id, int timeout_ms) {
    int fd = lz_procid_open(id);
    if (fd == -ESRCH)
        return 0;
    if (fd < 0)
        return fd;
    int r = 1;
    if (syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
        r = -errno;
    else if (lz_pidfd_wait_gone(fd, timeout_ms) < 0)
        r = -ETIMEDOUT;
    close(fd);
    return r;
}

void lz_procid_format(const struct lz_procid *id, char *buf, size_t len) {
    snprintf(buf, len, "%s:%" PRIu64 ":%" PRIu64 ":%" PRId64 ":%" PRId64, id->boot_id[0] ? id->boot_id : "-", id->dev,
             id->ino, id->pid, id->start_time);
}

int lz_procid_parse(const char *s, struct lz_procid *ret) {
    struct lz_procid id = { 0 };
    char boot[40];
    unsigned long long dev, ino;
    long long pid, st;
    int n = 0;
    if (sscanf(s, "%39[^:]:%llu:%llu:%lld:%lld%n", boot, &dev, &ino, &pid, &st, &n) != 5 || s[n] != '\0')
        return -EINVAL;
    if (strcmp(boot, "-") != 0) {
        if (strlen(boot) != 36)
            return -EINVAL;
        memcpy(id.boot_id, boot, 37);
    }
    id.dev = dev;
    id.ino = ino;
    id.pid = pid;
    id.start_time = st;
    *ret = id;
    return 0;
}
