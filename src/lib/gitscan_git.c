/* gitscan_git.c — asking the host's git about a repository of the
 * workspace: its configuration files and their includes, its hooks and
 * what they run (gitscan_int.h). */
#include "gitscan_int.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "spawn.h"

/* ---- running the host's git ------------------------------------------- */

char *lz_gs_find_git(void) {
    const char *path = getenv("PATH");
    if (!path || !path[0])
        path = "/usr/local/bin:/usr/bin:/bin";
    _cleanup_free_ char *dup = lz_xstrdup(path);
    char *save = NULL;
    for (char *d = strtok_r(dup, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (d[0] != '/')
            continue; /* a relative PATH entry would depend on the cwd */
        char *g = lz_xasprintf("%s/git", d);
        struct stat st;
        if (stat(g, &st) == 0 && S_ISREG(st.st_mode) && access(g, X_OK) == 0)
            return g;
        free(g);
    }
    return NULL;
}

char *lz_gitscan_git_path(void) { return lz_gs_find_git(); }

char **lz_gitscan_git_env(void) { return lz_gs_clean_env(); }

/* The environment for git: the variables that select the developer's
 * configuration, nothing that could redirect the repository. */
char **lz_gs_clean_env(void) {
    static const char *const keep[] = {
        "HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM", "GIT_CONFIG_NOSYSTEM", "PATH", "LANG"
    };
    char **e = lz_xcalloc(LZ_ARRAY_SIZE(keep) + 1, sizeof *e);
    size_t n = 0;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(keep); i++) {
        const char *v = getenv(keep[i]);
        if (v)
            e[n++] = lz_xasprintf("%s=%s", keep[i], v);
    }
    e[n] = NULL;
    return e;
}

int lz_gitscan_run_git(const char *git, char **envp, int timeout_ms, const char *const *args, char **ret,
                       size_t *ret_len) {
    size_t na = 0;
    while (args[na])
        na++;
    _cleanup_free_ char **argv = lz_xcalloc(na + 1, sizeof *argv);
    argv[0] = (char *)git;
    for (size_t i = 1; i < na; i++)
        argv[i] = (char *)args[i];
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0)
        return -errno;
    _cleanup_close_ int rd = pp[0];
    struct lz_spawn_opts o = { .path = git,
                               .argv = argv,
                               .envp = envp,
                               .stdin_fd = -1,
                               .stdout_fd = pp[1],
                               .stderr_fd = -1,
                               .setns_pidfd = -1,
                               .cwd = "/" };
    struct lz_child c = LZ_CHILD_NULL;
    int r = lz_spawn(&o, &c);
    close(pp[1]);
    if (r < 0)
        return r;
    size_t cap = 1 << 16, len = 0;
    char *buf = lz_xmalloc(cap);
    long deadline = lz_now_ms() + timeout_ms;
    r = 0;
    for (;;) {
        long left = deadline - lz_now_ms();
        struct pollfd p = { .fd = rd, .events = POLLIN };
        if (left <= 0 || poll(&p, 1, (int)left) <= 0) {
            r = -ETIMEDOUT;
            break;
        }
        if (len + 4096 > cap) {
            if (cap >= 64u << 20) {
                r = -EFBIG;
                break;
            }
            cap *= 2;
            buf = lz_xrealloc(buf, cap);
        }
        ssize_t n = read(rd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    int st = 0;
    if (r < 0) {
        lz_child_stop(&c, 100, &st);
        lz_child_close(&c);
        free(buf);
        return r;
    }
    long left = deadline - lz_now_ms();
    r = lz_child_wait(&c, left > 0 ? (int)left : 0, &st);
    if (r == -ETIMEDOUT)
        lz_child_stop(&c, 100, &st);
    lz_child_close(&c);
    if (r < 0) {
        free(buf);
        return r;
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    return st;
}

/* Runs git with argv (argv[0] ignored), output into *ret (NUL-terminated).
 * Returns the exit status, or a negative errno. */
static int run_git(struct scan *s, const char *const *args, char **ret, size_t *ret_len) {
    return lz_gitscan_run_git(s->git, s->envp, s->timeout_ms, args, ret, ret_len);
}

/* ---- configuration files ---------------------------------------------- */

static bool is_include_key(const char *k) {
    if (!strcmp(k, "include.path"))
        return true;
    size_t l = strlen(k);
    return !strncmp(k, "includeif.", 10) && l > 15 && !strcmp(k + l - 5, ".path");
}

/* Keys whose value names a file that changes what git log, diff, show
 * and blame display (docs/security-git.md, "What the host's Git shows"). */
static bool is_display_key(const char *k) {
    return !strcmp(k, "core.attributesfile") || !strcmp(k, "mailmap.file") || !strcmp(k, "blame.ignorerevsfile") ||
        !strcmp(k, "diff.orderfile");
}

/* Reads every include of file f (absolute, as Git names it), active or
 * not, and recurses; collects core.hooksPath values into hooks. */
static void scan_file(struct scan *s, const char *f, int depth, const char *repo, struct strv *hooks) {
    if (depth > LZ_GITSCAN_INCLUDE_DEPTH || strv_has(&s->cfgfiles, f))
        return;
    strv_add(&s->cfgfiles, f);
    struct stat st;
    if (stat(f, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    const char *args[] = { "git", "config", "--file", f, "--list", "--show-origin", "-z", "--no-includes", NULL };
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = run_git(s, args, &buf, &len);
    if (r != 0) {
        lz_gs_log(s, "git config --file %s failed (%s)", f, r < 0 ? strerror(-r) : "exit status");
        return;
    }
    _cleanup_free_ char *base = lz_gs_dir_of(f);
    struct lz_gitcfg_entry e;
    for (size_t off = 0; (off = lz_gitscan_next_entry(buf, len, off, false, &e)) != 0;) {
        if (!e.value)
            continue;
        if (!strcmp(e.key, "core.hookspath")) {
            strv_add(hooks, e.value);
            continue;
        }
        if (!is_include_key(e.key))
            continue;
        _cleanup_free_ char *t = lz_gitscan_join(e.value, base, s->home);
        if (!t)
            continue;
        _cleanup_free_ char *why = lz_xasprintf("%s (%s in %s)", repo, e.key, f);
        _cleanup_free_ char *c = lz_gs_protect_path(s, t, why);
        scan_file(s, t, depth + 1, repo, hooks);
    }
}

/* ---- hooks -------------------------------------------------------------- */

static const char *const hook_names[] = {
    "applypatch-msg",     "pre-applypatch",     "post-applypatch",       "pre-commit",       "pre-merge-commit",
    "prepare-commit-msg", "commit-msg",         "post-commit",           "pre-rebase",       "post-checkout",
    "post-merge",         "pre-push",           "pre-receive",           "update",           "proc-receive",
    "post-receive",       "post-update",        "reference-transaction", "push-to-checkout", "pre-auto-gc",
    "post-rewrite",       "sendemail-validate", "fsmonitor-watchman",    "p4-changelist",    "p4-prepare-changelist",
    "p4-post-changelist", "p4-pre-submit",      "post-index-change",
};

/* Protects name (relative to the work tree root wt) whether or not it
 * exists: the agent must not create it either. */
static void protect_in_tree(struct scan *s, const char *wt, const char *name, const char *why) {
    _cleanup_free_ char *a = lz_xasprintf("%s/%s", wt, name);
    _cleanup_free_ char *c = lz_gs_protect_path(s, a, why);
}

/* The configuration files a hook manager reads, wherever they exist. */
static void protect_each(struct scan *s, const char *root, const char *const *names, size_t n, const char *why) {
    for (size_t i = 0; i < n; i++)
        protect_in_tree(s, root, names[i], why);
}

static void analyse_hook(struct scan *s, const char *repo, const char *wt, const char *hdir, const char *name) {
    _cleanup_free_ char *path = lz_xasprintf("%s/%s", hdir, name);
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode) || !(st.st_mode & 0111))
        return;
    _cleanup_free_ char *why = lz_xasprintf("%s hook %s", repo, name);
    /* The hook itself, through every symlink on its way. */
    _cleanup_free_ char *real = lz_gs_protect_path(s, path, why);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (lz_read_file_at(AT_FDCWD, path, 1 << 20, &text, &len) < 0 || memchr(text, '\0', len))
        return; /* a binary hook runs nothing by name that we could read */
    unsigned m = lz_gitscan_managers(text, hdir);
    const char *root = wt ? wt : hdir;
    if (m & LZ_HM_HUSKY4) {
        static const char *const rc[] = { ".huskyrc",    ".huskyrc.json", ".huskyrc.yaml",   ".huskyrc.yml",
                                          ".huskyrc.js", ".huskyrc.cjs",  "husky.config.js", "husky.config.cjs" };
        protect_each(s, root, rc, LZ_ARRAY_SIZE(rc), why);
        lz_gs_notice(s,
                     "%s: husky v4 runs the commands in the \"husky\" key of package.json, which Lazaret cannot "
                     "keep read-only (normal work edits it); review package.json before committing on the host, "
                     "or move to husky v9 (.husky/)",
                     why);
    }
    if (m & LZ_HM_PRECOMMIT) {
        _cleanup_free_ char *cfg = lz_gitscan_precommit_config(text);
        protect_in_tree(s, root, cfg, why);
        lz_gs_notice(s,
                     "%s: pre-commit runs the hooks of %s (kept read-only); its `repo: local` hooks and the "
                     "scripts they name run files the agent can change; review them before committing on the host",
                     why, cfg);
    }
    if (m & LZ_HM_LEFTHOOK) {
        static const char *const lf[] = {
            "lefthook.yml",
            "lefthook.yaml",
            "lefthook.toml",
            "lefthook.json",
            ".lefthook.yml",
            ".lefthook.yaml",
            ".lefthook.toml",
            ".lefthook.json",
            "lefthook-local.yml",
            "lefthook-local.yaml",
            "lefthook-local.toml",
            "lefthook-local.json",
            ".lefthook-local.yml",
            ".lefthook-local.yaml",
            ".lefthook-local.toml",
            ".lefthook-local.json",
            ".config/lefthook.yml",
            ".config/lefthook.yaml",
            ".config/lefthook.toml",
            ".config/lefthook.json",
            ".config/lefthook-local.yml",
            ".config/lefthook-local.yaml",
            ".lefthook",
            ".lefthook-local",
        };
        protect_each(s, root, lf, LZ_ARRAY_SIZE(lf), why);
        lz_gs_notice(s,
                     "%s: lefthook runs the commands of its configuration (kept read-only); scripts those "
                     "commands name outside .lefthook/ can be changed by the agent; review them before "
                     "committing on the host",
                     why);
    }
    if (m & LZ_HM_SIMPLE_GIT_HOOKS)
        lz_gs_notice(s,
                     "%s: simple-git-hooks copies its commands from package.json when `simple-git-hooks` runs; "
                     "the agent can change that key: review package.json before running it on the host",
                     why);
    if (m & LZ_HM_PACKAGE_RUNNER)
        lz_gs_notice(s,
                     "%s runs npm/npx/yarn/pnpm/bun/make or node_modules code: package.json scripts, Makefiles "
                     "and node_modules are files the agent can change, which Lazaret cannot keep read-only; "
                     "review them (or commit with --no-verify) after an agent session",
                     why);
    /* Generic: every word naming an existing file of the work tree. */
    char **tok = NULL;
    size_t nt = lz_gitscan_tokens(text, &tok);
    for (size_t i = 0; i < nt; i++) {
        _cleanup_free_ char *a = tok[i][0] == '/' ? lz_xstrdup(tok[i]) : lz_xasprintf("%s/%s", root, tok[i]);
        struct stat ts;
        /* files only: a directory word (`eslint src`) names input, not code */
        if (stat(a, &ts) == 0 && S_ISREG(ts.st_mode)) {
            _cleanup_free_ char *c = lz_gs_protect_path(s, a, why);
        }
        free(tok[i]);
    }
    free(tok);
}

/* Looks at one hooks directory (absolute) of a repository. */
static void scan_hooks(struct scan *s, const char *repo, const char *wt, const char *hdir, bool configured) {
    _cleanup_free_ char *why = lz_xasprintf("%s core.hooksPath", repo);
    _cleanup_free_ char *c = lz_gitscan_canon(hdir, NULL, NULL);
    if (!c || strv_has(&s->hookdirs, c))
        return;
    strv_add(&s->hookdirs, c);
    if (configured) {
        unsigned m = lz_gitscan_managers(NULL, c);
        if (m & LZ_HM_HUSKY9) {
            /* husky v9: .husky/_/HOOK runs .husky/HOOK */
            _cleanup_free_ char *parent = lz_gs_dir_of(c);
            _cleanup_free_ char *p = lz_gs_protect_path(s, parent, why);
        }
        _cleanup_free_ char *p = lz_gs_protect_path(s, hdir, why);
    }
    for (size_t i = 0; i < LZ_ARRAY_SIZE(hook_names); i++)
        analyse_hook(s, repo, wt, c, hook_names[i]);
}

/* ---- one repository ----------------------------------------------------- */

/* Where the repository's common and own Git directories are, whether it is
 * bare, and the way up to its work tree's top. */
static const char *const rev_parse[] = { "rev-parse", "--path-format=absolute", "--git-common-dir",
                                         "--git-dir", "--is-bare-repository",   "--show-cdup",
                                         NULL };
/* Every active key with its scope and origin file, includes followed. */
static const char *const config_list[] = {
    "config", "--list", "--show-origin", "--show-scope", "-z", "--includes", NULL
};

/* Runs `git -C dir CMD...` (or, without dir, `git --git-dir=gitdir
 * CMD...`) like run_git; cmd is NULL-terminated. */
static int run_git_at(struct scan *s, const char *dir, const char *gitdir, const char *const *cmd, char **ret,
                      size_t *ret_len) {
    _cleanup_free_ char *gd = dir ? NULL : lz_xasprintf("--git-dir=%s", gitdir);
    const char *a[16];
    size_t n = 0;
    a[n++] = "git";
    if (dir) {
        a[n++] = "-C";
        a[n++] = dir;
    } else {
        a[n++] = gd;
    }
    for (; *cmd && n < LZ_ARRAY_SIZE(a) - 1; cmd++)
        a[n++] = *cmd;
    a[n] = NULL;
    return run_git(s, a, ret, ret_len);
}

/* Asks git about the repository at dir (-C) or gitdir (--git-dir). */
void lz_gs_scan_repo(struct scan *s, const char *dir, const char *gitdir) {
    const char *key = dir ? dir : gitdir;
    if (strv_has(&s->repos, key))
        return;
    strv_add(&s->repos, key);
    s->out->n_repos++;
    _cleanup_free_ char *rp = NULL;
    size_t rl = 0;
    _cleanup_free_ char *common = NULL, *wt = NULL;
    const char *rel_base = dir ? dir : gitdir;
    if (run_git_at(s, dir, gitdir, rev_parse, &rp, &rl) == 0) {
        char *save = NULL;
        char *l1 = strtok_r(rp, "\n", &save);
        char *l2 = l1 ? strtok_r(NULL, "\n", &save) : NULL;
        char *l3 = l2 ? strtok_r(NULL, "\n", &save) : NULL;
        char *l4 = l3 ? strtok_r(NULL, "\n", &save) : NULL;
        if (l1)
            common = lz_xstrdup(l1);
        if (l3 && !strcmp(l3, "false") && dir) {
            _cleanup_free_ char *j = l4 ? lz_xasprintf("%s/%s", dir, l4) : lz_xstrdup(dir);
            wt = lz_gitscan_canon(j, NULL, NULL);
        }
        (void)l2;
    }
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = run_git_at(s, dir, gitdir, config_list, &buf, &len);
    const char *repo = wt ? wt : key;
    _cleanup_free_ char *repo_name = NULL;
    {
        const char *rel = lz_gitscan_rel(s->ws, repo);
        repo_name = rel ? lz_xasprintf("repository %s", rel[0] ? rel : ".") : lz_xasprintf("repository %s", repo);
    }
    struct strv hooks = { 0 }, display = { 0 };
    _cleanup_free_ char *eff_hooks = NULL;
    if (r != 0) {
        lz_gs_log(s, "%s: git config --list failed (%s); its configuration was not read", repo_name,
                  r < 0 ? strerror(-r) : "non-zero exit");
    } else {
        struct strv origins = { 0 };
        struct lz_gitcfg_entry e;
        for (size_t off = 0; (off = lz_gitscan_next_entry(buf, len, off, true, &e)) != 0;) {
            if (strncmp(e.origin, "file:", 5))
                continue;
            const char *f = e.origin + 5;
            char *abs = f[0] == '/' ? lz_xstrdup(f) : lz_xasprintf("%s/%s", rel_base, f);
            if (!strv_has(&origins, abs))
                strv_push(&origins, abs);
            else
                free(abs);
            if (!strcmp(e.key, "core.hookspath") && e.value) {
                free(eff_hooks);
                eff_hooks = lz_xstrdup(e.value);
            }
            if (e.value && is_display_key(e.key))
                strv_push(&display, lz_xasprintf("%s=%s", e.key, e.value));
        }
        for (size_t i = 0; i < origins.n; i++) {
            _cleanup_free_ char *why = lz_xasprintf("%s (configuration file)", repo_name);
            _cleanup_free_ char *c = lz_gs_protect_path(s, origins.v[i], why);
            scan_file(s, origins.v[i], 0, repo_name, &hooks);
        }
        strv_clear(&origins);
    }
    /* Hooks: the effective directory, and every other core.hooksPath that
     * a condition could make effective later. */
    const char *hroot = wt ? wt : (gitdir ? gitdir : common);
    if (eff_hooks)
        strv_add(&hooks, eff_hooks);
    for (size_t i = 0; i < hooks.n; i++) {
        _cleanup_free_ char *h = lz_gitscan_join(hooks.v[i], hroot, s->home);
        if (h)
            scan_hooks(s, repo_name, wt, h, true);
    }
    if (common) {
        _cleanup_free_ char *h = lz_xasprintf("%s/hooks", common);
        scan_hooks(s, repo_name, wt, h, false);
    }
    /* Files the configuration names that change what git log, diff and
     * blame display: relative to the top of the work tree (or the Git
     * directory of a bare repository), where git runs. */
    for (size_t i = 0; i < display.n; i++) {
        char *eq = strchr(display.v[i], '=');
        *eq = '\0';
        _cleanup_free_ char *p = lz_gitscan_join(eq + 1, hroot, s->home);
        if (!p)
            continue;
        _cleanup_free_ char *why = lz_xasprintf("%s (%s)", repo_name, display.v[i]);
        _cleanup_free_ char *c = lz_gs_protect_path(s, p, why);
    }
    strv_clear(&display);
    strv_clear(&hooks);
}
