/* domain_id.c — see domain_id.h for the exact encodings. */
#include "domain_id.h"

#include <arpa/inet.h>
#include <sodium.h>

static int sodium_ready(void) { return sodium_init() < 0 ? -EIO : 0; }

static void put_u32(crypto_hash_sha256_state *st, uint32_t v) {
    uint8_t b[4] = { (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v };
    crypto_hash_sha256_update(st, b, sizeof b);
}

static void put_byte(crypto_hash_sha256_state *st, uint8_t v) { crypto_hash_sha256_update(st, &v, 1); }

static int put_bytes(crypto_hash_sha256_state *st, const void *p, size_t n) {
    if (n > UINT32_MAX)
        return -EINVAL;
    put_u32(st, (uint32_t)n);
    crypto_hash_sha256_update(st, p, n);
    return 0;
}

static int put_str(crypto_hash_sha256_state *st, const char *s) { return put_bytes(st, s, strlen(s)); }

/* L(list): sorted bytewise and deduplicated on a copy of the pointers. */
static int put_sorted_list(crypto_hash_sha256_state *st, char *const *list, size_t n) {
    _cleanup_free_ char **v = lz_xcalloc(n ? n : 1, sizeof *v);
    if (n)
        memcpy(v, list, n * sizeof *v);
    qsort(v, n, sizeof *v, lz_cmp_strp);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (m == 0 || strcmp(v[m - 1], v[i]) != 0)
            v[m++] = v[i];
    if (m > UINT32_MAX)
        return -EINVAL;
    put_u32(st, (uint32_t)m);
    for (size_t i = 0; i < m; i++) {
        int r = put_str(st, v[i]);
        if (r < 0)
            return r;
    }
    return 0;
}

int lz_domain_id_v1(const char *profile, const char *workspace, uint8_t ret_id[static LZ_DOMAIN_ID_LEN]) {
    int r = sodium_ready();
    if (r < 0)
        return r;
    if (strlen(profile) > UINT32_MAX || strlen(workspace) > UINT32_MAX)
        return -EINVAL;
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    crypto_hash_sha256_update(&st, (const uint8_t *)LZ_DOMAIN_ID_CONTEXT, strlen(LZ_DOMAIN_ID_CONTEXT));
    put_str(&st, profile);
    put_str(&st, workspace);
    crypto_hash_sha256_final(&st, ret_id);
    return 0;
}

void lz_domain_hash(const uint8_t id[static LZ_DOMAIN_ID_LEN], char ret[static LZ_DOMAIN_HASH_LEN + 1]) {
    char hex[2 * LZ_DOMAIN_ID_LEN + 1];
    lz_hex(id, LZ_DOMAIN_ID_LEN, hex);
    memcpy(ret, hex, LZ_DOMAIN_HASH_LEN);
    ret[LZ_DOMAIN_HASH_LEN] = '\0';
}

/* L(rules as lz_hostrule_format writes them), sorted: the order of a
 * list does not change what it allows. */
static int put_host_rules(crypto_hash_sha256_state *st, const struct lz_hostrule *v, size_t n) {
    _cleanup_free_ char *buf = lz_xcalloc(n ? n : 1, LZ_HOSTRULE_TEXT_MAX);
    _cleanup_free_ char **list = lz_xcalloc(n ? n : 1, sizeof *list);
    for (size_t i = 0; i < n; i++) {
        list[i] = buf + i * LZ_HOSTRULE_TEXT_MAX;
        if (lz_hostrule_format(&v[i], list[i], LZ_HOSTRULE_TEXT_MAX) < 0)
            return -EINVAL;
    }
    return put_sorted_list(st, list, n);
}

static int cmp_env(const void *a, const void *b) {
    return strcmp((*(const struct lz_env_entry *const *)a)->name, (*(const struct lz_env_entry *const *)b)->name);
}

int lz_config_fingerprint_v1(const struct lz_config *c, uint8_t ret_fp[static 32]) {
    int r = sodium_ready();
    if (r < 0)
        return r;
    const struct lz_profile *p = &c->profile;
    if (!c->data_root || !p->name || !p->image || c->n_auto_approve > UINT32_MAX || p->n_env > UINT32_MAX ||
        p->n_volumes > UINT32_MAX)
        return -EINVAL;

    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    crypto_hash_sha256_update(&st, (const uint8_t *)LZ_FINGERPRINT_CONTEXT, strlen(LZ_FINGERPRINT_CONTEXT));
    crypto_hash_sha256_update(&st, c->domain_id, sizeof c->domain_id);
    if ((r = put_str(&st, c->data_root)) < 0 || (r = put_sorted_list(&st, c->default_allow, c->n_default_allow)) < 0 ||
        (r = put_sorted_list(&st, c->default_deny, c->n_default_deny)) < 0)
        return r;
    put_byte(&st, c->escalation_enabled);
    if (c->escalation_socket_dir) {
        put_byte(&st, 1);
        if ((r = put_str(&st, c->escalation_socket_dir)) < 0)
            return r;
    } else {
        put_byte(&st, 0);
    }
    put_u32(&st, (uint32_t)c->n_auto_approve);
    for (size_t i = 0; i < c->n_auto_approve; i++) {
        const struct lz_auto_approve *a = &c->auto_approve[i];
        if (a->argc > UINT32_MAX)
            return -EINVAL;
        put_u32(&st, (uint32_t)a->argc);
        for (size_t j = 0; j < a->argc; j++)
            if ((r = put_str(&st, a->argv[j])) < 0)
                return r;
        /* Bit 0 allow_extra_args, bit 1 cwd = "workspace": the fingerprints
         * of rules without cwd are those of before it existed. */
        put_byte(&st, (uint8_t)((a->allow_extra_args ? 1 : 0) | (a->cwd_workspace ? 2 : 0)));
    }
    if ((r = put_str(&st, p->name)) < 0 || (r = put_str(&st, p->image)) < 0 ||
        (r = put_sorted_list(&st, p->persistent_dirs, p->n_persistent_dirs)) < 0 ||
        (r = put_sorted_list(&st, p->allow_egress, p->n_allow_egress)) < 0 ||
        (r = put_sorted_list(&st, p->deny_egress, p->n_deny_egress)) < 0)
        return r;

    _cleanup_free_ const struct lz_env_entry **env = lz_xcalloc(p->n_env ? p->n_env : 1, sizeof *env);
    for (size_t i = 0; i < p->n_env; i++)
        env[i] = &p->env[i];
    qsort(env, p->n_env, sizeof *env, cmp_env);
    put_u32(&st, (uint32_t)p->n_env);
    for (size_t i = 0; i < p->n_env; i++) {
        if ((r = put_str(&st, env[i]->name)) < 0)
            return r;
        /* Only the reference text: the host value behind it is authority,
         * not configuration (003 §3.2). */
        if (env[i]->reference) {
            put_byte(&st, 1);
            r = put_str(&st, env[i]->reference);
        } else {
            put_byte(&st, 0);
            r = put_str(&st, env[i]->value ? env[i]->value : "");
        }
        if (r < 0)
            return r;
    }

    put_u32(&st, (uint32_t)p->n_volumes);
    for (size_t i = 0; i < p->n_volumes; i++) {
        const struct lz_volume *v = &p->volumes[i];
        if ((r = put_str(&st, v->host)) < 0 || (r = put_str(&st, v->container)) < 0 ||
            (r = put_str(&st, v->read_only ? "ro" : "rw")) < 0)
            return r;
    }
    put_byte(&st, p->ignored_state);
    /* Appended only when off, so that the fingerprints of configurations
     * written before the key existed (it defaults to on) stay the same. */
    if (!p->host_ca_certificates)
        put_str(&st, "host_ca_certificates=false");
    /* Likewise only with private directories, in profile order (the order
     * of the binds). */
    if (p->n_private_dirs) {
        put_str(&st, "private_dirs");
        put_u32(&st, (uint32_t)p->n_private_dirs);
        for (size_t i = 0; i < p->n_private_dirs; i++)
            if ((r = put_str(&st, p->private_dirs[i])) < 0)
                return r;
    }
    /* Likewise only when the profile changed the host-tool paths. */
    if (p->n_host_tools_added || p->n_host_tools_removed) {
        put_str(&st, "host_tool_paths");
        put_u32(&st, (uint32_t)p->n_host_tools);
        for (size_t i = 0; i < p->n_host_tools; i++)
            if ((r = put_str(&st, p->host_tools[i])) < 0)
                return r;
    }
    /* Egress by name: appended only when the policy is not what every
     * configuration meant before the keys existed (the prefix policy
     * alone: "open", no host rules, the host's resolver), so that those
     * keep their fingerprints and any other policy is a new generation. */
    if ((p->egress && p->egress != LZ_EGRESS_OPEN) || p->n_allow_hosts || p->n_deny_hosts || c->resolver_set) {
        put_str(&st, "egress");
        put_str(&st, lz_egress_name(p->egress ? p->egress : LZ_EGRESS_OPEN));
        if ((r = put_host_rules(&st, p->allow_hosts, p->n_allow_hosts)) < 0 ||
            (r = put_host_rules(&st, p->deny_hosts, p->n_deny_hosts)) < 0)
            return r;
        if (c->resolver_set) {
            char a[INET_ADDRSTRLEN], txt[INET_ADDRSTRLEN + 8];
            inet_ntop(AF_INET, &c->resolver.sin_addr, a, sizeof a);
            snprintf(txt, sizeof txt, "%s:%u", a, (unsigned)ntohs(c->resolver.sin_port));
            put_byte(&st, 1);
            put_str(&st, txt);
        } else {
            put_byte(&st, 0);
        }
    }
    /* Published ports: only when there are some (earlier fingerprints
     * stand); in the order given (the same ports in another order are the
     * same Domain's configuration, but a restart costs little). */
    if (p->n_publish) {
        put_str(&st, "publish");
        put_u32(&st, (uint32_t)p->n_publish);
        for (size_t i = 0; i < p->n_publish; i++) {
            char t[LZ_PUBLISH_TEXT_MAX];
            lz_publish_format(&p->publish[i], t, sizeof t);
            put_str(&st, t);
        }
    }
    /* Credentials (never their values): only when there are some. */
    if (p->n_credentials) {
        put_str(&st, "credentials");
        put_u32(&st, (uint32_t)p->n_credentials);
        for (size_t i = 0; i < p->n_credentials; i++) {
            const struct lz_credential *cr = &p->credentials[i];
            put_str(&st, cr->var);
            put_str(&st, cr->host);
            put_str(&st, cr->header);
            put_byte(&st, cr->basic ? 1 : 0);
            put_str(&st, cr->basic ? cr->username : cr->prefix);
            put_str(&st, cr->basic ? "" : cr->suffix);
            put_byte(&st, (uint8_t)cr->from);
            put_byte(&st, (uint8_t)((cr->passed_plain ? 1 : 0) | (cr->unreachable ? 2 : 0)));
            if (cr->from == LZ_CRED_FROM_ENV)
                put_str(&st, cr->from_env);
            else if (cr->from == LZ_CRED_FROM_FILE)
                put_str(&st, cr->from_file);
            put_u32(&st, (uint32_t)cr->n_from_command);
            for (size_t k = 0; k < cr->n_from_command; k++)
                put_str(&st, cr->from_command[k]);
            put_u32(&st, (uint32_t)cr->n_push_refs);
            for (size_t k = 0; k < cr->n_push_refs; k++)
                put_str(&st, cr->push_refs[k]);
            put_byte(&st, cr->push_delete ? 1 : 0);
        }
    }
    /* Only when not the default, so earlier fingerprints stand. */
    if (p->tls_gate != LZ_TLS_GATE_STRICT) {
        put_str(&st, "tls_gate");
        put_str(&st, lz_tls_gate_name(p->tls_gate));
    }
    crypto_hash_sha256_final(&st, ret_fp);
    sodium_memzero(&st, sizeof st);
    return 0;
}
