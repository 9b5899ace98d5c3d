/* imgimport.c — see imgimport.h. */
#include "imgimport.h"

#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>

#include "imgtool.h"

/* An image config, checked (lz_oci_check_config: its parse in *ret_doc
 * when not NULL) before it is stored. */
static int put_config(const struct lz_oci_store *st, const char *cfg, size_t len, size_t n_layers, json_t **ret_doc,
                      char ret_digest[LZ_OCI_DIGEST_LEN + 1], struct lz_error *err) {
    int r = lz_oci_check_config(cfg, len, n_layers, ret_doc, err);
    if (r < 0)
        return r;
    return lz_oci_put_mem(st, cfg, len, ret_digest, err);
}

/* Copies a verified manifest, its config and its layers from a source
 * layout into the store, then names it. */
static int import_manifest(const struct lz_oci_store *st, int src, struct lz_oci_manifest *m, const char *name,
                           lz_progress_fn progress, void *ud, struct lz_error *err) {
    _cleanup_free_ char *cfg = NULL;
    size_t cfg_len;
    int r = lz_oci_src_read_blob(src, &m->config, LZ_OCI_MAX_JSON, &cfg, &cfg_len, err);
    if (r < 0)
        return lz_error_prefix(err, r, "image config");
    char dg[LZ_OCI_DIGEST_LEN + 1];
    r = put_config(st, cfg, cfg_len, m->n_layers, NULL, dg, err);
    if (r < 0)
        return r;

    uint64_t total = 0, done = 0;
    for (size_t i = 0; i < m->n_layers; i++)
        if (!lz_oci_has_blob(st, m->layers[i].digest, m->layers[i].size))
            total += (uint64_t)m->layers[i].size;
    for (size_t i = 0; i < m->n_layers; i++) {
        const struct lz_oci_desc *l = &m->layers[i];
        if (lz_oci_has_blob(st, l->digest, l->size))
            continue;
        char bp[80];
        lz_oci_blob_path(l->digest, bp);
        _cleanup_close_ int fd = lz_openat_beneath(src, bp, O_RDONLY, 0, true);
        if (fd < 0)
            return lz_error_set(err, fd, "layer %s: %s", l->digest, strerror(-fd));
        struct lz_oci_copy_progress pc = { progress, ud, "import", done, total };
        uint64_t sz;
        r = lz_oci_put_fd(st, fd, l->digest, l->size, &pc, dg, &sz, err);
        if (r < 0)
            return lz_error_prefix(err, r, "layer %zu", i + 1);
        done += sz;
        lz_progress_report(progress, ud, "import", done, total);
    }
    r = lz_oci_put_mem(st, m->raw, m->raw_len, dg, err);
    if (r < 0)
        return r;
    return lz_oci_set_name(st, name, m->digest, m->raw_len, m->media_type, err);
}

/* Parses the JSON file path of the unpacked source src (symlinks that stay
 * in src followed); what names it in errors. */
static int read_json(int src, const char *path, const char *what, json_t **ret, struct lz_error *err) {
    _cleanup_free_ char *buf = NULL;
    size_t len;
    int r = lz_oci_read_beneath(src, path, true, LZ_OCI_MAX_JSON, &buf, &len);
    if (r < 0)
        return lz_error_set(err, r, "%s: %s", what, strerror(-r));
    return lz_json_parse(buf, len, ret, what, err);
}

static int import_oci_dir(const struct lz_oci_store *st, int src, const char *tag, const char *name,
                          lz_progress_fn progress, void *ud, char **ret_digest, struct lz_error *err) {
    _cleanup_close_ int lfd = lz_openat_beneath(src, "oci-layout", O_RDONLY, 0, false);
    if (lfd < 0)
        return lz_error_set(err, lfd == -ENOENT ? -EINVAL : lfd, "not an OCI image layout (no oci-layout file)");
    _cleanup_json_ json_t *idx = NULL;
    int r = read_json(src, "index.json", "OCI layout index.json", &idx, err);
    if (r < 0)
        return r;
    json_t *ms = json_object_get(idx, "manifests"), *d, *pick = NULL;
    if (!json_is_array(ms) || json_array_size(ms) == 0)
        return lz_error_set(err, -ENOENT, "OCI layout has no manifests");
    size_t i;
    if (tag) {
        json_array_foreach(ms, i, d) {
            const char *n = lz_oci_ref_name(d);
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
    struct lz_oci_manifest m = { 0 };
    r = lz_oci_src_load_manifest(src, pick, 0, &m, err);
    if (r == 0)
        r = import_manifest(st, src, &m, name, progress, ud, err);
    if (r == 0)
        *ret_digest = lz_xstrdup(m.digest);
    lz_oci_manifest_clear(&m);
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

static int import_docker_dir(const struct lz_oci_store *st, int src, const char *tag, const char *name,
                             lz_progress_fn progress, void *ud, char **ret_digest, struct lz_error *err) {
    _cleanup_json_ json_t *arr = NULL;
    int r = read_json(src, "manifest.json", "docker archive manifest.json", &arr, err);
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
    const char *cfg_path = lz_json_str(pick, "Config");
    json_t *layers = json_object_get(pick, "Layers");
    if (!cfg_path || !json_is_array(layers) || json_array_size(layers) > LZ_OCI_MAX_LAYERS)
        return lz_error_set(err, -EBADMSG, "docker archive manifest.json: bad Config or Layers");

    _cleanup_free_ char *cfg = NULL;
    size_t cfg_len;
    r = lz_oci_read_beneath(src, cfg_path, true, LZ_OCI_MAX_JSON, &cfg, &cfg_len);
    if (r < 0)
        return lz_error_set(err, r, "docker archive config %s: %s", cfg_path, strerror(-r));
    _cleanup_json_ json_t *cdoc = NULL;
    char cfg_digest[LZ_OCI_DIGEST_LEN + 1];
    r = put_config(st, cfg, cfg_len, json_array_size(layers), &cdoc, cfg_digest, err);
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
        _cleanup_close_ int fd = p ? lz_openat_beneath(src, p, O_RDONLY, 0, true) : -EINVAL;
        if (fd >= 0 && fstat(fd, &s) == 0)
            total += (uint64_t)s.st_size;
    }
    json_array_foreach(layers, i, l) {
        const char *p = json_string_value(l);
        if (!p) {
            json_decref(ldescs);
            return lz_error_set(err, -EBADMSG, "docker archive: layer %zu is not a path", i + 1);
        }
        _cleanup_close_ int fd = lz_openat_beneath(src, p, O_RDONLY, 0, true);
        if (fd < 0) {
            json_decref(ldescs);
            return lz_error_set(err, fd, "docker archive layer %s: %s", p, strerror(-fd));
        }
        uint8_t magic[4] = { 0 };
        ssize_t n = pread(fd, magic, sizeof magic, 0);
        const char *mt = LZ_MT_LAYER_TAR;
        if (n >= 2 && magic[0] == 0x1f && magic[1] == 0x8b)
            mt = LZ_MT_LAYER_GZIP;
        else if (n == 4 && magic[0] == 0x28 && magic[1] == 0xb5 && magic[2] == 0x2f && magic[3] == 0xfd)
            mt = LZ_MT_LAYER_ZSTD;
        char dg[LZ_OCI_DIGEST_LEN + 1];
        uint64_t sz;
        struct lz_oci_copy_progress pc = { progress, ud, "import", done, total };
        r = lz_oci_put_fd(st, fd, NULL, -1, &pc, dg, &sz, err);
        if (r < 0) {
            json_decref(ldescs);
            return lz_error_prefix(err, r, "docker archive layer %s", p);
        }
        done += sz;
        const char *want = json_string_value(json_array_get(diff, i));
        const char *lb = strrchr(p, '/');
        lb = lb ? lb + 1 : p;
        bool named = strlen(lb) == 64 && hex64_at(lb);
        if ((!strcmp(mt, LZ_MT_LAYER_TAR) && want && strcmp(want, dg) != 0) ||
            (named && strncmp(lb, dg + 7, 64) != 0)) {
            json_decref(ldescs);
            return lz_error_set(err, -EBADMSG, "docker archive layer %s hashes to %s, expected %s", p, dg,
                                named ? lb : want);
        }
        json_array_append_new(ldescs,
                              json_pack("{s:s, s:s, s:I}", "mediaType", mt, "digest", dg, "size", (json_int_t)sz));
    }
    _cleanup_json_ json_t *man =
        json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:o}", "schemaVersion", 2, "mediaType", LZ_MT_OCI_MANIFEST, "config",
                  "mediaType", LZ_MT_OCI_CONFIG, "digest", cfg_digest, "size", (json_int_t)cfg_len, "layers", ldescs);
    char mdg[LZ_OCI_DIGEST_LEN + 1];
    r = lz_oci_put_manifest(st, name, man, mdg, err);
    if (r < 0)
        return r;
    *ret_digest = lz_xstrdup(mdg);
    return 0;
}

/* ---- import paths ---- */

/* Unpacks an archive with the preparer (the same confinement rules). */
static int unpack_archive(const struct lz_oci_store *st, const char *path, int dirfd, lz_progress_fn progress, void *ud,
                          struct lz_error *err) {
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return lz_error_set(err, -errno, "%s: %m", path);
    struct stat s;
    if (fstat(fd, &s) < 0 || !S_ISREG(s.st_mode))
        return lz_error_set(err, -EINVAL, "%s: not a regular file", path);
    struct lz_layer_opts o = {
        .progress = progress,
        .ud = ud,
        .phase = "unpack",
        .progress_total = (uint64_t)s.st_size,
    };
    int r = lz_prepare_apply_layer(dirfd, fd, &o, err);
    if (r < 0)
        return lz_error_prefix(err, r, "cannot unpack %s", path);
    (void)st;
    return 0;
}

int lz_image_import_local(const struct lz_oci_store *st, const struct lz_image_ref *p, lz_progress_fn progress,
                          void *ud, char **ret_digest, struct lz_error *err) {
    if (p->kind == LZ_REF_OCI) {
        _cleanup_close_ int src = open(p->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (src < 0)
            return lz_error_set(err, -errno, "oci:%s: %m", p->path);
        int r = import_oci_dir(st, src, p->tag, p->name, progress, ud, ret_digest, err);
        return r < 0 ? lz_error_prefix(err, r, "oci:%s", p->path) : 0;
    }
    char scratch[64];
    _cleanup_close_ int dfd = -EBADF;
    int r = lz_oci_scratch(st, ".import-", scratch, &dfd, err);
    if (r < 0)
        return r;
    r = unpack_archive(st, p->path, dfd, progress, ud, err);
    if (r == 0 && p->kind == LZ_REF_OCI_ARCHIVE)
        r = import_oci_dir(st, dfd, p->tag, p->name, progress, ud, ret_digest, err);
    else if (r == 0)
        r = import_docker_dir(st, dfd, p->tag, p->name, progress, ud, ret_digest, err);
    lz_prepare_remove_tree(st->fd, scratch);
    if (r < 0)
        return lz_error_prefix(err, r, "%s", p->name);
    return 0;
}

int lz_image_pull_registry(const struct lz_oci_store *st, const struct lz_image_ref *p, lz_progress_fn progress,
                           void *ud, char **ret_digest, struct lz_error *err) {
    char scratch[64];
    _cleanup_close_ int dfd = -EBADF;
    int r = lz_oci_scratch(st, ".pull-", scratch, &dfd, err);
    if (r < 0)
        return r;
    _cleanup_free_ char *src = lz_xasprintf("docker://%s", p->name);
    _cleanup_free_ char *dst = lz_xasprintf("oci:%s/layout:lazaret", scratch);
    char *argv[] = { (char *)"skopeo", (char *)"copy", src, dst, NULL };
    struct lz_tool_out o = { .progress = progress, .ud = ud, .prefix = "pull" };
    lz_progress_report(progress, ud, "pull", 0, 0);
    int status = 0;
    /* cwd = the store, so that the destination path has no ':' of data_root. */
    r = lz_tool_run(argv, st->path, LZ_TOOL_TIMEOUT_MS, &o, &status);
    if (r == -ENOENT) {
        r = lz_error_set(err, -ENOENT,
                         "skopeo is not installed; it is needed to pull %s from a registry "
                         "(or use an oci:, oci-archive: or docker-archive: reference)",
                         p->name);
    } else if (r == -ETIMEDOUT) {
        char tail[800];
        lz_tool_tail(&o, tail, sizeof tail);
        r = lz_error_set(err, -ETIMEDOUT, "skopeo copy %s did not finish within %d minutes and was stopped: %s", src,
                         LZ_TOOL_TIMEOUT_MIN, tail);
    } else if (r < 0) {
        r = lz_error_errno(err, r, "cannot run skopeo");
    } else if (status != 0) {
        char tail[800];
        lz_tool_tail(&o, tail, sizeof tail);
        if (lz_tool_unreachable(&o))
            r = lz_error_set(err, -EHOSTUNREACH, "registry unreachable while pulling %s: %s", p->name, tail);
        else
            r = lz_error_set(err, -EIO, "skopeo copy %s failed (exit %d): %s", src, status, tail);
    } else {
        _cleanup_close_ int lfd = lz_openat_beneath(dfd, "layout", O_RDONLY | O_DIRECTORY, 0, false);
        if (lfd < 0)
            r = lz_error_set(err, lfd, "skopeo wrote no OCI layout");
        else
            r = import_oci_dir(st, lfd, "lazaret", p->name, progress, ud, ret_digest, err);
    }
    lz_prepare_remove_tree(st->fd, scratch);
    return r;
}
