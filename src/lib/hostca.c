/* hostca.c — see hostca.h. */
#include "hostca.h"

#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>

#define HOSTCA_DEPTH 8
#define HOSTCA_FILES 1024
#define BEGIN_CERT "-----BEGIN CERTIFICATE-----"
#define END_CERT "-----END CERTIFICATE-----"

void lz_hostca_clear(struct lz_hostca *h) {
    for (size_t i = 0; i < h->n; i++) {
        free(h->names[i]);
        free(h->pems[i]);
    }
    free(h->names);
    free(h->pems);
    *h = (struct lz_hostca){ 0 };
}

/* A flat file name from a relative path: [A-Za-z0-9._-] kept, the rest _. */
static char *flat_name(const char *rel, size_t index, size_t k) {
    size_t n = strlen(rel);
    if (n > 4 && !strcmp(rel + n - 4, ".crt"))
        n -= 4;
    if (n > 80)
        n = 80;
    char base[81];
    for (size_t i = 0; i < n; i++) {
        char c = rel[i];
        base[i] = (char)((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                                 c == '-' || c == '_'
                             ? c
                             : '_');
    }
    base[n] = '\0';
    return k ? lz_xasprintf("%02zu-%s-%zu.crt", index, base, k) : lz_xasprintf("%02zu-%s.crt", index, base);
}

/* The DER of one block's base64 body (whitespace allowed), re-encoded as
 * a normalized PEM; NULL when it is not base64 of a DER SEQUENCE. */
static char *normalize(const char *b64, size_t len) {
    if (len == 0 || len > LZ_HOSTCA_MAX_CERT)
        return NULL;
    for (size_t i = 0; i < len; i++) {
        char c = b64[i];
        bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/' ||
            c == '=' || c == '\n' || c == '\r' || c == ' ' || c == '\t';
        if (!ok)
            return NULL;
    }
    _cleanup_free_ uint8_t *der = lz_xmalloc(len);
    size_t dl = 0;
    if (sodium_base642bin(der, len, b64, len, " \t\r\n", &dl, NULL, sodium_base64_VARIANT_ORIGINAL) != 0 || dl < 16 ||
        der[0] != 0x30)
        return NULL;
    size_t el = sodium_base64_ENCODED_LEN(dl, sodium_base64_VARIANT_ORIGINAL);
    _cleanup_free_ char *enc = lz_xmalloc(el);
    sodium_bin2base64(enc, el, der, dl, sodium_base64_VARIANT_ORIGINAL);
    struct lz_buf out = { 0 };
    lz_buf_add(&out, BEGIN_CERT "\n", strlen(BEGIN_CERT) + 1);
    size_t encl = strlen(enc);
    for (size_t off = 0; off < encl; off += 64) {
        size_t k = encl - off < 64 ? encl - off : 64;
        lz_buf_add(&out, enc + off, k);
        lz_buf_add(&out, "\n", 1);
    }
    lz_buf_add(&out, END_CERT "\n", strlen(END_CERT) + 1);
    lz_buf_add(&out, "", 1);
    return out.p;
}

int lz_hostca_parse(const char *name, const char *buf, size_t len, struct lz_hostca *h) {
    int taken = 0;
    size_t k = 0;
    const char *p = buf, *end = buf + len;
    while (p < end) {
        const char *b = memmem(p, (size_t)(end - p), "-----BEGIN ", 11);
        if (!b)
            break;
        const char *te = memmem(b + 11, (size_t)(end - b - 11), "-----", 5);
        if (!te)
            break;
        size_t tl = (size_t)(te - (b + 11));
        char type[64] = "";
        if (tl < sizeof type) {
            memcpy(type, b + 11, tl);
            type[tl] = '\0';
        }
        char endm[96];
        snprintf(endm, sizeof endm, "-----END %s-----", type);
        const char *body = te + 5;
        const char *e = type[0] ? memmem(body, (size_t)(end - body), endm, strlen(endm)) : NULL;
        if (!e)
            break; /* unterminated or unnamed: nothing after it is trusted */
        p = e + strlen(endm);
        if (strcmp(type, "CERTIFICATE") != 0) {
            h->skipped_blocks++; /* a private key, a CRL, ...: never taken */
            continue;
        }
        if (h->n >= LZ_HOSTCA_MAX_CERTS)
            break;
        char *pem = normalize(body, (size_t)(e - body));
        if (!pem) {
            h->skipped_blocks++;
            continue;
        }
        h->names = lz_xrealloc(h->names, (h->n + 1) * sizeof *h->names);
        h->pems = lz_xrealloc(h->pems, (h->n + 1) * sizeof *h->pems);
        h->names[h->n] = flat_name(name, h->n, k++);
        h->pems[h->n] = pem;
        h->n++;
        taken++;
    }
    return taken;
}

/* The relative paths of the *.crt regular files below dfd, unsorted. */
static void walk(int dfd, const char *prefix, int depth, char ***paths, size_t *n) {
    char **names = NULL;
    size_t nn = 0;
    if (depth > HOSTCA_DEPTH || lz_dir_names(dfd, HOSTCA_FILES, &names, &nn) < 0)
        return;
    for (size_t i = 0; i < nn && *n < HOSTCA_FILES; i++) {
        struct stat st;
        if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) < 0)
            continue;
        char *rel = prefix[0] ? lz_xasprintf("%s/%s", prefix, names[i]) : lz_xstrdup(names[i]);
        size_t l = strlen(names[i]);
        if (S_ISDIR(st.st_mode)) {
            int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) {
                walk(sub, rel, depth + 1, paths, n);
                close(sub);
            }
            free(rel);
        } else if (S_ISREG(st.st_mode) && l > 4 && !strcmp(names[i] + l - 4, ".crt")) {
            *paths = lz_xrealloc(*paths, (*n + 1) * sizeof **paths);
            (*paths)[(*n)++] = rel;
        } else {
            free(rel);
        }
    }
    lz_strv_free(names, nn);
}

const char *lz_hostca_dir(void) {
    const char *t = lz_test_hook("LAZARET_TEST_HOST_CA_DIR");
    return t ? t : LZ_HOSTCA_DIR;
}

int lz_hostca_load(const char *dir, struct lz_hostca *ret, struct lz_error *err) {
    *ret = (struct lz_hostca){ 0 };
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        return lz_error_set(err, -errno, "cannot read the host's CA certificates in %s: %s", dir, strerror(errno));
    }
    char **paths = NULL;
    size_t n = 0;
    walk(dfd, "", 0, &paths, &n);
    qsort(paths, n, sizeof *paths, lz_cmp_strp);
    for (size_t i = 0; i < n; i++) {
        _cleanup_close_ int fd = lz_openat_beneath(dfd, paths[i], O_RDONLY | O_NOFOLLOW, 0, false);
        _cleanup_free_ char *buf = NULL;
        size_t len = 0;
        /* Unreadable (a file only root may read) or oversized: left out. */
        if (fd >= 0 && lz_read_fd(fd, LZ_HOSTCA_MAX_FILE, &buf, &len) == 0)
            lz_hostca_parse(paths[i], buf, len, ret);
    }
    lz_strv_free(paths, n);
    crypto_hash_sha256_state hs;
    crypto_hash_sha256_init(&hs);
    for (size_t i = 0; i < ret->n; i++) {
        crypto_hash_sha256_update(&hs, (const uint8_t *)ret->names[i], strlen(ret->names[i]) + 1);
        crypto_hash_sha256_update(&hs, (const uint8_t *)ret->pems[i], strlen(ret->pems[i]) + 1);
    }
    crypto_hash_sha256_final(&hs, ret->digest);
    return 0;
}

/* mkdir -p of rel beneath rootfs_fd (never through a symlink); the last
 * component's fd. */
static int mkdirs_beneath(int rootfs_fd, const char *rel, uid_t uid, gid_t gid) {
    char path[256];
    size_t n = strlen(rel);
    if (n >= sizeof path)
        return -ENAMETOOLONG;
    memcpy(path, rel, n + 1);
    for (char *s = path;; s++) {
        if (*s != '/' && *s != '\0')
            continue;
        char c = *s;
        *s = '\0';
        if (mkdirat(rootfs_fd, path, 0755) == 0) {
            if (fchownat(rootfs_fd, path, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        } else if (errno != EEXIST) {
            return -errno;
        }
        *s = c;
        if (!c)
            break;
    }
    return lz_openat_beneath(rootfs_fd, rel, O_RDONLY | O_DIRECTORY, 0, false);
}

int lz_hostca_install(int rootfs_fd, const struct lz_hostca *h, uid_t uid, gid_t gid, struct lz_error *err) {
    if (h->n == 0)
        return 0;
    static const char dir[] = "usr/local/share/ca-certificates/lazaret-host";
    _cleanup_close_ int dfd = mkdirs_beneath(rootfs_fd, dir, uid, gid);
    if (dfd < 0)
        return lz_error_set(err, dfd, "cannot create /%s in the image: %s", dir, strerror(-dfd));
    for (size_t i = 0; i < h->n; i++) {
        _cleanup_close_ int fd = openat(dfd, h->names[i], O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0 || lz_write_full(fd, h->pems[i], strlen(h->pems[i])) < 0 || fchown(fd, uid, gid) < 0 ||
            fchmod(fd, 0644) < 0)
            return lz_error_set(err, -errno, "cannot write /%s/%s in the image: %s", dir, h->names[i], strerror(errno));
    }
    /* The bundle every TLS library reads: appended as
     * update-ca-certificates would (an image without it keeps none). */
    _cleanup_close_ int bfd =
        lz_openat_beneath(rootfs_fd, "etc/ssl/certs/ca-certificates.crt", O_WRONLY | O_APPEND | O_NOFOLLOW, 0, false);
    if (bfd == -ENOENT)
        return 0;
    if (bfd < 0)
        return lz_error_set(err, bfd, "cannot open /etc/ssl/certs/ca-certificates.crt in the image: %s",
                            strerror(-bfd));
    for (size_t i = 0; i < h->n; i++)
        if (lz_write_full(bfd, h->pems[i], strlen(h->pems[i])) < 0)
            return lz_error_set(err, -errno, "cannot append to /etc/ssl/certs/ca-certificates.crt: %s",
                                strerror(errno));
    return 0;
}
