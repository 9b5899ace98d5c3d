/* Renames that would un-hide the host's hidden files: see hidden.h. */
#include "hidden.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

struct hwalk {
    struct rt_ignore *ig;
    size_t left; /* entries still allowed */
    char from[PATH_MAX];
    char to[PATH_MAX];
    char *bad;
    size_t bad_size;
};

static int walk(struct hwalk *w, int fd, unsigned depth);

/* One entry of the walk; w->from and w->to name it. */
static int visit(struct hwalk *w, int dfd, const char *name, unsigned depth) {
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : -errno; /* the host removed it meanwhile */
    bool is_dir = S_ISDIR(st.st_mode);
    int b = rt_ignore_route(w->ig, w->from, is_dir, &st);
    if (b < 0)
        return b;
    if (b == RT_STORE) {
        /* Hidden now: it must be hidden where it is going. */
        int t = rt_ignore_route(w->ig, w->to, is_dir, &st);
        if (t < 0)
            return t;
        if (t == RT_STORE)
            return 0; /* and everything below it with it */
        if (w->bad && w->bad_size)
            snprintf(w->bad, w->bad_size, "%s", w->from);
        return -EXDEV;
    }
    if (!is_dir)
        return 0;
    int cfd = openat(dfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (cfd < 0)
        return errno == ENOENT ? 0 : -errno;
    int rc = walk(w, cfd, depth + 1);
    close(cfd);
    return rc;
}

static int walk(struct hwalk *w, int fd, unsigned depth) {
    if (depth > RT_HIDDEN_MAX_DEPTH)
        return -E2BIG;
    DIR *dp = NULL;
    int rc = lz_opendir_at(fd, &dp);
    if (rc < 0)
        return rc;
    size_t fl = strlen(w->from), tl = strlen(w->to);
    struct dirent *de;
    while (rc == 0 && (errno = 0, de = readdir(dp))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (w->left == 0) {
            rc = -E2BIG;
            break;
        }
        w->left--;
        /* `.git` at any depth is the host's wherever it goes (has no
         * hidden entries): not walked. */
        if (strcasecmp(de->d_name, ".git") == 0)
            continue;
        if (lz_snprintf(w->from + fl, sizeof w->from - fl, "/%s", de->d_name) < 0 ||
            lz_snprintf(w->to + tl, sizeof w->to - tl, "/%s", de->d_name) < 0)
            rc = -ENAMETOOLONG;
        else
            rc = visit(w, dirfd(dp), de->d_name, depth);
        w->from[fl] = '\0';
        w->to[tl] = '\0';
    }
    if (rc == 0 && errno != 0)
        rc = -errno;
    closedir(dp);
    return rc;
}

int rt_hidden_check_move(struct rt_ignore *ig, int fd, const char *from, const char *to, char *bad, size_t bad_size) {
    if (!ig)
        return 0; /* no routing: nothing is hidden */
    struct hwalk *w = lz_xcalloc(1, sizeof *w);
    w->ig = ig;
    w->left = RT_HIDDEN_MAX_ENTRIES;
    w->bad = bad;
    w->bad_size = bad_size;
    int rc = lz_snprintf(w->from, sizeof w->from, "%s", from);
    if (rc >= 0)
        rc = lz_snprintf(w->to, sizeof w->to, "%s", to);
    if (rc >= 0)
        rc = walk(w, fd, 0);
    free(w);
    return rc < 0 ? rc : 0;
}
