/* imgref.c — see imgref.h. */
#include "imgref.h"

#include <sys/stat.h>

#include "agents.h"
#include "oci.h"

void lz_image_ref_clear(struct lz_image_ref *p) {
    free(p->name);
    free(p->path);
    free(p->tag);
    free(p->suite);
    free(p->agent);
    *p = (struct lz_image_ref){ 0 };
}

bool lz_image_suite_valid(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 32 || s[0] == '-')
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-'))
            return false;
    return true;
}

static int split_path_tag(const char *s, struct lz_image_ref *p, const char *scheme, struct lz_error *err) {
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
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("._-:/@", *p)))
            return lz_error_set(err, -EINVAL, "invalid character in image reference \"%s\"", in);
    if (strstr(in, "//") || in[n - 1] == '/' || in[n - 1] == ':')
        return lz_error_set(err, -EINVAL, "invalid image reference \"%s\"", in);
    const char *at = strchr(in, '@');
    size_t name_len = at ? (size_t)(at - in) : n;
    _cleanup_free_ char *name = lz_xstrndup(in, name_len);
    _cleanup_free_ char *suffix = NULL;
    if (at) {
        if (!lz_oci_digest_valid(at + 1))
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
    bool has_domain = slash &&
        (memchr(name, '.', first) || memchr(name, ':', first) || (first == 9 && !strncmp(name, "localhost", 9)));
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

int lz_image_ref_parse(const char *ref, struct lz_image_ref *p, struct lz_error *err) {
    *p = (struct lz_image_ref){ 0 };
    int r;
    if (!ref || !ref[0])
        return lz_error_set(err, -EINVAL, "empty image reference");
    if (strncmp(ref, LZ_AGENT_IMAGE_PREFIX, strlen(LZ_AGENT_IMAGE_PREFIX)) == 0) {
        const struct lz_agent *a = lz_agent_find(ref + strlen(LZ_AGENT_IMAGE_PREFIX));
        if (!a)
            return lz_error_set(err, -EINVAL,
                                "unknown builtin image \"%s\" (known: builtin:agent-claude, builtin:agent-codex, "
                                "builtin:agent-opencode)",
                                ref);
        p->kind = LZ_REF_BUILTIN;
        p->suite = lz_xstrdup(LZ_AGENT_SUITE);
        p->agent = lz_xstrdup(a->name);
        p->name = lz_xstrdup(ref);
        return 0;
    }
    if (strncmp(ref, "builtin:", 8) == 0) {
        if (strncmp(ref + 8, "debian-", 7) != 0 || !lz_image_suite_valid(ref + 15))
            return lz_error_set(
                err, -EINVAL, "unknown builtin image \"%s\" (known: builtin:debian-<suite>, builtin:agent-NAME)", ref);
        p->kind = LZ_REF_BUILTIN;
        p->suite = lz_xstrdup(ref + 15);
        p->name = lz_xstrdup(ref);
        return 0;
    }
    static const struct {
        const char *scheme;
        enum lz_ref_kind kind;
    } local[] = {
        { "oci:", LZ_REF_OCI },
        { "oci-archive:", LZ_REF_OCI_ARCHIVE },
        { "docker-archive:", LZ_REF_DOCKER_ARCHIVE },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(local); i++) {
        size_t sl = strlen(local[i].scheme);
        if (strncmp(ref, local[i].scheme, sl) == 0) {
            p->kind = local[i].kind;
            r = split_path_tag(ref + sl, p, local[i].scheme, err);
            if (r < 0)
                lz_image_ref_clear(p);
            return r;
        }
    }
    p->kind = LZ_REF_REGISTRY;
    return normalize_registry(ref, &p->name, err);
}
