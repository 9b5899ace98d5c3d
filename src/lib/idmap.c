/* idmap.c — see idmap.h. */
#include "idmap.h"
#include "spawn.h"

#include <fcntl.h>
#include <pwd.h>

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

static int run_tool(char *const argv[], struct lz_error *err) {
    char out[512];
    int st = 0;
    int r = lz_spawn_capture(argv, 10000, out, sizeof out, &st);
    if (r == -ETIMEDOUT)
        return lz_error_set(err, r, "%s did not finish", argv[0]);
    if (r < 0)
        return lz_error_set(err, r, "cannot run %s: %s", argv[0], strerror(-r));
    if (st != 0)
        return lz_error_set(err, -EPERM, "%s failed (status %d): %s", argv[0], st, out);
    return 0;
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
        int r = run_tool(uargv, err);
        return r < 0 ? r : run_tool(gargv, err);
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
