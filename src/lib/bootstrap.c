/* bootstrap.c — see bootstrap.h. */
#include "bootstrap.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>

#include "agents.h"
#include "imgref.h"
#include "imgtool.h"
#include "oci.h"

/* One image: the base of suite, plus an agent when a is non-NULL. */
static int bootstrap_image(const struct lz_oci_store *st, const char *suite, const struct lz_agent *a,
                           lz_progress_fn progress, void *ud, struct lz_error *err) {
    char scratch[64];
    _cleanup_close_ int dfd = -EBADF;
    int r = lz_oci_scratch(st, ".bootstrap-", scratch, &dfd, err);
    if (r < 0)
        return r;
    /* mmdebstrap as the invoking user writes the tar itself (unshare mode
     * maps its subuids inside); the scratch directory must be writable. */
    _cleanup_free_ char *target = lz_xasprintf("%s/rootfs.tar", scratch);
    _cleanup_free_ char *suite_arg = lz_xstrdup(suite);
    _cleanup_free_ char *include = lz_xstrdup("--include=" LZ_BOOTSTRAP_PACKAGES);
    _cleanup_free_ char *hook = NULL;
    if (a) {
        free(include);
        include = lz_xstrdup("--include=" LZ_BOOTSTRAP_PACKAGES "," LZ_AGENT_PACKAGES);
        /* The names are ours (agents.h), not input: safe in a shell line.
         * Node does not read the system trust store: the host's bundle
         * (SSL_CERT_FILE, as lz_tool_env passes it, or Debian's) is lent to
         * npm for the build only, so that a TLS-intercepting proxy whose CA
         * the host trusts works; it and npm's cache are removed before the
         * tar is written. `--version` proves the agent starts. The chroot
         * gets Debian's PATH, not the caller's: npm links the agent into
         * /usr/local/bin, which a minimal PATH (cron, `env -i`, a service)
         * leaves out. */
        hook =
            lz_xasprintf("--customize-hook="
                         "cp \"${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}\" \"$1/tmp/lazaret-ca.crt\" || :; "
                         "chroot \"$1\" env HOME=/root PATH=" LZ_CHROOT_PATH " "
                         "NODE_EXTRA_CA_CERTS=/tmp/lazaret-ca.crt sh -c "
                         "'npm install --global --no-fund --no-audit --no-update-notifier %s && %s --version'; "
                         "r=$?; rm -rf \"$1/tmp/lazaret-ca.crt\" \"$1/root/.npm\"; exit $r",
                         a->npm_package, a->name);
    }
    char *argv[9];
    size_t n = 0;
    argv[n++] = (char *)"mmdebstrap";
    argv[n++] = (char *)"--variant=minbase";
    argv[n++] = include;
    argv[n++] = (char *)"--mode=auto";
    argv[n++] = (char *)"--format=tar";
    if (hook)
        argv[n++] = hook;
    argv[n++] = suite_arg; /* mmdebstrap takes SUITE TARGET last */
    argv[n++] = target;
    argv[n] = NULL;
    struct lz_tool_out o = { .progress = progress, .ud = ud, .prefix = "bootstrap" };
    lz_progress_report(progress, ud, "bootstrap", 0, 0);
    int status = 0;
    r = lz_tool_run(argv, st->path, LZ_TOOL_TIMEOUT_MS, &o, &status);
    char tail[800];
    lz_tool_tail(&o, tail, sizeof tail);
    if (r == -ENOENT) {
        r = lz_error_set(err, -ENOENT, "mmdebstrap is not installed; it builds the default base image");
        goto out;
    } else if (r == -ETIMEDOUT) {
        r = lz_error_set(err, -ETIMEDOUT,
                         "mmdebstrap %s did not finish within %d minutes (a stalled Debian mirror?) and was "
                         "stopped: %s",
                         suite, LZ_TOOL_TIMEOUT_MIN, tail);
        goto out;
    } else if (r < 0) {
        r = lz_error_errno(err, r, "cannot run mmdebstrap");
        goto out;
    } else if (status != 0) {
        r = lz_error_set(err, -EIO, "mmdebstrap %s failed (exit %d): %s", suite, status, tail);
        goto out;
    }

    {
        _cleanup_close_ int tfd = lz_openat_beneath(dfd, "rootfs.tar", O_RDONLY, 0, false);
        if (tfd < 0) {
            r = lz_error_set(err, tfd, "mmdebstrap wrote no rootfs.tar");
            goto out;
        }
        struct stat s;
        if (fstat(tfd, &s) < 0 || !S_ISREG(s.st_mode)) {
            r = lz_error_set(err, -EINVAL, "mmdebstrap output is not a regular file");
            goto out;
        }
        /* Hash in place, then move it into the store (same filesystem). */
        char ldg[LZ_OCI_DIGEST_LEN + 1];
        uint64_t lsize;
        struct lz_oci_copy_progress pc = { progress, ud, "bootstrap: hashing", 0, (uint64_t)s.st_size };
        r = lz_oci_hash_copy(tfd, -1, LZ_OCI_MAX_BLOB, &pc, ldg, &lsize);
        if (r < 0) {
            r = lz_error_set(err, r, "reading mmdebstrap output: %s", strerror(-r));
            goto out;
        }
        if (fsync(tfd) < 0 || renameat(dfd, "rootfs.tar", st->blobs, ldg + 7) < 0) {
            r = lz_error_set(err, -errno, "image store: cannot store the base layer: %m");
            goto out;
        }
        char created[32];
        lz_oci_now_rfc3339(created);
        _cleanup_free_ char *created_by = a
            ? lz_xasprintf("mmdebstrap --variant=minbase --include=%s,%s %s; npm install --global %s",
                           LZ_BOOTSTRAP_PACKAGES, LZ_AGENT_PACKAGES, suite, a->npm_package)
            : lz_xasprintf("mmdebstrap --variant=minbase --include=%s %s", LZ_BOOTSTRAP_PACKAGES, suite);
        _cleanup_json_ json_t *cfg = json_pack(
            "{s:s, s:s, s:s, s:{s:[s], s:[s,s], s:s}, s:{s:s, s:[s]}, s:[{s:s, s:s}]}", "created", created,
            "architecture", lz_oci_host_arch(), "os", "linux", "config", "Env",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "Cmd", "/bin/bash", "-l", "WorkingDir",
            "/", "rootfs", "type", "layers", "diff_ids", ldg, "history", "created", created, "created_by", created_by);
        if (!cfg)
            abort();
        char cdg[LZ_OCI_DIGEST_LEN + 1];
        size_t clen;
        r = lz_oci_put_json(st, cfg, cdg, &clen, err);
        if (r < 0)
            goto out;
        _cleanup_free_ char *name =
            a ? lz_xasprintf("%s%s", LZ_AGENT_IMAGE_PREFIX, a->name) : lz_xasprintf("builtin:debian-%s", suite);
        _cleanup_json_ json_t *man = json_pack(
            "{s:i, s:s, s:{s:s, s:s, s:I}, s:[{s:s, s:s, s:I}], s:{s:s, s:s}}", "schemaVersion", 2, "mediaType",
            LZ_MT_OCI_MANIFEST, "config", "mediaType", LZ_MT_OCI_CONFIG, "digest", cdg, "size", (json_int_t)clen,
            "layers", "mediaType", LZ_MT_LAYER_TAR, "digest", ldg, "size", (json_int_t)lsize, "annotations",
            "org.opencontainers.image.created", created, "org.opencontainers.image.title", name);
        if (!man)
            abort();
        char mdg[LZ_OCI_DIGEST_LEN + 1];
        r = lz_oci_put_manifest(st, name, man, mdg, err);
        if (r == 0)
            lz_progress_report(progress, ud, "bootstrap: done", lsize, lsize);
    }
out:
    lz_prepare_remove_tree(st->fd, scratch);
    return r;
}

int lz_bootstrap_locked(const struct lz_oci_store *st, const char *suite, lz_progress_fn progress, void *ud,
                        struct lz_error *err) {
    return bootstrap_image(st, suite, NULL, progress, ud, err);
}

int lz_bootstrap_agent_locked(const struct lz_oci_store *st, const char *agent, lz_progress_fn progress, void *ud,
                              struct lz_error *err) {
    const struct lz_agent *a = lz_agent_find(agent);
    if (!a)
        return lz_error_set(err, -EINVAL, "unknown agent \"%s\" (known: claude, codex, opencode)", agent ?: "");
    return bootstrap_image(st, LZ_AGENT_SUITE, a, progress, ud, err);
}

/* Opens the Storage Root's image store and takes its bootstrap lock (held
 * until *lk is closed); the store is closed again on failure. */
static int open_locked(const char *data_root, struct lz_oci_store *st, int *lk, struct lz_error *err) {
    if (sodium_init() < 0)
        return lz_error_set(err, -EIO, "libsodium initialisation failed");
    int r = lz_oci_open(data_root, true, st, err);
    if (r < 0)
        return r;
    if ((r = lz_oci_lock(st->fd, ".bootstrap.lock", lk)) < 0) {
        lz_oci_close(st);
        return lz_error_errno(err, r, "cannot lock image store");
    }
    return 0;
}

int lz_image_bootstrap_agent(const char *data_root, const char *agent, bool refresh, lz_progress_fn progress, void *ud,
                             struct lz_error *err) {
    const struct lz_agent *a = lz_agent_find(agent);
    if (!a)
        return lz_error_set(err, -EINVAL, "unknown agent \"%s\" (known: claude, codex, opencode)", agent ?: "");
    struct lz_oci_store st;
    _cleanup_close_ int lk = -EBADF;
    int r = open_locked(data_root, &st, &lk, err);
    if (r < 0)
        return lz_error_sanitize(err, r);
    _cleanup_free_ char *name = lz_xasprintf("%s%s", LZ_AGENT_IMAGE_PREFIX, a->name);
    _cleanup_free_ char *digest = NULL;
    if (!refresh && (r = lz_oci_lookup(&st, name, &digest, err)) != -ENOENT)
        r = r < 0 ? r : 1;
    else
        r = bootstrap_image(&st, LZ_AGENT_SUITE, a, progress, ud, err);
    lz_oci_close(&st);
    return lz_error_sanitize(err, r);
}

int lz_image_bootstrap(const char *data_root, const char *suite, lz_progress_fn progress, void *ud,
                       struct lz_error *err) {
    if (!suite || !lz_image_suite_valid(suite))
        return lz_error_set(err, -EINVAL, "invalid Debian suite \"%s\"", suite ?: "");
    struct lz_oci_store st;
    _cleanup_close_ int lk = -EBADF;
    int r = open_locked(data_root, &st, &lk, err);
    if (r < 0)
        return lz_error_sanitize(err, r);
    r = lz_bootstrap_locked(&st, suite, progress, ud, err);
    lz_oci_close(&st);
    return lz_error_sanitize(err, r);
}
