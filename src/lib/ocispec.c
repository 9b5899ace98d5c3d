/* ocispec.c — see ocispec.h. */
#include "ocispec.h"

#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>

/* Docker's default capability set without CAP_NET_RAW: enough for package
 * managers as root in the sandbox; nothing that administers the network. */
static const char *const caps[] = {
    "CAP_CHOWN",      "CAP_DAC_OVERRIDE", "CAP_FSETID",      "CAP_FOWNER",  "CAP_MKNOD",
    "CAP_SETGID",     "CAP_SETUID",       "CAP_SETFCAP",     "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT", "CAP_KILL",         "CAP_AUDIT_WRITE",
};

static json_t *caps_json(void) {
    json_t *a = json_array();
    for (size_t i = 0; i < LZ_ARRAY_SIZE(caps); i++)
        json_array_append_new(a, json_string(caps[i]));
    json_t *c = json_object();
    json_object_set(c, "bounding", a);
    json_object_set(c, "effective", a);
    json_object_set(c, "permitted", a);
    json_decref(a);
    return c;
}

static json_t *mount_json(const char *dest, const char *type, const char *src, const char *const *opts) {
    json_t *m = json_object();
    json_object_set_new(m, "destination", json_string(dest));
    json_object_set_new(m, "type", json_string(type));
    json_object_set_new(m, "source", json_string(src));
    json_t *o = json_array();
    for (; opts && *opts; opts++)
        json_array_append_new(o, json_string(*opts));
    json_object_set_new(m, "options", o);
    return m;
}

void lz_oci_binds_free(struct lz_oci_bind *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        free(b[i].source);
        free(b[i].destination);
    }
    free(b);
}

static void add_bind(struct lz_oci_bind **b, size_t *n, const char *src, const char *dst, bool ro) {
    *b = lz_xrealloc(*b, (*n + 1) * sizeof **b);
    (*b)[*n] = (struct lz_oci_bind){ lz_xstrdup(src), lz_xstrdup(dst), ro };
    (*n)++;
}
static void add_str(char ***v, size_t *n, const char *s) {
    *v = lz_xrealloc(*v, (*n + 1) * sizeof **v);
    (*v)[(*n)++] = lz_xstrdup(s);
}

/* Type of name under dirfd without following symlinks; 0 if absent. */
static mode_t type_at(int dirfd, const char *name) {
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    return st.st_mode & S_IFMT;
}

int lz_oci_workspace_mounts(const char *ws, const char *view, struct lz_oci_bind **binds, size_t *n_binds,
                            char ***tmpfs, size_t *n_tmpfs, struct lz_error *err) {
    _cleanup_close_ int wfd = open(ws, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (wfd < 0)
        return lz_error_set(err, -errno, "cannot open workspace %s: %s", ws, strerror(errno));
    add_bind(binds, n_binds, view, "/workspace", false);

    mode_t git = type_at(wfd, ".git");
    if (git == S_IFDIR) {
        _cleanup_free_ char *gitdir = lz_xasprintf("%s/.git", ws);
        _cleanup_close_ int gfd = open(gitdir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (gfd < 0)
            return lz_error_set(err, -errno, "cannot open %s: %s", gitdir, strerror(errno));
        /* .git bound onto itself: the agent cannot rename it away and
         * plant a new one whose config the host's Git would read. */
        _cleanup_free_ char *vgit = lz_xasprintf("%s/.git", view);
        add_bind(binds, n_binds, vgit, "/workspace/.git", false);
        if (type_at(gfd, "config") == S_IFREG) {
            _cleanup_free_ char *cfg = lz_xasprintf("%s/config", gitdir);
            add_bind(binds, n_binds, cfg, "/workspace/.git/config", true);
        }
        /* Hooks: the host directory must exist to be covered; Git creates
         * it at init, and an empty one is what Git itself would make. */
        if (type_at(gfd, "hooks") == 0 && mkdirat(gfd, "hooks", 0755) < 0 && errno != EEXIST)
            return lz_error_set(err, -errno, "cannot create %s/hooks: %s", gitdir, strerror(errno));
        if (type_at(gfd, "hooks") != S_IFDIR)
            return lz_error_set(err, -EINVAL, "%s/hooks is not a directory: refusing to start (it cannot be hidden)",
                                gitdir);
        add_str(tmpfs, n_tmpfs, "/workspace/.git/hooks");
    } else if (git == S_IFREG) {
        /* A gitfile (linked worktree or submodule): keep it read-only so
         * it cannot be pointed at an agent-written repository. */
        _cleanup_free_ char *gf = lz_xasprintf("%s/.git", view);
        add_bind(binds, n_binds, gf, "/workspace/.git", true);
    } else if (git != 0) {
        return lz_error_set(err, -EINVAL, "%s/.git is neither a directory nor a file: refusing to start", ws);
    }
    /* `.vscode`, `.idea` and the other host-tool configuration paths are
     * no longer hidden here: the router serves them, at any depth, from the
     * Domain's copy (docs/host-tools.md). */
    return 0;
}

int lz_oci_sandbox_config(const struct lz_sandbox_spec *s, char **ret_json, struct lz_error *err) {
    json_t *root = json_object();
    json_object_set_new(root, "ociVersion", json_string("1.0.2"));

    json_t *proc = json_object();
    json_object_set_new(proc, "terminal", json_false());
    json_object_set_new(proc, "user", json_pack("{s:i,s:i}", "uid", 0, "gid", 0));
    if (s->test_prelude) {
        /* Test builds only (bundle.c): the prelude runs beside init, from
         * the sandbox's first moment; init still becomes PID 1. */
        _cleanup_free_ char *script = lz_xasprintf("( %s ) & exec /run/lazaret/init", s->test_prelude);
        json_object_set_new(proc, "args", json_pack("[sss]", "/bin/sh", "-c", script));
    } else {
        json_object_set_new(proc, "args", json_pack("[s]", "/run/lazaret/init"));
    }
    json_object_set_new(proc, "env",
                        json_pack("[s]", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
    json_object_set_new(proc, "cwd", json_string("/"));
    json_object_set_new(proc, "capabilities", caps_json());
    json_object_set_new(proc, "noNewPrivileges", json_true());
    json_object_set_new(root, "process", proc);

    json_object_set_new(root, "root", json_pack("{s:s,s:b}", "path", s->rootfs, "readonly", 0));
    json_object_set_new(root, "hostname", json_string(s->hostname ? s->hostname : "lazaret"));

    json_t *mounts = json_array();
    static const char *const proc_o[] = { "nosuid", "noexec", "nodev", NULL };
    static const char *const tmp_o[] = { "nosuid", "nodev", "mode=1777", NULL };
    static const char *const run_o[] = { "nosuid", "nodev", "mode=755", NULL };
    static const char *const hide_o[] = { "nosuid", "nodev", "noexec", "mode=755", NULL };
    static const char *const rw_o[] = { "rbind", "rw", NULL };
    static const char *const ro_o[] = { "rbind", "ro", NULL };
    for (size_t i = 0; i < s->n_anchors; i++)
        json_array_append_new(mounts, mount_json(s->anchors[i].destination, "bind", s->anchors[i].source, rw_o));
    json_array_append_new(mounts, mount_json("/proc", "proc", "proc", proc_o));
    json_array_append_new(mounts, mount_json("/tmp", "tmpfs", "tmpfs", tmp_o));
    json_array_append_new(mounts, mount_json("/run", "tmpfs", "tmpfs", run_o));
    json_array_append_new(mounts, mount_json("/run/lazaret/init", "bind", s->init_path, ro_o));

    struct lz_oci_bind *wb = NULL;
    size_t nwb = 0, ntmp = 0;
    char **tmpd = NULL;
    int r = lz_oci_workspace_mounts(s->workspace, s->view ? s->view : s->workspace, &wb, &nwb, &tmpd, &ntmp, err);
    if (r < 0) {
        json_decref(root);
        json_decref(mounts);
        return r;
    }
    /* A linked worktree: its `.git` names the common Git directory where
     * the sandbox sees it, and that directory is served by its own router
     * (worktree.h). The gitfile bound here replaces the host's, which
     * names a host path. */
    if (s->wt_gitfile && s->wt_common_view && s->wt_common) {
        for (size_t i = 0; i < nwb; i++)
            if (!strcmp(wb[i].destination, "/workspace/.git")) {
                free(wb[i].source);
                wb[i].source = lz_xstrdup(s->wt_gitfile);
                wb[i].read_only = true;
            }
        add_bind(&wb, &nwb, s->wt_common_view, LZ_SANDBOX_GIT_COMMON, false);
        _cleanup_close_ int cfd = open(s->wt_common, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* Only over a gitdir that is there: the mount point cannot be made
         * through the router (gitdir is read-only inside). */
        _cleanup_free_ char *gd_rel = s->wt_name ? lz_xasprintf("worktrees/%s/gitdir", s->wt_name) : NULL;
        if (cfd >= 0 && gd_rel && s->wt_gitdir_file && type_at(cfd, gd_rel) == S_IFREG) {
            _cleanup_free_ char *dst = lz_xasprintf(LZ_SANDBOX_GIT_COMMON "/%s", gd_rel);
            add_bind(&wb, &nwb, s->wt_gitdir_file, dst, true);
        }
        if (cfd >= 0 && type_at(cfd, "config") == S_IFREG) {
            _cleanup_free_ char *cfg = lz_xasprintf("%s/config", s->wt_common);
            add_bind(&wb, &nwb, cfg, LZ_SANDBOX_GIT_COMMON "/config", true);
        }
        if (cfd >= 0 && type_at(cfd, "hooks") == S_IFDIR)
            add_str(&tmpd, &ntmp, LZ_SANDBOX_GIT_COMMON "/hooks");
    }
    for (size_t i = 0; i < nwb; i++)
        json_array_append_new(mounts,
                              mount_json(wb[i].destination, "bind", wb[i].source, wb[i].read_only ? ro_o : rw_o));
    /* Over the router's view, so mounted after it: gVisor's own mount,
     * which the router never sees (renames and links across it give
     * EXDEV in the sandbox). No set-id bits and no device nodes, as the
     * router refuses them elsewhere in /workspace: runsc 20240729 ignores
     * both options (its gofer makes no device node, and it honours no
     * set-id bit anywhere), later ones honour nosuid. */
    static const char *const priv_o[] = { "rbind", "rw", "nosuid", "nodev", NULL };
    for (size_t i = 0; i < s->n_private_dirs; i++)
        json_array_append_new(mounts,
                              mount_json(s->private_dirs[i].destination, "bind", s->private_dirs[i].source, priv_o));
    for (size_t i = 0; i < ntmp; i++) {
        json_array_append_new(mounts, mount_json(tmpd[i], "tmpfs", "tmpfs", hide_o));
        free(tmpd[i]);
    }
    free(tmpd);
    lz_oci_binds_free(wb, nwb);
    for (size_t i = 0; i < s->n_binds; i++)
        json_array_append_new(
            mounts,
            mount_json(s->binds[i].destination, "bind", s->binds[i].source, s->binds[i].read_only ? ro_o : rw_o));
    json_object_set_new(root, "mounts", mounts);

    json_t *ns = json_array();
    static const char *const nstypes[] = { "pid", "ipc", "uts", "mount" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(nstypes); i++)
        json_array_append_new(ns, json_pack("{s:s}", "type", nstypes[i]));
    if (s->netns_path)
        json_array_append_new(ns, json_pack("{s:s,s:s}", "type", "network", "path", s->netns_path));
    else
        json_array_append_new(ns, json_pack("{s:s}", "type", "network"));
    json_t *linux_ = json_object();
    json_object_set_new(linux_, "namespaces", ns);
    json_object_set_new(root, "linux", linux_);

    char *out = json_dumps(root, JSON_INDENT(1) | JSON_SORT_KEYS);
    json_decref(root);
    if (!out)
        return lz_error_set(err, -ENOMEM, "cannot encode the OCI spec");
    *ret_json = out;
    return 0;
}

int lz_oci_process_json(const struct lz_exec_spec *e, char **ret_json, struct lz_error *err) {
    json_t *p = json_object();
    json_object_set_new(p, "terminal", json_boolean(e->terminal));
    if (e->terminal && e->rows && e->cols)
        json_object_set_new(p, "consoleSize", json_pack("{s:i,s:i}", "height", e->rows, "width", e->cols));
    json_object_set_new(p, "user", json_pack("{s:i,s:i}", "uid", 0, "gid", 0));
    json_t *a = json_array();
    for (char *const *v = e->argv; *v; v++)
        json_array_append_new(a, json_string(*v));
    json_object_set_new(p, "args", a);
    json_t *env = json_array();
    for (char *const *v = e->envv; v && *v; v++)
        json_array_append_new(env, json_string(*v));
    json_object_set_new(p, "env", env);
    json_object_set_new(p, "cwd", json_string(e->cwd ? e->cwd : "/workspace"));
    json_object_set_new(p, "capabilities", caps_json());
    json_object_set_new(p, "noNewPrivileges", json_true());
    char *out = json_dumps(p, JSON_COMPACT);
    json_decref(p);
    if (!out)
        return lz_error_set(err, -ENOMEM, "cannot encode the process spec (invalid UTF-8 in an argument?)");
    *ret_json = out;
    return 0;
}
