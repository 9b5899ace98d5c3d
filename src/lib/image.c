/* image.c — see image.h for the layout and the contracts: the top-level
 * image operations (prepare, list); the store, references, imports, tools,
 * the bootstrap and the artifact record live in the modules image.h names. */
#include "image.h"
#include "hostca.h"

#include <dirent.h>
#include <fcntl.h>
#include <sodium.h>
#include <sys/stat.h>

#include "catalog.h"
#include "imgimport.h"
#include "imgref.h"
#include "oci.h"

/* ---- prepared artifacts ---- */

static void fill_prepared(const char *data_root, const char *id, const char *digest, const char *name,
                          struct lz_prepared *ret) {
    memcpy(ret->artifact_id, id, 65);
    ret->rootfs = lz_xasprintf("%s/prepared/%s/rootfs", data_root, id);
    ret->manifest_digest = lz_xstrdup(digest);
    ret->source_ref = lz_xstrdup(name);
}

static int prepare_artifact(const char *data_root, const struct lz_oci_store *st, const char *name, const char *mdigest,
                            const struct lz_hostca *ca, lz_progress_fn progress, void *ud, struct lz_prepared *ret,
                            struct lz_error *err) {
    char id[65];
    /* Root's Domains map sandbox IDs 1..N to its subordinate range: store
     * image owners there, so that they are themselves again inside. */
    struct lz_idmap_ranges rg;
    bool shift = geteuid() == 0 && lz_idmap_ranges(&rg);
    bool with_ca = ca && ca->n;
    char variant[192] = "", cahex[65];
    if (shift)
        snprintf(variant, sizeof variant, "shift:%lu+%lu/%lu+%lu", rg.us, rg.un, rg.gs, rg.gn);
    if (with_ca) {
        /* The host's CA certificates: another set, another tree. */
        lz_hex(ca->digest, sizeof ca->digest, cahex);
        size_t l = strlen(variant);
        snprintf(variant + l, sizeof variant - l, "%shostca:%s", l ? ";" : "", cahex);
    }
    int r = lz_prepared_artifact_id_owned(mdigest, variant[0] ? variant : NULL, id);
    if (r < 0)
        return lz_error_set(err, r, "invalid manifest digest \"%s\"", mdigest);
    _cleanup_free_ char *pdir = lz_xasprintf("%s/prepared", data_root);
    r = lz_mkdir_p(pdir, 0755);
    if (r < 0)
        return lz_error_set(err, r, "cannot create %s: %s", pdir, strerror(-r));
    _cleanup_close_ int pfd = open(pdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (pfd < 0)
        return lz_error_set(err, -errno, "%s: %m", pdir);
    struct lz_prepared_info existing;
    if (lz_prepared_info_read(pfd, id, id, &existing) == 0) {
        lz_prepared_info_clear(&existing);
        /* Reuse: known to the catalog (and not being reclaimed) first;
         * read-only when it is known 'ready' already (the lease checks it
         * again, under the catalog lock, and updates its last use). */
        r = lz_catalog_known_ready(data_root, id, err);
        if (r == 0)
            r = lz_catalog_register(data_root, id, err);
        if (r < 0)
            return r;
        fill_prepared(data_root, id, mdigest, name, ret);
        return 0;
    }

    _cleanup_free_ char *raw = NULL;
    size_t raw_len;
    r = lz_oci_read_blob(st, mdigest, &raw, &raw_len, err);
    if (r < 0)
        return r;
    struct lz_oci_manifest m = { 0 };
    memcpy(m.digest, mdigest, LZ_OCI_DIGEST_LEN + 1);
    r = lz_json_parse(raw, raw_len, &m.doc, mdigest, err);
    if (r < 0)
        return r;
    r = lz_oci_manifest_parse(&m, err);
    if (r < 0) {
        lz_oci_manifest_clear(&m);
        return r;
    }

    /* The durable intent comes first: a tree whose creator dies is then
     * reclaimable by gc, and a tree without an intent is never touched. */
    char tmp[64];
    lz_oci_random_name(".tmp-", tmp);
    r = lz_catalog_prepare_begin(data_root, tmp, id, err);
    if (r < 0) {
        lz_oci_manifest_clear(&m);
        return r;
    }
    if (mkdirat(pfd, tmp, 0700) < 0) {
        r = lz_error_set(err, -errno, "cannot create %s/%s: %m", pdir, tmp);
        lz_catalog_prepare_forget(data_root, tmp, NULL);
        lz_oci_manifest_clear(&m);
        return r;
    }
    _cleanup_close_ int tfd = lz_openat_beneath(pfd, tmp, O_RDONLY | O_DIRECTORY, 0, false);
    _cleanup_close_ int rfd = -EBADF;
    if (tfd < 0) {
        r = lz_error_set(err, tfd, "cannot open %s/%s: %s", pdir, tmp, strerror(-tfd));
        goto fail;
    }
    if (mkdirat(tfd, "rootfs", 0755) < 0 ||
        (rfd = lz_openat_beneath(tfd, "rootfs", O_RDONLY | O_DIRECTORY, 0, false)) < 0) {
        r = lz_error_set(err, rfd < 0 && rfd != -EBADF ? rfd : -errno, "cannot create rootfs in %s/%s", pdir, tmp);
        goto fail;
    }

    uint64_t total = 0, done = 0;
    for (size_t i = 0; i < m.n_layers; i++)
        total += (uint64_t)m.layers[i].size;
    struct lz_prepare_stats stats = { 0 };
    for (size_t i = 0; i < m.n_layers; i++) {
        const struct lz_oci_desc *l = &m.layers[i];
        _cleanup_close_ int lfd = openat(st->blobs, l->digest + 7, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (lfd < 0) {
            r = lz_error_set(err, -errno, "image store: layer %s: %m", l->digest);
            goto fail;
        }
        struct lz_layer_opts o = {
            .expected_digest = l->digest,
            .progress = progress,
            .ud = ud,
            .phase = "prepare",
            .progress_base = done,
            .progress_total = total,
            .stats = &stats,
            .shift = shift ? &rg : NULL,
        };
        r = lz_prepare_apply_layer(rfd, lfd, &o, err);
        if (r < 0) {
            lz_error_prefix(err, r, "preparing layer %zu/%zu (%s)", i + 1, m.n_layers, l->digest);
            goto fail;
        }
        done += (uint64_t)l->size;
    }
    if (with_ca &&
        (r = lz_hostca_install(rfd, ca, shift ? (uid_t)rg.us : geteuid(), shift ? (gid_t)rg.gs : getegid(), err)) < 0)
        goto fail;

    {
        _cleanup_free_ char *rootfs_path = lz_xasprintf("%s/%s/rootfs", pdir, tmp);
        _cleanup_free_ const char **layers = lz_xcalloc(m.n_layers + 1, sizeof *layers);
        for (size_t i = 0; i < m.n_layers; i++)
            layers[i] = m.layers[i].digest;
        struct lz_artifact_record rec = {
            .artifact_id = id,
            .source_ref = name,
            .manifest_digest = mdigest,
            .config_digest = m.config.digest,
            .layers = layers,
            .n_layers = m.n_layers,
            .stats = &stats,
        };
        r = lz_artifact_write(tfd, rootfs_path, &rec, err);
        if (r < 0)
            goto fail;
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
    lz_oci_manifest_clear(&m);
    fill_prepared(data_root, id, mdigest, name, ret);
    return 0;

fail:
    /* The tree first, then the intent: an intent without its tree is
     * harmless, a tree without an intent would never be reclaimed. */
    if (lz_prepare_remove_tree(pfd, tmp) == 0)
        lz_catalog_prepare_forget(data_root, tmp, NULL);
    lz_oci_manifest_clear(&m);
    return r;
}

int lz_image_prepare(const char *data_root, const char *ref, lz_progress_fn progress, void *ud, struct lz_prepared *ret,
                     struct lz_error *err) {
    return lz_image_prepare_ca(data_root, ref, NULL, progress, ud, ret, err);
}

int lz_image_prepare_ca(const char *data_root, const char *ref, const struct lz_hostca *ca, lz_progress_fn progress,
                        void *ud, struct lz_prepared *ret, struct lz_error *err) {
    if (sodium_init() < 0)
        return lz_error_set(err, -EIO, "libsodium initialisation failed");
    struct lz_image_ref p;
    int r = lz_image_ref_parse(ref, &p, err);
    if (r < 0)
        return lz_error_sanitize(err, r);
    struct lz_oci_store st;
    r = lz_oci_open(data_root, true, &st, err);
    if (r < 0) {
        lz_image_ref_clear(&p);
        return lz_error_sanitize(err, r);
    }
    _cleanup_free_ char *digest = NULL;
    switch (p.kind) {
    case LZ_REF_BUILTIN: {
        r = lz_oci_lookup(&st, p.name, &digest, err);
        if (r != -ENOENT)
            break;
        _cleanup_close_ int lk = -EBADF;
        r = lz_oci_lock(st.fd, ".bootstrap.lock", &lk);
        if (r < 0) {
            lz_error_set(err, r, "cannot lock image store: %s", strerror(-r));
            break;
        }
        /* Another process may have built it while we waited. */
        r = lz_oci_lookup(&st, p.name, &digest, err);
        if (r != -ENOENT)
            break;
        r = p.agent ? lz_bootstrap_agent_locked(&st, p.agent, progress, ud, err)
                    : lz_bootstrap_locked(&st, p.suite, progress, ud, err);
        if (r == 0)
            r = lz_oci_lookup(&st, p.name, &digest, err);
        break;
    }
    case LZ_REF_REGISTRY:
        r = lz_oci_lookup(&st, p.name, &digest, err);
        if (r == -ENOENT)
            r = lz_image_pull_registry(&st, &p, progress, ud, &digest, err);
        break;
    case LZ_REF_OCI:
    case LZ_REF_OCI_ARCHIVE:
    case LZ_REF_DOCKER_ARCHIVE: r = lz_image_import_local(&st, &p, progress, ud, &digest, err); break;
    }
    if (r == -ENOENT && err && err->code == 0)
        r = lz_error_set(err, r, "image %s not found in the store", p.name);
    if (r == 0)
        r = prepare_artifact(data_root, &st, p.name, digest, ca, progress, ud, ret, err);
    lz_oci_close(&st);
    lz_image_ref_clear(&p);
    return lz_error_sanitize(err, r);
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
    struct lz_oci_store st;
    int r = lz_oci_open(data_root, false, &st, err);
    if (r < 0 && r != -ENOENT)
        return r;
    if (r == 0) {
        _cleanup_json_ json_t *idx = NULL;
        r = lz_oci_read_index(&st, &idx, err);
        if (r < 0) {
            lz_oci_close(&st);
            return r;
        }
        json_t *ms = json_object_get(idx, "manifests"), *d;
        size_t i;
        l.images = lz_xcalloc(json_array_size(ms), sizeof *l.images);
        json_array_foreach(ms, i, d) {
            const char *n = lz_oci_ref_name(d), *dg = lz_json_str(d, "digest");
            if (!n || !lz_oci_digest_valid(dg))
                continue;
            struct lz_image_info *im = &l.images[l.n_images++];
            im->name = lz_xstrdup(n);
            im->manifest_digest = lz_xstrdup(dg);
            _cleanup_free_ char *raw = NULL;
            size_t len;
            struct lz_oci_manifest m = { 0 };
            memcpy(m.digest, dg, LZ_OCI_DIGEST_LEN + 1);
            if (lz_oci_read_blob(&st, dg, &raw, &len, NULL) == 0 && lz_json_parse(raw, len, &m.doc, dg, NULL) == 0 &&
                lz_oci_manifest_parse(&m, NULL) == 0) {
                im->config_digest = lz_xstrdup(m.config.digest);
                im->size = len + (uint64_t)m.config.size;
                for (size_t k = 0; k < m.n_layers; k++)
                    im->size += (uint64_t)m.layers[k].size;
            }
            lz_oci_manifest_clear(&m);
        }
        lz_oci_close(&st);
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
            struct lz_prepared_info pi;
            if (lz_prepared_info_read(dirfd(dir), de->d_name, de->d_name, &pi) < 0)
                continue;
            if (l.n_prepared == cap) {
                cap = cap ? cap * 2 : 8;
                l.prepared = lz_xrealloc(l.prepared, cap * sizeof *l.prepared);
            }
            l.prepared[l.n_prepared++] = pi;
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
