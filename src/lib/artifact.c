/* artifact.c — see artifact.h: the prepared-artifact record. */
#include "artifact.h"

#include <fcntl.h>
#include <ftw.h>
#include <sodium.h>
#include <sys/stat.h>

#include "oci.h"

#define ARTIFACT_CONTEXT "lazaret-prepared-artifact-v1"

static void put_u32be(crypto_hash_sha256_state *h, uint32_t v) {
    uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
    crypto_hash_sha256_update(h, b, 4);
}

int lz_prepared_artifact_id(const char *manifest_digest, char ret_id[65]) {
    return lz_prepared_artifact_id_owned(manifest_digest, NULL, ret_id);
}

int lz_prepared_artifact_id_owned(const char *manifest_digest, const char *owners, char ret_id[65]) {
    if (!lz_oci_digest_valid(manifest_digest))
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
    if (owners) {
        put_u32be(&h, (uint32_t)strlen(owners));
        crypto_hash_sha256_update(&h, (const uint8_t *)owners, strlen(owners));
    }
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
    r = lz_oci_read_beneath(prepared_fd, p, false, LZ_OCI_MAX_JSON, &buf, &len);
    if (r < 0)
        return r;
    json_error_t je;
    json_t *j = json_loadb(buf, len, 0, &je);
    if (!j)
        return -EBADMSG;
    const char *aid = lz_json_str(j, "artifact_id");
    _cleanup_close_ int dfd = lz_openat_beneath(prepared_fd, dir, O_RDONLY | O_DIRECTORY, 0, false);
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
    pi->source_ref = lz_xstrdup(lz_json_str(src, "ref") ?: "");
    pi->manifest_digest = lz_xstrdup(lz_json_str(src, "manifest_digest") ?: "");
    pi->created = lz_xstrdup(lz_json_str(a, "created") ?: "");
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

int lz_artifact_write(int dir_fd, const char *rootfs_path, const struct lz_artifact_record *a, struct lz_error *err) {
    uint64_t size = tree_size(rootfs_path);
    char created[32];
    lz_oci_now_rfc3339(created);
    json_t *layers = json_array();
    for (size_t i = 0; i < a->n_layers; i++)
        json_array_append_new(layers, json_string(a->layers[i]));
    _cleanup_json_ json_t *j = json_pack(
        "{s:s, s:s, s:{s:s, s:s, s:s}, s:o, s:s, s:I, s:{s:I, s:I}}", "artifact_id", a->artifact_id, "preparer",
        LZ_PREPARER_VERSION, "source", "ref", a->source_ref, "manifest_digest", a->manifest_digest, "config_digest",
        a->config_digest, "layers", layers, "created", created, "size", (json_int_t)size, "stats", "entries",
        (json_int_t)a->stats->entries, "devices_skipped", (json_int_t)a->stats->devices_skipped);
    if (!j)
        abort();
    _cleanup_free_ char *out = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
    if (!out)
        abort();
    int r = lz_write_file_atomic_at(dir_fd, "artifact.json", out, strlen(out), 0644);
    if (r < 0)
        return lz_error_errno(err, r, "cannot write artifact.json");
    return 0;
}
