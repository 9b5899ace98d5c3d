/* bundle.c — the OCI bundle of a Domain generation (hc.h): the sandbox's
 * config.json with its binds (terminfo, volumes through their routers, the
 * network files, the State Anchor's directories), and the image's shell. */
#include "hc_gen.h"
#include "hc_esc.h"
#include "gitscan.h"
#include "ocispec.h"
#include "paths.h"
#include "privdirs.h"

#include <fcntl.h>
#include <sys/stat.h>

int hc_find_shell(const char *rootfs, char **ret) {
    static const char *const cands[] = { "usr/bin/bash", "bin/bash", "usr/bin/sh", "bin/sh" };
    _cleanup_close_ int rfd = open(rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rfd < 0)
        return -errno;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cands); i++) {
        struct stat st;
        if (fstatat(rfd, cands[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && (S_ISREG(st.st_mode) || S_ISLNK(st.st_mode))) {
            *ret = lz_xasprintf("/%s", cands[i]);
            return 0;
        }
    }
    return -ENOENT;
}

static void add_terminfo_binds(struct lz_oci_bind **b, size_t *n) {
    static const char *const dirs[][2] = {
        { "/etc/terminfo", "/run/lazaret/terminfo/etc" },
        { "/lib/terminfo", "/run/lazaret/terminfo/lib" },
        { "/usr/share/terminfo", "/run/lazaret/terminfo/share" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(dirs); i++) {
        struct stat st;
        if (stat(dirs[i][0], &st) == 0 && S_ISDIR(st.st_mode)) {
            *b = lz_xrealloc(*b, (*n + 1) * sizeof **b);
            (*b)[*n] = (struct lz_oci_bind){ lz_xstrdup(dirs[i][0]), lz_xstrdup(dirs[i][1]), true };
            (*n)++;
        }
    }
}

/* Host escalation: the mailbox (req/ writable by the sandbox, res/ and
 * hc.pub read-only) and the static Escalation Client, read-only, at
 * /run/lazaret/escalate and on PATH as lazaret-escalate. */
static int add_escalation_binds(struct hc *h, struct lz_oci_bind **b, size_t *n, struct lz_error *err) {
    const char *mb = hc_esc_mailbox_dir(h);
    if (!mb)
        return 0;
    _cleanup_free_ char *client = NULL;
    int r = lz_libexec_path("lazaret-escalate", &client, err);
    if (r < 0)
        return r;
    *b = lz_xrealloc(*b, (*n + 5) * sizeof **b);
    (*b)[(*n)++] = (struct lz_oci_bind){ lz_xstrdup(mb), lz_xstrdup("/run/lazaret/mailbox"), true };
    (*b)[(*n)++] = (struct lz_oci_bind){ lz_xasprintf("%s/req", mb), lz_xstrdup("/run/lazaret/mailbox/req"), false };
    (*b)[(*n)++] = (struct lz_oci_bind){ lz_xasprintf("%s/res", mb), lz_xstrdup("/run/lazaret/mailbox/res"), true };
    (*b)[(*n)++] = (struct lz_oci_bind){ lz_xstrdup(client), lz_xstrdup("/run/lazaret/escalate"), true };
    (*b)[(*n)++] = (struct lz_oci_bind){ lz_xstrdup(client), lz_xstrdup("/usr/local/bin/lazaret-escalate"), true };
    return 0;
}

/* The OCI bundle: written once the Supervisor exists, since the spec names
 * its network namespace. */
int hc_write_bundle(struct hc *h, struct lz_error *err) {
    struct lz_config *c = h->cfg;
    int r;
    _cleanup_free_ char *init = NULL;
    if ((r = lz_libexec_path("lazaret-init", &init, err)) < 0)
        return r;
    struct lz_oci_bind *binds = NULL;
    size_t nb = 0;
    add_terminfo_binds(&binds, &nb);
    /* The Domain CA's certificate (credentials, hc_creds.h): lazaret-init
     * adds it to the image's trust store. */
    if (h->trust_dir) {
        binds = lz_xrealloc(binds, (nb + 1) * sizeof *binds);
        binds[nb++] = (struct lz_oci_bind){ lz_xstrdup(h->trust_dir), lz_xstrdup("/run/lazaret/trust"), true };
    }
    if ((r = add_escalation_binds(h, &binds, &nb, err)) < 0) {
        lz_oci_binds_free(binds, nb);
        return r;
    }
    /* A writable volume is seen through its router (set-id bits, device
     * nodes); a read-only bind cannot create or chmod anything. */
    for (size_t i = 0, w = 0; i < c->profile.n_volumes; i++) {
        const struct lz_volume *v = &c->profile.volumes[i];
        (void)lz_mkdir_p(v->host, 0700);
        const char *src = v->host;
        if (w < h->n_vol && h->vol_of[w] == i)
            src = h->vol_view[w++];
        binds = lz_xrealloc(binds, (nb + 1) * sizeof *binds);
        binds[nb++] = (struct lz_oci_bind){ lz_xstrdup(src), lz_xstrdup(v->container), v->read_only };
    }
    /* The sandbox's resolver is the connectivity helper's DNS forwarder. */
    static const struct {
        const char *name, *dest, *text;
    } netfiles[] = {
        { "resolv.conf", "/etc/resolv.conf", "nameserver 10.0.2.3\n" },
        { "hosts", "/etc/hosts", "127.0.0.1\tlocalhost\n127.0.1.1\tlazaret\n" },
        { "hostname", "/etc/hostname", "lazaret\n" },
    };
    _cleanup_close_ int gfd = open(h->gen_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (size_t i = 0; i < LZ_ARRAY_SIZE(netfiles); i++) {
        if (gfd < 0 ||
            lz_write_file_volatile_at(gfd, netfiles[i].name, netfiles[i].text, strlen(netfiles[i].text), 0644) < 0)
            continue;
        binds = lz_xrealloc(binds, (nb + 1) * sizeof *binds);
        binds[nb++] = (struct lz_oci_bind){ lz_xasprintf("%s/%s", h->gen_dir, netfiles[i].name),
                                            lz_xstrdup(netfiles[i].dest), true };
    }
    char netns[64];
    snprintf(netns, sizeof netns, "/proc/%d/ns/net", (int)h->rs.pid);
    struct lz_oci_bind *anchors = lz_xcalloc(c->profile.n_persistent_dirs + 1, sizeof *anchors);
    for (size_t i = 0; i < c->profile.n_persistent_dirs; i++)
        anchors[i] = (struct lz_oci_bind){ lz_xasprintf("%s%s", h->anchor_target, c->profile.persistent_dirs[i]),
                                           lz_xstrdup(c->profile.persistent_dirs[i]), false };
    const char *tw = lz_test_hook("LAZARET_TEST_WORKSPACE");
    bool plain_bind = tw && strcmp(tw, "bind") == 0;
    /* Private directories: checked against the host's rules at every
     * start (a .gitignore may have changed), then bound from the store.
     * Not with the plain bind of the tests and bench (no store there). */
    struct lz_oci_bind *priv = NULL;
    size_t npriv = plain_bind ? 0 : c->profile.n_private_dirs;
    if (npriv) {
        _cleanup_free_ char *git = lz_gitscan_git_path();
        _cleanup_free_ char *tree = lz_xasprintf("%s/ignored/tree", c->domain_dir);
        char **src = NULL;
        if ((r = lz_privdirs_check(c->workspace, git, c->profile.private_dirs, npriv, err)) < 0 ||
            (r = lz_privdirs_sources(tree, c->profile.private_dirs, npriv, &src, err)) < 0) {
            lz_oci_binds_free(binds, nb);
            lz_oci_binds_free(anchors, c->profile.n_persistent_dirs);
            return r;
        }
        priv = lz_xcalloc(npriv, sizeof *priv);
        for (size_t i = 0; i < npriv; i++) {
            priv[i] =
                (struct lz_oci_bind){ src[i], lz_xasprintf(LZ_SANDBOX_WORKSPACE "/%s", c->profile.private_dirs[i]),
                                      false };
            src[i] = NULL;
        }
        lz_strv_free(src, npriv);
        hc_log("private directories: %zu bound from the Domain's store", npriv);
    }
    struct lz_sandbox_spec spec = {
        .rootfs = h->rootfs,
        .workspace = c->workspace,
        /* LAZARET_TEST_WORKSPACE=bind: the workspace bound as is, no
         * router and no Git policy (bench/workspace.py's baseline). */
        .view = plain_bind ? c->workspace : h->view,
        .init_path = init,
        .hostname = "lazaret",
        .netns_path = netns,
        .binds = binds,
        .n_binds = nb,
        .anchors = anchors,
        .n_anchors = c->profile.n_persistent_dirs,
        .wt_gitfile = h->wt.name && !plain_bind ? h->wt_gitfile : NULL,
        .wt_common_view = h->wt.name && !plain_bind ? h->vol_view[h->n_vol - 1] : NULL,
        .wt_common = h->wt.common,
        .wt_name = h->wt.name,
        .wt_gitdir_file = h->wt_gitdir_file,
        .private_dirs = priv,
        .n_private_dirs = npriv,
        .test_prelude = lz_test_hook("LAZARET_TEST_INIT_PRELUDE"),
    };
    if (spec.test_prelude)
        hc_log("WARNING: the sandbox's first process runs a test prelude (a test hook; test builds only)");
    _cleanup_free_ char *json = NULL;
    r = lz_oci_sandbox_config(&spec, &json, err);
    lz_oci_binds_free(binds, nb);
    lz_oci_binds_free(anchors, c->profile.n_persistent_dirs);
    lz_oci_binds_free(priv, npriv);
    if (r < 0)
        return r;
    /* The runtime directory: no fsync (util.h). */
    _cleanup_close_ int bfd = open(h->bundle_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (bfd < 0 || (r = lz_write_file_volatile_at(bfd, "config.json", json, strlen(json), 0600)) < 0) {
        return lz_error_set(err, bfd < 0 ? -errno : r, "cannot write the OCI bundle in %s", h->bundle_dir);
    }

    return 0;
}
