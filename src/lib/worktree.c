/* worktree.c — see worktree.h. */
#include "worktree.h"

#include <fcntl.h>
#include <libgen.h>
#include <sys/stat.h>

/* The first line of a small regular file (no symlink followed at its
 * last component), without its line ending; malloc'd, or NULL. */
static char *read_line_at(int dfd, const char *name) {
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return NULL;
    char buf[PATH_MAX + 16];
    ssize_t n = lz_read_full(fd, buf, sizeof buf - 1);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    buf[strcspn(buf, "\r\n")] = '\0';
    return lz_xstrdup(buf);
}

static bool is_dir_at(int dfd, const char *name) {
    struct stat st;
    return fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* True when canonical a is b or lies below it. */
static bool within(const char *a, const char *b) {
    size_t n = strlen(b);
    return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/' || (n == 1 && b[0] == '/'));
}

void lz_worktree_clear(struct lz_worktree *w) {
    free(w->gitdir);
    free(w->common);
    free(w->name);
    free(w->repo);
    *w = (struct lz_worktree){ 0 };
}

int lz_worktree_probe(const char *workspace, struct lz_worktree *ret, struct lz_error *err) {
    _cleanup_close_ int wfd = open(workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (wfd < 0)
        return lz_error_set(err, -errno, "cannot open the workspace %s: %s", workspace, strerror(errno));
    struct stat st;
    if (fstatat(wfd, ".git", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
        return 0;
    _cleanup_free_ char *line = read_line_at(wfd, ".git");
    if (!line || strncmp(line, "gitdir: ", 8) != 0 || !line[8])
        return 0;
    const char *v = line + 8;
    _cleanup_free_ char *target = v[0] == '/' ? lz_xstrdup(v) : lz_xasprintf("%s/%s", workspace, v);
    _cleanup_free_ char *gitdir = realpath(target, NULL);
    if (!gitdir)
        return lz_error_set(err, -errno,
                            "%s/.git names the Git directory %s: %s (was the worktree's repository moved or "
                            "removed? `git worktree repair` in the main repository mends the link)",
                            workspace, target, strerror(errno));
    /* COMMON/worktrees/NAME: only Git's own layout. */
    _cleanup_free_ char *d1 = lz_xstrdup(gitdir), *d2 = lz_xstrdup(gitdir);
    const char *name = basename(d1);
    _cleanup_free_ char *parent = lz_xstrdup(dirname(d2));
    _cleanup_free_ char *p2 = lz_xstrdup(parent);
    if (strcmp(basename(p2), "worktrees") != 0)
        return 0; /* a submodule's gitfile, or a separate Git directory */
    _cleanup_free_ char *common0 = lz_xstrdup(dirname(parent));
    _cleanup_close_ int gfd = open(gitdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (gfd < 0)
        return lz_error_set(err, -errno, "cannot open %s: %s", gitdir, strerror(errno));
    _cleanup_free_ char *cd = read_line_at(gfd, "commondir");
    if (!cd || !cd[0])
        return lz_error_set(err, -EINVAL, "%s has no commondir: it is not a linked worktree's Git directory", gitdir);
    _cleanup_free_ char *cdp = cd[0] == '/' ? lz_xstrdup(cd) : lz_xasprintf("%s/%s", gitdir, cd);
    _cleanup_free_ char *common = realpath(cdp, NULL);
    if (!common)
        return lz_error_set(err, -errno, "%s/commondir names %s: %s", gitdir, cdp, strerror(errno));
    if (strcmp(common, common0) != 0)
        return lz_error_set(err, -EINVAL,
                            "%s/commondir names %s, not the directory holding it (%s): Lazaret serves only Git's "
                            "own worktree layout",
                            gitdir, common, common0);
    _cleanup_close_ int cfd = open(common, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cfd < 0 || fstatat(cfd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) < 0 || !is_dir_at(cfd, "objects") ||
        !is_dir_at(cfd, "refs"))
        return lz_error_set(err, -EINVAL, "%s is not a Git directory (HEAD, objects/, refs/)", common);
    _cleanup_free_ char *ws = realpath(workspace, NULL);
    if (!ws)
        return lz_error_set(err, -errno, "cannot resolve the workspace %s: %s", workspace, strerror(errno));
    if (within(ws, common) || within(common, ws))
        return lz_error_set(err, -EINVAL,
                            "the worktree %s and its repository's Git directory %s contain one another: Lazaret "
                            "cannot serve them apart",
                            ws, common);
    size_t cl = strlen(common);
    char *repo = cl > 5 && !strcmp(common + cl - 5, "/.git") ? lz_xstrndup(common, cl - 5) : lz_xstrdup(common);
    *ret = (struct lz_worktree){ .gitdir = TAKE_PTR(gitdir),
                                 .common = TAKE_PTR(common),
                                 .name = lz_xstrdup(name),
                                 .repo = repo };
    return 1;
}

char *lz_worktree_head(const char *gitdir) {
    _cleanup_close_ int gfd = open(gitdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (gfd < 0)
        return NULL;
    _cleanup_free_ char *h = read_line_at(gfd, "HEAD");
    if (!h)
        return NULL;
    if (!strncmp(h, "ref: refs/heads/", 16))
        return lz_xstrdup(h + 16);
    if (!strncmp(h, "ref: ", 5))
        return lz_xstrdup(h + 5);
    if (strspn(h, "0123456789abcdef") >= 8)
        return lz_xasprintf("detached at %.8s", h);
    return NULL;
}

char *lz_worktree_gitfile(const char *name) {
    return lz_xasprintf("gitdir: " LZ_SANDBOX_GIT_COMMON "/worktrees/%s\n", name);
}
