/* oci.c — see oci.h: the image store and OCI documents. */
#include "oci.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sodium.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>

const char *lz_oci_host_arch(void) {
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

void lz_progress_report(lz_progress_fn fn, void *ud, const char *phase, uint64_t done, uint64_t total) {
    if (fn)
        fn(ud, phase, done, total);
}

/* ---- small helpers ---- */

/* Reads a regular file of at most max bytes, opened confined under dirfd. */
int lz_oci_read_beneath(int dirfd, const char *path, bool allow_symlinks, size_t max, char **ret_buf, size_t *ret_len) {
    _cleanup_close_ int fd = lz_openat_beneath(dirfd, path, O_RDONLY, 0, allow_symlinks);
    if (fd < 0)
        return fd;
    return lz_read_fd(fd, max, ret_buf, ret_len);
}

bool lz_oci_digest_valid(const char *d) {
    if (!d || strlen(d) != LZ_OCI_DIGEST_LEN || strncmp(d, "sha256:", 7) != 0)
        return false;
    for (const char *p = d + 7; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return false;
    return true;
}

void lz_oci_blob_path(const char *digest, char out[80]) {
    memcpy(out, "blobs/sha256/", 13);
    memcpy(out + 13, digest + 7, 65);
}

void lz_oci_sha256(const void *buf, size_t len, char out[LZ_OCI_DIGEST_LEN + 1]) {
    uint8_t md[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(md, buf, len);
    memcpy(out, "sha256:", 7);
    lz_hex(md, sizeof md, out + 7);
}

void lz_oci_random_name(const char *prefix, char out[64]) {
    uint8_t r[8];
    char hex[17];
    randombytes_buf(r, sizeof r);
    lz_hex(r, sizeof r, hex);
    (void)lz_snprintf(out, 64, "%s%s", prefix, hex);
}

void lz_oci_now_rfc3339(char out[32]) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

int lz_oci_lock(int dirfd, const char *name, int *ret_fd) {
    _cleanup_close_ int fd = openat(dirfd, name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    while (flock(fd, LOCK_EX) < 0)
        if (errno != EINTR)
            return -errno;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

const char *lz_json_str(json_t *o, const char *key) {
    json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;
    return json_is_string(v) ? json_string_value(v) : NULL;
}

int lz_json_parse(const char *buf, size_t len, json_t **ret, const char *what, struct lz_error *err) {
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

char *lz_json_dump_compact(json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
    if (!s)
        abort();
    return s;
}

/* ---- the store ---- */

void lz_oci_close(struct lz_oci_store *s) {
    lz_closep(&s->fd);
    lz_closep(&s->blobs);
    free(s->path);
    s->path = NULL;
}

int lz_oci_open(const char *data_root, bool create, struct lz_oci_store *ret, struct lz_error *err) {
    if (!data_root || data_root[0] != '/')
        return lz_error_set(err, -EINVAL, "data root must be an absolute path");
    struct lz_oci_store s = { .fd = -EBADF, .blobs = -EBADF, .path = lz_xasprintf("%s/images", data_root) };
    int r;
    if (create) {
        _cleanup_free_ char *b = lz_xasprintf("%s/blobs/sha256", s.path);
        r = lz_mkdir_p(b, 0755);
        if (r < 0) {
            lz_error_set(err, r, "cannot create image store %s: %s", s.path, strerror(-r));
            lz_oci_close(&s);
            return r;
        }
    }
    s.fd = open(s.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s.fd < 0) {
        r = -errno;
        /* Absent without create is an empty store to the caller. */
        if (r != -ENOENT || create)
            lz_error_set(err, r, "cannot open image store %s: %s", s.path, strerror(-r));
        lz_oci_close(&s);
        return r;
    }
    s.blobs = lz_openat_beneath(s.fd, "blobs/sha256", O_RDONLY | O_DIRECTORY, 0, false);
    if (s.blobs < 0) {
        r = s.blobs;
        lz_error_set(err, r, "image store %s: blobs/sha256: %s", s.path, strerror(-r));
        lz_oci_close(&s);
        return r;
    }
    if (create && faccessat(s.fd, "index.json", F_OK, AT_SYMLINK_NOFOLLOW) < 0) {
        _cleanup_close_ int lk = -EBADF;
        r = lz_oci_lock(s.fd, ".lock", &lk);
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
            lz_oci_close(&s);
            return r;
        }
    }
    *ret = s;
    return 0;
}

int lz_oci_read_index(const struct lz_oci_store *st, json_t **ret, struct lz_error *err) {
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = lz_oci_read_beneath(st->fd, "index.json", false, LZ_OCI_MAX_JSON, &buf, &len);
    if (r < 0)
        return lz_error_set(err, r, "%s/index.json: %s", st->path, strerror(-r));
    json_t *j;
    r = lz_json_parse(buf, len, &j, "image store index.json", err);
    if (r < 0)
        return r;
    if (!json_is_array(json_object_get(j, "manifests"))) {
        json_decref(j);
        return lz_error_set(err, -EBADMSG, "image store index.json has no manifests array");
    }
    *ret = j;
    return 0;
}

const char *lz_oci_ref_name(json_t *desc) { return lz_json_str(json_object_get(desc, "annotations"), LZ_OCI_REF_NAME); }

/* -ENOENT (no message) when the store has no image of that name. */
int lz_oci_lookup(const struct lz_oci_store *st, const char *name, char **ret_digest, struct lz_error *err) {
    _cleanup_json_ json_t *idx = NULL;
    int r = lz_oci_read_index(st, &idx, err);
    if (r < 0)
        return r;
    json_t *ms = json_object_get(idx, "manifests"), *d;
    size_t i;
    json_array_foreach(ms, i, d) {
        const char *n = lz_oci_ref_name(d), *dg = lz_json_str(d, "digest");
        if (!n || strcmp(n, name) != 0)
            continue;
        if (!lz_oci_digest_valid(dg))
            return lz_error_set(err, -EBADMSG, "image store: invalid digest for %s", name);
        char bp[80];
        lz_oci_blob_path(dg, bp);
        if (faccessat(st->fd, bp, F_OK, AT_SYMLINK_NOFOLLOW) < 0)
            return -ENOENT;
        *ret_digest = lz_xstrdup(dg);
        return 0;
    }
    return -ENOENT;
}

int lz_oci_set_name(const struct lz_oci_store *st, const char *name, const char *digest, uint64_t size,
                    const char *media_type, struct lz_error *err) {
    _cleanup_close_ int lk = -EBADF;
    int r = lz_oci_lock(st->fd, ".lock", &lk);
    if (r < 0)
        return lz_error_set(err, r, "cannot lock image store: %s", strerror(-r));
    _cleanup_json_ json_t *idx = NULL;
    r = lz_oci_read_index(st, &idx, err);
    if (r < 0)
        return r;
    json_t *ms = json_object_get(idx, "manifests");
    json_t *nms, *d;
    size_t i;
    json_array_foreach(ms, i, d) {
        const char *n = lz_oci_ref_name(d), *dg = lz_json_str(d, "digest");
        if (n && dg && !strcmp(n, name) && !strcmp(dg, digest))
            return 0; /* unchanged: no write on every prepare of a local source */
    }
    nms = json_array();
    json_array_foreach(ms, i, d) {
        const char *n = lz_oci_ref_name(d);
        if (!n || strcmp(n, name) != 0)
            json_array_append(nms, d);
    }
    json_array_append_new(nms,
                          json_pack("{s:s, s:s, s:I, s:{s:s}}", "mediaType", media_type, "digest", digest, "size",
                                    (json_int_t)size, "annotations", LZ_OCI_REF_NAME, name));
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

bool lz_oci_has_blob(const struct lz_oci_store *st, const char *digest, int64_t size) {
    struct stat s;
    if (fstatat(st->blobs, digest + 7, &s, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(s.st_mode))
        return false;
    return size < 0 || s.st_size == size;
}

/* Reads src to EOF (at most limit bytes), copying to dst when dst >= 0. */
int lz_oci_hash_copy(int src, int dst, uint64_t limit, const struct lz_oci_copy_progress *pc,
                     char ret_digest[LZ_OCI_DIGEST_LEN + 1], uint64_t *ret_size) {
    _cleanup_free_ uint8_t *buf = lz_xmalloc(256 * 1024);
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    uint64_t n = 0, last = 0;
    for (;;) {
        ssize_t r = lz_read_full(src, buf, 256 * 1024);
        if (r < 0)
            return (int)r;
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
int lz_oci_put_fd(const struct lz_oci_store *st, int src, const char *expected_digest, int64_t expected_size,
                  const struct lz_oci_copy_progress *pc, char ret_digest[LZ_OCI_DIGEST_LEN + 1], uint64_t *ret_size,
                  struct lz_error *err) {
    char tmp[64];
    lz_oci_random_name(".tmp-", tmp);
    _cleanup_close_ int fd = openat(st->blobs, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return lz_error_set(err, -errno, "image store: cannot create blob: %m");
    char digest[LZ_OCI_DIGEST_LEN + 1];
    uint64_t size;
    uint64_t limit = expected_size >= 0 ? (uint64_t)expected_size : LZ_OCI_MAX_BLOB;
    int r = lz_oci_hash_copy(src, fd, limit, pc, digest, &size);
    if (r == -EFBIG)
        r = lz_error_set(err, -EBADMSG, "blob %s is larger than its descriptor says", expected_digest ?: "");
    else if (r < 0)
        r = lz_error_set(err, r, "image store: copying blob: %s", strerror(-r));
    else if (expected_digest && strcmp(digest, expected_digest) != 0)
        r = lz_error_set(err, -EBADMSG, "blob digest mismatch: expected %s, got %s", expected_digest, digest);
    else if (expected_size >= 0 && size != (uint64_t)expected_size)
        r = lz_error_set(err, -EBADMSG, "blob %s size mismatch: expected %" PRId64 ", got %" PRIu64, digest,
                         expected_size, size);
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

int lz_oci_put_mem(const struct lz_oci_store *st, const void *buf, size_t len, char ret_digest[LZ_OCI_DIGEST_LEN + 1],
                   struct lz_error *err) {
    char digest[LZ_OCI_DIGEST_LEN + 1];
    lz_oci_sha256(buf, len, digest);
    if (!lz_oci_has_blob(st, digest, (int64_t)len)) {
        char tmp[64];
        lz_oci_random_name(".tmp-", tmp);
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

int lz_oci_put_json(const struct lz_oci_store *st, json_t *j, char ret_digest[LZ_OCI_DIGEST_LEN + 1], size_t *ret_len,
                    struct lz_error *err) {
    _cleanup_free_ char *raw = lz_json_dump_compact(j);
    size_t len = strlen(raw);
    int r = lz_oci_put_mem(st, raw, len, ret_digest, err);
    if (r < 0)
        return r;
    *ret_len = len;
    return 0;
}

int lz_oci_put_manifest(const struct lz_oci_store *st, const char *name, json_t *manifest,
                        char ret_digest[LZ_OCI_DIGEST_LEN + 1], struct lz_error *err) {
    size_t len;
    int r = lz_oci_put_json(st, manifest, ret_digest, &len, err);
    if (r < 0)
        return r;
    return lz_oci_set_name(st, name, ret_digest, len, LZ_MT_OCI_MANIFEST, err);
}

/* Reads a small store blob and checks its digest (the store is trusted, but
 * a manifest or config is cheap to verify). */
int lz_oci_read_blob(const struct lz_oci_store *st, const char *digest, char **ret_buf, size_t *ret_len,
                     struct lz_error *err) {
    if (!lz_oci_digest_valid(digest))
        return lz_error_set(err, -EBADMSG, "invalid digest \"%s\"", digest ?: "");
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = lz_oci_read_beneath(st->blobs, digest + 7, false, LZ_OCI_MAX_JSON, &buf, &len);
    if (r < 0)
        return lz_error_set(err, r, "image store: blob %s: %s", digest, strerror(-r));
    char got[LZ_OCI_DIGEST_LEN + 1];
    lz_oci_sha256(buf, len, got);
    if (strcmp(got, digest) != 0)
        return lz_error_set(err, -EBADMSG, "image store: blob %s is corrupt (hashes to %s)", digest, got);
    *ret_buf = TAKE_PTR(buf);
    *ret_len = len;
    return 0;
}

int lz_oci_scratch(const struct lz_oci_store *st, const char *prefix, char name[64], int *ret_fd,
                   struct lz_error *err) {
    lz_oci_random_name(prefix, name);
    if (mkdirat(st->fd, name, 0700) < 0)
        return lz_error_set(err, -errno, "image store: cannot create scratch directory: %m");
    int fd = lz_openat_beneath(st->fd, name, O_RDONLY | O_DIRECTORY, 0, false);
    if (fd < 0) {
        lz_prepare_remove_tree(st->fd, name);
        return lz_error_set(err, fd, "image store: cannot open scratch directory: %s", strerror(-fd));
    }
    *ret_fd = fd;
    return 0;
}

/* ---- descriptors and manifests ---- */

int lz_oci_parse_desc(json_t *j, struct lz_oci_desc *d, const char *what, struct lz_error *err) {
    if (!json_is_object(j))
        return lz_error_set(err, -EBADMSG, "%s: descriptor is not an object", what);
    d->media_type = lz_json_str(j, "mediaType");
    d->digest = lz_json_str(j, "digest");
    json_t *sz = json_object_get(j, "size");
    if (!d->digest || strncmp(d->digest, "sha256:", 7) != 0)
        return lz_error_set(err, -ENOTSUP, "%s: only sha256 digests are supported (got \"%s\")", what, d->digest ?: "");
    if (!lz_oci_digest_valid(d->digest))
        return lz_error_set(err, -EBADMSG, "%s: invalid digest \"%s\"", what, d->digest);
    if (!json_is_integer(sz) || json_integer_value(sz) < 0 || (uint64_t)json_integer_value(sz) > LZ_OCI_MAX_BLOB)
        return lz_error_set(err, -EBADMSG, "%s: invalid size", what);
    d->size = (int64_t)json_integer_value(sz);
    return 0;
}

static bool layer_type_ok(const char *mt) {
    static const char *const ok[] = {
        LZ_MT_LAYER_TAR,
        LZ_MT_LAYER_GZIP,
        LZ_MT_LAYER_ZSTD,
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

void lz_oci_manifest_clear(struct lz_oci_manifest *m) {
    if (m->doc)
        json_decref(m->doc);
    free(m->raw);
    m->doc = NULL;
    m->raw = NULL;
}

/* Parses a manifest document (already digest-checked). */
int lz_oci_manifest_parse(struct lz_oci_manifest *m, struct lz_error *err) {
    json_t *sv = json_object_get(m->doc, "schemaVersion");
    if (!json_is_integer(sv) || json_integer_value(sv) != 2)
        return lz_error_set(err, -ENOTSUP, "manifest %s: unsupported schemaVersion", m->digest);
    int r = lz_oci_parse_desc(json_object_get(m->doc, "config"), &m->config, "manifest config", err);
    if (r < 0)
        return r;
    json_t *ls = json_object_get(m->doc, "layers"), *l;
    if (!json_is_array(ls))
        return lz_error_set(err, -EBADMSG, "manifest %s: no layers array", m->digest);
    if (json_array_size(ls) > LZ_OCI_MAX_LAYERS)
        return lz_error_set(err, -EFBIG, "manifest %s: more than %d layers", m->digest, LZ_OCI_MAX_LAYERS);
    size_t i;
    json_array_foreach(ls, i, l) {
        r = lz_oci_parse_desc(l, &m->layers[i], "manifest layer", err);
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
int lz_oci_src_read_blob(int src, const struct lz_oci_desc *d, size_t max, char **ret_buf, size_t *ret_len,
                         struct lz_error *err) {
    if (d->size > (int64_t)max)
        return lz_error_set(err, -EFBIG, "blob %s is too large (%" PRId64 " bytes)", d->digest, d->size);
    char bp[80];
    lz_oci_blob_path(d->digest, bp);
    _cleanup_close_ int fd = lz_openat_beneath(src, bp, O_RDONLY, 0, true);
    if (fd < 0)
        return lz_error_set(err, fd, "blob %s: %s", d->digest, strerror(-fd));
    _cleanup_free_ char *buf = lz_xmalloc((size_t)d->size + 1);
    ssize_t n = lz_read_full(fd, buf, (size_t)d->size + 1);
    if (n < 0)
        return lz_error_set(err, (int)n, "blob %s: %s", d->digest, strerror((int)-n));
    if (n != d->size)
        return lz_error_set(err, -EBADMSG, "blob %s size mismatch: descriptor says %" PRId64, d->digest, d->size);
    char got[LZ_OCI_DIGEST_LEN + 1];
    lz_oci_sha256(buf, (size_t)n, got);
    if (strcmp(got, d->digest) != 0)
        return lz_error_set(err, -EBADMSG, "blob digest mismatch: expected %s, got %s", d->digest, got);
    buf[n] = '\0';
    *ret_buf = TAKE_PTR(buf);
    *ret_len = (size_t)n;
    return 0;
}

static bool is_index(const char *mt, json_t *doc) {
    if (mt && (!strcmp(mt, LZ_MT_OCI_INDEX) || !strcmp(mt, LZ_MT_DOCKER_LIST)))
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
        const char *os = lz_json_str(p, "os"), *arch = lz_json_str(p, "architecture");
        if (os && arch && !strcmp(os, "linux") && !strcmp(arch, lz_oci_host_arch())) {
            *ret = d;
            return 0;
        }
    }
    if (n_plain == 1) {
        *ret = only;
        return 0;
    }
    return lz_error_set(err, -ENOENT, "image index has no manifest for linux/%s", lz_oci_host_arch());
}

int lz_oci_src_load_manifest(int src, json_t *jdesc, int depth, struct lz_oci_manifest *m, struct lz_error *err) {
    if (depth > 3)
        return lz_error_set(err, -ELOOP, "image index nesting too deep");
    struct lz_oci_desc d;
    int r = lz_oci_parse_desc(jdesc, &d, "manifest descriptor", err);
    if (r < 0)
        return r;
    _cleanup_free_ char *raw = NULL;
    size_t len;
    r = lz_oci_src_read_blob(src, &d, LZ_OCI_MAX_JSON, &raw, &len, err);
    if (r < 0)
        return r;
    json_t *doc;
    r = lz_json_parse(raw, len, &doc, d.digest, err);
    if (r < 0)
        return r;
    const char *mt = lz_json_str(doc, "mediaType");
    if (!mt)
        mt = d.media_type;
    if (is_index(mt, doc)) {
        json_t *pick = NULL;
        r = index_pick(doc, &pick, err);
        if (r == 0)
            r = lz_oci_src_load_manifest(src, pick, depth + 1, m, err);
        json_decref(doc);
        return r;
    }
    if (mt && strcmp(mt, LZ_MT_OCI_MANIFEST) != 0 && strcmp(mt, LZ_MT_DOCKER_MANIFEST) != 0) {
        json_decref(doc);
        return lz_error_set(err, -ENOTSUP, "%s: unsupported manifest media type \"%s\"", d.digest, mt);
    }
    m->doc = doc;
    m->raw = TAKE_PTR(raw);
    m->raw_len = len;
    memcpy(m->digest, d.digest, LZ_OCI_DIGEST_LEN + 1);
    m->media_type = mt ? mt : LZ_MT_OCI_MANIFEST;
    return lz_oci_manifest_parse(m, err);
}

/* Checks a config blob: JSON object, the host's OS/architecture when it
 * says, as many diff_ids as layers. */
int lz_oci_check_config(const char *buf, size_t len, size_t n_layers, json_t **ret_doc, struct lz_error *err) {
    json_t *c;
    int r = lz_json_parse(buf, len, &c, "image config", err);
    if (r < 0)
        return r;
    const char *os = lz_json_str(c, "os"), *arch = lz_json_str(c, "architecture");
    json_t *diff = json_object_get(json_object_get(c, "rootfs"), "diff_ids");
    if (!json_is_object(c))
        r = lz_error_set(err, -EBADMSG, "image config is not an object");
    else if (os && strcmp(os, "linux") != 0)
        r = lz_error_set(err, -ENOTSUP, "image is for OS \"%s\", not linux", os);
    else if (arch && strcmp(arch, lz_oci_host_arch()) != 0)
        r = lz_error_set(err, -ENOTSUP, "image is for architecture \"%s\", this host is %s", arch, lz_oci_host_arch());
    else if (diff && (!json_is_array(diff) || json_array_size(diff) != n_layers))
        r = lz_error_set(err, -EBADMSG, "image config lists %zu diff_ids for %zu layers",
                         json_is_array(diff) ? json_array_size(diff) : 0, n_layers);
    if (r < 0 || !ret_doc)
        json_decref(c);
    else
        *ret_doc = c;
    return r;
}
