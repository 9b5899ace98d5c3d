/* image.c — see image.h for the layout and the contracts. */
#include "image.h"
#include "procenv.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>

#include "catalog.h"

#define MAX_JSON (4u << 20)
#define MAX_LAYERS 1024
#define MAX_BLOB (UINT64_C(64) << 30)
#define REF_NAME "org.opencontainers.image.ref.name"
#define MT_OCI_INDEX "application/vnd.oci.image.index.v1+json"
#define MT_OCI_MANIFEST "application/vnd.oci.image.manifest.v1+json"
#define MT_OCI_CONFIG "application/vnd.oci.image.config.v1+json"
#define MT_DOCKER_LIST "application/vnd.docker.distribution.manifest.list.v2+json"
#define MT_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MT_LAYER_TAR "application/vnd.oci.image.layer.v1.tar"
#define MT_LAYER_GZIP "application/vnd.oci.image.layer.v1.tar+gzip"
#define MT_LAYER_ZSTD "application/vnd.oci.image.layer.v1.tar+zstd"
#define ARTIFACT_CONTEXT "lazaret-prepared-artifact-v1"
#define DIGEST_LEN 71 /* "sha256:" + 64 */

/* json_decrefp comes with jansson >= 2.9. */
#define _cleanup_json_ _cleanup_(json_decrefp)

static const char *host_arch(void) {
#if defined(__x86_64__)
    return "amd64";
#elif defined(__aarch64__)
    return "arm64";
#elif defined(__i386__)
    return "386";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return "ppc64le";
#elif defined(__s390x__)
    return "s390x";
#elif defined(__riscv) && __riscv_xlen == 64
    return "riscv64";
#else
    return "unknown";
#endif
}

static void progress_report(lz_progress_fn fn, void *ud, const char *phase, uint64_t done, uint64_t total) {
    if (fn)
        fn(ud, phase, done, total);
}

/* ---- small helpers ---- */

static int open_beneath(int dirfd, const char *path, int flags, bool allow_symlinks) {
    struct open_how how = {
        /* openat2 refuses O_PATH with any flag but O_DIRECTORY/O_NOFOLLOW. */
        .flags = (uint64_t)(flags | O_CLOEXEC | ((flags & O_PATH) ? 0 : O_NOCTTY)),
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | (allow_symlinks ? 0 : RESOLVE_NO_SYMLINKS),
    };
    long r;
    do
        r = syscall(SYS_openat2, dirfd, path, &how, sizeof how);
    while (r < 0 && errno == EAGAIN);
    return r < 0 ? -errno : (int)r;
}

/* Reads a regular file of at most max bytes, opened confined under dirfd. */
static int read_beneath(int dirfd, const char *path, bool allow_symlinks, size_t max, char **ret_buf,
                        size_t *ret_len) {
    _cleanup_close_ int fd = open_beneath(dirfd, path, O_RDONLY, allow_symlinks);
    if (fd < 0)
        return fd;
    struct stat s;
    if (fstat(fd, &s) < 0)
        return -errno;
    if (!S_ISREG(s.st_mode))
        return -EINVAL;
    if ((uint64_t)s.st_size > max)
        return -EFBIG;
    _cleanup_free_ char *buf = lz_xmalloc((size_t)s.st_size + 2);
    ssize_t n = lz_read_full(fd, buf, (size_t)s.st_size + 1);
    if (n < 0)
        return (int)n;
    if ((size_t)n > (size_t)s.st_size)
        return -EFBIG; /* grew while we read */
    buf[n] = '\0';
    *ret_buf = TAKE_PTR(buf);
    *ret_len = (size_t)n;
    return 0;
}

static bool digest_valid(const char *d) {
    if (!d || strlen(d) != DIGEST_LEN || strncmp(d, "sha256:", 7) != 0)
        return false;
    for (const char *p = d + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

static void blob_path(const char *digest, char out[80]) {
    memcpy(out, "blobs/sha256/", 13);
    memcpy(out + 13, digest + 7, 65);
}

static void sha256_digest(const void *buf, size_t len, char out[DIGEST_LEN + 1]) {
    uint8_t md[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(md, buf, len);
    memcpy(out, "sha256:", 7);
    lz_hex(md, sizeof md, out + 7);
}

static void random_name(const char *prefix, char out[64]) {
    uint8_t r[8];
    char hex[17];
    randombytes_buf(r, sizeof r);
    lz_hex(r, sizeof r, hex);
    (void)lz_snprintf(out, 64, "%s%s", prefix, hex);
}

static void now_rfc3339(char out[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int lock_file(int dirfd, const char *name, int *ret_fd) {
    _cleanup_close_ int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    while (flock(fd, LOCK_EX) < 0)
        if (errno != EINTR)
            return -errno;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

static const char *json_str(json_t *o, const char *key) {
    json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

static int json_parse(const char *buf, size_t len, json_t **ret, const char *what, struct lz_error *err) {
    json_error_t je;
    json_t *j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!j)
        return lz_error_set(err, -EBADMSG, "%s: invalid JSON at line %d: %s", what, je.line, je.text);
    if (!json_is_object(j) && !json_is_array(j)) {
        json_decref(j);
        return lz_error_set(err, -EBADMSG, "%s: not a JSON object", what);
    }
    *ret = j;
    return 0;
}

static char *json_dump_compact(json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    if (!s)
        abort();
    return s;
}

/* Error messages quote attacker-controlled names: keep them one printable
 * line (no terminal escapes reach the user's terminal). */
static int sanitize_error(struct lz_error *err, int r) {
    if (r < 0 && err)
        for (char *c = err->msg; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                *c = '?';
    return r;
}

/* ---- the store ---- */

struct store {
    int fd;      /* <data_root>/images */
    int blobs;   /* <data_root>/images/blobs/sha256 */
    char *path;  /* <data_root>/images */
};

static void store_close(struct store *s) {
    lz_closep(&s->fd);
    lz_closep(&s->blobs);
    free(s->path);
    s->path = NULL;
}

static int store_open(const char *data_root, bool create, struct store *ret, struct lz_error *err) {
    if (!data_root || data_root[0] != '/')
        return lz_error_set(err, -EINVAL, "data root must be an absolute path");
    struct store s = { .fd = -EBADF, .blobs = -EBADF, .path = lz_xasprintf("%s/images", data_root) };
    int r;
    if (create) {
        _cleanup_free_ char *b = lz_xasprintf("%s/blobs/sha256", s.path);
        r = lz_mkdir_p(b, 0755);
        if (r < 0) {
            lz_error_set(err, r, "cannot create image store %s: %s", s.path, strerror(-r));
            store_close(&s);
            return r;
        }
    }
    s.fd = open(s.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.fd < 0) {
        r = -errno;
        if (r != -ENOENT)
            lz_error_set(err, r, "cannot open image store %s: %s", s.path, strerror(-r));
        store_close(&s);
        return r;
    }
    s.blobs = open_beneath(s.fd, "blobs/sha256", O_RDONLY | O_DIRECTORY, false);
    if (s.blobs < 0) {
        r = s.blobs;
        lz_error_set(err, r, "image store %s: blobs/sha256: %s", s.path, strerror(-r));
        store_close(&s);
        return r;
    }
    if (create && faccessat(s.fd, "index.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
        _cleanup_close_ int lk = -EBADF;
        r = lock_file(s.fd, ".lock", &lk);
        if (r == 0 && faccessat(s.fd, "oci-layout", F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
            static const char layout[] = "{\"imageLayoutVersion\":\"1.0.0\"}\n";
            r = lz_write_file_atomic_at(s.fd, "oci-layout", layout, sizeof layout - 1, 0644);
        }
        if (r == 0 && faccessat(s.fd, "index.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
            static const char index[] = "{\"schemaVersion\":2,\"manifests\":[]}\n";
            r = lz_write_file_atomic_at(s.fd, "index.json", index, sizeof index - 1, 0644);
        }
        if (r < 0) {
            lz_error_set(err, r, "cannot initialise image store %s: %s", s.path, strerror(-r));
            store_close(&s);
            return r;
        }
    }
    *ret = s;
    return 0;
}

static int store_read_index(const struct store *st, json_t **ret, struct lz_error *err) {
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = read_beneath(st->fd, "index.json", false, MAX_JSON, &buf, &len);
    if (r < 0)
        return lz_error_set(err, r, "%s/index.json: %s", st->path, strerror(-r));
    json_t *j;
    r = json_parse(buf, len, &j, "image store index.json", err);
    if (r < 0)
        return r;
    if (!json_is_array(json_object_get(j, "manifests"))) {
        json_decref(j);
        return lz_error_set(err, -EBADMSG, "image store index.json has no manifests array");
    }
    *ret = j;
    return 0;
}

static const char *desc_ref_name(json_t *desc) {
    return json_str(json_object_get(desc, "annotations"), REF_NAME);
}

/* -ENOENT (no message) when the store has no image of that name. */
static int store_lookup(const struct store *st, const char *name, char **ret_digest, struct lz_error *err) {
    _cleanup_json_ json_t *idx = NULL;
    int r = store_read_index(st, &idx, err);
    if (r < 0)
        return r;
    json_t *ms = json_object_get(idx, "manifests"), *d;
    size_t i;
    json_array_foreach(ms, i, d) {
        const char *n = desc_ref_name(d), *dg = json_str(d, "digest");
        if (!n || strcmp(n, name) != 0)
            continue;
        if (!digest_valid(dg))
            return lz_error_set(err, -EBADMSG, "image store: invalid digest for %s", name);
        char bp[80];
        blob_path(dg, bp);
        if (faccessat(st->fd, bp, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
            return -ENOENT;
        *ret_digest = lz_xstrdup(dg);
        return 0;
    }
    return -ENOENT;
}

static int store_set_name(const struct store *st, const char *name, const char *digest, uint64_t size,
                          const char *media_type, struct lz_error *err) {
    _cleanup_close_ int lk = -EBADF;
    int r = lock_file(st->fd, ".lock", &lk);
    if (r < 0)
        return lz_error_set(err, r, "cannot lock image store: %s", strerror(-r));
    _cleanup_json_ json_t *idx = NULL;
    r = store_read_index(st, &idx, err);
    if (r < 0)
        return r;
    json_t *ms = json_object_get(idx, "manifests");
    json_t *nms, *d;
    size_t i;
    json_array_foreach(ms, i, d) {
        const char *n = desc_ref_name(d), *dg = json_str(d, "digest");
        if (n && dg && !strcmp(n, name) && !strcmp(dg, digest))
            return 0; /* unchanged: no write on every prepare of a local source */
    }
    nms = json_array();
    json_array_foreach(ms, i, d) {
        const char *n = desc_ref_name(d);
        if (!n || strcmp(n, name) != 0)
            json_array_append(nms, d);
    }
    json_array_append_new(nms, json_pack("{s:s, s:s, s:I, s:{s:s}}", "mediaType", media_type, "digest", digest,
                                         "size", (json_int_t)size, "annotations", REF_NAME, name));
    json_object_set_new(idx, "manifests", nms);
    _cleanup_free_ char *out = json_dumps(idx, JSON_INDENT(2));
    if (!out)
        abort();
    size_t olen = strlen(out);
    out = lz_xrealloc(out, olen + 2);
    out[olen++] = '\n';
    r = lz_write_file_atomic_at(st->fd, "index.json", out, olen, 0644);
    if (r < 0)
        return lz_error_set(err, r, "cannot write image store index.json: %s", strerror(-r));
    return 0;
}

static bool store_has_blob(const struct store *st, const char *digest, int64_t size) {
    struct stat s;
    if (fstatat(st->blobs, digest + 7, &s, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(s.st_mode))
        return false;
    return size < 0 || s.st_size == size;
}

struct copy_progress {
    lz_progress_fn fn;
    void *ud;
    const char *phase;
    uint64_t base, total;
};

/* Reads src to EOF (at most limit bytes), copying to dst when dst >= 0. */
static int hash_copy(int src, int dst, uint64_t limit, const struct copy_progress *pc,
                     char ret_digest[DIGEST_LEN + 1], uint64_t *ret_size) {
    _cleanup_free_ uint8_t *buf = lz_xmalloc(256 * 1024);
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    uint64_t n = 0, last = 0;
    for (;;) {
        ssize_t r = read(src, buf, 256 * 1024);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            break;
        if ((uint64_t)r > limit - n)
            return -EFBIG;
        n += (uint64_t)r;
        crypto_hash_sha256_update(&h, buf, (unsigned long long)r);
        if (dst >= 0) {
            int w = lz_write_full(dst, buf, (size_t)r);
            if (w < 0)
                return w;
        }
        if (pc && pc->fn && n - last >= (1u << 20)) {
            pc->fn(pc->ud, pc->phase, pc->base + n, pc->total);
            last = n;
        }
    }
    uint8_t md[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&h, md);
    memcpy(ret_digest, "sha256:", 7);
    lz_hex(md, sizeof md, ret_digest + 7);
    *ret_size = n;
    return 0;
}

/* Copies src into the store. With expected_digest (and expected_size >= 0)
 * the copy is refused unless it matches; the blob appears under its digest
 * only after it was verified and synced. */
static int store_put_fd(const struct store *st, int src, const char *expected_digest, int64_t expected_size,
                        const struct copy_progress *pc, char ret_digest[DIGEST_LEN + 1], uint64_t *ret_size,
                        struct lz_error *err) {
    char tmp[64];
    random_name(".tmp-", tmp);
    _cleanup_close_ int fd = openat(st->blobs, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return lz_error_set(err, -errno, "image store: cannot create blob: %m");
    char digest[DIGEST_LEN + 1];
    uint64_t size;
    uint64_t limit = expected_size >= 0 ? (uint64_t)expected_size : MAX_BLOB;
    int r = hash_copy(src, fd, limit, pc, digest, &size);
    if (r == -EFBIG)
        r = lz_error_set(err, -EBADMSG, "blob %s is larger than its descriptor says", expected_digest ?: "");
    else if (r < 0)
        r = lz_error_set(err, r, "image store: copying blob: %s", strerror(-r));
    else if (expected_digest && strcmp(digest, expected_digest) != 0)
        r = lz_error_set(err, -EBADMSG, "blob digest mismatch: expected %s, got %s", expected_digest, digest);
    else if (expected_size >= 0 && size != (uint64_t)expected_size)
        r = lz_error_set(err, -EBADMSG, "blob %s size mismatch: expected %" PRId64 ", got %" PRIu64,
                         digest, expected_size, size);
    else if (fsync(fd) < 0)
        r = lz_error_set(err, -errno, "image store: fsync: %m");
    else if (renameat(st->blobs, tmp, st->blobs, digest + 7) < 0)
        r = lz_error_set(err, -errno, "image store: rename blob: %m");
    if (r < 0) {
        unlinkat(st->blobs, tmp, 0);
        return r;
    }
    memcpy(ret_digest, digest, sizeof digest);
    if (ret_size)
        *ret_size = size;
    return 0;
}

static int store_put_mem(const struct store *st, const void *buf, size_t len, char ret_digest[DIGEST_LEN + 1],
                         struct lz_error *err) {
    char digest[DIGEST_LEN + 1];
    sha256_digest(buf, len, digest);
    if (!store_has_blob(st, digest, (int64_t)len)) {
        char tmp[64];
        random_name(".tmp-", tmp);
        _cleanup_close_ int fd = openat(st->blobs, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
            return lz_error_set(err, -errno, "image store: cannot create blob: %m");
        int r = lz_write_full(fd, buf, len);
        if (r == 0 && fsync(fd) < 0)
            r = -errno;
        if (r == 0 && renameat(st->blobs, tmp, st->blobs, digest + 7) < 0)
            r = -errno;
        if (r < 0) {
            unlinkat(st->blobs, tmp, 0);
            return lz_error_set(err, r, "image store: writing blob: %s", strerror(-r));
        }
    }
    memcpy(ret_digest, digest, sizeof digest);
    return 0;
}

/* Reads a small store blob and checks its digest (the store is trusted, but
 * a manifest or config is cheap to verify). */
static int store_read_blob(const struct store *st, const char *digest, char **ret_buf, size_t *ret_len,
                           struct lz_error *err) {
    if (!digest_valid(digest))
        return lz_error_set(err, -EBADMSG, "invalid digest \"%s\"", digest ?: "");
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = read_beneath(st->blobs, digest + 7, false, MAX_JSON, &buf, &len);
    if (r < 0)
        return lz_error_set(err, r, "image store: blob %s: %s", digest, strerror(-r));
    char got[DIGEST_LEN + 1];
    sha256_digest(buf, len, got);
    if (strcmp(got, digest) != 0)
        return lz_error_set(err, -EBADMSG, "image store: blob %s is corrupt (hashes to %s)", digest, got);
    *ret_buf = TAKE_PTR(buf);
    *ret_len = len;
    return 0;
}

/* ---- descriptors and manifests ---- */

struct desc {
    const char *media_type; /* may be NULL */
    const char *digest;
    int64_t size;
};

static int parse_desc(json_t *j, struct desc *d, const char *what, struct lz_error *err) {
    if (!json_is_object(j))
        return lz_error_set(err, -EBADMSG, "%s: descriptor is not an object", what);
    d->media_type = json_str(j, "mediaType");
    d->digest = json_str(j, "digest");
    json_t *sz = json_object_get(j, "size");
    if (!d->digest || strncmp(d->digest, "sha256:", 7) != 0)
        return lz_error_set(err, -ENOTSUP, "%s: only sha256 digests are supported (got \"%s\")", what,
                            d->digest ?: "");
    if (!digest_valid(d->digest))
        return lz_error_set(err, -EBADMSG, "%s: invalid digest \"%s\"", what, d->digest);
    if (!json_is_integer(sz) || json_integer_value(sz) < 0 || (uint64_t)json_integer_value(sz) > MAX_BLOB)
        return lz_error_set(err, -EBADMSG, "%s: invalid size", what);
    d->size = (int64_t)json_integer_value(sz);
    return 0;
}

static bool layer_type_ok(const char *mt) {
    static const char *const ok[] = {
        MT_LAYER_TAR, MT_LAYER_GZIP, MT_LAYER_ZSTD,
        "application/vnd.oci.image.layer.nondistributable.v1.tar",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
        "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
        "application/vnd.docker.image.rootfs.diff.tar.gzip",
        "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(ok); i++)
        if (strcmp(mt, ok[i]) == 0)
            return true;
    return false;
}

struct manifest {
    json_t *doc;
    char *raw;
    size_t raw_len;
    char digest[DIGEST_LEN + 1];
    const char *media_type;
    struct desc config;
    struct desc layers[MAX_LAYERS];
    size_t n_layers;
};

static void manifest_clear(struct manifest *m) {
    if (m->doc)
        json_decref(m->doc);
    free(m->raw);
    m->doc = NULL;
    m->raw = NULL;
}

/* Parses a manifest document (already digest-checked). */
static int manifest_parse(struct manifest *m, struct lz_error *err) {
    json_t *sv = json_object_get(m->doc, "schemaVersion");
    if (!json_is_integer(sv) || json_integer_value(sv) != 2)
        return lz_error_set(err, -ENOTSUP, "manifest %s: unsupported schemaVersion", m->digest);
    int r = parse_desc(json_object_get(m->doc, "config"), &m->config, "manifest config", err);
    if (r < 0)
        return r;
    json_t *ls = json_object_get(m->doc, "layers"), *l;
    if (!json_is_array(ls))
        return lz_error_set(err, -EBADMSG, "manifest %s: no layers array", m->digest);
    if (json_array_size(ls) > MAX_LAYERS)
        return lz_error_set(err, -EFBIG, "manifest %s: more than %d layers", m->digest, MAX_LAYERS);
    size_t i;
    json_array_foreach(ls, i, l) {
        r = parse_desc(l, &m->layers[i], "manifest layer", err);
        if (r < 0)
            return r;
        const char *mt = m->layers[i].media_type;
        if (!mt || !layer_type_ok(mt))
            return lz_error_set(err, -ENOTSUP, "manifest %s: unsupported layer media type \"%s\"", m->digest,
                                mt ?: "(none)");
    }
    m->n_layers = json_array_size(ls);
    return 0;
}

/* Reads a blob of a source layout, bounded and verified against d. */
static int src_read_blob(int src, const struct desc *d, size_t max, char **ret_buf, size_t *ret_len,
                         struct lz_error *err) {
    if (d->size > (int64_t)max)
        return lz_error_set(err, -EFBIG, "blob %s is too large (%" PRId64 " bytes)", d->digest, d->size);
    char bp[80];
    blob_path(d->digest, bp);
    _cleanup_close_ int fd = open_beneath(src, bp, O_RDONLY, true);
    if (fd < 0)
        return lz_error_set(err, fd, "blob %s: %s", d->digest, strerror(-fd));
    _cleanup_free_ char *buf = lz_xmalloc((size_t)d->size + 1);
    ssize_t n = lz_read_full(fd, buf, (size_t)d->size + 1);
    if (n < 0)
        return lz_error_set(err, (int)n, "blob %s: %s", d->digest, strerror((int)-n));
    if (n != d->size)
        return lz_error_set(err, -EBADMSG, "blob %s size mismatch: descriptor says %" PRId64, d->digest, d->size);
    char got[DIGEST_LEN + 1];
    sha256_digest(buf, (size_t)n, got);
    if (strcmp(got, d->digest) != 0)
        return lz_error_set(err, -EBADMSG, "blob digest mismatch: expected %s, got %s", d->digest, got);
    buf[n] = '\0';
    *ret_buf = TAKE_PTR(buf);
    *ret_len = (size_t)n;
    return 0;
}

static bool is_index(const char *mt, json_t *doc) {
    if (mt && (!strcmp(mt, MT_OCI_INDEX) || !strcmp(mt, MT_DOCKER_LIST)))
        return true;
    return !mt && json_is_array(json_object_get(doc, "manifests")) && !json_object_get(doc, "layers");
}

/* Picks the linux/<host arch> entry of an index. */
static int index_pick(json_t *doc, json_t **ret, struct lz_error *err) {
    json_t *ms = json_object_get(doc, "manifests"), *d, *only = NULL;
    size_t i, n_plain = 0;
    json_array_foreach(ms, i, d) {
        json_t *p = json_object_get(d, "platform");
        if (!p) {
            n_plain++;
            only = d;
            continue;
        }
        const char *os = json_str(p, "os"), *arch = json_str(p, "architecture");
        if (os && arch && !strcmp(os, "linux") && !strcmp(arch, host_arch())) {
            *ret = d;
            return 0;
        }
    }
    if (n_plain == 1) {
        *ret = only;
        return 0;
    }
    return lz_error_set(err, -ENOENT, "image index has no manifest for linux/%s", host_arch());
}

static int src_load_manifest(int src, json_t *jdesc, int depth, struct manifest *m, struct lz_error *err) {
    if (depth > 3)
        return lz_error_set(err, -ELOOP, "image index nesting too deep");
    struct desc d;
    int r = parse_desc(jdesc, &d, "manifest descriptor", err);
    if (r < 0)
        return r;
    _cleanup_free_ char *raw = NULL;
    size_t len;
    r = src_read_blob(src, &d, MAX_JSON, &raw, &len, err);
    if (r < 0)
        return r;
    json_t *doc;
    r = json_parse(raw, len, &doc, d.digest, err);
    if (r < 0)
        return r;
    const char *mt = json_str(doc, "mediaType");
    if (!mt)
        mt = d.media_type;
    if (is_index(mt, doc)) {
        json_t *pick = NULL;
        r = index_pick(doc, &pick, err);
        if (r == 0)
            r = src_load_manifest(src, pick, depth + 1, m, err);
        json_decref(doc);
        return r;
    }
    if (mt && strcmp(mt, MT_OCI_MANIFEST) != 0 && strcmp(mt, MT_DOCKER_MANIFEST) != 0) {
        json_decref(doc);
        return lz_error_set(err, -ENOTSUP, "%s: unsupported manifest media type \"%s\"", d.digest, mt);
    }
    m->doc = doc;
    m->raw = TAKE_PTR(raw);
    m->raw_len = len;
    memcpy(m->digest, d.digest, DIGEST_LEN + 1);
    m->media_type = mt ? mt : MT_OCI_MANIFEST;
    return manifest_parse(m, err);
}

/* Checks a config blob: JSON object, the host's OS/architecture when it
 * says, as many diff_ids as layers. */
static int check_config(const char *buf, size_t len, size_t n_layers, json_t **ret_doc, struct lz_error *err) {
    json_t *c;
    int r = json_parse(buf, len, &c, "image config", err);
    if (r < 0)
        return r;
    const char *os = json_str(c, "os"), *arch = json_str(c, "architecture");
    json_t *diff = json_object_get(json_object_get(c, "rootfs"), "diff_ids");
    if (!json_is_object(c))
        r = lz_error_set(err, -EBADMSG, "image config is not an object");
    else if (os && strcmp(os, "linux") != 0)
        r = lz_error_set(err, -ENOTSUP, "image is for OS \"%s\", not linux", os);
    else if (arch && strcmp(arch, host_arch()) != 0)
        r = lz_error_set(err, -ENOTSUP, "image is for architecture \"%s\", this host is %s", arch, host_arch());
    else if (diff && (!json_is_array(diff) || json_array_size(diff) != n_layers))
        r = lz_error_set(err, -EBADMSG, "image config lists %zu diff_ids for %zu layers",
                         json_is_array(diff) ? json_array_size(diff) : 0, n_layers);
    if (r < 0 || !ret_doc)
        json_decref(c);
    else
        *ret_doc = c;
    return r;
}

/* Copies a verified manifest, its config and its layers from a source
 * layout into the store, then names it. */
static int import_manifest(const struct store *st, int src, struct manifest *m, const char *name,
                           lz_progress_fn progress, void *ud, struct lz_error *err) {
    _cleanup_free_ char *cfg = NULL;
    size_t cfg_len;
    int r = src_read_blob(src, &m->config, MAX_JSON, &cfg, &cfg_len, err);
    if (r < 0)
        return lz_error_prefix(err, r, "image config");
    r = check_config(cfg, cfg_len, m->n_layers, NULL, err);
    if (r < 0)
        return r;
    char dg[DIGEST_LEN + 1];
    r = store_put_mem(st, cfg, cfg_len, dg, err);
    if (r < 0)
        return r;

    uint64_t total = 0, done = 0;
    for (size_t i = 0; i < m->n_layers; i++)
        if (!store_has_blob(st, m->layers[i].digest, m->layers[i].size))
            total += (uint64_t)m->layers[i].size;
    for (size_t i = 0; i < m->n_layers; i++) {
        const struct desc *l = &m->layers[i];
        if (store_has_blob(st, l->digest, l->size))
            continue;
        char bp[80];
        blob_path(l->digest, bp);
        _cleanup_close_ int fd = open_beneath(src, bp, O_RDONLY, true);
        if (fd < 0)
            return lz_error_set(err, fd, "layer %s: %s", l->digest, strerror(-fd));
        struct copy_progress pc = { progress, ud, "import", done, total };
        uint64_t sz;
        r = store_put_fd(st, fd, l->digest, l->size, &pc, dg, &sz, err);
        if (r < 0)
            return lz_error_prefix(err, r, "layer %zu", i + 1);
        done += sz;
        progress_report(progress, ud, "import", done, total);
    }
    r = store_put_mem(st, m->raw, m->raw_len, dg, err);
    if (r < 0)
        return r;
    return store_set_name(st, name, m->digest, m->raw_len, m->media_type, err);
}

static int import_oci_dir(const struct store *st, int src, const char *tag, const char *name,
                          lz_progress_fn progress, void *ud, char **ret_digest, struct lz_error *err) {
    _cleanup_free_ char *buf = NULL;
    size_t len;
    _cleanup_close_ int lfd = open_beneath(src, "oci-layout", O_RDONLY, false);
    if (lfd < 0)
        return lz_error_set(err, lfd == -ENOENT ? -EINVAL : lfd, "not an OCI image layout (no oci-layout file)");
    int r = read_beneath(src, "index.json", true, MAX_JSON, &buf, &len);
    if (r < 0)
        return lz_error_set(err, r, "OCI layout index.json: %s", strerror(-r));
    _cleanup_json_ json_t *idx = NULL;
    r = json_parse(buf, len, &idx, "OCI layout index.json", err);
    if (r < 0)
        return r;
    json_t *ms = json_object_get(idx, "manifests"), *d, *pick = NULL;
    if (!json_is_array(ms) || json_array_size(ms) == 0)
        return lz_error_set(err, -ENOENT, "OCI layout has no manifests");
    size_t i;
    if (tag) {
        json_array_foreach(ms, i, d) {
            const char *n = desc_ref_name(d);
            if (n && strcmp(n, tag) == 0)
                pick = d;
        }
        if (!pick)
            return lz_error_set(err, -ENOENT, "OCI layout has no image tagged \"%s\"", tag);
    } else {
        if (json_array_size(ms) != 1)
            return lz_error_set(err, -EINVAL, "OCI layout holds %zu images; name one with :TAG", json_array_size(ms));
        pick = json_array_get(ms, 0);
    }
    struct manifest m = { 0 };
    r = src_load_manifest(src, pick, 0, &m, err);
    if (r == 0)
        r = import_manifest(st, src, &m, name, progress, ud, err);
    if (r == 0)
        *ret_digest = lz_xstrdup(m.digest);
    manifest_clear(&m);
    return r;
}

/* docker save: manifest.json [{Config, RepoTags, Layers}]. The archive has
 * no layer digests; we hash what we copy and build an OCI manifest. */
static bool hex64_at(const char *s) {
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return true;
}

static int import_docker_dir(const struct store *st, int src, const char *tag, const char *name,
                             lz_progress_fn progress, void *ud, char **ret_digest, struct lz_error *err) {
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = read_beneath(src, "manifest.json", true, MAX_JSON, &buf, &len);
    if (r < 0)
        return lz_error_set(err, r, "docker archive manifest.json: %s", strerror(-r));
    _cleanup_json_ json_t *arr = NULL;
    r = json_parse(buf, len, &arr, "docker archive manifest.json", err);
    if (r < 0)
        return r;
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return lz_error_set(err, -EBADMSG, "docker archive manifest.json holds no image");
    json_t *pick = NULL, *e;
    size_t i;
    if (tag) {
        json_array_foreach(arr, i, e) {
            json_t *t;
            size_t k;
            json_array_foreach(json_object_get(e, "RepoTags"), k, t) {
                const char *s = json_string_value(t);
                size_t sl = s ? strlen(s) : 0, tl = strlen(tag);
                if (s && (!strcmp(s, tag) || (sl > tl && s[sl - tl - 1] == ':' && !strcmp(s + sl - tl, tag))))
                    pick = e;
            }
        }
        if (!pick)
            return lz_error_set(err, -ENOENT, "docker archive has no image tagged \"%s\"", tag);
    } else {
        if (json_array_size(arr) != 1)
            return lz_error_set(err, -EINVAL, "docker archive holds %zu images; name one with :TAG",
                                json_array_size(arr));
        pick = json_array_get(arr, 0);
    }
    const char *cfg_path = json_str(pick, "Config");
    json_t *layers = json_object_get(pick, "Layers");
    if (!cfg_path || !json_is_array(layers) || json_array_size(layers) > MAX_LAYERS)
        return lz_error_set(err, -EBADMSG, "docker archive manifest.json: bad Config or Layers");

    _cleanup_free_ char *cfg = NULL;
    size_t cfg_len;
    r = read_beneath(src, cfg_path, true, MAX_JSON, &cfg, &cfg_len);
    if (r < 0)
        return lz_error_set(err, r, "docker archive config %s: %s", cfg_path, strerror(-r));
    _cleanup_json_ json_t *cdoc = NULL;
    r = check_config(cfg, cfg_len, json_array_size(layers), &cdoc, err);
    if (r < 0)
        return r;
    char cfg_digest[DIGEST_LEN + 1];
    r = store_put_mem(st, cfg, cfg_len, cfg_digest, err);
    if (r < 0)
        return r;
    /* "<hex>.json" (classic) or "blobs/sha256/<hex>" (docker >= 25): the
     * name is the digest, so check it. */
    const char *cb = strrchr(cfg_path, '/');
    cb = cb ? cb + 1 : cfg_path;
    if (strlen(cb) >= 64 && hex64_at(cb) && (cb[64] == '\0' || !strcmp(cb + 64, ".json")) &&
        strncmp(cb, cfg_digest + 7, 64) != 0)
        return lz_error_set(err, -EBADMSG, "docker archive config %s hashes to %s", cfg_path, cfg_digest);

    json_t *diff = json_object_get(json_object_get(cdoc, "rootfs"), "diff_ids");
    json_t *ldescs = json_array(), *l;
    uint64_t total = 0, done = 0;
    json_array_foreach(layers, i, l) {
        struct stat s;
        const char *p = json_string_value(l);
        _cleanup_close_ int fd = p ? open_beneath(src, p, O_RDONLY, true) : -EINVAL;
        if (fd >= 0 && fstat(fd, &s) == 0)
            total += (uint64_t)s.st_size;
    }
    json_array_foreach(layers, i, l) {
        const char *p = json_string_value(l);
        if (!p) {
            json_decref(ldescs);
            return lz_error_set(err, -EBADMSG, "docker archive: layer %zu is not a path", i + 1);
        }
        _cleanup_close_ int fd = open_beneath(src, p, O_RDONLY, true);
        if (fd < 0) {
            json_decref(ldescs);
            return lz_error_set(err, fd, "docker archive layer %s: %s", p, strerror(-fd));
        }
        uint8_t magic[4] = { 0 };
        ssize_t n = pread(fd, magic, sizeof magic, 0);
        const char *mt = MT_LAYER_TAR;
        if (n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b)
            mt = MT_LAYER_GZIP;
        else if (n == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd)
            mt = MT_LAYER_ZSTD;
        char dg[DIGEST_LEN + 1];
        uint64_t sz;
        struct copy_progress pc = { progress, ud, "import", done, total };
        r = store_put_fd(st, fd, NULL, -1, &pc, dg, &sz, err);
        if (r < 0) {
            json_decref(ldescs);
            return lz_error_prefix(err, r, "docker archive layer %s", p);
        }
        done += sz;
        const char *want = json_string_value(json_array_get(diff, i));
        const char *lb = strrchr(p, '/');
        lb = lb ? lb + 1 : p;
        bool named = strlen(lb) == 64 && hex64_at(lb);
        if ((!strcmp(mt, MT_LAYER_TAR) && want && strcmp(want, dg) != 0) ||
            (named && strncmp(lb, dg + 7, 64) != 0)) {
            json_decref(ldescs);
            return lz_error_set(err, -EBADMSG, "docker archive layer %s hashes to %s, expected %s", p, dg,
                                named ? lb : want);
        }
        json_array_append_new(ldescs, json_pack("{s:s, s:s, s:I}", "mediaType", mt, "digest", dg, "size",
                                                (json_int_t)sz));
    }
    _cleanup_json_ json_t *man = json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}", "schemaVersion", 2, "mediaType",
                                           MT_OCI_MANIFEST, "config", "mediaType", MT_OCI_CONFIG, "digest",
                                           cfg_digest, "size", (json_int_t)cfg_len, "layers", ldescs);
    _cleanup_free_ char *raw = json_dump_compact(man);
    char mdg[DIGEST_LEN + 1];
    r = store_put_mem(st, raw, strlen(raw), mdg, err);
    if (r < 0)
        return r;
    r = store_set_name(st, name, mdg, strlen(raw), MT_OCI_MANIFEST, err);
    if (r < 0)
        return r;
    *ret_digest = lz_xstrdup(mdg);
    return 0;
}

/* ---- running tools (skopeo, mmdebstrap) ---- */

#define TAIL_LINES 4
struct tool_out {
    lz_progress_fn progress;
    void *ud;
    const char *prefix;
    char line[512];
    size_t line_len;
    char tail[TAIL_LINES][256];
    size_t n_tail;
};

static void tool_line(struct tool_out *o) {
    o->line[o->line_len] = '\0';
    size_t n = o->line_len;
    o->line_len = 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)o->line[i] < 0x20 || o->line[i] == 0x7f)
            o->line[i] = o->line[i] == '\t' ? ' ' : '?';
    while (n && (o->line[n - 1] == ' ' || o->line[n - 1] == '\t'))
        o->line[--n] = '\0';
    if (!n)
        return;
    if (o->n_tail == TAIL_LINES) {
        memmove(o->tail[0], o->tail[1], sizeof o->tail[0] * (TAIL_LINES - 1));
        o->n_tail--;
    }
    (void)lz_snprintf(o->tail[o->n_tail++], sizeof o->tail[0], "%s", o->line);
    if (o->progress) {
        char phase[600];
        (void)lz_snprintf(phase, sizeof phase, "%s: %s", o->prefix, o->line);
        o->progress(o->ud, phase, 0, 0);
    }
}

static void tool_tail(const struct tool_out *o, char *out, size_t size) {
    size_t off = 0;
    out[0] = '\0';
    for (size_t i = 0; i < o->n_tail && off < size; i++) {
        int w = snprintf(out + off, size - off, "%s%s", i ? " | " : "", o->tail[i]);
        if (w < 0)
            break;
        off += (size_t)w;
    }
}

/* fork + execvpe of argv (no shell), with lz_tool_env(); stdin /dev/null; stdout and stderr into
 * o. Returns -errno when the program could not be started, else 0 with
 * *ret_status = exit status (128 + signal when killed). */
static int run_tool(char *const argv[], int cwd_fd, struct tool_out *o, int *ret_status) {
    int out[2], ex[2];
    /* Not the whole client environment (it may hold the secrets a profile
     * references): what registry and Debian-mirror tools need (procenv.h). */
    _cleanup_env_ char **envp = lz_tool_env();
    if (pipe2(out, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(ex, O_CLOEXEC) < 0) {
        int r = -errno;
        close(out[0]);
        close(out[1]);
        return r;
    }
    pid_t pid = fork();
    if (pid < 0) {
        int r = -errno;
        close(out[0]);
        close(out[1]);
        close(ex[0]);
        close(ex[1]);
        return r;
    }
    if (pid == 0) {
        /* Child: only async-signal-safe calls until exec. */
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        signal(SIGPIPE, SIG_DFL);
        int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (nul < 0 || dup2(nul, 0) < 0 || dup2(out[1], 1) < 0 || dup2(out[1], 2) < 0 ||
            (cwd_fd >= 0 && fchdir(cwd_fd) < 0)) {
            int e = errno;
            (void)!write(ex[1], &e, sizeof e);
            _exit(127);
        }
        execvpe(argv[0], argv, envp);
        int e = errno;
        (void)!write(ex[1], &e, sizeof e);
        _exit(127);
    }
    close(out[1]);
    close(ex[1]);
    int child_errno = 0;
    ssize_t n;
    do
        n = read(ex[0], &child_errno, sizeof child_errno);
    while (n < 0 && errno == EINTR);
    close(ex[0]);
    if (n != (ssize_t)sizeof child_errno)
        child_errno = 0; /* EOF: exec succeeded */
    char buf[4096];
    for (;;) {
        n = read(out[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        for (ssize_t i = 0; i < n; i++) {
            if (buf[i] == '\n' || buf[i] == '\r') {
                tool_line(o);
            } else {
                if (o->line_len == sizeof o->line - 1)
                    tool_line(o);
                o->line[o->line_len++] = buf[i];
            }
        }
    }
    if (o->line_len)
        tool_line(o);
    close(out[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -errno;
    if (child_errno)
        return -child_errno;
    *ret_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return 0;
}

/* ---- references ---- */

enum ref_kind { REF_BUILTIN, REF_OCI, REF_OCI_ARCHIVE, REF_DOCKER_ARCHIVE, REF_REGISTRY };

struct parsed_ref {
    enum ref_kind kind;
    char *name;    /* store name */
    char *path;    /* local sources: absolute */
    char *tag;     /* local sources: optional */
    char *suite;   /* builtin */
};

static void parsed_ref_clear(struct parsed_ref *p) {
    free(p->name);
    free(p->path);
    free(p->tag);
    free(p->suite);
    *p = (struct parsed_ref){ 0 };
}

static bool suite_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 32 || s[0] == '-')
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return false;
    return true;
}

static int split_path_tag(const char *s, struct parsed_ref *p, const char *scheme, struct lz_error *err) {
    struct stat st;
    _cleanup_free_ char *path = NULL;
    if (!s[0])
        return lz_error_set(err, -EINVAL, "%s: reference needs a path", scheme);
    if (stat(s, &st) == 0) {
        path = lz_xstrdup(s);
    } else {
        const char *c = strrchr(s, ':');
        if (c && c[1] && !strchr(c, '/') && c != s) {
            path = lz_xstrndup(s, (size_t)(c - s));
            p->tag = lz_xstrdup(c + 1);
        } else {
            path = lz_xstrdup(s);
        }
    }
    char *abs = realpath(path, NULL);
    if (!abs)
        return lz_error_set(err, -errno, "%s%s: %m", scheme, path);
    p->path = abs;
    p->name = p->tag ? lz_xasprintf("%s%s:%s", scheme, abs, p->tag) : lz_xasprintf("%s%s", scheme, abs);
    return 0;
}

/* Normalises a registry reference the way docker does: default registry
 * docker.io, "library/" for official images, tag "latest". */
static int normalize_registry(const char *in, char **ret, struct lz_error *err) {
    if (strncmp(in, "docker://", 9) == 0)
        in += 9;
    size_t n = strlen(in);
    if (n == 0 || n > 512 || !((in[0] >= 'a' && in[0] <= 'z') || (in[0] >= '0' && in[0] <= '9')))
        return lz_error_set(err, -EINVAL, "invalid image reference \"%s\"", in);
    for (const char *p = in; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("._-:/@", *p)))
            return lz_error_set(err, -EINVAL, "invalid character in image reference \"%s\"", in);
    if (strstr(in, "//") || in[n - 1] == '/' || in[n - 1] == ':')
        return lz_error_set(err, -EINVAL, "invalid image reference \"%s\"", in);
    const char *at = strchr(in, '@');
    size_t name_len = at ? (size_t)(at - in) : n;
    _cleanup_free_ char *name = lz_xstrndup(in, name_len);
    _cleanup_free_ char *suffix = NULL;
    if (at) {
        if (!digest_valid(at + 1))
            return lz_error_set(err, -EINVAL, "image reference \"%s\": invalid digest", in);
        suffix = lz_xstrdup(at);
    } else {
        char *slash = strrchr(name, '/'), *colon = strrchr(name, ':');
        if (colon && (!slash || colon > slash)) {
            suffix = lz_xstrdup(colon);
            *colon = '\0';
        } else {
            suffix = lz_xstrdup(":latest");
        }
    }
    char *slash = strchr(name, '/');
    size_t first = slash ? (size_t)(slash - name) : 0;
    bool has_domain = slash && (memchr(name, '.', first) || memchr(name, ':', first) ||
                                (first == 9 && !strncmp(name, "localhost", 9)));
    if (strchr(name, ':') && !has_domain)
        return lz_error_set(err, -EINVAL, "invalid image reference \"%s\"", in);
    if (has_domain && first == 9 && !strncmp(name, "docker.io", 9) && !strchr(slash + 1, '/'))
        *ret = lz_xasprintf("docker.io/library/%s%s", slash + 1, suffix);
    else if (has_domain)
        *ret = lz_xasprintf("%s%s", name, suffix);
    else if (slash)
        *ret = lz_xasprintf("docker.io/%s%s", name, suffix);
    else
        *ret = lz_xasprintf("docker.io/library/%s%s", name, suffix);
    return 0;
}

static int parse_ref(const char *ref, struct parsed_ref *p, struct lz_error *err) {
    *p = (struct parsed_ref){ 0 };
    int r;
    if (!ref || !ref[0])
        return lz_error_set(err, -EINVAL, "empty image reference");
    if (strncmp(ref, "builtin:", 8) == 0) {
        if (strncmp(ref + 8, "debian-", 7) != 0 || !suite_valid(ref + 15))
            return lz_error_set(err, -EINVAL, "unknown builtin image \"%s\" (known: builtin:debian-<suite>)", ref);
        p->kind = REF_BUILTIN;
        p->suite = lz_xstrdup(ref + 15);
        p->name = lz_xstrdup(ref);
        return 0;
    }
    static const struct {
        const char *scheme;
        enum ref_kind kind;
    } local[] = {
        { "oci:", REF_OCI },
        { "oci-archive:", REF_OCI_ARCHIVE },
        { "docker-archive:", REF_DOCKER_ARCHIVE },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(local); i++) {
        size_t sl = strlen(local[i].scheme);
        if (strncmp(ref, local[i].scheme, sl) == 0) {
            p->kind = local[i].kind;
            r = split_path_tag(ref + sl, p, local[i].scheme, err);
            if (r < 0)
                parsed_ref_clear(p);
            return r;
        }
    }
    p->kind = REF_REGISTRY;
    return normalize_registry(ref, &p->name, err);
}

/* ---- import paths ---- */

static int make_scratch(const struct store *st, const char *prefix, char name[64], int *ret_fd,
                        struct lz_error *err) {
    random_name(prefix, name);
    if (mkdirat(st->fd, name, 0700) < 0)
        return lz_error_set(err, -errno, "image store: cannot create scratch directory: %m");
    int fd = open_beneath(st->fd, name, O_RDONLY | O_DIRECTORY, false);
    if (fd < 0) {
        lz_prepare_remove_tree(st->fd, name);
        return lz_error_set(err, fd, "image store: cannot open scratch directory: %s", strerror(-fd));
    }
    *ret_fd = fd;
    return 0;
}

/* Unpacks an archive with the preparer (the same confinement rules). */
static int unpack_archive(const struct store *st, const char *path, int dirfd, lz_progress_fn progress, void *ud,
                          struct lz_error *err) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return lz_error_set(err, -errno, "%s: %m", path);
    struct stat s;
    if (fstat(fd, &s) < 0 || !S_ISREG(s.st_mode))
        return lz_error_set(err, -EINVAL, "%s: not a regular file", path);
    struct lz_layer_opts o = {
        .progress = progress, .ud = ud, .phase = "unpack", .progress_total = (uint64_t)s.st_size,
    };
    int r = lz_prepare_apply_layer(dirfd, fd, &o, err);
    if (r < 0)
        return lz_error_prefix(err, r, "cannot unpack %s", path);
    (void)st;
    return 0;
}

static int import_local(const struct store *st, const struct parsed_ref *p, lz_progress_fn progress, void *ud,
                        char **ret_digest, struct lz_error *err) {
    if (p->kind == REF_OCI) {
        _cleanup_close_ int src = open(p->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (src < 0)
            return lz_error_set(err, -errno, "oci:%s: %m", p->path);
        int r = import_oci_dir(st, src, p->tag, p->name, progress, ud, ret_digest, err);
        return r < 0 ? lz_error_prefix(err, r, "oci:%s", p->path) : 0;
    }
    char scratch[64];
    _cleanup_close_ int dfd = -EBADF;
    int r = make_scratch(st, ".import-", scratch, &dfd, err);
    if (r < 0)
        return r;
    r = unpack_archive(st, p->path, dfd, progress, ud, err);
    if (r == 0 && p->kind == REF_OCI_ARCHIVE)
        r = import_oci_dir(st, dfd, p->tag, p->name, progress, ud, ret_digest, err);
    else if (r == 0)
        r = import_docker_dir(st, dfd, p->tag, p->name, progress, ud, ret_digest, err);
    lz_prepare_remove_tree(st->fd, scratch);
    if (r < 0)
        return lz_error_prefix(err, r, "%s", p->name);
    return 0;
}

static bool looks_unreachable(const struct tool_out *o) {
    static const char *const marks[] = {
        "no such host", "dial tcp", "connection refused", "i/o timeout", "network is unreachable",
        "TLS handshake timeout", "temporary failure in name resolution", "server misbehaving",
    };
    for (size_t i = 0; i < o->n_tail; i++)
        for (size_t k = 0; k < LZ_ARRAY_SIZE(marks); k++)
            if (strcasestr(o->tail[i], marks[k]))
                return true;
    return false;
}

static int pull_registry(const struct store *st, const struct parsed_ref *p, lz_progress_fn progress, void *ud,
                         char **ret_digest, struct lz_error *err) {
    char scratch[64];
    _cleanup_close_ int dfd = -EBADF;
    int r = make_scratch(st, ".pull-", scratch, &dfd, err);
    if (r < 0)
        return r;
    _cleanup_free_ char *src = lz_xasprintf("docker://%s", p->name);
    _cleanup_free_ char *dst = lz_xasprintf("oci:%s/layout:lazaret", scratch);
    char *argv[] = { (char *)"skopeo", (char *)"copy", src, dst, NULL };
    struct tool_out o = { .progress = progress, .ud = ud, .prefix = "pull" };
    progress_report(progress, ud, "pull", 0, 0);
    int status = 0;
    /* cwd = the store, so that the destination path has no ':' of data_root. */
    r = run_tool(argv, st->fd, &o, &status);
    if (r == -ENOENT) {
        r = lz_error_set(err, -ENOENT,
                         "skopeo is not installed; it is needed to pull %s from a registry "
                         "(or use an oci:, oci-archive: or docker-archive: reference)", p->name);
    } else if (r < 0) {
        r = lz_error_set(err, r, "cannot run skopeo: %s", strerror(-r));
    } else if (status != 0) {
        char tail[800];
        tool_tail(&o, tail, sizeof tail);
        if (looks_unreachable(&o))
            r = lz_error_set(err, -EHOSTUNREACH, "registry unreachable while pulling %s: %s", p->name, tail);
        else
            r = lz_error_set(err, -EIO, "skopeo copy %s failed (exit %d): %s", src, status, tail);
    } else {
        _cleanup_close_ int lfd = open_beneath(dfd, "layout", O_RDONLY | O_DIRECTORY, false);
        if (lfd < 0)
            r = lz_error_set(err, lfd, "skopeo wrote no OCI layout");
        else
            r = import_oci_dir(st, lfd, "lazaret", p->name, progress, ud, ret_digest, err);
    }
    lz_prepare_remove_tree(st->fd, scratch);
    return r;
}

/* ---- bootstrap ---- */

static int bootstrap_locked(const struct store *st, const char *suite, lz_progress_fn progress, void *ud,
                            struct lz_error *err) {
    char scratch[64];
    _cleanup_close_ int dfd = -EBADF;
    int r = make_scratch(st, ".bootstrap-", scratch, &dfd, err);
    if (r < 0)
        return r;
    /* mmdebstrap as the invoking user writes the tar itself (unshare mode
     * maps its subuids inside); the scratch directory must be writable. */
    _cleanup_free_ char *target = lz_xasprintf("%s/rootfs.tar", scratch);
    _cleanup_free_ char *suite_arg = lz_xstrdup(suite);
    char *argv[] = {
        (char *)"mmdebstrap", (char *)"--variant=minbase", (char *)"--include=" LZ_BOOTSTRAP_PACKAGES,
        (char *)"--mode=auto", (char *)"--format=tar", suite_arg, target, NULL,
    };
    struct tool_out o = { .progress = progress, .ud = ud, .prefix = "bootstrap" };
    progress_report(progress, ud, "bootstrap", 0, 0);
    int status = 0;
    r = run_tool(argv, st->fd, &o, &status);
    char tail[800];
    tool_tail(&o, tail, sizeof tail);
    if (r == -ENOENT) {
        r = lz_error_set(err, -ENOENT, "mmdebstrap is not installed; it builds the default base image");
        goto out;
    } else if (r < 0) {
        r = lz_error_set(err, r, "cannot run mmdebstrap: %s", strerror(-r));
        goto out;
    } else if (status != 0) {
        r = lz_error_set(err, -EIO, "mmdebstrap %s failed (exit %d): %s", suite, status, tail);
        goto out;
    }

    {
        _cleanup_close_ int tfd = open_beneath(dfd, "rootfs.tar", O_RDONLY, false);
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
        char ldg[DIGEST_LEN + 1];
        uint64_t lsize;
        struct copy_progress pc = { progress, ud, "bootstrap: hashing", 0, (uint64_t)s.st_size };
        r = hash_copy(tfd, -1, MAX_BLOB, &pc, ldg, &lsize);
        if (r < 0) {
            r = lz_error_set(err, r, "reading mmdebstrap output: %s", strerror(-r));
            goto out;
        }
        if (fsync(tfd) < 0 || renameat(dfd, "rootfs.tar", st->blobs, ldg + 7) < 0) {
            r = lz_error_set(err, -errno, "image store: cannot store the base layer: %m");
            goto out;
        }
        char created[32];
        now_rfc3339(created);
        _cleanup_free_ char *created_by =
            lz_xasprintf("mmdebstrap --variant=minbase --include=%s %s", LZ_BOOTSTRAP_PACKAGES, suite);
        _cleanup_json_ json_t *cfg = json_pack(
            "{s:s, s:s, s:s, s:{s:[s], s:[s,s], s:s}, s:{s:s, s:[s]}, s:[{s:s, s:s}]}",
            "created", created, "architecture", host_arch(), "os", "linux",
            "config", "Env", "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "Cmd", "/bin/bash", "-l", "WorkingDir", "/",
            "rootfs", "type", "layers", "diff_ids", ldg,
            "history", "created", created, "created_by", created_by);
        if (!cfg)
            abort();
        _cleanup_free_ char *craw = json_dump_compact(cfg);
        char cdg[DIGEST_LEN + 1];
        r = store_put_mem(st, craw, strlen(craw), cdg, err);
        if (r < 0)
            goto out;
        _cleanup_free_ char *name = lz_xasprintf("builtin:debian-%s", suite);
        _cleanup_json_ json_t *man = json_pack(
            "{s:i, s:s, s:{s:s, s:s, s:I}, s:[{s:s, s:s, s:I}], s:{s:s, s:s}}",
            "schemaVersion", 2, "mediaType", MT_OCI_MANIFEST,
            "config", "mediaType", MT_OCI_CONFIG, "digest", cdg, "size", (json_int_t)strlen(craw),
            "layers", "mediaType", MT_LAYER_TAR, "digest", ldg, "size", (json_int_t)lsize,
            "annotations", "org.opencontainers.image.created", created, "org.opencontainers.image.title", name);
        if (!man)
            abort();
        _cleanup_free_ char *mraw = json_dump_compact(man);
        char mdg[DIGEST_LEN + 1];
        r = store_put_mem(st, mraw, strlen(mraw), mdg, err);
        if (r < 0)
            goto out;
        r = store_set_name(st, name, mdg, strlen(mraw), MT_OCI_MANIFEST, err);
        if (r == 0)
            progress_report(progress, ud, "bootstrap: done", lsize, lsize);
    }
out:
    lz_prepare_remove_tree(st->fd, scratch);
    return r;
}

int lz_image_bootstrap(const char *data_root, const char *suite, lz_progress_fn progress, void *ud,
                       struct lz_error *err) {
    if (!suite || !suite_valid(suite))
        return lz_error_set(err, -EINVAL, "invalid Debian suite \"%s\"", suite ?: "");
    if (sodium_init() < 0)
        return lz_error_set(err, -EIO, "libsodium initialisation failed");
    struct store st;
    int r = store_open(data_root, true, &st, err);
    if (r < 0)
        return r;
    _cleanup_close_ int lk = -EBADF;
    r = lock_file(st.fd, ".bootstrap.lock", &lk);
    if (r < 0)
        r = lz_error_set(err, r, "cannot lock image store: %s", strerror(-r));
    else
        r = bootstrap_locked(&st, suite, progress, ud, err);
    store_close(&st);
    return sanitize_error(err, r);
}

/* ---- prepared artifacts ---- */

static void put_u32be(crypto_hash_sha256_state *h, uint32_t v) {
    uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
    crypto_hash_sha256_update(h, b, 4);
}

int lz_prepared_artifact_id(const char *manifest_digest, char ret_id[65]) {
    if (!digest_valid(manifest_digest))
        return -EINVAL;
    if (sodium_init() < 0)
        return -EIO;
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    crypto_hash_sha256_update(&h, (const uint8_t *)ARTIFACT_CONTEXT, strlen(ARTIFACT_CONTEXT));
    put_u32be(&h, (uint32_t)strlen(manifest_digest));
    crypto_hash_sha256_update(&h, (const uint8_t *)manifest_digest, strlen(manifest_digest));
    put_u32be(&h, (uint32_t)strlen(LZ_PREPARER_VERSION));
    crypto_hash_sha256_update(&h, (const uint8_t *)LZ_PREPARER_VERSION, strlen(LZ_PREPARER_VERSION));
    uint8_t md[crypto_hash_sha256_BYTES];
    crypto_hash_sha256_final(&h, md);
    lz_hex(md, sizeof md, ret_id);
    return 0;
}

/* A complete artifact: <dir>/artifact.json names id, <dir>/rootfs is a
 * directory (dir is id once published, a .tmp-* name before). */
static int artifact_load(int prepared_fd, const char *dir, const char *id, json_t **ret) {
    char p[128];
    int r = lz_snprintf(p, sizeof p, "%s/artifact.json", dir);
    if (r < 0)
        return r;
    _cleanup_free_ char *buf = NULL;
    size_t len;
    r = read_beneath(prepared_fd, p, false, MAX_JSON, &buf, &len);
    if (r < 0)
        return r;
    json_error_t je;
    json_t *j = json_loadb(buf, len, 0, &je);
    if (!j)
        return -EBADMSG;
    const char *aid = json_str(j, "artifact_id");
    _cleanup_close_ int dfd = open_beneath(prepared_fd, dir, O_RDONLY | O_DIRECTORY, false);
    struct stat s;
    if (!aid || strcmp(aid, id) != 0 || dfd < 0 || fstatat(dfd, "rootfs", &s, AT_SYMLINK_NOFOLLOW) < 0 ||
        !S_ISDIR(s.st_mode)) {
        json_decref(j);
        return -EBADMSG;
    }
    *ret = j;
    return 0;
}

static void info_from_json(json_t *a, const char *id, struct lz_prepared_info *pi) {
    memset(pi, 0, sizeof *pi);
    snprintf(pi->artifact_id, sizeof pi->artifact_id, "%s", id);
    json_t *src = json_object_get(a, "source");
    pi->source_ref = lz_xstrdup(json_str(src, "ref") ?: "");
    pi->manifest_digest = lz_xstrdup(json_str(src, "manifest_digest") ?: "");
    pi->created = lz_xstrdup(json_str(a, "created") ?: "");
    json_t *sz = json_object_get(a, "size");
    pi->size = json_is_integer(sz) && json_integer_value(sz) > 0 ? (uint64_t)json_integer_value(sz) : 0;
}

int lz_prepared_info_read(int prepared_fd, const char *dir, const char *artifact_id, struct lz_prepared_info *ret) {
    if (!dir || !artifact_id || strlen(artifact_id) != 64)
        return -EINVAL;
    json_t *a = NULL;
    int r = artifact_load(prepared_fd, dir, artifact_id, &a);
    if (r < 0)
        return r;
    info_from_json(a, artifact_id, ret);
    json_decref(a);
    return 0;
}

void lz_prepared_info_clear(struct lz_prepared_info *p) {
    if (!p)
        return;
    free(p->source_ref);
    free(p->manifest_digest);
    free(p->created);
    *p = (struct lz_prepared_info){ 0 };
}

static __thread uint64_t tree_bytes;
static int tree_size_cb(const char *path, const struct stat *s, int flag, struct FTW *f) {
    (void)path;
    (void)flag;
    (void)f;
    uint64_t b = (uint64_t)s->st_blocks * 512;
    tree_bytes += S_ISDIR(s->st_mode) || s->st_nlink <= 1 ? b : b / s->st_nlink;
    return 0;
}

static uint64_t tree_size(const char *path) {
    tree_bytes = 0;
    nftw(path, tree_size_cb, 32, FTW_PHYS | FTW_MOUNT);
    return tree_bytes;
}

static void fill_prepared(const char *data_root, const char *id, const char *digest, const char *name,
                          struct lz_prepared *ret) {
    memcpy(ret->artifact_id, id, 65);
    ret->rootfs = lz_xasprintf("%s/prepared/%s/rootfs", data_root, id);
    ret->manifest_digest = lz_xstrdup(digest);
    ret->source_ref = lz_xstrdup(name);
}

static int prepare_artifact(const char *data_root, const struct store *st, const char *name, const char *mdigest,
                            lz_progress_fn progress, void *ud, struct lz_prepared *ret, struct lz_error *err) {
    char id[65];
    int r = lz_prepared_artifact_id(mdigest, id);
    if (r < 0)
        return lz_error_set(err, r, "invalid manifest digest \"%s\"", mdigest);
    _cleanup_free_ char *pdir = lz_xasprintf("%s/prepared", data_root);
    r = lz_mkdir_p(pdir, 0755);
    if (r < 0)
        return lz_error_set(err, r, "cannot create %s: %s", pdir, strerror(-r));
    _cleanup_close_ int pfd = open(pdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return lz_error_set(err, -errno, "%s: %m", pdir);
    json_t *existing = NULL;
    if (artifact_load(pfd, id, id, &existing) == 0) {
        json_decref(existing);
        /* Reuse: known to the catalog (and not being reclaimed) first. */
        r = lz_catalog_register(data_root, id, err);
        if (r < 0)
            return r;
        fill_prepared(data_root, id, mdigest, name, ret);
        return 0;
    }

    _cleanup_free_ char *raw = NULL;
    size_t raw_len;
    r = store_read_blob(st, mdigest, &raw, &raw_len, err);
    if (r < 0)
        return r;
    struct manifest m = { 0 };
    memcpy(m.digest, mdigest, DIGEST_LEN + 1);
    r = json_parse(raw, raw_len, &m.doc, mdigest, err);
    if (r < 0)
        return r;
    r = manifest_parse(&m, err);
    if (r < 0) {
        manifest_clear(&m);
        return r;
    }

    /* The durable intent comes first: a tree whose creator dies is then
     * reclaimable by gc, and a tree without an intent is never touched. */
    char tmp[64];
    random_name(".tmp-", tmp);
    r = lz_catalog_prepare_begin(data_root, tmp, id, err);
    if (r < 0) {
        manifest_clear(&m);
        return r;
    }
    if (mkdirat(pfd, tmp, 0700) < 0) {
        r = lz_error_set(err, -errno, "cannot create %s/%s: %m", pdir, tmp);
        lz_catalog_prepare_forget(data_root, tmp, NULL);
        manifest_clear(&m);
        return r;
    }
    _cleanup_close_ int tfd = open_beneath(pfd, tmp, O_RDONLY | O_DIRECTORY, false);
    _cleanup_close_ int rfd = -EBADF;
    if (tfd < 0) {
        r = lz_error_set(err, tfd, "cannot open %s/%s: %s", pdir, tmp, strerror(-tfd));
        goto fail;
    }
    if (mkdirat(tfd, "rootfs", 0755) < 0 || (rfd = open_beneath(tfd, "rootfs", O_RDONLY | O_DIRECTORY, false)) < 0) {
        r = lz_error_set(err, rfd < 0 && rfd != -EBADF ? rfd : -errno, "cannot create rootfs in %s/%s", pdir, tmp);
        goto fail;
    }

    uint64_t total = 0, done = 0;
    for (size_t i = 0; i < m.n_layers; i++)
        total += (uint64_t)m.layers[i].size;
    struct lz_prepare_stats stats = { 0 };
    for (size_t i = 0; i < m.n_layers; i++) {
        const struct desc *l = &m.layers[i];
        _cleanup_close_ int lfd = openat(st->blobs, l->digest + 7, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (lfd < 0) {
            r = lz_error_set(err, -errno, "image store: layer %s: %m", l->digest);
            goto fail;
        }
        struct lz_layer_opts o = {
            .expected_digest = l->digest, .progress = progress, .ud = ud, .phase = "prepare",
            .progress_base = done, .progress_total = total, .stats = &stats,
        };
        r = lz_prepare_apply_layer(rfd, lfd, &o, err);
        if (r < 0) {
            lz_error_prefix(err, r, "preparing layer %zu/%zu (%s)", i + 1, m.n_layers, l->digest);
            goto fail;
        }
        done += (uint64_t)l->size;
    }

    {
        _cleanup_free_ char *rootfs_path = lz_xasprintf("%s/%s/rootfs", pdir, tmp);
        uint64_t size = tree_size(rootfs_path);
        char created[32];
        now_rfc3339(created);
        json_t *layers = json_array();
        for (size_t i = 0; i < m.n_layers; i++)
            json_array_append_new(layers, json_string(m.layers[i].digest));
        _cleanup_json_ json_t *a = json_pack(
            "{s:s, s:s, s:{s:s, s:s, s:s}, s:o, s:s, s:I, s:{s:I, s:I}}",
            "artifact_id", id, "preparer", LZ_PREPARER_VERSION,
            "source", "ref", name, "manifest_digest", mdigest, "config_digest", m.config.digest,
            "layers", layers, "created", created, "size", (json_int_t)size,
            "stats", "entries", (json_int_t)stats.entries, "devices_skipped", (json_int_t)stats.devices_skipped);
        if (!a)
            abort();
        _cleanup_free_ char *out = json_dumps(a, JSON_INDENT(2) | JSON_SORT_KEYS);
        if (!out)
            abort();
        r = lz_write_file_atomic_at(tfd, "artifact.json", out, strlen(out), 0644);
        if (r < 0) {
            lz_error_set(err, r, "cannot write artifact.json: %s", strerror(-r));
            goto fail;
        }
    }
    /* Durable before it is visible: a published artifact is complete. */
    if (syncfs(tfd) < 0 || fchmod(tfd, 0755) < 0) {
        r = lz_error_set(err, -errno, "cannot sync prepared tree: %m");
        goto fail;
    }
    r = lz_catalog_prepare_publish(data_root, pfd, tmp, id, err);
    if (r < 0)
        goto fail;
    if (r == 1) {
        /* Someone else published it first: theirs is as good as ours. */
        if (lz_prepare_remove_tree(pfd, tmp) == 0)
            lz_catalog_prepare_forget(data_root, tmp, NULL);
    }
    manifest_clear(&m);
    fill_prepared(data_root, id, mdigest, name, ret);
    return 0;

fail:
    /* The tree first, then the intent: an intent without its tree is
     * harmless, a tree without an intent would never be reclaimed. */
    if (lz_prepare_remove_tree(pfd, tmp) == 0)
        lz_catalog_prepare_forget(data_root, tmp, NULL);
    manifest_clear(&m);
    return r;
}

int lz_image_prepare(const char *data_root, const char *ref, lz_progress_fn progress, void *ud,
                     struct lz_prepared *ret, struct lz_error *err) {
    if (sodium_init() < 0)
        return lz_error_set(err, -EIO, "libsodium initialisation failed");
    struct parsed_ref p;
    int r = parse_ref(ref, &p, err);
    if (r < 0)
        return sanitize_error(err, r);
    struct store st;
    r = store_open(data_root, true, &st, err);
    if (r < 0) {
        parsed_ref_clear(&p);
        return sanitize_error(err, r);
    }
    _cleanup_free_ char *digest = NULL;
    switch (p.kind) {
    case REF_BUILTIN: {
        r = store_lookup(&st, p.name, &digest, err);
        if (r != -ENOENT)
            break;
        _cleanup_close_ int lk = -EBADF;
        r = lock_file(st.fd, ".bootstrap.lock", &lk);
        if (r < 0) {
            lz_error_set(err, r, "cannot lock image store: %s", strerror(-r));
            break;
        }
        /* Another process may have built it while we waited. */
        r = store_lookup(&st, p.name, &digest, err);
        if (r != -ENOENT)
            break;
        r = bootstrap_locked(&st, p.suite, progress, ud, err);
        if (r == 0)
            r = store_lookup(&st, p.name, &digest, err);
        break;
    }
    case REF_REGISTRY:
        r = store_lookup(&st, p.name, &digest, err);
        if (r == -ENOENT)
            r = pull_registry(&st, &p, progress, ud, &digest, err);
        break;
    case REF_OCI:
    case REF_OCI_ARCHIVE:
    case REF_DOCKER_ARCHIVE:
        r = import_local(&st, &p, progress, ud, &digest, err);
        break;
    }
    if (r == -ENOENT && err && err->code == 0)
        r = lz_error_set(err, r, "image %s not found in the store", p.name);
    if (r == 0)
        r = prepare_artifact(data_root, &st, p.name, digest, progress, ud, ret, err);
    store_close(&st);
    parsed_ref_clear(&p);
    return sanitize_error(err, r);
}

void lz_prepared_clear(struct lz_prepared *p) {
    if (!p)
        return;
    free(p->rootfs);
    free(p->manifest_digest);
    free(p->source_ref);
    *p = (struct lz_prepared){ 0 };
}

/* ---- listing ---- */

static int cmp_image(const void *a, const void *b) {
    return strcmp(((const struct lz_image_info *)a)->name, ((const struct lz_image_info *)b)->name);
}

static int cmp_prepared(const void *a, const void *b) {
    const struct lz_prepared_info *x = a, *y = b;
    int c = strcmp(x->source_ref, y->source_ref);
    return c ? c : strcmp(x->artifact_id, y->artifact_id);
}

int lz_image_list(const char *data_root, struct lz_image_list *ret, struct lz_error *err) {
    struct lz_image_list l = { 0 };
    struct store st;
    int r = store_open(data_root, false, &st, err);
    if (r < 0 && r != -ENOENT)
        return r;
    if (r == 0) {
        _cleanup_json_ json_t *idx = NULL;
        r = store_read_index(&st, &idx, err);
        if (r < 0) {
            store_close(&st);
            return r;
        }
        json_t *ms = json_object_get(idx, "manifests"), *d;
        size_t i;
        l.images = lz_xcalloc(json_array_size(ms), sizeof *l.images);
        json_array_foreach(ms, i, d) {
            const char *n = desc_ref_name(d), *dg = json_str(d, "digest");
            if (!n || !digest_valid(dg))
                continue;
            struct lz_image_info *im = &l.images[l.n_images++];
            im->name = lz_xstrdup(n);
            im->manifest_digest = lz_xstrdup(dg);
            _cleanup_free_ char *raw = NULL;
            size_t len;
            struct manifest m = { 0 };
            memcpy(m.digest, dg, DIGEST_LEN + 1);
            if (store_read_blob(&st, dg, &raw, &len, NULL) == 0 && json_parse(raw, len, &m.doc, dg, NULL) == 0 &&
                manifest_parse(&m, NULL) == 0) {
                im->config_digest = lz_xstrdup(m.config.digest);
                im->size = len + (uint64_t)m.config.size;
                for (size_t k = 0; k < m.n_layers; k++)
                    im->size += (uint64_t)m.layers[k].size;
            }
            manifest_clear(&m);
        }
        store_close(&st);
        qsort(l.images, l.n_images, sizeof *l.images, cmp_image);
    }

    _cleanup_free_ char *pdir = lz_xasprintf("%s/prepared", data_root);
    DIR *dir = opendir(pdir);
    if (dir) {
        size_t cap = 0;
        struct dirent *de;
        while ((de = readdir(dir))) {
            if (de->d_name[0] == '.' || strlen(de->d_name) != 64)
                continue;
            json_t *a = NULL;
            if (artifact_load(dirfd(dir), de->d_name, de->d_name, &a) < 0)
                continue;
            if (l.n_prepared == cap) {
                cap = cap ? cap * 2 : 8;
                l.prepared = lz_xrealloc(l.prepared, cap * sizeof *l.prepared);
            }
            info_from_json(a, de->d_name, &l.prepared[l.n_prepared++]);
            json_decref(a);
        }
        closedir(dir);
        qsort(l.prepared, l.n_prepared, sizeof *l.prepared, cmp_prepared);
    } else if (errno != ENOENT) {
        int e = -errno;
        lz_image_list_clear(&l);
        return lz_error_set(err, e, "%s: %s", pdir, strerror(-e));
    }
    *ret = l;
    return 0;
}

void lz_image_list_clear(struct lz_image_list *l) {
    if (!l)
        return;
    for (size_t i = 0; i < l->n_images; i++) {
        free(l->images[i].name);
        free(l->images[i].manifest_digest);
        free(l->images[i].config_digest);
    }
    free(l->images);
    for (size_t i = 0; i < l->n_prepared; i++) {
        free(l->prepared[i].source_ref);
        free(l->prepared[i].manifest_digest);
        free(l->prepared[i].created);
    }
    free(l->prepared);
    *l = (struct lz_image_list){ 0 };
}
