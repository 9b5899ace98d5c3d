/* config_hosttools.c — a profile's host-tool configuration paths
 * (hosttools.h, docs/host-tools.md): the default set, with the names a
 * profile adds (`host_tool_paths_add`) and removes
 * (`host_tool_paths_remove`). Never silently: a name removed must be in
 * the default set, a name added must not, and `config check` and the
 * Domain's start show what is in effect and what the profile changed. */
#include "config_int.h"
#include "hosttools.h"

static bool in_list(char *const *v, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (lz_hosttools_name_eq(v[i], strlen(v[i]), name, strlen(name)))
            return true;
    return false;
}

/* The effective set from the defaults and the profile's changes. */
static void build_effective(struct lz_profile *p) {
    size_t cap = LZ_HOSTTOOLS_MAX + 1;
    p->host_tools = lz_xcalloc(cap, sizeof(char *));
    p->n_host_tools = 0;
    for (const struct lz_hosttool_default *d = lz_hosttools_defaults; d->name; d++)
        if (!in_list(p->host_tools_removed, p->n_host_tools_removed, d->name))
            p->host_tools[p->n_host_tools++] = lz_xstrdup(d->name);
    for (size_t i = 0; i < p->n_host_tools_added && p->n_host_tools < cap; i++)
        p->host_tools[p->n_host_tools++] = lz_xstrdup(p->host_tools_added[i]);
}

void cfg_host_tools_default(struct lz_profile *p) { build_effective(p); }

static int parse_names(struct loader *ld, const struct profile_in *pi, const struct lz_toml_value *arr,
                       const char *name, bool add, char ***ret, size_t *ret_n) {
    char key[160], d[DISP_MAX];
    snprintf(key, sizeof key, "profiles.%s.%s", pi->name, name);
    int r = cfg_check_array(ld, arr, key);
    if (r < 0)
        return r;
    if (arr->u.array.n > LZ_HOSTTOOLS_MAX / 2)
        return cfg_err(ld, arr->line, key, "more than %d names", LZ_HOSTTOOLS_MAX / 2);
    *ret = lz_xcalloc(arr->u.array.n ? arr->u.array.n : 1, sizeof(char *));
    for (size_t i = 0; i < arr->u.array.n; i++) {
        const struct lz_toml_value *e = arr->u.array.items[i];
        snprintf(key, sizeof key, "profiles.%s.%s[%zu]", pi->name, name, i);
        if ((r = cfg_check_string(ld, e, key)) < 0)
            return r;
        const char *s = e->u.string.s, *why = lz_hosttools_name_invalid(s);
        if (strlen(s) != e->u.string.len)
            why = "it contains a NUL byte";
        if (why)
            return cfg_err(ld, e->line, key, "%s is not a host-tool path name: %s", cfg_disp(s, d, sizeof d), why);
        if (in_list(*ret, *ret_n, s))
            return cfg_err(ld, e->line, key, "%s is listed twice", cfg_disp(s, d, sizeof d));
        bool dflt = lz_hosttools_is_default(s);
        if (add && dflt)
            return cfg_err(ld, e->line, key, "%s is already in the default set (nothing to add)",
                           cfg_disp(s, d, sizeof d));
        if (!add && !dflt)
            return cfg_err(ld, e->line, key,
                           "%s is not in the default set (see `lazaret config check` or lazaret.toml(5) for it)",
                           cfg_disp(s, d, sizeof d));
        (*ret)[(*ret_n)++] = lz_xstrdup(s);
    }
    return 0;
}

int cfg_parse_host_tools(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *t) {
    struct lz_profile *p = &pi->p;
    const struct lz_toml_value *v;
    int r;
    if ((v = lz_toml_table_get(t, "host_tool_paths_add")) &&
        (r = parse_names(ld, pi, v, "host_tool_paths_add", true, &p->host_tools_added, &p->n_host_tools_added)) < 0)
        return r;
    if ((v = lz_toml_table_get(t, "host_tool_paths_remove")) &&
        (r = parse_names(ld, pi, v, "host_tool_paths_remove", false, &p->host_tools_removed,
                         &p->n_host_tools_removed)) < 0)
        return r;
    build_effective(p);
    return 0;
}

void cfg_host_tools_free(struct lz_profile *p) {
    lz_strv_free(p->host_tools, p->n_host_tools);
    lz_strv_free(p->host_tools_added, p->n_host_tools_added);
    lz_strv_free(p->host_tools_removed, p->n_host_tools_removed);
}

void lz_config_host_tools_note(FILE *out, const struct lz_profile *p) {
    char d[DISP_MAX];
    fprintf(out, "host-tool configuration paths (sandbox writes kept in the Domain; `lazaret state diff`):");
    for (size_t i = 0; i < p->n_host_tools; i++)
        fprintf(out, " %s", cfg_disp(p->host_tools[i], d, sizeof d));
    if (!p->n_host_tools)
        fprintf(out, " none");
    fputc('\n', out);
    if (p->n_host_tools_added) {
        fprintf(out, "  profile %s adds:", cfg_disp(p->name, d, sizeof d));
        for (size_t i = 0; i < p->n_host_tools_added; i++)
            fprintf(out, " %s", cfg_disp(p->host_tools_added[i], d, sizeof d));
        fputc('\n', out);
    }
    if (p->n_host_tools_removed) {
        fprintf(out, "  profile %s REMOVES (the sandbox writes these to the host):", cfg_disp(p->name, d, sizeof d));
        for (size_t i = 0; i < p->n_host_tools_removed; i++)
            fprintf(out, " %s", cfg_disp(p->host_tools_removed[i], d, sizeof d));
        fputc('\n', out);
    }
}
