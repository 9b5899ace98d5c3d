/* procenv.c — see procenv.h. */
#include "procenv.h"
#include "config.h"
#include "toml.h" /* lz_utf8_valid */

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

char *const lz_helper_envp[] = { (char *)LZ_HELPER_PATH, NULL };

/* Lazaret's own debug and test hooks: not secrets, read by the coordinator
 * and the Supervisor (crash points, fake boot ID, model trace, tool paths).
 * The test hooks exist only in test builds (util.h lz_test_hook). */
const char *const lz_env_hooks[] = {
    "LAZARET_DEBUG",
    "LAZARET_RUNSC",
    "LAZARET_SLIRP4NETNS",
#ifdef LZ_TEST_HOOKS
    "LAZARET_TEST_BOOT_ID",
    "LAZARET_TEST_CRASH",
    "LAZARET_TEST_NETFOLLOW",
    "LAZARET_TEST_NET",          /* helper-configures: the start overlap's positive control */
    "LAZARET_TEST_NET_DELAY_MS", /* the Supervisor's policy install waits (slirp.h, supervisor.c) */
    "LAZARET_TEST_INIT_PRELUDE", /* a shell command the sandbox runs beside lazaret-init (bundle.c) */
    "LAZARET_TEST_AUTO_APPROVE",
    "LAZARET_TEST_WORKSPACE",
    "LAZARET_TEST_FUSE", /* the routers' --fuse-transport (supervisor.c) */
    "LAZARET_TEST_TEARDOWN_PAUSE_MS",
    "LAZARET_TEST_EXIT_PAUSE_MS", /* the coordinator's teardown waits before removing its socket */
    "LAZARET_TEST_RESOLVER",      /* fail: the Domain's resolver and gate do not start (coordinator.c) */
    "LAZARET_TEST_MAILBOX_UNBOUNDED",
    "LAZARET_TEST_HOST_CA_DIR", /* the gate's trust of the host's CAs (hc_creds.c) */
#endif
    NULL,
};

/* What the coordinator needs to locate the same configuration file,
 * Storage Root, Git config and runtime directory as its client: the Git
 * scan (gitscan.h) must resolve the host's Git configuration exactly as
 * the developer's git does, so Git's own config-locating variables come
 * along, and the scan's bounds. */
static const char *const coordinator_dirs[] = {
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
    "LAZARET_GIT_SCAN_MAX_ENTRIES",
    "LAZARET_GIT_SCAN_MAX_DEPTH",
    NULL,
};

/* The image tools' legitimate needs: finding themselves and their helpers
 * (the user's PATH), their configuration and credentials (HOME, XDG,
 * registry auth), temporary space, messages, and the network path to the
 * registry or the Debian mirror (proxies, TLS trust). */
static const char *const tool_vars[] = {
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "no_proxy",
    "NO_PROXY",
    "all_proxy",
    "ALL_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "REGISTRY_AUTH_FILE",
    "DOCKER_CONFIG",
    "CONTAINERS_REGISTRIES_CONF",
    "SOURCE_DATE_EPOCH",
    NULL,
};

/* Longer values are not copied: none of these legitimately is. */
#define ENV_VALUE_MAX 4096

static void push(char ***v, size_t *n, char *s) {
    *v = lz_xrealloc(*v, (*n + 2) * sizeof **v);
    (*v)[(*n)++] = s;
    (*v)[*n] = NULL;
}

static bool has(char **v, size_t n, const char *name) {
    size_t k = strlen(name);
    for (size_t i = 0; i < n; i++)
        if (!strncmp(v[i], name, k) && v[i][k] == '=')
            return true;
    return false;
}

static void copy_vars(char ***v, size_t *n, const char *const *names) {
    for (; *names; names++) {
        const char *val = secure_getenv(*names);
        if (val && strlen(val) <= ENV_VALUE_MAX && !has(*v, *n, *names))
            push(v, n, lz_xasprintf("%s=%s", *names, val));
    }
}

char **lz_env_build(enum lz_env_kind kind) {
    char **v = NULL;
    size_t n = 0;
    push(&v, &n, lz_xstrdup(LZ_HELPER_PATH));
    if (kind == LZ_ENV_SUPERVISOR || kind == LZ_ENV_COORDINATOR)
        copy_vars(&v, &n, lz_env_hooks);
    if (kind == LZ_ENV_COORDINATOR)
        copy_vars(&v, &n, coordinator_dirs);
    return v;
}

char **lz_tool_env(void) {
    char **v = NULL;
    size_t n = 0;
    copy_vars(&v, &n, tool_vars);
    if (!has(v, n, "PATH"))
        push(&v, &n, lz_xstrdup(LZ_HELPER_PATH));
    return v;
}

void lz_env_free(char **envp) {
    for (size_t i = 0; envp && envp[i]; i++) {
        explicit_bzero(envp[i], strlen(envp[i]));
        free(envp[i]);
    }
    free(envp);
}

/* ---- hand-over ---- */

struct lz_envpass {
    char *buf; /* the records, NUL-separated; zeroed on free */
    size_t len;
    const char **rec; /* pointers into buf */
    size_t n;
};

static bool name_valid(const char *s, size_t n) {
    if (n == 0 || !(s[0] == '_' || (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')))
        return false;
    for (size_t i = 1; i < n; i++)
        if (!(s[i] == '_' || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z') ||
              (s[i] >= '0' && s[i] <= '9')))
            return false;
    return true;
}

int lz_envpass_create(const struct lz_config *c, int *ret_fd, struct lz_error *err) {
    /* Each referenced host variable once, with the value the client
     * resolved (and validated). */
    size_t len = 0;
    for (size_t i = 0; i < c->profile.n_env; i++) {
        const struct lz_env_entry *e = &c->profile.env[i];
        if (e->reference && e->value)
            len += strlen(e->reference + 4) + 1 + strlen(e->value) + 1;
    }
    /* The PATH that resolved bare auto_approve names (config.h), so that
     * the coordinator finds the same executables; unless a reference
     * already carries it. */
    for (size_t i = 0; i < c->profile.n_credentials; i++) {
        const struct lz_credential *cr = &c->profile.credentials[i];
        if (cr->from == LZ_CRED_FROM_ENV && cr->value)
            len += strlen(cr->from_env) + 1 + strlen(cr->value) + 1;
    }
    bool path_ref = false;
    for (size_t i = 0; i < c->profile.n_env; i++)
        path_ref |= c->profile.env[i].reference && !strcmp(c->profile.env[i].reference + 4, "PATH");
    const char *aa_path = c->auto_approve_path && !path_ref ? c->auto_approve_path : NULL;
    if (aa_path)
        len += strlen("PATH=") + strlen(aa_path) + 1;
    if (len > LZ_ENVPASS_MAX)
        return lz_error_set(err, -E2BIG, "the profile's environment is too large to hand over");
    char *buf = lz_xmalloc(len ? len : 1);
    size_t off = 0;
    for (size_t i = 0; i < c->profile.n_env; i++) {
        const struct lz_env_entry *e = &c->profile.env[i];
        if (!e->reference || !e->value)
            continue;
        const char *var = e->reference + 4;
        bool dup = false;
        for (size_t k = 0; k < i && !dup; k++)
            dup =
                c->profile.env[k].reference && c->profile.env[k].value && !strcmp(c->profile.env[k].reference + 4, var);
        if (dup)
            continue;
        size_t nl = strlen(var), vl = strlen(e->value);
        memcpy(buf + off, var, nl);
        buf[off + nl] = '=';
        memcpy(buf + off + nl + 1, e->value, vl + 1);
        off += nl + 1 + vl + 1;
    }
    /* Credentials' host variables, unless a reference or an earlier
     * credential already carries the variable. */
    for (size_t i = 0; i < c->profile.n_credentials; i++) {
        const struct lz_credential *cr = &c->profile.credentials[i];
        if (cr->from != LZ_CRED_FROM_ENV || !cr->value)
            continue;
        bool dup = false;
        for (size_t k = 0; k < c->profile.n_env && !dup; k++)
            dup = c->profile.env[k].reference && c->profile.env[k].value &&
                !strcmp(c->profile.env[k].reference + 4, cr->from_env);
        for (size_t k = 0; k < i && !dup; k++)
            dup = c->profile.credentials[k].from == LZ_CRED_FROM_ENV && c->profile.credentials[k].value &&
                !strcmp(c->profile.credentials[k].from_env, cr->from_env);
        if (dup)
            continue;
        size_t nl = strlen(cr->from_env), vl = strlen(cr->value);
        memcpy(buf + off, cr->from_env, nl);
        buf[off + nl] = '=';
        memcpy(buf + off + nl + 1, cr->value, vl + 1);
        off += nl + 1 + vl + 1;
    }
    if (aa_path) {
        size_t vl = strlen(aa_path);
        memcpy(buf + off, "PATH=", 5);
        memcpy(buf + off + 5, aa_path, vl + 1);
        off += 5 + vl + 1;
    }
    int fd = memfd_create("lazaret-envpass", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    int r = 0;
    if (fd < 0 || lz_write_full(fd, buf, off) < 0 ||
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
        r = -errno;
    if (buf) /* never NULL (lz_xmalloc aborts), but say so to the compiler */
        explicit_bzero(buf, len ? len : 1);
    free(buf);
    if (r < 0) {
        if (fd >= 0)
            close(fd);
        return lz_error_set(err, r, "cannot hand the profile's environment to the Host Coordinator: %s", strerror(-r));
    }
    *ret_fd = fd;
    return 0;
}

void lz_envpass_free(struct lz_envpass *p) {
    if (!p)
        return;
    if (p->buf) {
        explicit_bzero(p->buf, p->len);
        free(p->buf);
    }
    free(p->rec);
    free(p);
}

int lz_envpass_read(int fd, struct lz_envpass **ret, struct lz_error *err) {
    struct stat st;
    if (fstat(fd, &st) < 0)
        return lz_error_set(err, -errno, "cannot read the profile's environment: %s", strerror(errno));
    if (!S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t)st.st_size > LZ_ENVPASS_MAX)
        return lz_error_set(err, -EBADMSG, "the profile's environment hand-over is not valid");
    struct lz_envpass *p = lz_xcalloc(1, sizeof *p);
    p->len = (size_t)st.st_size;
    p->buf = lz_xmalloc(p->len + 1);
    ssize_t n = 0;
    while ((size_t)n < p->len) {
        ssize_t k = pread(fd, p->buf + n, p->len - (size_t)n, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        n += k;
    }
    if ((size_t)n != p->len || (p->len && p->buf[p->len - 1] != '\0')) {
        lz_envpass_free(p);
        return lz_error_set(err, -EBADMSG, "the profile's environment hand-over is truncated");
    }
    p->buf[p->len] = '\0';
    for (size_t off = 0; off < p->len;) {
        const char *rec = p->buf + off;
        size_t rl = strlen(rec);
        const char *eq = memchr(rec, '=', rl);
        bool ok = eq && name_valid(rec, (size_t)(eq - rec)) && lz_utf8_valid(eq + 1, rl - (size_t)(eq - rec) - 1);
        for (size_t i = 0; ok && i < p->n; i++) {
            size_t k = (size_t)(eq - rec);
            ok = !(strncmp(p->rec[i], rec, k + 1) == 0);
        }
        if (!ok) {
            lz_envpass_free(p);
            return lz_error_set(err, -EBADMSG, "the profile's environment hand-over has an invalid record");
        }
        p->rec = lz_xrealloc(p->rec, (p->n + 1) * sizeof *p->rec);
        p->rec[p->n++] = rec;
        off += rl + 1;
    }
    *ret = p;
    return 0;
}

const char *lz_envpass_get(void *envpass, const char *name) {
    const struct lz_envpass *p = envpass;
    size_t k = strlen(name);
    for (size_t i = 0; p && i < p->n; i++)
        if (!strncmp(p->rec[i], name, k) && p->rec[i][k] == '=')
            return p->rec[i] + k + 1;
    return NULL;
}
