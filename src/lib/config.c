/* config.c — see config.h.
 *
 * Order of work (003 §3.2): parse; decode and structurally validate every
 * profile (types, names, tokens, lexical paths, prefixes, allow/deny
 * conflicts); select the profile; resolve the selected profile's host paths
 * against the filesystem (canonical paths, SR-2); only then resolve its
 * environment references; finally derive the Domain ID and fingerprint. */
#include "config.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sys/stat.h>

#include "agents.h"
#include "config_int.h"
#include "domain_id.h"

static void prefix_list_done(struct prefix_list *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    free(l->lines);
    l->v = NULL;
    l->lines = NULL;
    l->n = 0;
}

/* ---- sections -------------------------------------------------------- */

static const char *const builtin_deny[] = {
    "10.0.0.0/8",    "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
    "100.64.0.0/10", "127.0.0.0/8",   "224.0.0.0/4",    "240.0.0.0/4",
};
static const char *const builtin_allow[] = { "0.0.0.0/0" };

static void prefix_list_builtin(struct prefix_list *l, const char *const *v, size_t n, const char *key) {
    l->v = lz_xcalloc(n, sizeof *l->v);
    l->lines = lz_xcalloc(n, sizeof *l->lines);
    for (size_t i = 0; i < n; i++)
        l->v[i] = lz_xstrdup(v[i]);
    l->n = n;
    l->key = key;
}

static int parse_prefix_list(struct loader *ld, const struct lz_toml_value *arr, const char *key,
                             struct prefix_list *l) {
    char d[DISP_MAX], kb[512];
    int r = cfg_check_array(ld, arr, key);
    if (r < 0)
        return r;
    size_t n = arr->u.array.n;
    l->v = lz_xcalloc(n ? n : 1, sizeof *l->v);
    l->lines = lz_xcalloc(n ? n : 1, sizeof *l->lines);
    l->key = key;
    for (size_t i = 0; i < n; i++) {
        const struct lz_toml_value *e = arr->u.array.items[i];
        snprintf(kb, sizeof kb, "%s[%zu]", key, i);
        r = cfg_check_string(ld, e, kb);
        if (r < 0)
            return r;
        char canon[19];
        const char *why = NULL;
        if (lz_ipv4_prefix_parse(e->u.string.s, canon, NULL, NULL, &why) < 0) {
            if (strcmp(why, "has host bits set") == 0)
                return cfg_err(ld, e->line, kb, "%s has host bits set (did you mean \"%s\"?)",
                               cfg_disp(e->u.string.s, d, sizeof d), canon);
            return cfg_err(ld, e->line, kb, "%s %s", cfg_disp(e->u.string.s, d, sizeof d), why);
        }
        l->v[l->n] = lz_xstrdup(canon);
        l->lines[l->n++] = e->line;
    }
    return 0;
}

/* SR-6: the same prefix may not be both allowed and denied. The message
 * names both places; built-in lists have no line. */
static int check_conflicts(struct loader *ld, const struct prefix_list *const *allow, size_t na,
                           const struct prefix_list *const *deny, size_t nd) {
    for (size_t a = 0; a < na; a++)
        for (size_t i = 0; i < allow[a]->n; i++)
            for (size_t b = 0; b < nd; b++)
                for (size_t j = 0; j < deny[b]->n; j++) {
                    if (strcmp(allow[a]->v[i], deny[b]->v[j]) != 0)
                        continue;
                    char ka[512], kd[512], where[64] = "";
                    int la = allow[a]->lines[i], ldn = deny[b]->lines[j];
                    snprintf(ka, sizeof ka, "%s%s[%zu]", la > 0 ? "" : "built-in ", allow[a]->key, i);
                    snprintf(kd, sizeof kd, "%s%s[%zu]", ldn > 0 ? "" : "built-in ", deny[b]->key, j);
                    if (ldn > 0)
                        snprintf(where, sizeof where, " at line %d", ldn);
                    if (la > 0 || ldn <= 0)
                        return cfg_err(ld, la, ka,
                                       "\"%s\" is also denied by %s%s; the same prefix cannot be both "
                                       "allowed and denied",
                                       allow[a]->v[i], kd, where);
                    return cfg_err(ld, ldn, kd,
                                   "\"%s\" is also allowed by %s; the same prefix cannot be both "
                                   "allowed and denied",
                                   deny[b]->v[j], ka);
                }
    return 0;
}

/* Moves a prefix list into a deduplicated string vector. */
static void prefix_list_take(struct prefix_list *l, char ***ret, size_t *ret_n) {
    size_t m = 0;
    for (size_t i = 0; i < l->n; i++) {
        bool dup = false;
        for (size_t j = 0; j < m; j++)
            if (strcmp(l->v[j], l->v[i]) == 0)
                dup = true;
        if (dup)
            free(l->v[i]);
        else
            l->v[m++] = l->v[i];
    }
    *ret = l->v;
    *ret_n = m;
    l->v = NULL;
    l->n = 0;
    free(l->lines);
    l->lines = NULL;
}

static void profile_done(struct lz_profile *p) {
    free(p->name);
    free(p->image);
    lz_strv_free(p->persistent_dirs, p->n_persistent_dirs);
    lz_strv_free(p->private_dirs, p->n_private_dirs);
    cfg_host_tools_free(p);
    lz_strv_free(p->allow_egress, p->n_allow_egress);
    lz_strv_free(p->deny_egress, p->n_deny_egress);
    for (size_t i = 0; i < p->n_env; i++) {
        free(p->env[i].name);
        free(p->env[i].reference);
        if (p->env[i].value) {
            explicit_bzero(p->env[i].value, strlen(p->env[i].value));
            free(p->env[i].value);
        }
    }
    free(p->env);
    for (size_t i = 0; i < p->n_volumes; i++) {
        free(p->volumes[i].host);
        free(p->volumes[i].container);
        free(p->volumes[i].mode);
    }
    free(p->volumes);
    lz_strv_free(p->command, p->n_command);
    free(p->allow_hosts);
    free(p->deny_hosts);
    free(p->publish);
    for (size_t i = 0; i < p->n_credentials; i++)
        cfg_credential_free(&p->credentials[i]);
    free(p->credentials);
    memset(p, 0, sizeof *p);
}

/* ---- egress by name --------------------------------------------------- */

static const char *const egress_names[] = {
    [LZ_EGRESS_OPEN] = "open",
    [LZ_EGRESS_BALANCED] = "balanced",
    [LZ_EGRESS_LOCKED] = "locked",
};

const char *lz_egress_name(enum lz_egress e) {
    if ((size_t)e >= LZ_ARRAY_SIZE(egress_names) || !egress_names[e])
        return "?";
    return egress_names[e];
}

static const char *const tls_gate_names[] = {
    [LZ_TLS_GATE_STRICT] = "strict",
    [LZ_TLS_GATE_LENIENT] = "lenient",
    [LZ_TLS_GATE_OFF] = "off",
};

const char *lz_tls_gate_name(enum lz_tls_gate g) {
    return (size_t)g < LZ_ARRAY_SIZE(tls_gate_names) ? tls_gate_names[g] : "?";
}

/* A string key whose value is one of names[first..n-1] (NULL entries
 * skipped): its index, or the error `what`. */
static int parse_name_value(struct loader *ld, const struct lz_toml_value *v, const char *key, const char *const *names,
                            size_t first, size_t n, const char *what, int *ret) {
    char d[DISP_MAX];
    int r = cfg_check_string(ld, v, key);
    if (r < 0)
        return r;
    for (size_t i = first; i < n; i++)
        if (names[i] && strcmp(v->u.string.s, names[i]) == 0) {
            *ret = (int)i;
            return 0;
        }
    return cfg_err(ld, v->line, key, "%s %s", cfg_disp(v->u.string.s, d, sizeof d), what);
}

static int parse_tls_gate(struct loader *ld, const struct lz_toml_value *v, const char *key, enum lz_tls_gate *ret) {
    int g = 0;
    int r = parse_name_value(ld, v, key, tls_gate_names, 0, LZ_ARRAY_SIZE(tls_gate_names),
                             "is not a TLS gate mode: write \"strict\" (HTTPS must name an allowed server, the "
                             "default), \"lenient\" (a hello without a server name passes to learned addresses) or "
                             "\"off\" (no name check on port 443)",
                             &g);
    if (r == 0)
        *ret = (enum lz_tls_gate)g;
    return r;
}

/* `egress = "..."` of a profile or of [network]. */
static int parse_egress_value(struct loader *ld, const struct lz_toml_value *v, const char *key, enum lz_egress *ret) {
    int e = 0;
    int r = parse_name_value(ld, v, key, egress_names, LZ_EGRESS_OPEN, LZ_ARRAY_SIZE(egress_names),
                             "is not an egress preset: write \"open\" (the prefix policy alone, every name "
                             "resolves), \"balanced\" (the built-in names of the profile plus allow_hosts) or "
                             "\"locked\" (allow_hosts and allow_egress only)",
                             &e);
    if (r == 0)
        *ret = (enum lz_egress)e;
    return r;
}

/* Two rules that name the same host (or suffix), ports aside. */
static bool hostrule_same_name(const struct lz_hostrule *a, const struct lz_hostrule *b) {
    return a->wildcard == b->wildcard && strcmp(a->name, b->name) == 0;
}

static bool hostrule_same(const struct lz_hostrule *a, const struct lz_hostrule *b) {
    return hostrule_same_name(a, b) && a->n_ports == b->n_ports &&
        memcmp(a->ports, b->ports, a->n_ports * sizeof a->ports[0]) == 0;
}

/* One allow_hosts or deny_hosts list, with the line of every rule. */
static int parse_host_list(struct loader *ld, const struct lz_toml_value *arr, const char *key, unsigned flags,
                           struct lz_hostrule **ret, int **ret_lines, size_t *ret_n) {
    char kb[512];
    int r = cfg_want_type(ld, arr, LZ_TOML_ARRAY, key);
    if (r < 0)
        return r;
    size_t n = arr->u.array.n;
    if (n > LZ_CONFIG_MAX_HOSTRULES)
        return cfg_err(ld, arr->line, key,
                       "more than %d host rules; a wildcard (\"*.example.com\") covers every name below a domain",
                       LZ_CONFIG_MAX_HOSTRULES);
    struct lz_hostrule *v = lz_xcalloc(n ? n : 1, sizeof *v);
    int *lines = lz_xcalloc(n ? n : 1, sizeof *lines);
    for (size_t i = 0; i < n; i++) {
        const struct lz_toml_value *e = arr->u.array.items[i];
        struct lz_error he = { 0 };
        snprintf(kb, sizeof kb, "%s[%zu]", key, i);
        if ((r = cfg_check_string(ld, e, kb)) < 0 || (r = lz_hostrule_parse(e->u.string.s, flags, &v[i], &he)) < 0) {
            free(v);
            free(lines);
            return r == -EINVAL && he.msg[0] ? cfg_err(ld, e->line, kb, "%s", he.msg) : r;
        }
        lines[i] = e->line;
    }
    *ret = v;
    *ret_lines = lines;
    *ret_n = n;
    return 0;
}

/* Appends r to p's allow set unless the same rule is already there. */
static void allow_add(struct lz_profile *p, const struct lz_hostrule *r) {
    for (size_t i = 0; i < p->n_allow_hosts; i++)
        if (hostrule_same(&p->allow_hosts[i], r))
            return;
    p->allow_hosts[p->n_allow_hosts++] = *r;
}

/* The effective allow set of p (config.h): under BALANCED the preset of
 * its image first, then own[]. own is not kept. */
static int egress_effective(struct loader *ld, struct lz_profile *p, const struct lz_hostrule *own, size_t n_own) {
    const char *const *lists[2] = { NULL, NULL };
    size_t n_preset = 0;
    if (p->egress == LZ_EGRESS_BALANCED) {
        const struct lz_agent *a = lz_agent_of_image(p->image);
        lists[0] = lz_dev_hosts;
        lists[1] = a ? a->hosts : NULL;
        for (size_t l = 0; l < 2; l++)
            for (size_t i = 0; lists[l] && lists[l][i]; i++)
                n_preset++;
    }
    free(p->allow_hosts);
    p->allow_hosts = lz_xcalloc(n_preset + n_own + 1, sizeof *p->allow_hosts);
    p->n_allow_hosts = 0;
    for (size_t l = 0; l < 2; l++)
        for (size_t i = 0; lists[l] && lists[l][i]; i++) {
            struct lz_hostrule hr;
            struct lz_error he = { 0 };
            if (lz_hostrule_parse(lists[l][i], 0, &hr, &he) < 0)
                return lz_error_set(ld->err, -EINVAL, "built-in host rule of the balanced preset: %s", he.msg);
            allow_add(p, &hr);
        }
    p->n_allow_hosts_preset = p->n_allow_hosts;
    for (size_t i = 0; i < n_own; i++)
        allow_add(p, &own[i]);
    return 0;
}

/* A profile's egress, allow_hosts and deny_hosts; the effective set. */
static int parse_profile_egress(struct loader *ld, const struct lz_config *c, struct profile_in *pi) {
    char key[128], ka[128], kd[128];
    const struct lz_toml_value *t = pi->tbl, *v;
    struct lz_profile *p = &pi->p;
    int r;
    snprintf(key, sizeof key, "profiles.%s.egress", pi->name);
    p->egress = c->default_egress ? c->default_egress : LZ_EGRESS_BALANCED;
    p->egress_inherited = true;
    if ((v = lz_toml_table_get(t, "egress"))) {
        if ((r = parse_egress_value(ld, v, key, &p->egress)) < 0)
            return r;
        p->egress_inherited = false;
    }
    snprintf(key, sizeof key, "profiles.%s.tls_gate", pi->name);
    p->tls_gate = LZ_TLS_GATE_STRICT;
    if ((v = lz_toml_table_get(t, "tls_gate")) && (r = parse_tls_gate(ld, v, key, &p->tls_gate)) < 0)
        return r;
    _cleanup_free_ struct lz_hostrule *own = NULL;
    _cleanup_free_ int *own_lines = NULL, *deny_lines = NULL;
    size_t n_own = 0;
    snprintf(ka, sizeof ka, "profiles.%s.allow_hosts", pi->name);
    snprintf(kd, sizeof kd, "profiles.%s.deny_hosts", pi->name);
    if ((v = lz_toml_table_get(t, "allow_hosts")) && (r = parse_host_list(ld, v, ka, 0, &own, &own_lines, &n_own)) < 0)
        return r;
    if ((v = lz_toml_table_get(t, "deny_hosts")) &&
        (r = parse_host_list(ld, v, kd, LZ_HOSTRULE_NO_PORTS, &p->deny_hosts, &deny_lines, &p->n_deny_hosts)) < 0)
        return r;
    /* As with prefixes (SR-6): a name the profile both allows and denies
     * is a mistake in the file (the deny would win, silently). A deny of
     * a preset's name is how a profile narrows the preset: accepted. */
    for (size_t i = 0; i < n_own; i++)
        for (size_t j = 0; j < p->n_deny_hosts; j++) {
            if (!hostrule_same_name(&own[i], &p->deny_hosts[j]))
                continue;
            char txt[LZ_HOSTRULE_TEXT_MAX];
            lz_hostrule_format(&p->deny_hosts[j], txt, sizeof txt);
            snprintf(key, sizeof key, "%s[%zu]", ka, i);
            return cfg_err(ld, own_lines[i], key,
                           "\"%s\" is also denied by %s[%zu] at line %d; the same host cannot be both allowed and "
                           "denied: remove one of them",
                           txt, kd, j, deny_lines[j]);
        }
    if ((r = egress_effective(ld, p, own, n_own)) < 0)
        return r;
    struct lz_error he = { 0 };
    if (lz_hostrule_check(p->allow_hosts, p->n_allow_hosts, &he) < 0)
        return cfg_err(ld, lz_toml_table_get(t, "allow_hosts") ? lz_toml_table_get(t, "allow_hosts")->line : t->line,
                       ka, "%s (with the preset's rules): name fewer ports", he.msg);
    return 0;
}

/* [network] resolver = "A.B.C.D" or "A.B.C.D:PORT" (port 53 when left
 * out). An address only: the resolver is what turns names into
 * addresses, so a name here could not be looked up by it. */
static int parse_resolver(struct loader *ld, struct lz_config *c, const struct lz_toml_value *v) {
    static const char key[] = "network.resolver";
    static const char what[] = "write an IPv4 address, optionally with a port: \"192.0.2.53\" or \"192.0.2.53:5353\"";
    char d[DISP_MAX], addr[16];
    int r = cfg_check_string(ld, v, key);
    if (r < 0)
        return r;
    const char *s = v->u.string.s, *colon = strchr(s, ':');
    const char *disp = cfg_disp(s, d, sizeof d);
    if (colon && strchr(colon + 1, ':'))
        return cfg_err(ld, v->line, key, "%s looks like an IPv6 address; only IPv4 resolvers are supported: %s", disp,
                       what);
    size_t alen = colon ? (size_t)(colon - s) : strlen(s);
    struct in_addr in;
    if (alen == 0 || alen >= sizeof addr)
        return cfg_err(ld, v->line, key, "%s is not an IPv4 address: %s", disp, what);
    memcpy(addr, s, alen);
    addr[alen] = '\0';
    if (inet_pton(AF_INET, addr, &in) != 1) {
        if (strpbrk(addr, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"))
            return cfg_err(ld, v->line, key,
                           "%s is a name; the resolver is what looks names up, so it must be an address: %s", disp,
                           what);
        return cfg_err(ld, v->line, key, "%s is not an IPv4 address: %s", disp, what);
    }
    if (in.s_addr == htonl(INADDR_ANY))
        return cfg_err(ld, v->line, key, "%s: 0.0.0.0 is not a resolver's address: %s", disp, what);
    unsigned long port = 53;
    if (colon) {
        const char *ps = colon + 1;
        size_t pl = strlen(ps);
        if (pl == 0 || pl > 5 || strspn(ps, "0123456789") != pl || (pl > 1 && ps[0] == '0'))
            return cfg_err(ld, v->line, key, "%s: the port must be a number from 1 to 65535: %s", disp, what);
        port = strtoul(ps, NULL, 10);
        if (port == 0 || port > 65535)
            return cfg_err(ld, v->line, key, "%s: the port must be a number from 1 to 65535: %s", disp, what);
    }
    memset(&c->resolver, 0, sizeof c->resolver);
    c->resolver.sin_family = AF_INET;
    c->resolver.sin_addr = in;
    c->resolver.sin_port = htons((uint16_t)port);
    c->resolver_set = true;
    return 0;
}

static void profile_in_done(struct profile_in *pi) {
    profile_done(&pi->p);
    prefix_list_done(&pi->allow);
    prefix_list_done(&pi->deny);
    free(pi->profile_dir);
    free(pi->domain_dir);
    free((char *)pi->allow.key);
    free((char *)pi->deny.key);
    pi->allow.key = pi->deny.key = NULL;
    pi->profile_dir = pi->domain_dir = NULL;
}

static int cmp_env_entry(const void *a, const void *b) {
    return strcmp(((const struct lz_env_entry *)a)->name, ((const struct lz_env_entry *)b)->name);
}

static int parse_env(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *t) {
    char key[512], d[DISP_MAX];
    snprintf(key, sizeof key, "profiles.%s.env", pi->name);
    int r = cfg_want_type(ld, t, LZ_TOML_TABLE, key);
    if (r < 0)
        return r;
    if (t->u.table.n > LZ_CONFIG_MAX_LIST)
        return cfg_err(ld, t->line, key, "more than %d entries", LZ_CONFIG_MAX_LIST);
    struct lz_profile *p = &pi->p;
    p->env = lz_xcalloc(t->u.table.n ? t->u.table.n : 1, sizeof *p->env);
    for (size_t i = 0; i < t->u.table.n; i++) {
        const struct lz_toml_entry *e = &t->u.table.entries[i];
        if (!cfg_env_name_valid(e->key))
            return cfg_err(ld, e->line, NULL, "%s.%s: not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)",
                           key, cfg_kdisp(e->key, d, sizeof d));
        snprintf(key, sizeof key, "profiles.%s.env.%s", pi->name, e->key);
        if ((r = cfg_check_string(ld, e->value, key)) < 0)
            return r;
        const char *v = e->value->u.string.s;
        struct lz_env_entry *ent = &p->env[p->n_env];
        if (strncmp(v, "env:", 4) == 0) {
            if (!cfg_env_name_valid(v + 4))
                return cfg_err(ld, e->value->line, key, "%s does not name a valid host environment variable",
                               cfg_disp(v, d, sizeof d));
            ent->reference = lz_xstrdup(v);
            ent->optional = ld->builtin_profile;
        } else {
            ent->value = lz_xstrdup(v);
        }
        ent->name = lz_xstrdup(e->key);
        p->n_env++;
        snprintf(key, sizeof key, "profiles.%s.env", pi->name);
    }
    return 0;
}

/* Where a package manager writes, so that `apt-get install` persists: the
 * persistent_dirs of a profile that does not list its own (the built-in
 * one's too); `persistent_dirs = []` asks for none. */
static void set_default_persistent(struct lz_profile *p) {
    static const char *const pdirs[] = { "/etc", "/opt", "/root", "/usr", "/var" };
    p->persistent_dirs = lz_xcalloc(LZ_ARRAY_SIZE(pdirs), sizeof(char *));
    for (size_t i = 0; i < LZ_ARRAY_SIZE(pdirs); i++)
        p->persistent_dirs[p->n_persistent_dirs++] = lz_xstrdup(pdirs[i]);
}

/* `command = ["prog", "arg", ...]`: the session's default argv. argv[0]
 * is looked up in the sandbox's PATH when the session starts, like an
 * argv given after `lazaret run --`. */
static int parse_command(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *arr) {
    char key[128];
    snprintf(key, sizeof key, "profiles.%s.command", pi->name);
    int r = cfg_check_array(ld, arr, key);
    if (r < 0)
        return r;
    size_t n = arr->u.array.n;
    if (n == 0)
        return cfg_err(ld, arr->line, key, "must not be empty (leave the key out for a login shell)");
    pi->p.command = lz_xcalloc(n + 1, sizeof *pi->p.command);
    for (size_t i = 0; i < n; i++) {
        const struct lz_toml_value *e = arr->u.array.items[i];
        snprintf(key, sizeof key, "profiles.%s.command[%zu]", pi->name, i);
        if ((r = cfg_check_string(ld, e, key)) < 0)
            return r;
        if (i == 0 && e->u.string.len == 0)
            return cfg_err(ld, e->line, key, "the program must not be empty");
        pi->p.command[pi->p.n_command++] = lz_xstrdup(e->u.string.s);
    }
    return 0;
}

/* publish = ["8080", "127.0.0.1:3000:3000"] (publish.h). */
static int parse_publish(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *arr) {
    char key[128];
    snprintf(key, sizeof key, "profiles.%s.publish", pi->name);
    int r = cfg_check_array(ld, arr, key);
    if (r < 0)
        return r;
    size_t n = arr->u.array.n;
    if (n > LZ_PUBLISH_MAX)
        return cfg_err(ld, arr->line, key, "%zu ports: at most %d", n, LZ_PUBLISH_MAX);
    pi->p.publish = lz_xcalloc(n ? n : 1, sizeof *pi->p.publish);
    for (size_t i = 0; i < n; i++) {
        const struct lz_toml_value *e = arr->u.array.items[i];
        snprintf(key, sizeof key, "profiles.%s.publish[%zu]", pi->name, i);
        if ((r = cfg_check_string(ld, e, key)) < 0)
            return r;
        struct lz_error pe = { 0 };
        if (lz_publish_parse(e->u.string.s, &pi->p.publish[i], &pe) < 0)
            return cfg_err(ld, e->line, key, "%s", pe.msg);
        pi->p.n_publish++;
    }
    struct lz_error pe = { 0 };
    snprintf(key, sizeof key, "profiles.%s.publish", pi->name);
    if (lz_publish_check(pi->p.publish, pi->p.n_publish, &pe) < 0)
        return cfg_err(ld, arr->line, key, "%s", pe.msg);
    return 0;
}

static int parse_profile(struct loader *ld, struct lz_config *c, struct profile_in *pi,
                         const struct prefix_list *defallow, const struct prefix_list *defdeny) {
    char key[128], d[DISP_MAX];
    const struct lz_toml_value *t = pi->tbl;
    int r;
    snprintf(key, sizeof key, "profiles.%s", pi->name);
    static const char *const keys[] = { "image",
                                        "persistent_dirs",
                                        "allow_egress",
                                        "deny_egress",
                                        "env",
                                        "volumes",
                                        "ignored_state",
                                        "host_ca_certificates",
                                        "command",
                                        "host_tool_paths_add",
                                        "host_tool_paths_remove",
                                        "egress",
                                        "allow_hosts",
                                        "deny_hosts",
                                        "tls_gate",
                                        "publish",
                                        "credentials",
                                        "private_dirs",
                                        NULL };
    if ((r = cfg_check_keys(ld, t, key, keys)) < 0)
        return r;

    pi->p.name = lz_xstrdup(pi->name);
    const struct lz_toml_value *img = lz_toml_table_get(t, "image");
    snprintf(key, sizeof key, "profiles.%s.image", pi->name);
    if (!img)
        return cfg_err(ld, t->line, NULL, "profiles.%s: missing required key image", pi->name);
    if ((r = cfg_check_string(ld, img, key)) < 0)
        return r;
    if (img->u.string.len == 0 || strpbrk(img->u.string.s, " \t") || cfg_has_ctrl(img->u.string.s))
        return cfg_err(ld, img->line, key, "%s is not an image reference", cfg_disp(img->u.string.s, d, sizeof d));
    pi->p.image = lz_xstrdup(img->u.string.s);

    const struct lz_toml_value *v;
    if (!(v = lz_toml_table_get(t, "persistent_dirs")))
        set_default_persistent(&pi->p);
    else if ((r = cfg_parse_persistent(ld, pi, v)) < 0)
        return r;

    pi->allow.key = lz_xasprintf("profiles.%s.allow_egress", pi->name);
    pi->deny.key = lz_xasprintf("profiles.%s.deny_egress", pi->name);
    if ((v = lz_toml_table_get(t, "allow_egress")) && (r = parse_prefix_list(ld, v, pi->allow.key, &pi->allow)) < 0)
        return r;
    if ((v = lz_toml_table_get(t, "deny_egress")) && (r = parse_prefix_list(ld, v, pi->deny.key, &pi->deny)) < 0)
        return r;

    if ((v = lz_toml_table_get(t, "env")) && (r = parse_env(ld, pi, v)) < 0)
        return r;
    if ((v = lz_toml_table_get(t, "credentials")) && (r = cfg_parse_credentials(ld, pi, v)) < 0)
        return r;

    snprintf(key, sizeof key, "profiles.%s.ignored_state", pi->name);
    if ((r = cfg_get_bool(ld, t, "ignored_state", key, true, &pi->p.ignored_state)) < 0)
        return r;
    snprintf(key, sizeof key, "profiles.%s.host_ca_certificates", pi->name);
    if ((r = cfg_get_bool(ld, t, "host_ca_certificates", key, true, &pi->p.host_ca_certificates)) < 0)
        return r;
    if ((v = lz_toml_table_get(t, "command")) && (r = parse_command(ld, pi, v)) < 0)
        return r;
    if ((v = lz_toml_table_get(t, "publish")) && (r = parse_publish(ld, pi, v)) < 0)
        return r;
    if ((r = cfg_parse_host_tools(ld, pi, t)) < 0)
        return r;
    if ((v = lz_toml_table_get(t, "private_dirs")) && (r = cfg_parse_private_dirs(ld, pi, v)) < 0)
        return r;
    if ((r = parse_profile_egress(ld, c, pi)) < 0 || (r = cfg_check_credentials(ld, pi)) < 0)
        return r;

    /* Expansion context of this profile (for unselected profiles too, so
     * their tokens and resulting paths are checked the same way). */
    if ((r = lz_domain_id_v1(pi->name, c->workspace, pi->domain_id)) < 0)
        return lz_error_set(ld->err, r, "%s: cannot compute the Domain ID", ld->file);
    char hex[65];
    lz_hex(pi->domain_id, 32, hex);
    lz_domain_hash(pi->domain_id, pi->domain_hash);
    pi->profile_dir = lz_xasprintf("%s/%s", c->data_root, pi->name);
    pi->domain_dir = lz_xasprintf("%s/domains/%s", c->data_root, hex);
    struct expand_ctx x = { .profile_name = pi->name,
                            .profile_dir = pi->profile_dir,
                            .domain_dir = pi->domain_dir,
                            .domain_hash = pi->domain_hash,
                            .workspace = c->workspace };
    if ((v = lz_toml_table_get(t, "volumes")) && (r = cfg_parse_volumes(ld, pi, v, &x)) < 0)
        return r;

    const struct prefix_list *allow[] = { defallow, &pi->allow }, *deny[] = { defdeny, &pi->deny };
    return check_conflicts(ld, allow, 2, deny, 2);
}

/* A rule's cwd: "empty" (the default: a fresh empty host directory per
 * run, which the sandbox cannot write) or "workspace", which lets the
 * sandbox choose the code the program reads from its working directory
 * (conftest.py, Makefile, CTestTestfile.cmake, eslint.config.js, ...) and
 * so is accepted only with runs_workspace_code = true in the same rule. */
static int parse_rule_cwd(struct loader *ld, const struct lz_toml_value *rule, size_t i, struct lz_auto_approve *a) {
    char key[128], akey[128], d[DISP_MAX];
    int r;
    bool ack = false;
    snprintf(akey, sizeof akey, "escalation.auto_approve[%zu].runs_workspace_code", i);
    if ((r = cfg_get_bool(ld, rule, "runs_workspace_code", akey, false, &ack)) < 0)
        return r;
    const struct lz_toml_value *v = lz_toml_table_get(rule, "cwd");
    snprintf(key, sizeof key, "escalation.auto_approve[%zu].cwd", i);
    if (v) {
        if ((r = cfg_check_string(ld, v, key)) < 0)
            return r;
        if (strcmp(v->u.string.s, "workspace") == 0)
            a->cwd_workspace = true;
        else if (strcmp(v->u.string.s, "empty") != 0)
            return cfg_err(ld, v->line, key,
                           "%s is not a working directory a rule can name: \"empty\" (the default) "
                           "or \"workspace\"",
                           cfg_disp(v->u.string.s, d, sizeof d));
    }
    const struct lz_toml_value *k = lz_toml_table_get(rule, "runs_workspace_code");
    if (a->cwd_workspace && !ack)
        return cfg_err(ld, v ? v->line : rule->line, key,
                       "cwd = \"workspace\" lets the sandbox choose code this program reads from its working "
                       "directory (conftest.py, Makefile, package.json, ...) and run it on the host without a prompt; "
                       "if that is what you want, add runs_workspace_code = true to this rule "
                       "(escalation.auto_approve[%zu]), otherwise remove cwd",
                       i);
    if (ack && !a->cwd_workspace)
        return cfg_err(ld, k ? k->line : rule->line, akey,
                       "is true but the rule runs in a fresh empty directory (no cwd = \"workspace\"): remove it, or "
                       "add cwd = \"workspace\" if the program must run in the workspace");
    return 0;
}

static int parse_escalation(struct loader *ld, struct lz_config *c, const struct lz_toml_value *t) {
    char key[128];
    int r;
    if ((r = cfg_want_type(ld, t, LZ_TOML_TABLE, "escalation")) < 0 ||
        (r = cfg_check_keys(
             ld, t, "escalation",
             (const char *const[]){ "enabled", "socket_dir", "prompt_timeout_seconds", "auto_approve", NULL })) < 0 ||
        (r = cfg_get_bool(ld, t, "enabled", "escalation.enabled", true, &c->escalation_enabled)) < 0 ||
        (r = cfg_get_count(ld, t, "prompt_timeout_seconds", "escalation.prompt_timeout_seconds",
                           LZ_ESC_PROMPT_TIMEOUT_MAX, LZ_ESC_PROMPT_TIMEOUT_DEFAULT, &c->escalation_prompt_timeout_s)) <
            0)
        return r;
    if (c->escalation_prompt_timeout_s < LZ_ESC_PROMPT_TIMEOUT_MIN) {
        const struct lz_toml_value *pt = lz_toml_table_get(t, "prompt_timeout_seconds");
        return cfg_err(ld, pt ? pt->line : t->line, "escalation.prompt_timeout_seconds",
                       "%" PRId64 " is too short to read a prompt (at least %d seconds)",
                       c->escalation_prompt_timeout_s, LZ_ESC_PROMPT_TIMEOUT_MIN);
    }
    const struct lz_toml_value *v = lz_toml_table_get(t, "socket_dir");
    if (v) {
        if ((r = cfg_host_setting(ld, v, "escalation.socket_dir", &c->escalation_socket_dir)) < 0)
            return r;
        ld->socket_dir_line = v->line;
    }
    v = lz_toml_table_get(t, "auto_approve");
    if (!v)
        return 0;
    if ((r = cfg_check_array(ld, v, "escalation.auto_approve")) < 0)
        return r;
    c->auto_approve = lz_xcalloc(v->u.array.n ? v->u.array.n : 1, sizeof *c->auto_approve);
    for (size_t i = 0; i < v->u.array.n; i++) {
        const struct lz_toml_value *rule = v->u.array.items[i];
        snprintf(key, sizeof key, "escalation.auto_approve[%zu]", i);
        if ((r = cfg_want_type(ld, rule, LZ_TOML_TABLE, key)) < 0 ||
            (r = cfg_check_keys(
                 ld, rule, key,
                 (const char *const[]){ "argv", "allow_extra_args", "cwd", "runs_workspace_code", NULL })) < 0)
            return r;
        struct lz_auto_approve *a = &c->auto_approve[c->n_auto_approve++];
        a->line = rule->line;
        snprintf(key, sizeof key, "escalation.auto_approve[%zu].allow_extra_args", i);
        if ((r = cfg_get_bool(ld, rule, "allow_extra_args", key, false, &a->allow_extra_args)) < 0)
            return r;
        if ((r = parse_rule_cwd(ld, rule, i, a)) < 0)
            return r;
        const struct lz_toml_value *argv = lz_toml_table_get(rule, "argv");
        snprintf(key, sizeof key, "escalation.auto_approve[%zu]", i);
        if (!argv)
            return cfg_err(ld, rule->line, key, "missing required key argv");
        snprintf(key, sizeof key, "escalation.auto_approve[%zu].argv", i);
        if ((r = cfg_check_array(ld, argv, key)) < 0)
            return r;
        if (argv->u.array.n == 0)
            return cfg_err(ld, argv->line, key, "must not be empty");
        a->argv = lz_xcalloc(argv->u.array.n + 1, sizeof *a->argv);
        for (size_t j = 0; j < argv->u.array.n; j++) {
            const struct lz_toml_value *s = argv->u.array.items[j];
            snprintf(key, sizeof key, "escalation.auto_approve[%zu].argv[%zu]", i, j);
            if ((r = cfg_check_string(ld, s, key)) < 0)
                return r;
            if (j == 0 && s->u.string.len == 0)
                return cfg_err(ld, s->line, key, "the executable must not be empty");
            if (j == 0)
                a->line = s->line;
            a->argv[a->argc++] = lz_xstrdup(s->u.string.s);
        }
    }
    return 0;
}

static int resolve_env(struct loader *ld, struct lz_config *c, const struct lz_toml_value *ptbl) {
    char key[512], d[DISP_MAX];
    const struct lz_toml_value *envt = lz_toml_table_get(ptbl, "env");
    for (size_t i = 0; i < c->profile.n_env; i++) {
        struct lz_env_entry *e = &c->profile.env[i];
        if (!e->reference)
            continue;
        const struct lz_toml_entry *te = lz_toml_table_entry(envt, e->name);
        int line = te ? te->value->line : 0;
        snprintf(key, sizeof key, "profiles.%s.env.%s", c->profile.name, e->name);
        const char *var = e->reference + 4;
        const char *val = ld->lookup_env ? ld->lookup_env(ld->lookup_env_ud, var) : secure_getenv(var);
        if (!val && e->optional)
            continue; /* a built-in's key that the host does not have: not passed */
        if (!val)
            return cfg_err(ld, line, key, "host environment variable %s is not set", cfg_disp(var, d, sizeof d));
        size_t n = strlen(val);
        if (n > LZ_CONFIG_MAX_ENV_VALUE)
            return cfg_err(ld, line, key, "host environment variable %s is longer than %d bytes",
                           cfg_disp(var, d, sizeof d), LZ_CONFIG_MAX_ENV_VALUE);
        /* A C string cannot carry NUL, so only UTF-8 remains to check. */
        if (!lz_utf8_valid(val, n))
            return cfg_err(ld, line, key, "host environment variable %s is not valid UTF-8",
                           cfg_disp(var, d, sizeof d));
        e->value = lz_xstrdup(val);
    }
    if (c->profile.n_env > 1)
        qsort(c->profile.env, c->profile.n_env, sizeof *c->profile.env, cmp_env_entry);
    return 0;
}

static int load_agent(struct loader *ld, struct lz_config *c, const struct lz_agent *a, struct prefix_list *defallow,
                      struct prefix_list *defdeny);
static int load_builtin_profile(struct loader *ld, struct lz_config *c, const char *name, const char *body,
                                struct prefix_list *defallow, struct prefix_list *defdeny);

/* No configuration file: the built-in configuration. Returns 1 when the
 * profile is a built-in agent, fully resolved by load_agent. */
static int load_builtin(struct loader *ld, struct lz_config *c, const char *profile) {
    const struct lz_agent *agent = lz_agent_find(profile);
    if (strcmp(profile, LZ_DEFAULT_PROFILE) != 0 && !agent)
        return lz_error_set(ld->err, -ENOENT,
                            "profile \"%s\" is not defined: no configuration file exists and "
                            "the built-in configuration defines only \"%s\", \"claude\", \"codex\" and \"opencode\"",
                            profile, LZ_DEFAULT_PROFILE);
    c->builtin_default = true;
    c->prepared_keep_days = LZ_PREPARED_KEEP_DAYS_DEFAULT;
    c->prepared_max_bytes = LZ_PREPARED_MAX_BYTES_DEFAULT;
    int r = cfg_default_data_root(ld, &c->data_root);
    if (r < 0)
        return r;
    c->escalation_enabled = true;
    c->escalation_prompt_timeout_s = LZ_ESC_PROMPT_TIMEOUT_DEFAULT;
    c->linger_seconds = LZ_LINGER_SECONDS_DEFAULT;
    c->default_egress = LZ_EGRESS_BALANCED;
    if (agent) {
        __attribute__((cleanup(prefix_list_done))) struct prefix_list a = { 0 }, d = { 0 };
        prefix_list_builtin(&a, builtin_allow, LZ_ARRAY_SIZE(builtin_allow), "network.default_allow");
        prefix_list_builtin(&d, builtin_deny, LZ_ARRAY_SIZE(builtin_deny), "network.default_deny");
        r = load_agent(ld, c, agent, &a, &d);
        return r < 0 ? r : 1;
    }
    c->n_default_allow = LZ_ARRAY_SIZE(builtin_allow);
    c->default_allow = lz_xcalloc(c->n_default_allow, sizeof(char *));
    for (size_t i = 0; i < c->n_default_allow; i++)
        c->default_allow[i] = lz_xstrdup(builtin_allow[i]);
    c->n_default_deny = LZ_ARRAY_SIZE(builtin_deny);
    c->default_deny = lz_xcalloc(c->n_default_deny, sizeof(char *));
    for (size_t i = 0; i < c->n_default_deny; i++)
        c->default_deny[i] = lz_xstrdup(builtin_deny[i]);
    struct lz_profile *p = &c->profile;
    p->name = lz_xstrdup(LZ_DEFAULT_PROFILE);
    p->image = lz_xstrdup(LZ_BUILTIN_IMAGE);
    set_default_persistent(p);
    p->ignored_state = true;
    cfg_host_tools_default(p);
    p->host_ca_certificates = true;
    p->egress = c->default_egress;
    p->egress_inherited = true;
    if ((r = egress_effective(ld, p, NULL, 0)) < 0)
        return r;
    c->profile_names = lz_xcalloc(1, sizeof(char *));
    c->profile_names[c->n_profile_names++] = lz_xstrdup(LZ_DEFAULT_PROFILE);
    return 0;
}

/* Moves the selected profile into c and resolves it: Domain ID, paths
 * against the filesystem, auto_approve rules, env: references. */
static int finish_selected(struct loader *ld, struct lz_config *c, struct profile_in *selected,
                           struct prefix_list *defallow, struct prefix_list *defdeny,
                           const struct lz_toml_value *ptbl) {
    c->profile = selected->p;
    memset(&selected->p, 0, sizeof selected->p);
    prefix_list_take(&selected->allow, &c->profile.allow_egress, &c->profile.n_allow_egress);
    prefix_list_take(&selected->deny, &c->profile.deny_egress, &c->profile.n_deny_egress);
    prefix_list_take(defallow, &c->default_allow, &c->n_default_allow);
    prefix_list_take(defdeny, &c->default_deny, &c->n_default_deny);

    c->profile_dir = lz_xasprintf("%s/%s", c->data_root, c->profile.name);
    int r = lz_domain_id_v1(c->profile.name, c->workspace, c->domain_id);
    if (r < 0)
        return lz_error_set(ld->err, r, "cannot compute the Domain ID");
    lz_hex(c->domain_id, sizeof c->domain_id, c->domain_id_hex);
    c->domain_dir = lz_xasprintf("%s/domains/%s", c->data_root, c->domain_id_hex);

    /* The rules' executables are checked against the workspace too (sbwrite.h). */
    if ((r = cfg_resolve_paths(ld, c)) < 0 || (!ld->no_workspace && (r = cfg_resolve_auto_approve(ld, c)) < 0) ||
        (r = cfg_resolve_credentials(ld, c)) < 0)
        return r;
    return resolve_env(ld, c, ptbl);
}

/* A built-in agent profile (agents.h), through the same parser and checks
 * as a profile of the file; defallow and defdeny are the lists in force
 * (the file's, or the built-in ones). */
static int load_builtin_profile(struct loader *ld, struct lz_config *c, const char *name, const char *body,
                                struct prefix_list *defallow, struct prefix_list *defdeny) {
    _cleanup_free_ char *text = lz_xasprintf("[profiles.%s]\n%s", name, body);
    _cleanup_toml_ struct lz_toml_value *root = NULL;
    int r = lz_toml_parse(text, strlen(text), "built-in agent profile", &root, ld->err);
    if (r < 0)
        return r;
    const struct lz_toml_value *tbl = lz_toml_table_get(lz_toml_table_get(root, "profiles"), name);
    if (!tbl)
        return lz_error_set(ld->err, -EINVAL, "built-in profile %s is malformed", name);
    __attribute__((cleanup(profile_in_done))) struct profile_in pi = { .name = name, .tbl = tbl };
    ld->builtin_profile = true;
    r = parse_profile(ld, c, &pi, defallow, defdeny);
    ld->builtin_profile = false;
    if (r < 0)
        return r;
    pi.p.builtin = true;
    /* Lines of the built-in text mean nothing to the user. */
    for (size_t i = 0; i < pi.p.n_volumes; i++)
        pi.p.volumes[i].line = 0;
    for (size_t k = 0; k < pi.p.n_volumes; k++) {
        ld->vol_hosts = lz_xrealloc(ld->vol_hosts, (ld->n_vol_hosts + 1) * sizeof *ld->vol_hosts);
        ld->vol_keys = lz_xrealloc(ld->vol_keys, (ld->n_vol_hosts + 1) * sizeof *ld->vol_keys);
        ld->vol_hosts[ld->n_vol_hosts] = lz_xstrdup(pi.p.volumes[k].host);
        ld->vol_keys[ld->n_vol_hosts++] = lz_xasprintf("built-in profiles.%s.volumes[%zu].host", name, k);
    }
    return finish_selected(ld, c, &pi, defallow, defdeny, tbl);
}

static int load_agent(struct loader *ld, struct lz_config *c, const struct lz_agent *a, struct prefix_list *defallow,
                      struct prefix_list *defdeny) {
    return load_builtin_profile(ld, c, a->name, a->profile, defallow, defdeny);
}

static int load_file(struct loader *ld, struct lz_config *c, const char *profile) {
    char d[DISP_MAX];
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    int r = lz_read_file_at(AT_FDCWD, c->source_path, LZ_CONFIG_MAX_FILE, &buf, &len);
    if (r == -EFBIG)
        return lz_error_set(ld->err, r, "%s: larger than %d bytes", ld->file, LZ_CONFIG_MAX_FILE);
    if (r == -EINVAL)
        return lz_error_set(ld->err, r, "%s: not a regular file", ld->file);
    if (r < 0)
        return lz_error_set(ld->err, r, "%s: %s", ld->file, strerror(-r));

    _cleanup_toml_ struct lz_toml_value *root = NULL;
    if ((r = lz_toml_parse(buf, len, ld->file, &root, ld->err)) < 0)
        return r;
    if ((r = cfg_check_keys(ld, root, NULL,
                            (const char *const[]){ "storage", "network", "escalation", "profiles", NULL })) < 0)
        return r;

    /* [storage] */
    const struct lz_toml_value *t = lz_toml_table_get(root, "storage"), *v;
    if (t) {
        if ((r = cfg_want_type(ld, t, LZ_TOML_TABLE, "storage")) < 0 ||
            (r = cfg_check_keys(ld, t, "storage",
                                (const char *const[]){ "data_root", "prepared_keep_days", "prepared_max_bytes",
                                                       "linger_seconds", NULL })) < 0)
            return r;
    }
    {
        int64_t days, bytes;
        if ((r = cfg_get_count(ld, t, "prepared_keep_days", "storage.prepared_keep_days", LZ_PREPARED_KEEP_DAYS_MAX,
                               LZ_PREPARED_KEEP_DAYS_DEFAULT, &days)) < 0 ||
            (r = cfg_get_count(ld, t, "linger_seconds", "storage.linger_seconds", LZ_LINGER_SECONDS_MAX,
                               LZ_LINGER_SECONDS_DEFAULT, &c->linger_seconds)) < 0 ||
            (r = cfg_get_count(ld, t, "prepared_max_bytes", "storage.prepared_max_bytes", INT64_MAX,
                               LZ_PREPARED_MAX_BYTES_DEFAULT, &bytes)) < 0)
            return r;
        c->prepared_keep_days = days;
        c->prepared_max_bytes = (uint64_t)bytes;
    }
    if ((v = lz_toml_table_get(t, "data_root"))) {
        _cleanup_free_ char *p = NULL;
        if ((r = cfg_host_setting(ld, v, "storage.data_root", &p)) < 0)
            return r;
        if (strcmp(p, "/") == 0)
            return cfg_err(ld, v->line, "storage.data_root", "\"/\" cannot be the Storage Root");
        c->data_root = TAKE_PTR(p);
        ld->data_root_line = v->line;
    } else if ((r = cfg_default_data_root(ld, &c->data_root)) < 0) {
        return r;
    }

    /* [network] — a missing list takes the built-in value. */
    __attribute__((cleanup(prefix_list_done))) struct prefix_list defallow = { 0 }, defdeny = { 0 };
    t = lz_toml_table_get(root, "network");
    if (t &&
        ((r = cfg_want_type(ld, t, LZ_TOML_TABLE, "network")) < 0 ||
         (r = cfg_check_keys(ld, t, "network",
                             (const char *const[]){ "default_allow", "default_deny", "egress", "resolver", NULL })) <
             0))
        return r;
    c->default_egress = LZ_EGRESS_BALANCED;
    if ((v = lz_toml_table_get(t, "egress")) &&
        (r = parse_egress_value(ld, v, "network.egress", &c->default_egress)) < 0)
        return r;
    if ((v = lz_toml_table_get(t, "resolver")) && (r = parse_resolver(ld, c, v)) < 0)
        return r;
    if ((v = lz_toml_table_get(t, "default_allow"))) {
        if ((r = parse_prefix_list(ld, v, "network.default_allow", &defallow)) < 0)
            return r;
    } else {
        prefix_list_builtin(&defallow, builtin_allow, LZ_ARRAY_SIZE(builtin_allow), "network.default_allow");
    }
    if ((v = lz_toml_table_get(t, "default_deny"))) {
        if ((r = parse_prefix_list(ld, v, "network.default_deny", &defdeny)) < 0)
            return r;
    } else {
        prefix_list_builtin(&defdeny, builtin_deny, LZ_ARRAY_SIZE(builtin_deny), "network.default_deny");
    }
    {
        const struct prefix_list *a[] = { &defallow }, *dn[] = { &defdeny };
        if ((r = check_conflicts(ld, a, 1, dn, 1)) < 0)
            return r;
    }

    /* [escalation] */
    c->escalation_enabled = true;
    c->escalation_prompt_timeout_s = LZ_ESC_PROMPT_TIMEOUT_DEFAULT;
    if ((t = lz_toml_table_get(root, "escalation")) && (r = parse_escalation(ld, c, t)) < 0)
        return r;

    /* [profiles.*]: every profile structurally, then the selected one. */
    t = lz_toml_table_get(root, "profiles");
    if (t && (r = cfg_want_type(ld, t, LZ_TOML_TABLE, "profiles")) < 0)
        return r;
    size_t np = lz_toml_len(t);
    if (np > LZ_CONFIG_MAX_LIST)
        return cfg_err(ld, t->line, "profiles", "more than %d profiles", LZ_CONFIG_MAX_LIST);
    c->profile_names = lz_xcalloc(np ? np : 1, sizeof(char *));
    ssize_t sel = -1;
    /* Freed on every return below; emptied once moved into c. */
    __attribute__((cleanup(profile_in_done))) struct profile_in selected = { 0 };
    for (size_t i = 0; i < np; i++) {
        const struct lz_toml_entry *e = &t->u.table.entries[i];
        if (!lz_profile_name_valid(e->key))
            return cfg_err(ld, e->line, NULL, "profiles.%s: invalid profile name (must match ^[a-z0-9_-]{2,32}$)",
                           cfg_kdisp(e->key, d, sizeof d));
        /* {data_root}/{profile} must not collide with Lazaret's own
         * directories of the Storage Root. */
        static const char *const reserved[] = { "domains", "images", "prepared" };
        for (size_t k = 0; k < LZ_ARRAY_SIZE(reserved); k++)
            if (strcmp(e->key, reserved[k]) == 0)
                return cfg_err(ld, e->line, NULL,
                               "profiles.%s: the profile name \"%s\" is reserved "
                               "({data_root}/%s is Lazaret's own)",
                               reserved[k], reserved[k], reserved[k]);
        char key[64];
        snprintf(key, sizeof key, "profiles.%s", e->key);
        if ((r = cfg_want_type(ld, e->value, LZ_TOML_TABLE, key)) < 0)
            return r;
        c->profile_names[c->n_profile_names++] = lz_xstrdup(e->key);
        struct profile_in pi = { .name = e->key, .tbl = e->value };
        r = parse_profile(ld, c, &pi, &defallow, &defdeny);
        for (size_t k = 0; r >= 0 && k < pi.p.n_volumes; k++) {
            ld->vol_hosts = lz_xrealloc(ld->vol_hosts, (ld->n_vol_hosts + 1) * sizeof *ld->vol_hosts);
            ld->vol_keys = lz_xrealloc(ld->vol_keys, (ld->n_vol_hosts + 1) * sizeof *ld->vol_keys);
            ld->vol_hosts[ld->n_vol_hosts] = lz_xstrdup(pi.p.volumes[k].host);
            ld->vol_keys[ld->n_vol_hosts++] = lz_xasprintf("profiles.%s.volumes[%zu].host", e->key, k);
        }
        if (r >= 0 && strcmp(e->key, profile) == 0) {
            sel = (ssize_t)i;
            selected = pi;
        } else {
            profile_in_done(&pi);
        }
        if (r < 0)
            return r;
    }
    const struct lz_agent *agent = sel < 0 ? lz_agent_find(profile) : NULL;
    if (agent)
        return load_agent(ld, c, agent, &defallow, &defdeny);
    /* A file that adds, say, one auto-approval rule keeps the built-in
     * default profile unless it defines one of its own. */
    if (sel < 0 && strcmp(profile, LZ_DEFAULT_PROFILE) == 0)
        return load_builtin_profile(ld, c, LZ_DEFAULT_PROFILE, "image = \"" LZ_BUILTIN_IMAGE "\"\n", &defallow,
                                    &defdeny);
    if (sel < 0) {
        char list[512] = "";
        size_t o = 0;
        for (size_t i = 0; i < c->n_profile_names && o < sizeof list; i++) {
            int n = snprintf(list + o, sizeof list - o, "%s%s", i ? ", " : "", c->profile_names[i]);
            o += n > 0 ? (size_t)n : 0;
        }
        return lz_error_set(
            ld->err, -ENOENT, "%s: profile %s is not defined (%s%s; built-in: default, claude, codex, opencode)",
            ld->file, cfg_disp(profile, d, sizeof d), np ? "defined profiles: " : "no profiles are defined", list);
    }
    return finish_selected(ld, c, &selected, &defallow, &defdeny, t->u.table.entries[sel].value);
}

/* Everything but the fingerprint, with ld's lists freed by the caller on
 * every path. */
static int load_config(const struct lz_config_opts *opts, struct loader *ld, struct lz_config *c, const char *profile,
                       struct lz_error *err) {
    int r = cfg_resolve_workspace(opts, ld->home, c, err);
    if (r < 0)
        return r;
    if ((r = cfg_locate_config(opts, ld->home, &c->source_path, err)) < 0)
        return r;
    if (c->source_path) {
        ld->file = c->source_path;
        return load_file(ld, c, profile);
    }
    ld->file = "built-in configuration";
    if ((r = load_builtin(ld, c, profile)) < 0)
        return r;
    if (r > 0)
        return 0;
    c->profile_dir = lz_xasprintf("%s/%s", c->data_root, c->profile.name);
    if ((r = lz_domain_id_v1(c->profile.name, c->workspace, c->domain_id)) < 0)
        return lz_error_set(err, r, "cannot compute the Domain ID");
    lz_hex(c->domain_id, sizeof c->domain_id, c->domain_id_hex);
    c->domain_dir = lz_xasprintf("%s/domains/%s", c->data_root, c->domain_id_hex);
    return cfg_resolve_paths(ld, c);
}

int lz_config_load(const struct lz_config_opts *opts, struct lz_config **ret, struct lz_error *err) {
    const char *profile = opts && opts->profile ? opts->profile : LZ_DEFAULT_PROFILE;
    char d[DISP_MAX];
    if (!lz_profile_name_valid(profile))
        return lz_error_set(err, -EINVAL, "invalid profile name %s (must match ^[a-z0-9_-]{2,32}$)",
                            cfg_disp(profile, d, sizeof d));

    _cleanup_config_ struct lz_config *c = lz_xcalloc(1, sizeof *c);
    struct loader ld = { .err = err,
                         .home = lz_home_dir(),
                         .lookup_env = opts ? opts->lookup_env : NULL,
                         .lookup_env_ud = opts ? opts->lookup_env_ud : NULL,
                         .no_workspace = opts && opts->no_workspace };
    int r = load_config(opts, &ld, c, profile, err);
    for (size_t i = 0; i < ld.n_vol_hosts; i++) {
        free(ld.vol_hosts[i]);
        free(ld.vol_keys[i]);
    }
    free(ld.vol_hosts);
    free(ld.vol_keys);
    if (r < 0)
        return r;
    /* `lazaret run --publish`: after the profile's own. */
    if (opts && opts->n_publish) {
        struct lz_profile *p = &c->profile;
        if (p->n_publish + opts->n_publish > LZ_PUBLISH_MAX)
            return lz_error_set(err, -EINVAL, "%zu published ports: at most %d", p->n_publish + opts->n_publish,
                                LZ_PUBLISH_MAX);
        p->publish = lz_xrealloc(p->publish, (p->n_publish + opts->n_publish) * sizeof *p->publish);
        for (size_t i = 0; i < opts->n_publish; i++) {
            if ((r = lz_publish_parse(opts->publish[i], &p->publish[p->n_publish], err)) < 0)
                return r;
            p->n_publish++;
        }
        if ((r = lz_publish_check(p->publish, p->n_publish, err)) < 0)
            return r;
    }

    if ((r = lz_config_fingerprint_v1(c, c->fingerprint)) < 0)
        return lz_error_set(err, r, "cannot compute the Configuration Fingerprint");
    lz_hex(c->fingerprint, sizeof c->fingerprint, c->fingerprint_hex);
    *ret = TAKE_PTR(c);
    return 0;
}

void lz_config_free(struct lz_config *c) {
    if (!c)
        return;
    free(c->source_path);
    free(c->data_root);
    lz_strv_free(c->default_allow, c->n_default_allow);
    lz_strv_free(c->default_deny, c->n_default_deny);
    free(c->escalation_socket_dir);
    for (size_t i = 0; i < c->n_auto_approve; i++) {
        lz_strv_free(c->auto_approve[i].argv, c->auto_approve[i].argc);
        free(c->auto_approve[i].written);
        free(c->auto_approve[i].warning);
    }
    free(c->auto_approve);
    free(c->auto_approve_path);
    profile_done(&c->profile);
    free(c->workspace);
    free(c->start_dir);
    free(c->profile_dir);
    free(c->domain_dir);
    lz_strv_free(c->profile_names, c->n_profile_names);
    free(c);
}
