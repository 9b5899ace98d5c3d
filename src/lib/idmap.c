/* idmap.c — see idmap.h. */
#include "idmap.h"
#include "spawn.h"

#include <fcntl.h>
#include <pwd.h>
#include <signal.h>

#define MAX_SUBIDS 65536ul

bool lz_subid_range(const char *file, const char *user, uid_t uid, unsigned long *ret_start, unsigned long *ret_count) {
    _cleanup_fclose_ FILE *f = fopen(file, "re");
    if (!f)
        return false;
    char line[512], uidstr[16];
    snprintf(uidstr, sizeof uidstr, "%u", (unsigned)uid);
    while (fgets(line, sizeof line, f)) {
        char *save = NULL;
        char *a = strtok_r(line, ":\n", &save), *b = strtok_r(NULL, ":\n", &save), *c = strtok_r(NULL, ":\n", &save);
        if (!a || !b || !c || (strcmp(a, user) && strcmp(a, uidstr)))
            continue;
        char *e1, *e2;
        errno = 0;
        unsigned long s = strtoul(b, &e1, 10), n = strtoul(c, &e2, 10);
        if (errno || *e1 || *e2 || n == 0)
            continue;
        *ret_start = s;
        *ret_count = n > MAX_SUBIDS ? MAX_SUBIDS : n;
        return true;
    }
    return false;
}

bool lz_idmap_ranges(struct lz_idmap_ranges *r) {
    uid_t uid = getuid();
    struct passwd *pw = getpwuid(uid);
    return pw && lz_subid_range("/etc/subuid", pw->pw_name, uid, &r->us, &r->un) &&
        lz_subid_range("/etc/subgid", pw->pw_name, uid, &r->gs, &r->gn) && access("/usr/bin/newuidmap", X_OK) == 0 &&
        access("/usr/bin/newgidmap", X_OK) == 0;
}

bool lz_idmap_have_subids(void) {
    struct lz_idmap_ranges r;
    return lz_idmap_ranges(&r);
}

/* newuidmap and newgidmap write different maps of the same process and
 * need nothing of each other: both run at once (each is a setuid exec of a
 * few ms on the Domain's start path), then both are waited for, bounded. */
static int run_tools(char *const *const argvs[2], struct lz_error *err) {
    struct lz_child c[2] = { LZ_CHILD_NULL, LZ_CHILD_NULL };
    int outp[2][2] = { { -EBADF, -EBADF }, { -EBADF, -EBADF } };
    int r = 0;
    for (int i = 0; i < 2 && r == 0; i++) {
        if (pipe2(outp[i], O_CLOEXEC) < 0) {
            r = lz_error_set(err, -errno, "pipe: %s", strerror(errno));
            break;
        }
        struct lz_spawn_opts o = { .path = argvs[i][0],
                                   .argv = argvs[i],
                                   .stdin_fd = -1,
                                   .stdout_fd = outp[i][1],
                                   .stderr_fd = outp[i][1],
                                   .setns_pidfd = -1 };
        if ((r = lz_spawn(&o, &c[i])) < 0)
            lz_error_set(err, r, "cannot run %s: %s", argvs[i][0], strerror(-r));
        lz_closep(&outp[i][1]);
    }
    long deadline = lz_now_ms() + 10000;
    for (int i = 0; i < 2; i++) {
        char out[512] = "";
        if (outp[i][0] >= 0) {
            ssize_t n = lz_read_full(outp[i][0], out, sizeof out - 1);
            out[n > 0 ? n : 0] = '\0';
            char *nl = strchr(out, '\n');
            if (nl)
                *nl = '\0';
            lz_closep(&outp[i][0]);
        }
        if (c[i].pidfd < 0)
            continue;
        long left = deadline - lz_now_ms();
        int st = 0, w = lz_child_wait(&c[i], left > 0 ? (int)left : 0, &st);
        if (w < 0) {
            lz_child_signal(&c[i], SIGKILL);
            lz_child_wait(&c[i], -1, &st);
            if (r == 0)
                r = lz_error_set(err, w, "%s did not finish", argvs[i][0]);
        } else if (st != 0 && r == 0) {
            r = lz_error_set(err, -EPERM, "%s failed (status %d): %s", argvs[i][0], st, out);
        }
        lz_child_close(&c[i]);
    }
    return r;
}

static int write_proc(pid_t pid, const char *file, const char *text, struct lz_error *err) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || write(fd, text, strlen(text)) < 0)
        return lz_error_set(err, -errno, "cannot write %s: %s", path, strerror(errno));
    return 0;
}

int lz_idmap_write(pid_t pid, struct lz_error *err) {
    char pids[16], u[16], g[16];
    snprintf(pids, sizeof pids, "%d", (int)pid);
    snprintf(u, sizeof u, "%u", (unsigned)getuid());
    snprintf(g, sizeof g, "%u", (unsigned)getgid());
    struct lz_idmap_ranges rg;
    if (lz_idmap_ranges(&rg)) {
        char a1[24], a2[24], b1[24], b2[24];
        snprintf(a1, sizeof a1, "%lu", rg.us);
        snprintf(a2, sizeof a2, "%lu", rg.un);
        snprintf(b1, sizeof b1, "%lu", rg.gs);
        snprintf(b2, sizeof b2, "%lu", rg.gn);
        char *uargv[] = { (char *)"/usr/bin/newuidmap", pids, (char *)"0", u, (char *)"1", (char *)"1", a1, a2, NULL };
        char *gargv[] = { (char *)"/usr/bin/newgidmap", pids, (char *)"0", g, (char *)"1", (char *)"1", b1, b2, NULL };
        char *const *const argvs[2] = { uargv, gargv };
        return run_tools(argvs, err);
    }
    char line[64];
    int r = write_proc(pid, "setgroups", "deny", err);
    if (r < 0)
        return r;
    snprintf(line, sizeof line, "0 %s 1", u);
    if ((r = write_proc(pid, "uid_map", line, err)) < 0)
        return r;
    snprintf(line, sizeof line, "0 %s 1", g);
    return write_proc(pid, "gid_map", line, err);
}
