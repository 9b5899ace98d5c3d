/* argcodec.c — see argcodec.h. */
#include "argcodec.h"

#define FIELD(s, off, type) ((type *)(void *)((char *)(s) + (off)))
#define CFIELD(s, off, type) ((type const *)(const void *)((const char *)(s) + (off)))

/* A descriptor number: 1..5 decimal digits, at most 65535. */
static int parse_fd(const char *v) {
    size_t n = strlen(v);
    if (n == 0 || n > 5 || strspn(v, "0123456789") != n)
        return -1;
    long x = strtol(v, NULL, 10);
    return x > 65535 ? -1 : (int)x;
}

struct argv_buf {
    char **v;
    size_t n, cap;
};

static void push(struct argv_buf *b, char *s) {
    if (b->n + 2 > b->cap) {
        b->cap = b->cap ? 2 * b->cap : 32;
        b->v = lz_xrealloc(b->v, b->cap * sizeof *b->v);
    }
    b->v[b->n++] = s;
    b->v[b->n] = NULL;
}

static void push_opt(struct argv_buf *b, const char *name, char *value) {
    push(b, lz_xasprintf("--%s", name));
    if (value)
        push(b, value);
}

void lz_argv_free(char **argv) {
    for (size_t i = 0; argv && argv[i]; i++)
        free(argv[i]);
    free(argv);
}

int lz_argv_encode(const struct lz_arg_spec *spec, size_t n_spec, const void *s, const char *const *head, size_t n_head,
                   char ***ret_argv, struct lz_error *err) {
    struct argv_buf b = { 0 };
    for (size_t i = 0; i < n_head; i++)
        push(&b, lz_xstrdup(head[i]));
    int r = 0;
    for (size_t i = 0; i < n_spec && r == 0; i++) {
        const struct lz_arg_spec *a = &spec[i];
        switch (a->kind) {
        case LZ_ARG_STR: {
            const char *v = *CFIELD(s, a->off, const char *);
            if (v)
                push_opt(&b, a->name, lz_xstrdup(v));
            else if (a->required)
                r = lz_error_set(err, -EINVAL, "--%s is missing", a->name);
            break;
        }
        case LZ_ARG_FD: {
            int fd = *CFIELD(s, a->off, int);
            if (fd > 65535)
                r = lz_error_set(err, -EINVAL, "--%s: descriptor %d is out of range", a->name, fd);
            else if (fd >= 0)
                push_opt(&b, a->name, lz_xasprintf("%d", fd));
            else if (a->required)
                r = lz_error_set(err, -EINVAL, "--%s is missing", a->name);
            break;
        }
        case LZ_ARG_FLAG:
            if (*CFIELD(s, a->off, bool))
                push_opt(&b, a->name, NULL);
            break;
        case LZ_ARG_LIST: {
            char *const *v = *CFIELD(s, a->off, char **);
            size_t n = *CFIELD(s, a->n_off, size_t);
            if (n > a->max)
                r = lz_error_set(err, -E2BIG, "more than %zu --%s values", a->max, a->name);
            for (size_t k = 0; r == 0 && k < n; k++)
                push_opt(&b, a->name, lz_xstrdup(v[k]));
            break;
        }
        case LZ_ARG_ENUM: {
            int e = *CFIELD(s, a->off, int);
            if (e >= (int)a->n_names)
                r = lz_error_set(err, -EINVAL, "--%s: value %d has no name", a->name, e);
            else if (e >= 0)
                push_opt(&b, a->name, lz_xstrdup(a->names[e]));
            break;
        }
        }
    }
    if (r < 0) {
        lz_argv_free(b.v);
        return r;
    }
    if (!b.v)
        b.v = lz_xcalloc(1, sizeof *b.v);
    *ret_argv = b.v;
    return 0;
}

void lz_arg_clear(const struct lz_arg_spec *spec, size_t n_spec, void *s) {
    for (size_t i = 0; i < n_spec; i++)
        if (spec[i].kind == LZ_ARG_LIST) {
            char ***v = FIELD(s, spec[i].off, char **);
            free(*v);
            *v = NULL;
            *FIELD(s, spec[i].n_off, size_t) = 0;
        }
}

/* Zero, then -1 in the descriptors and enums (absent). */
static void init(const struct lz_arg_spec *spec, size_t n_spec, void *s) {
    for (size_t i = 0; i < n_spec; i++)
        switch (spec[i].kind) {
        case LZ_ARG_STR: *FIELD(s, spec[i].off, const char *) = NULL; break;
        case LZ_ARG_FD:
        case LZ_ARG_ENUM: *FIELD(s, spec[i].off, int) = -1; break;
        case LZ_ARG_FLAG: *FIELD(s, spec[i].off, bool) = false; break;
        case LZ_ARG_LIST:
            *FIELD(s, spec[i].off, char **) = NULL;
            *FIELD(s, spec[i].n_off, size_t) = 0;
            break;
        }
}

static int decode_one(const struct lz_arg_spec *a, const char *v, void *s, struct lz_error *err) {
    switch (a->kind) {
    case LZ_ARG_STR: *FIELD(s, a->off, const char *) = v; return 0;
    case LZ_ARG_FD: {
        int fd = parse_fd(v);
        if (fd < 0)
            return lz_error_set(err, -EINVAL, "--%s: '%.64s' is not a descriptor number", a->name, v);
        *FIELD(s, a->off, int) = fd;
        return 0;
    }
    case LZ_ARG_FLAG: *FIELD(s, a->off, bool) = true; return 0;
    case LZ_ARG_LIST: {
        char ***lv = FIELD(s, a->off, char **);
        size_t *n = FIELD(s, a->n_off, size_t);
        if (*n >= a->max)
            return lz_error_set(err, -EINVAL, "more than %zu --%s values", a->max, a->name);
        *lv = lz_xrealloc(*lv, (*n + 1) * sizeof **lv);
        (*lv)[(*n)++] = (char *)v;
        return 0;
    }
    case LZ_ARG_ENUM:
        for (size_t k = 0; k < a->n_names; k++)
            if (!strcmp(v, a->names[k])) {
                *FIELD(s, a->off, int) = (int)k;
                return 0;
            }
        return lz_error_set(err, -EINVAL, "--%s: unknown value '%.64s'", a->name, v);
    }
    return lz_error_set(err, -EINVAL, "--%s: unknown kind", a->name);
}

int lz_argv_decode(const struct lz_arg_spec *spec, size_t n_spec, int argc, char *const *argv, void *s,
                   struct lz_error *err) {
    init(spec, n_spec, s);
    /* Which options were seen: duplicates and the required ones. */
    _cleanup_free_ bool *seen = lz_xcalloc(n_spec ? n_spec : 1, sizeof *seen);
    int r = 0;
    for (int i = 0; i < argc && r == 0; i++) {
        const char *t = argv[i];
        const struct lz_arg_spec *a = NULL;
        size_t k = 0;
        if (t && t[0] == '-' && t[1] == '-')
            for (k = 0; k < n_spec && !a; k++)
                if (!strcmp(t + 2, spec[k].name))
                    a = &spec[k];
        if (!a) {
            r = lz_error_set(err, -EINVAL, "unexpected argument '%.64s'", t ? t : "");
            break;
        }
        k--;
        if (seen[k] && a->kind != LZ_ARG_LIST) {
            r = lz_error_set(err, -EINVAL, "--%s given twice", a->name);
            break;
        }
        seen[k] = true;
        const char *v = NULL;
        if (a->kind != LZ_ARG_FLAG) {
            if (i + 1 >= argc || !argv[i + 1]) {
                r = lz_error_set(err, -EINVAL, "--%s needs a value", a->name);
                break;
            }
            v = argv[++i];
        }
        r = decode_one(a, v, s, err);
    }
    for (size_t k = 0; k < n_spec && r == 0; k++)
        if (spec[k].required && !seen[k])
            r = lz_error_set(err, -EINVAL, "--%s is missing", spec[k].name);
    if (r < 0) {
        lz_arg_clear(spec, n_spec, s);
        init(spec, n_spec, s);
    }
    return r;
}
