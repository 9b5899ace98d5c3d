/* privdirs.c — see privdirs.h. */
#include "privdirs.h"

#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gitscan.h"

/* Per git run: the checks are a few small runs at every start. */
#define PRIVDIRS_GIT_TIMEOUT_MS 10000

const char *lz_privdir_invalid(const char *rel) {
    if (!rel[0])
        return "it is empty";
    if (strlen(rel) > LZ_PRIVDIR_PATH_MAX)
        return "it is too long";
    if (rel[0] == '/')
        return "it is absolute (private directories are relative to the workspace)";
    if (rel[strlen(rel) - 1] == '/')
        return "it ends with '/'";
    for (const char *p = rel; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            return "it contains a control character";
    for (const char *p = rel;;) {
        const char *s = strchr(p, '/');
        size_t n = s ? (size_t)(s - p) : strlen(p);
        if (n == 0)
            return "it has an empty component";
        if (n > 255)
            return "a component is longer than 255 bytes";
        if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
            return "it has a '.' or '..' component";
        /* Git's own directory, in any case: the router keeps every `.git`
         * the host's (docs/security-git.md). */
        if (n == 4 && strncasecmp(p, ".git", 4) == 0)
            return "it has a .git component";
        if (!s)
            return NULL;
        p = s + 1;
    }
}

bool lz_privdirs_nested(const char *a, const char *b) {
    size_t na = strlen(a), nb = strlen(b);
    const char *s = na <= nb ? a : b, *l = na <= nb ? b : a;
    size_t n = na <= nb ? na : nb;
    return strncmp(s, l, n) == 0 && (l[n] == '\0' || l[n] == '/');
}

static void free_env(char **env) {
    for (char **e = env; e && *e; e++)
        free(*e);
    free(env);
}

/* `git -C workspace CMD1 [CMD2] -- PATHS...` (n paths): the exit status and,
 * with ret, the output; a negative errno. The paths are taken literally:
 * with --literal-pathspecs where the command accepts it (check-ignore does
 * not, and reads no wildcards; "./" keeps a leading ':' from being magic,
 * and a trailing '/' makes Git take the path for a directory whether or
 * not it exists, so that `node_modules/` rules match). */
static int git_at(const char *git, char **env, const char *workspace, const char *cmd1, const char *cmd2,
                  const char *const *paths, size_t n, char **ret) {
    bool ci = strcmp(cmd1, "check-ignore") == 0;
    const char **args = lz_xcalloc(n + 8, sizeof *args);
    char **own = lz_xcalloc(n + 1, sizeof *own);
    size_t k = 0;
    args[k++] = "git";
    args[k++] = "-C";
    args[k++] = workspace;
    args[k++] = ci ? "--no-pager" : "--literal-pathspecs";
    args[k++] = cmd1;
    if (cmd2)
        args[k++] = cmd2;
    args[k++] = "--";
    for (size_t i = 0; i < n; i++)
        args[k++] = ci ? (own[i] = lz_xasprintf("./%s/", paths[i])) : paths[i];
    args[k] = NULL;
    char *out = NULL;
    size_t len = 0;
    int st = lz_gitscan_run_git(git, env, PRIVDIRS_GIT_TIMEOUT_MS, args, &out, &len);
    lz_strv_free(own, n);
    free(args);
    if (st >= 0 && ret)
        *ret = out;
    else
        free(out);
    return st;
}

static int git_failed(const char *git, const char *workspace, const char *what, int st, struct lz_error *err) {
    if (st < 0)
        return lz_error_set(err, st, "private_dirs: cannot run %s %s in %s: %s", git, what, workspace, strerror(-st));
    return lz_error_set(err, -EINVAL,
                        "private_dirs: `git %s` failed in %s (exit status %d; run `git -C %s status` to see why): "
                        "private directories need the workspace in a Git work tree that git trusts",
                        what, workspace, st, workspace);
}

/* 1 if rel (a directory path) is ignored by the host's rules, 0 if not. */
static int is_ignored(const char *git, char **env, const char *workspace, const char *rel, struct lz_error *err) {
    int st = git_at(git, env, workspace, "check-ignore", "-q", &rel, 1, NULL);
    if (st == 0 || st == 1)
        return st == 0;
    return git_failed(git, workspace, "check-ignore", st, err);
}

/* It and its parents on the host: directories where they exist. The
 * router routes a symlink or a file by the rules for files (a
 * `node_modules/` rule does not match it), so the mount point would be the
 * host's entry, and a symlink would take it elsewhere. Parents that are
 * absent must be ignored (the store makes them) or the router would not
 * show them. */
static int check_shape(int wfd, const char *git, char **env, const char *workspace, const char *rel,
                       struct lz_error *err) {
    _cleanup_free_ char *pre = lz_xstrdup(rel);
    int r = 0;
    for (char *end = pre; r >= 0;) {
        end = strchr(end, '/');
        if (end)
            *end = '\0'; /* pre is the prefix up to this component */
        struct stat st;
        if (fstatat(wfd, pre, &st, AT_SYMLINK_NOFOLLOW) == 0) {
            if (!S_ISDIR(st.st_mode))
                r = lz_error_set(err, -ENOTDIR,
                                 "private_dirs: %s/%s is %s in the workspace, not a directory: remove it "
                                 "(or remove %s from private_dirs)",
                                 workspace, pre, S_ISLNK(st.st_mode) ? "a symlink" : "a file", rel);
        } else if (errno != ENOENT && errno != ENOTDIR) {
            r = lz_error_set(err, -errno, "private_dirs: cannot look at %s/%s: %s", workspace, pre, strerror(errno));
        } else if (end && (r = is_ignored(git, env, workspace, pre, err)) == 0) {
            r = lz_error_set(err, -ENOENT,
                             "private_dirs: %s: its parent %s does not exist in the workspace and is not "
                             "git-ignored; create %s/%s, or name an existing directory",
                             rel, pre, workspace, pre);
        }
        if (!end)
            break;
        *end++ = '/';
    }
    return r < 0 ? r : 0;
}

/* One directory, for the message: tracked content, then ignored. Tracked
 * content first: Git calls a directory holding tracked files not ignored,
 * and that is not what to fix. */
static int check_one(const char *git, char **env, const char *workspace, const char *rel, struct lz_error *err) {
    _cleanup_free_ char *out = NULL;
    int st = git_at(git, env, workspace, "ls-files", "--cached", &rel, 1, &out);
    if (st != 0)
        return git_failed(git, workspace, "ls-files", st, err);
    if (out && out[0]) {
        char *nl = strchr(out, '\n');
        if (nl)
            *nl = '\0';
        return lz_error_set(err, -EPERM,
                            "private_dirs: %s holds files tracked by Git in %s (%s): a private directory hides "
                            "the host's files; untrack them (`git rm -r --cached %s`) or remove it from "
                            "private_dirs",
                            rel, workspace, out, rel);
    }
    int r = is_ignored(git, env, workspace, rel, err);
    if (r == 0)
        return lz_error_set(err, -EPERM,
                            "private_dirs: %s is not git-ignored in %s: a private directory is the Domain's own "
                            "and never reaches the host; add \"/%s/\" to the workspace's .gitignore (or to "
                            ".git/info/exclude), or remove it from private_dirs",
                            rel, workspace, rel);
    return r < 0 ? r : 0;
}

int lz_privdirs_check(const char *workspace, const char *git, char *const *dirs, size_t n, struct lz_error *err) {
    if (!n)
        return 0;
    if (!git)
        return lz_error_set(err, -ENOENT,
                            "private_dirs: no git on PATH to check that they are git-ignored in %s; install git "
                            "or remove private_dirs from the profile",
                            workspace);
    _cleanup_close_ int wfd = open(workspace, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (wfd < 0)
        return lz_error_set(err, -errno, "cannot open workspace %s: %s", workspace, strerror(errno));
    char **env = lz_gitscan_git_env();
    const char *const *paths = (const char *const *)dirs;
    int r = 0;
    for (size_t i = 0; r >= 0 && i < n; i++)
        r = check_shape(wfd, git, env, workspace, dirs[i], err);
    /* Two git runs for all of them (each costs milliseconds on the start
     * path); one per directory only to say which failed. check-ignore
     * prints each ignored path once: as many lines as paths, all ignored. */
    _cleanup_free_ char *tracked = NULL, *ignored = NULL;
    int st = r < 0 ? 0 : git_at(git, env, workspace, "ls-files", "--cached", paths, n, &tracked);
    bool fast = r >= 0 && st == 0 && tracked && !tracked[0];
    if (fast) {
        st = git_at(git, env, workspace, "check-ignore", NULL, paths, n, &ignored);
        size_t lines = 0;
        for (const char *c = ignored; c && *c; c++)
            lines += *c == '\n';
        fast = st == 0 && lines == n;
    }
    for (size_t i = 0; r >= 0 && !fast && i < n; i++)
        r = check_one(git, env, workspace, dirs[i], err);
    if (r >= 0 && !fast)
        r = lz_error_set(err, -EINVAL, "private_dirs: git's answers in %s do not agree; run `git -C %s status`",
                         workspace, workspace);
    free_env(env);
    return r < 0 ? r : 0;
}

int lz_privdirs_sources(const char *store_tree, char *const *dirs, size_t n, char ***ret, struct lz_error *err) {
    if (mkdir(store_tree, 0755) < 0 && errno != EEXIST)
        return lz_error_set(err, -errno, "cannot create %s: %s", store_tree, strerror(errno));
    _cleanup_close_ int tfd = open(store_tree, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (tfd < 0)
        return lz_error_set(err, -errno, "cannot open %s: %s", store_tree, strerror(errno));
    char **v = lz_xcalloc(n + 1, sizeof *v);
    int r = 0;
    for (size_t i = 0; i < n; i++) {
        /* Component by component, never following a symlink: the store
         * is written by the sandbox, which may have left one where a
         * private directory is to be. */
        int fd = fcntl(tfd, F_DUPFD_CLOEXEC, 3);
        _cleanup_free_ char *rel = lz_xstrdup(dirs[i]);
        char *save = NULL;
        for (char *c = strtok_r(rel, "/", &save); fd >= 0 && c; c = strtok_r(NULL, "/", &save)) {
            if (mkdirat(fd, c, 0755) < 0 && errno != EEXIST) {
                r = -errno;
                close(fd);
                fd = r;
                break;
            }
            int next = openat(fd, c, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            r = next < 0 ? -errno : 0;
            close(fd);
            fd = next < 0 ? r : next;
        }
        if (fd < 0) {
            r = lz_error_set(err, fd == -ELOOP ? -ENOTDIR : fd,
                             "private_dirs: cannot use %s/%s: %s (a symlink or a file the sandbox left there? "
                             "`lazaret state reset --ignored-only` clears the Domain's ignored files)",
                             store_tree, dirs[i], fd == -ELOOP ? "a symlink is in the way" : strerror(-fd));
            break;
        }
        _cleanup_close_ int dfd = fd;
        v[i] = lz_xasprintf("%s/%s", store_tree, dirs[i]);
        struct stat a, b;
        /* runsc opens the source by path: it must lead where we went. */
        if (fstat(dfd, &a) < 0 || stat(v[i], &b) < 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) {
            r = lz_error_set(err, -EXDEV, "private_dirs: %s changed while it was checked", v[i]);
            break;
        }
    }
    if (r < 0) {
        lz_strv_free(v, n);
        return r;
    }
    *ret = v;
    return 0;
}
