/* config_creds.c — a profile's credentials (config.h, struct
 * lz_credential; docs/credentials.md):
 *
 *   [profiles.NAME.credentials.VAR]
 *   host = "api.example.com"        required; canonical name, TCP port 443
 *   header = "x-api-key"            default "authorization"
 *   format = "{}"                   one {} (default "Bearer {}"), or "basic"
 *   username = "x-access-token"     format = "basic" only (its default)
 *   from_env | from_file | from_command   exactly one
 *   push_refs = ["refs/heads/agent/..."]  optional (globs)
 *   push_delete = false                   optional
 *
 * Structure is checked for every profile; the host's values (from_env)
 * are resolved for the selected one only, with the env: references. */
#include "config_int.h"
#include "credential.h"

#include <ctype.h>

/* Fields the gate must never rewrite: the framing and routing of the
 * request, and hop-by-hop fields. */
static const char *const refused_headers[] = {
    "host",    "content-length", "transfer-encoding", "connection",       "upgrade",        "te",
    "trailer", "expect",         "keep-alive",        "proxy-connection", "http2-settings", NULL,
};

static bool token_char(unsigned char ch) { return isalnum(ch) || (ch && strchr("!#$%&'*+-.^_`|~", ch)); }

/* The text around {} of a format: visible ASCII and spaces, no '{' or '}'
 * of its own. */
static bool format_text_ok(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e || s[i] == '{' || s[i] == '}')
            return false;
    return true;
}

/* A push_refs pattern: refs/..., components of [A-Za-z0-9._/-] and '*',
 * "**" only as a whole component. */
static const char *push_ref_problem(const char *s) {
    if (strncmp(s, "refs/", 5) != 0)
        return "must start with refs/ (for example \"refs/heads/agent/*\")";
    if (strlen(s) > 255)
        return "is longer than 255 bytes";
    const char *c = s + 5;
    if (!*c)
        return "names no ref below refs/";
    for (const char *comp = c; *comp;) {
        const char *end = strchr(comp, '/');
        size_t n = end ? (size_t)(end - comp) : strlen(comp);
        if (n == 0)
            return "has an empty component (//, or a trailing /)";
        if (comp[0] == '.')
            return "has a component starting with '.'";
        for (size_t i = 0; i < n; i++) {
            unsigned char ch = (unsigned char)comp[i];
            if (!(isalnum(ch) || ch == '.' || ch == '_' || ch == '-' || ch == '*'))
                return "has a character other than letters, digits, . _ - * and /";
        }
        if (memmem(comp, n, "**", 2) && !(n == 2))
            return "has ** inside a component (** stands for whole components only)";
        if (n >= 3 && memchr(comp, '*', n) && memmem(comp, n, "***", 3))
            return "has ***";
        if (memmem(comp, n, "..", 2))
            return "has ..";
        comp += n;
        if (*comp == '/')
            comp++;
    }
    return NULL;
}

static int cred_string(struct loader *ld, const struct lz_toml_value *t, const char *name, const char *base,
                       const struct lz_toml_value **ret) {
    char key[512];
    snprintf(key, sizeof key, "%s.%s", base, name);
    const struct lz_toml_value *v = lz_toml_table_get(t, name);
    *ret = v;
    if (!v)
        return 0;
    int r = cfg_check_string(ld, v, key);
    if (r < 0)
        return r;
    if (v->u.string.len == 0)
        return cfg_err(ld, v->line, key, "must not be empty");
    if (cfg_has_ctrl(v->u.string.s))
        return cfg_err(ld, v->line, key, "has a control character");
    return 1;
}

static int parse_one(struct loader *ld, struct profile_in *pi, const char *var, const struct lz_toml_value *t,
                     struct lz_credential *cr) {
    char base[256], key[512], d[DISP_MAX];
    snprintf(base, sizeof base, "profiles.%s.credentials.%s", pi->name, var);
    int r = cfg_want_type(ld, t, LZ_TOML_TABLE, base);
    if (r < 0)
        return r;
    static const char *const keys[] = { "host",      "header",       "format",    "username",    "from_env",
                                        "from_file", "from_command", "push_refs", "push_delete", NULL };
    if ((r = cfg_check_keys(ld, t, base, keys)) < 0)
        return r;
    cr->var = lz_xstrdup(var);
    cr->line = ld->builtin_profile ? 0 : t->line;
    cr->optional = ld->builtin_profile;

    const struct lz_toml_value *v;
    if ((r = cred_string(ld, t, "host", base, &v)) < 0)
        return r;
    if (!r)
        return cfg_err(ld, t->line, base, "missing required key host (the one server the value is for)");
    struct lz_error he = { 0 };
    snprintf(key, sizeof key, "%s.host", base);
    if (strchr(v->u.string.s, '*') || strchr(v->u.string.s, ':'))
        return cfg_err(ld, v->line, key,
                       "%s: one host name, without a wildcard or a port (credentials go to TCP port 443 of that "
                       "name only)",
                       cfg_disp(v->u.string.s, d, sizeof d));
    if (lz_hostname_canon(v->u.string.s, v->u.string.len, cr->host, &he) < 0)
        return cfg_err(ld, v->line, key, "%s", he.msg);
    if ((r = cred_string(ld, t, "header", base, &v)) < 0)
        return r;
    cr->header = lz_xstrdup(r ? v->u.string.s : "authorization");
    snprintf(key, sizeof key, "%s.header", base);
    for (char *h = cr->header; *h; h++) {
        if (!token_char((unsigned char)*h))
            return cfg_err(ld, v->line, key, "%s is not a header name (letters, digits and !#$%%&'*+-.^_`|~)",
                           cfg_disp(v->u.string.s, d, sizeof d));
        *h = (char)tolower((unsigned char)*h);
    }
    for (size_t i = 0; refused_headers[i]; i++)
        if (!strcmp(cr->header, refused_headers[i]))
            return cfg_err(ld, v ? v->line : t->line, key,
                           "%s frames or routes the request; a credential cannot be carried in it",
                           cfg_disp(cr->header, d, sizeof d));

    if ((r = cred_string(ld, t, "format", base, &v)) < 0)
        return r;
    const char *fmt = r ? v->u.string.s : "Bearer {}";
    snprintf(key, sizeof key, "%s.format", base);
    if (!strcmp(fmt, "basic")) {
        cr->basic = true;
        if (strcmp(cr->header, "authorization") != 0)
            return cfg_err(ld, v->line, key, "\"basic\" is carried in the authorization header (header = %s)",
                           cfg_disp(cr->header, d, sizeof d));
    } else {
        const char *b = strstr(fmt, "{}");
        if (!b || strstr(b + 2, "{}"))
            return cfg_err(ld, v ? v->line : t->line, key,
                           "%s must hold {} exactly once, where the value goes (for example \"Bearer {}\"), or be "
                           "\"basic\"",
                           cfg_disp(fmt, d, sizeof d));
        if (!format_text_ok(fmt, (size_t)(b - fmt)) || !format_text_ok(b + 2, strlen(b + 2)))
            return cfg_err(ld, v->line, key, "%s: only printable ASCII around {}", cfg_disp(fmt, d, sizeof d));
        cr->prefix = lz_xstrndup(fmt, (size_t)(b - fmt));
        cr->suffix = lz_xstrdup(b + 2);
    }
    if ((r = cred_string(ld, t, "username", base, &v)) < 0)
        return r;
    snprintf(key, sizeof key, "%s.username", base);
    if (r && !cr->basic)
        return cfg_err(ld, v->line, key, "applies to format = \"basic\" only");
    if (cr->basic) {
        cr->username = lz_xstrdup(r ? v->u.string.s : "x-access-token");
        for (const char *u = cr->username; *u; u++)
            if ((unsigned char)*u <= 0x20 || (unsigned char)*u > 0x7e || *u == ':')
                return cfg_err(ld, v ? v->line : t->line, key,
                               "%s: printable ASCII without spaces or ':' (HTTP Basic separates the user name from "
                               "the password with ':')",
                               cfg_disp(cr->username, d, sizeof d));
    }

    /* The source: exactly one. */
    const struct lz_toml_value *fe = lz_toml_table_get(t, "from_env"), *ff = lz_toml_table_get(t, "from_file"),
                               *fc = lz_toml_table_get(t, "from_command");
    int n_from = !!fe + !!ff + !!fc;
    if (n_from != 1)
        return cfg_err(ld, t->line, base,
                       n_from ? "has more than one of from_env, from_file and from_command: keep one"
                              : "says where the value comes from with one of from_env = \"VAR\", from_file = "
                                "\"PATH\" or from_command = [\"PROGRAM\", ...]");
    if (fe) {
        if ((r = cred_string(ld, t, "from_env", base, &v)) < 0)
            return r;
        snprintf(key, sizeof key, "%s.from_env", base);
        if (!cfg_env_name_valid(v->u.string.s))
            return cfg_err(ld, v->line, key, "%s is not a valid environment variable name",
                           cfg_disp(v->u.string.s, d, sizeof d));
        cr->from = LZ_CRED_FROM_ENV;
        cr->from_env = lz_xstrdup(v->u.string.s);
    } else if (ff) {
        if ((r = cred_string(ld, t, "from_file", base, &v)) < 0)
            return r;
        snprintf(key, sizeof key, "%s.from_file", base);
        const char *p = v->u.string.s;
        if (p[0] == '~' && p[1] == '/') {
            if (!ld->home)
                return cfg_err(ld, v->line, key, "starts with ~/ but HOME is not set");
            cr->from_file = lz_xasprintf("%s/%s", ld->home, p + 2);
        } else if (p[0] == '/') {
            cr->from_file = lz_xstrdup(p);
        } else {
            return cfg_err(ld, v->line, key, "%s: an absolute path or one starting with ~/", cfg_disp(p, d, sizeof d));
        }
        if (cfg_has_dotdot(cr->from_file))
            return cfg_err(ld, v->line, key, "%s has a .. component", cfg_disp(p, d, sizeof d));
        cr->from = LZ_CRED_FROM_FILE;
    } else {
        snprintf(key, sizeof key, "%s.from_command", base);
        if ((r = cfg_check_array(ld, fc, key)) < 0)
            return r;
        size_t n = fc->u.array.n;
        if (n == 0 || n > 64)
            return cfg_err(ld, fc->line, key,
                           "a program and up to 63 arguments, for example [\"gh\", \"auth\", "
                           "\"token\"]");
        cr->from_command = lz_xcalloc(n + 1, sizeof *cr->from_command);
        for (size_t i = 0; i < n; i++) {
            const struct lz_toml_value *e = fc->u.array.items[i];
            char k2[600];
            snprintf(k2, sizeof k2, "%s[%zu]", key, i);
            if ((r = cfg_check_string(ld, e, k2)) < 0)
                return r;
            if (i == 0 && (e->u.string.len == 0 || (e->u.string.s[0] != '/' && strchr(e->u.string.s, '/'))))
                return cfg_err(ld, e->line, k2,
                               "the program: a bare name (looked up in the system's bin "
                               "directories) or an absolute path");
            cr->from_command[cr->n_from_command++] = lz_xstrdup(e->u.string.s);
        }
        cr->from = LZ_CRED_FROM_COMMAND;
    }

    snprintf(key, sizeof key, "%s.push_refs", base);
    if ((v = lz_toml_table_get(t, "push_refs"))) {
        if ((r = cfg_check_array(ld, v, key)) < 0)
            return r;
        if (v->u.array.n == 0 || v->u.array.n > LZ_CRED_PUSH_REFS_MAX)
            return cfg_err(ld, v->line, key, "1 to %d patterns (leave the key out not to inspect pushes)",
                           LZ_CRED_PUSH_REFS_MAX);
        cr->push_refs = lz_xcalloc(v->u.array.n, sizeof *cr->push_refs);
        for (size_t i = 0; i < v->u.array.n; i++) {
            const struct lz_toml_value *e = v->u.array.items[i];
            char k2[600];
            snprintf(k2, sizeof k2, "%s[%zu]", key, i);
            if ((r = cfg_check_string(ld, e, k2)) < 0)
                return r;
            const char *why = push_ref_problem(e->u.string.s);
            if (why)
                return cfg_err(ld, e->line, k2, "%s %s", cfg_disp(e->u.string.s, d, sizeof d), why);
            cr->push_refs[cr->n_push_refs++] = lz_xstrdup(e->u.string.s);
        }
    }
    snprintf(key, sizeof key, "%s.push_delete", base);
    if ((r = cfg_get_bool(ld, t, "push_delete", key, false, &cr->push_delete)) < 0)
        return r;
    if (cr->push_delete && !cr->n_push_refs)
        return cfg_err(ld, lz_toml_table_get(t, "push_delete")->line, key,
                       "applies with push_refs only (the refs a push may delete)");
    return 0;
}

static int cmp_cred(const void *a, const void *b) {
    return strcmp(((const struct lz_credential *)a)->var, ((const struct lz_credential *)b)->var);
}

void cfg_credential_free(struct lz_credential *cr) {
    free(cr->var);
    free(cr->header);
    free(cr->prefix);
    free(cr->suffix);
    free(cr->username);
    free(cr->from_env);
    free(cr->from_file);
    lz_strv_free(cr->from_command, cr->n_from_command);
    lz_strv_free(cr->push_refs, cr->n_push_refs);
    if (cr->value) {
        explicit_bzero(cr->value, strlen(cr->value));
        free(cr->value);
    }
    memset(cr, 0, sizeof *cr);
}

int cfg_parse_credentials(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *t) {
    char key[256], d[DISP_MAX];
    snprintf(key, sizeof key, "profiles.%s.credentials", pi->name);
    int r = cfg_want_type(ld, t, LZ_TOML_TABLE, key);
    if (r < 0)
        return r;
    if (t->u.table.n > LZ_CONFIG_MAX_CREDENTIALS)
        return cfg_err(ld, t->line, key, "more than %d credentials", LZ_CONFIG_MAX_CREDENTIALS);
    struct lz_profile *p = &pi->p;
    p->credentials = lz_xcalloc(t->u.table.n ? t->u.table.n : 1, sizeof *p->credentials);
    for (size_t i = 0; i < t->u.table.n; i++) {
        const struct lz_toml_entry *e = &t->u.table.entries[i];
        if (!cfg_env_name_valid(e->key))
            return cfg_err(ld, e->line, NULL,
                           "%s.%s: not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*): the name is the "
                           "variable the sandbox sees",
                           key, cfg_kdisp(e->key, d, sizeof d));
        for (size_t k = 0; k < p->n_env; k++)
            if (!strcmp(p->env[k].name, e->key))
                return cfg_err(ld, e->line, NULL,
                               "%s.%s: %s is also in profiles.%s.env; a variable is either passed (env) or a "
                               "credential the sandbox never holds: keep one",
                               key, e->key, e->key, pi->name);
        r = parse_one(ld, pi, e->key, e->value, &p->credentials[p->n_credentials]);
        p->n_credentials++; /* freed with the profile, also half-parsed */
        if (r < 0)
            return r;
    }
    if (p->n_credentials > 1)
        qsort(p->credentials, p->n_credentials, sizeof *p->credentials, cmp_cred);
    return 0;
}

/* After the profile's egress: the gate must be there to do the work, and
 * the host must be reachable on 443. */
int cfg_check_credentials(struct loader *ld, struct profile_in *pi) {
    struct lz_profile *p = &pi->p;
    char key[256], d[DISP_MAX];
    bool gate = p->egress != LZ_EGRESS_OPEN && p->tls_gate != LZ_TLS_GATE_OFF;
    for (size_t i = 0; i < p->n_credentials; i++) {
        struct lz_credential *cr = &p->credentials[i];
        snprintf(key, sizeof key, "profiles.%s.credentials.%s", pi->name, cr->var);
        if (!gate) {
            if (cr->optional && cr->from == LZ_CRED_FROM_ENV) {
                /* A built-in agent profile under egress = "open" (or with
                 * the gate off): the value goes in as it did before. */
                cr->passed_plain = true;
                continue;
            }
            return cfg_err(ld, cr->line, key,
                           "needs the TLS gate, which %s: a credential the sandbox never holds is added by the gate",
                           p->egress == LZ_EGRESS_OPEN ? "does not run under egress = \"open\" (use \"balanced\" or "
                                                         "\"locked\")"
                                                       : "this profile turns off (tls_gate = \"off\")");
        }
        struct lz_hostports ports;
        int v = lz_hostrule_decide(p->allow_hosts, p->n_allow_hosts, p->deny_hosts, p->n_deny_hosts, cr->host, &ports);
        if ((v != LZ_HOST_ALLOWED || !lz_hostports_has(&ports, 443)) && cr->optional) {
            cr->unreachable = true;
            continue;
        }
        if (v != LZ_HOST_ALLOWED || !lz_hostports_has(&ports, 443))
            return cfg_err(ld, cr->line, key,
                           "host %s is not allowed on TCP port 443 by this profile%s: add \"%s:443\" to "
                           "profiles.%s.allow_hosts",
                           cfg_disp(cr->host, d, sizeof d), v == LZ_HOST_DENIED ? " (deny_hosts denies it)" : "",
                           cr->host, pi->name);
    }
    return 0;
}

/* The selected profile's from_env values (the others are fetched when the
 * Domain starts: credential.h). A value goes into one header line, so it
 * must be printable ASCII without spaces. */
int cfg_resolve_credentials(struct loader *ld, struct lz_config *c) {
    char key[256], d[DISP_MAX];
    for (size_t i = 0; i < c->profile.n_credentials; i++) {
        struct lz_credential *cr = &c->profile.credentials[i];
        if (cr->from != LZ_CRED_FROM_ENV || cr->unreachable)
            continue;
        snprintf(key, sizeof key, "profiles.%s.credentials.%s.from_env", c->profile.name, cr->var);
        const char *val =
            ld->lookup_env ? ld->lookup_env(ld->lookup_env_ud, cr->from_env) : secure_getenv(cr->from_env);
        if (!val && cr->optional)
            continue;
        if (!val)
            return cfg_err(ld, cr->line, key, "host environment variable %s is not set",
                           cfg_disp(cr->from_env, d, sizeof d));
        size_t n = strlen(val);
        const char *why = lz_credential_value_problem(val, n);
        if (why)
            return cfg_err(ld, cr->line, key, "host environment variable %s %s", cfg_disp(cr->from_env, d, sizeof d),
                           why);
        cr->value = lz_xstrdup(val);
    }
    return 0;
}
