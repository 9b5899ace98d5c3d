/* worktree.c — see worktree.h. */
#include "worktree.h"
#include "gitscan.h"
#include "spawn.h"

#include <fcntl.h>
#include <libgen.h>
#include <signal.h>
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
    /* The id goes into a gitfile line and a mount destination. */
    for (const char *q = name; *q; q++)
        if ((unsigned char)*q < 0x20 || *q == 0x7f)
            return lz_error_set(err, -EINVAL, "%s: a worktree id with a control character is not served", gitdir);
    if (strlen(name) > 255)
        return lz_error_set(err, -ENAMETOOLONG, "%s: the worktree id is too long", gitdir);
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
    *ret = (struct lz_worktree){
        .gitdir = TAKE_PTR(gitdir), .common = TAKE_PTR(common), .name = lz_xstrdup(name), .repo = repo
    };
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

static bool name_ok(const char *n) {
    size_t l = strlen(n);
    if (l == 0 || l > 64 || n[0] == '-' || n[0] == '.' || strstr(n, "..") || (l >= 5 && !strcmp(n + l - 5, ".lock")))
        return false;
    return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == l;
}

/* Runs git (argv[0], absolute) with this process's environment, output to
 * stderr; its exit status, or a negative errno. */
static int run_git(char *const argv[]) {
    extern char **environ;
    struct lz_spawn_opts o = { .path = argv[0],
                               .argv = argv,
                               .envp = environ,
                               .stdin_fd = -1,
                               .stdout_fd = 2,
                               .stderr_fd = 2,
                               .setns_pidfd = -1 };
    struct lz_child c;
    int r = lz_spawn(&o, &c);
    if (r < 0)
        return r;
    int st = 0;
    r = lz_child_wait(&c, 600 * 1000, &st);
    if (r < 0) {
        lz_child_signal(&c, SIGKILL);
        lz_child_wait(&c, -1, &st);
    }
    lz_child_close(&c);
    return r < 0 ? r : st;
}

int lz_worktree_create(const char *workspace, const char *name, char **ret_path, struct lz_error *err) {
    if (!name_ok(name))
        return lz_error_set(err, -EINVAL,
                            "--worktree %s: a worktree name is letters, digits, '.', '_' and '-' (not first), at "
                            "most 64, without \"..\" or a \".lock\" end",
                            name);
    struct lz_worktree wt = { 0 };
    int r = lz_worktree_probe(workspace, &wt, err);
    if (r < 0)
        return r;
    _cleanup_free_ char *main_top = NULL, *common = NULL;
    if (r > 0) {
        main_top = TAKE_PTR(wt.repo);
        common = TAKE_PTR(wt.common);
        lz_worktree_clear(&wt);
    } else {
        _cleanup_free_ char *g = lz_xasprintf("%s/.git", workspace);
        struct stat st;
        if (lstat(g, &st) < 0 || !S_ISDIR(st.st_mode))
            return lz_error_set(err, -EINVAL,
                                "--worktree: %s is not a Git repository's main work tree or one of its linked "
                                "worktrees",
                                workspace);
        main_top = realpath(workspace, NULL);
        common = realpath(g, NULL);
        if (!main_top || !common)
            return lz_error_set(err, -errno, "cannot resolve %s: %s", workspace, strerror(errno));
    }
    _cleanup_free_ char *d1 = lz_xstrdup(main_top), *d2 = lz_xstrdup(main_top);
    const char *parent = dirname(d1), *base = basename(d2);
    _cleanup_free_ char *path = lz_xasprintf("%s/%s-%s", strcmp(parent, "/") ? parent : "", base, name);
    struct stat st;
    if (lstat(path, &st) == 0) {
        struct lz_error e2 = { 0 };
        r = lz_worktree_probe(path, &wt, &e2);
        /* Git names worktrees/<id> after PATH's last component, not NAME. */
        bool same = r > 0 && !strcmp(wt.common, common);
        lz_worktree_clear(&wt);
        if (!same)
            return lz_error_set(err, -EEXIST, "--worktree %s: %s exists and is not a linked worktree of %s", name, path,
                                main_top);
        *ret_path = TAKE_PTR(path);
        return 0;
    }
    _cleanup_free_ char *git = lz_gitscan_git_path();
    if (!git)
        return lz_error_set(err, -ENOENT, "--worktree needs the host's git, which is not on PATH");
    _cleanup_free_ char *ref = lz_xasprintf("refs/heads/%s", name);
    char *verify[] = { git, (char *)"-C", main_top, (char *)"rev-parse", (char *)"--verify", (char *)"-q", ref, NULL };
    char out[128];
    int st2 = 0;
    bool exists = lz_spawn_capture(verify, 30000, out, sizeof out, &st2) == 0 && st2 == 0;
    char *add_new[] = { git,          (char *)"-C", main_top, (char *)"worktree", (char *)"add", path,
                        (char *)"-b", (char *)name, NULL };
    char *add_old[] = { git, (char *)"-C", main_top, (char *)"worktree", (char *)"add", path, (char *)name, NULL };
    r = run_git(exists ? add_old : add_new);
    if (r != 0)
        return lz_error_set(err, r < 0 ? r : -EIO, "git worktree add %s %s%s failed (%s)", path, exists ? "" : "-b ",
                            name, r < 0 ? strerror(-r) : "see git's message above");
    *ret_path = TAKE_PTR(path);
    return 0;
}
