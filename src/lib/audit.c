/* audit.c — the Domain's audit: escalation and network rows on one chain
 * (see audit.h). */
#include "audit.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <stdarg.h>
#include <jansson.h>
#include <sodium.h>
#include <time.h>

#include "db.h"
#include "domains.h"
#include "escape.h"

static const char *const decider_names[] = { "none", "rule", "developer" };
static const char *const decision_names[] = {
    "none", "auto-approved", "approved", "approved-for-session", "session-approved", "edited", "denied",
};
static const char *const end_names[] = { "completed", "denied", "timed-out", "cancelled", "failed" };
/* Indexed by event - 1 (the events start at 1). */
static const char *const net_event_names[] = {
    "learned", "refused",    "denied",      "filtered",           "limited",
    "allowed", "suppressed", "tls-refused", "credential-refused", "git-push",
};

const char *lz_audit_decider_name(enum lz_audit_decider d) {
    return (unsigned)d < LZ_ARRAY_SIZE(decider_names) ? decider_names[d] : NULL;
}
const char *lz_audit_decision_name(enum lz_audit_decision d) {
    return (unsigned)d < LZ_ARRAY_SIZE(decision_names) ? decision_names[d] : NULL;
}
const char *lz_audit_end_name(enum lz_outcome o) {
    return (unsigned)o < LZ_ARRAY_SIZE(end_names) ? end_names[o] : NULL;
}
const char *lz_audit_net_event_name(enum lz_audit_net_event e) {
    return (unsigned)e - 1 < LZ_ARRAY_SIZE(net_event_names) ? net_event_names[(unsigned)e - 1] : NULL;
}

static int name_index(const char *const *names, size_t n, const char *s) {
    for (size_t i = 0; s && i < n; i++)
        if (!strcmp(s, names[i]))
            return (int)i;
    return -1;
}

/* Stored times are wall-clock milliseconds, as the rest of the store. */
static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Strict lowercase hex of exactly n bytes. */
static bool unhex(const char *s, uint8_t *out, size_t n) {
    if (!s || strlen(s) != 2 * n)
        return false;
    for (size_t i = 0; i < 2 * n; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0)
            return false;
        if (i % 2 == 0)
            out[i / 2] = (uint8_t)(v << 4);
        else
            out[i / 2] |= (uint8_t)v;
    }
    return true;
}

/* ---- the canonical encoding ---- */

static void put_raw(crypto_hash_sha256_state *h, const void *p, size_t n) {
    crypto_hash_sha256_update(h, p, (unsigned long long)n);
}

static void put_i64(crypto_hash_sha256_state *h, int64_t x) {
    uint64_t u = (uint64_t)x;
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(u >> (56 - 8 * i));
    put_raw(h, b, 8);
}

static void put_str(crypto_hash_sha256_state *h, const char *s) {
    size_t n = s ? strlen(s) : 0;
    put_i64(h, (int64_t)n);
    put_raw(h, s ? s : "", n);
}

static void put_vec(crypto_hash_sha256_state *h, const char *const *v, size_t n) {
    put_i64(h, (int64_t)n);
    for (size_t i = 0; i < n; i++)
        put_str(h, v[i]);
}

void lz_audit_row_hash(int64_t seq, const struct lz_audit_entry *e, const uint8_t prev_hash[LZ_AUDIT_HASH_LEN],
                       uint8_t ret[LZ_AUDIT_HASH_LEN]) {
    static const char ctx[] = "lazaret/v1/audit-row"; /* with its NUL */
    static const uint8_t absent = 0, present = 1;
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    put_raw(&h, ctx, sizeof ctx);
    put_i64(&h, seq);
    put_i64(&h, e->gen);
    put_raw(&h, e->request_id, LZ_RECORD_ID_LEN);
    put_raw(&h, e->session_id, LZ_RECORD_ID_LEN);
    put_i64(&h, e->received_ms);
    put_str(&h, lz_audit_decider_name(e->decided_by));
    put_i64(&h, e->decided_ref);
    put_str(&h, lz_audit_decision_name(e->decision));
    put_str(&h, lz_audit_end_name(e->end_state));
    put_vec(&h, e->argv, e->argc);
    if (e->edited_argv) {
        put_raw(&h, &present, 1);
        put_vec(&h, e->edited_argv, e->edited_argc);
    } else {
        put_raw(&h, &absent, 1);
    }
    put_str(&h, e->executable);
    if (e->has_sha256) {
        put_raw(&h, &present, 1);
        put_raw(&h, e->executable_sha256, LZ_AUDIT_HASH_LEN);
    } else {
        put_raw(&h, &absent, 1);
    }
    put_str(&h, e->cwd);
    put_i64(&h, e->exit_status);
    put_i64(&h, e->signal);
    put_i64(&h, e->output_bytes);
    put_i64(&h, e->ended_ms);
    put_raw(&h, prev_hash, LZ_AUDIT_HASH_LEN);
    crypto_hash_sha256_final(&h, ret);
}

/* inet_ntop's form of a host-order IPv4 address. */
static void addr_text(uint32_t a, char out[INET_ADDRSTRLEN]) {
    struct in_addr in = { .s_addr = htonl(a) };
    if (!inet_ntop(AF_INET, &in, out, INET_ADDRSTRLEN))
        out[0] = '\0'; /* cannot happen: the buffer fits every address */
}

void lz_audit_net_row_hash(int64_t seq, const struct lz_audit_net_entry *e, const uint8_t prev_hash[LZ_AUDIT_HASH_LEN],
                           uint8_t ret[LZ_AUDIT_HASH_LEN]) {
    static const char ctx[] = "lazaret/v1/audit-net-row"; /* with its NUL */
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    put_raw(&h, ctx, sizeof ctx);
    put_i64(&h, seq);
    put_i64(&h, e->gen);
    put_i64(&h, e->at_ms);
    put_str(&h, lz_audit_net_event_name(e->event));
    put_str(&h, e->name);
    put_i64(&h, (int64_t)e->n_addrs);
    for (size_t i = 0; i < e->n_addrs; i++) {
        char a[INET_ADDRSTRLEN];
        addr_text(e->addrs[i], a);
        put_str(&h, a);
    }
    put_str(&h, e->ports);
    put_str(&h, e->detail);
    put_raw(&h, prev_hash, LZ_AUDIT_HASH_LEN);
    crypto_hash_sha256_final(&h, ret);
}

void lz_audit_genesis(const char *domain_id, uint8_t ret[LZ_AUDIT_HASH_LEN]) {
    static const char ctx[] = "lazaret/v1/audit-genesis"; /* with its NUL */
    crypto_hash_sha256_state h;
    crypto_hash_sha256_init(&h);
    put_raw(&h, ctx, sizeof ctx);
    put_raw(&h, domain_id, strlen(domain_id));
    crypto_hash_sha256_final(&h, ret);
}

/* ---- stored renderings ---- */

static char *render(const char *s) {
    char *out = NULL;
    if (lz_escape(s ? s : "", s ? strlen(s) : 0, 0, &out) < 0)
        return NULL; /* cannot happen within LZ_AUDIT_BYTES_MAX */
    return out;
}

/* The JSON array of the elements' renderings. */
static char *render_argv(const char *const *v, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        _cleanup_free_ char *r = render(v[i]);
        if (!r || json_array_append_new(a, json_string(r)) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return s;
}

/* The bytes of a stored rendering, accepted only in the one form lz_escape
 * gives them, and NUL-free (argv elements and paths are C strings). */
static char *unrender(const char *text, const char **why) {
    uint8_t *b = NULL;
    ssize_t n = lz_unescape(text, strlen(text), 0, &b);
    if (n < 0) {
        *why = "not a rendering lz_escape produces";
        return NULL;
    }
    _cleanup_free_ char *again = NULL;
    if (memchr(b, '\0', (size_t)n) || lz_escape(b, (size_t)n, 0, &again) < 0 || strcmp(again, text) != 0) {
        *why = memchr(b, '\0', (size_t)n) ? "holds a NUL byte" : "not in its canonical escaped form";
        free(b);
        return NULL;
    }
    char *s = lz_xrealloc(b, (size_t)n + 1);
    s[n] = '\0';
    return s;
}

static void free_vec(char **v, size_t n) {
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* Decodes a stored argv column; NULL with *why on any deviation from the
 * form render_argv writes. */
static char **unrender_argv(const char *text, size_t *ret_n, const char **why) {
    json_error_t je;
    json_t *a = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    if (!a || !json_is_array(a) || json_array_size(a) > LZ_AUDIT_ARGV_MAX) {
        *why = "not a JSON array of at most 4096 strings";
        json_decref(a);
        return NULL;
    }
    size_t n = json_array_size(a);
    char **v = lz_xcalloc(n + 1, sizeof *v);
    for (size_t i = 0; i < n; i++) {
        const char *t = json_string_value(json_array_get(a, i));
        if (!t) {
            *why = "an element is not a string";
            goto fail;
        }
        if (!(v[i] = unrender(t, why)))
            goto fail;
    }
    char *again = json_dumps(a, JSON_COMPACT);
    bool same = again && !strcmp(again, text);
    free(again);
    json_decref(a);
    if (!same) {
        *why = "not in its canonical JSON form";
        free_vec(v, n);
        return NULL;
    }
    *ret_n = n;
    return v;
fail:
    json_decref(a);
    free_vec(v, n);
    return NULL;
}

/* ---- appending ---- */

static int check_entry(const struct lz_audit_entry *e, struct lz_error *err) {
    if (!lz_audit_decider_name(e->decided_by) || !lz_audit_decision_name(e->decision) ||
        !lz_audit_end_name(e->end_state))
        return lz_error_set(err, -EINVAL, "audit entry: decided_by, decision or end_state out of range");
    if (e->gen < 0 || e->decided_ref < 0 || e->output_bytes < 0 || e->received_ms < 0 || e->ended_ms < 0)
        return lz_error_set(err, -EINVAL, "audit entry: a negative generation, reference, time or byte count");
    if (e->exit_status < -1 || e->exit_status > 255 || e->signal < 0 || e->signal > LZ_RECORD_SIGNAL_MAX)
        return lz_error_set(err, -EINVAL, "audit entry: exit status %d or signal %d out of range", e->exit_status,
                            e->signal);
    if ((e->argc && !e->argv) || e->argc > LZ_AUDIT_ARGV_MAX || e->edited_argc > LZ_AUDIT_ARGV_MAX ||
        (!e->edited_argv && e->edited_argc))
        return lz_error_set(err, -EINVAL, "audit entry: argv count out of range (at most %d)", LZ_AUDIT_ARGV_MAX);
    size_t total = (e->executable ? strlen(e->executable) : 0) + (e->cwd ? strlen(e->cwd) : 0);
    for (size_t i = 0; i < e->argc; i++) {
        if (!e->argv[i])
            return lz_error_set(err, -EINVAL, "audit entry: argv[%zu] is NULL", i);
        total += strlen(e->argv[i]);
    }
    for (size_t i = 0; i < e->edited_argc; i++) {
        if (!e->edited_argv[i])
            return lz_error_set(err, -EINVAL, "audit entry: edited argv[%zu] is NULL", i);
        total += strlen(e->edited_argv[i]);
    }
    if (total > LZ_AUDIT_BYTES_MAX)
        return lz_error_set(err, -EINVAL, "audit entry: more than %d bytes of argv and paths", LZ_AUDIT_BYTES_MAX);
    return 0;
}

static int meta_text(struct lz_db *db, const char *key, char **ret, struct lz_error *err) {
    return lz_db_get_text(db, ret, err, "SELECT value FROM meta WHERE key = ?1", "t", key);
}

/* "<seq> <64 hex>" */
static bool parse_head(const char *s, int64_t *ret_seq, uint8_t hash[LZ_AUDIT_HASH_LEN]) {
    char *end;
    errno = 0;
    long long seq = strtoll(s, &end, 10);
    if (errno || end == s || s[0] == '-' || s[0] == '+' || *end != ' ' || seq < 1 || !unhex(end + 1, hash, 32))
        return false;
    *ret_seq = seq;
    return true;
}

/* The printable ASCII form of a network row's text field: 0x20..0x7e,
 * without a space when !space, at most max bytes. NULL when s is in it,
 * else what is wrong. */
static const char *net_text_problem(const char *s, size_t len, size_t max, bool space) {
    if (len > max)
        return "longer than its bound";
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\0')
            return "holds a NUL byte";
        if (c < (space ? 0x20 : 0x21) || c > 0x7e)
            return space ? "holds a byte that is not printable ASCII"
                         : "holds a space or a byte that is not printable ASCII";
    }
    return NULL;
}

static int check_net_entry(const struct lz_audit_net_entry *e, struct lz_error *err) {
    if (!lz_audit_net_event_name(e->event))
        return lz_error_set(err, -EINVAL, "audit network entry: event %d out of range", (int)e->event);
    if (e->gen < 0 || e->at_ms < 0)
        return lz_error_set(err, -EINVAL, "audit network entry: a negative generation or time");
    if (e->n_addrs > LZ_AUDIT_NET_ADDRS_MAX || (e->n_addrs && !e->addrs))
        return lz_error_set(err, -EINVAL, "audit network entry: addrs: %zu addresses (at most %d)", e->n_addrs,
                            LZ_AUDIT_NET_ADDRS_MAX);
    static const struct {
        const char *field;
        size_t off, max;
        bool space;
    } text[] = {
        { "name", offsetof(struct lz_audit_net_entry, name), LZ_AUDIT_NET_NAME_MAX, false },
        { "ports", offsetof(struct lz_audit_net_entry, ports), LZ_AUDIT_NET_PORTS_MAX, false },
        { "detail", offsetof(struct lz_audit_net_entry, detail), LZ_AUDIT_NET_DETAIL_MAX, true },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(text); i++) {
        const char *v = *(const char *const *)((const char *)e + text[i].off);
        const char *why = v ? net_text_problem(v, strlen(v), text[i].max, text[i].space) : NULL;
        if (why)
            return lz_error_set(err, -EINVAL, "audit network entry: %s %s (printable ASCII, at most %zu bytes)",
                                text[i].field, why, text[i].max);
    }
    return 0;
}

/* The seq and prev_hash of the next row of the chain, whichever table its
 * predecessor is in. */
static int chain_next(struct lz_db *db, int64_t *ret_seq, uint8_t prev[LZ_AUDIT_HASH_LEN], struct lz_error *err) {
    _cleanup_free_ char *domain_id = NULL, *head = NULL, *last_hash = NULL;
    int64_t last_seq = 0, head_seq = 0;
    uint8_t head_hash[LZ_AUDIT_HASH_LEN];
    int r;
    if ((r = meta_text(db, "domain_id", &domain_id, err)) < 0 || (r = meta_text(db, "audit_head", &head, err)) < 0)
        return r;
    if (!domain_id || !lz_domain_id_valid(domain_id))
        return lz_error_set(err, -EBADMSG, "Domain Store %s: no valid domain_id; cannot chain the audit", db->path);
    sqlite3_stmt *q = NULL;
    if ((r = lz_db_prepare(db, &q, err,
                           "SELECT seq, row_hash FROM (SELECT seq, row_hash FROM audit"
                           " UNION ALL SELECT seq, row_hash FROM audit_net) ORDER BY seq DESC LIMIT 1",
                           "")) == 0 &&
        (r = lz_db_step_row(db, q, err)) == 1) {
        last_seq = sqlite3_column_int64(q, 0);
        last_hash = lz_db_col_dup(q, 1, true);
    }
    if ((r = lz_db_finalize(db, &q, r, err)) < 0)
        return r;
    bool have_head = head && parse_head(head, &head_seq, head_hash);
    /* Chain onto the newest evidence: rows cut off after the head keep the
     * gap (and the head's hash) in the chain, so verify still reports them. */
    if (have_head && head_seq >= last_seq) {
        memcpy(prev, head_hash, LZ_AUDIT_HASH_LEN);
    } else if (last_seq > 0) {
        head_seq = last_seq;
        if (!unhex(last_hash, prev, LZ_AUDIT_HASH_LEN))
            memset(prev, 0, LZ_AUDIT_HASH_LEN); /* a damaged hash: that row fails verify */
    } else {
        head_seq = 0;
        lz_audit_genesis(domain_id, prev);
    }
    *ret_seq = head_seq + 1;
    return 0;
}

static int move_head(struct lz_db *db, int64_t seq, const char *hash_hex, struct lz_error *err) {
    _cleanup_free_ char *nh = lz_xasprintf("%" PRId64 " %s", seq, hash_hex);
    return lz_db_run(db, err, "INSERT INTO meta VALUES('audit_head', ?1) ON CONFLICT(key) DO UPDATE SET value = ?1",
                     "t", nh);
}

static int append_locked(struct lz_db *db, const struct lz_audit_entry *in, int64_t *ret_seq, struct lz_error *err) {
    struct lz_audit_entry e = *in;
    if (!e.ended_ms)
        e.ended_ms = wall_ms();
    int64_t seq;
    uint8_t prev[LZ_AUDIT_HASH_LEN];
    int r;
    if ((r = chain_next(db, &seq, prev, err)) < 0)
        return r;
    uint8_t hash[LZ_AUDIT_HASH_LEN];
    lz_audit_row_hash(seq, &e, prev, hash);

    char req[2 * LZ_RECORD_ID_LEN + 1], ses[2 * LZ_RECORD_ID_LEN + 1];
    char sha[2 * LZ_AUDIT_HASH_LEN + 1] = "", prev_hex[2 * LZ_AUDIT_HASH_LEN + 1], hash_hex[2 * LZ_AUDIT_HASH_LEN + 1];
    lz_hex(e.request_id, LZ_RECORD_ID_LEN, req);
    lz_hex(e.session_id, LZ_RECORD_ID_LEN, ses);
    if (e.has_sha256)
        lz_hex(e.executable_sha256, LZ_AUDIT_HASH_LEN, sha);
    lz_hex(prev, sizeof prev, prev_hex);
    lz_hex(hash, sizeof hash, hash_hex);
    _cleanup_free_ char *argv = render_argv(e.argv, e.argc);
    _cleanup_free_ char *edited = e.edited_argv ? render_argv(e.edited_argv, e.edited_argc) : NULL;
    _cleanup_free_ char *exe = render(e.executable), *cwd = render(e.cwd);
    if (!argv || (e.edited_argv && !edited) || !exe || !cwd)
        return lz_error_set(err, -ENOMEM, "audit entry: cannot render it");
    r = lz_db_run(db, err,
                  "INSERT INTO audit(seq, gen, request_id, session_id, received_ms, decided_by, decided_ref, decision,"
                  " end_state, argv, edited_argv, executable, executable_sha256, cwd, exit_status, signal,"
                  " output_bytes, ended_ms, prev_hash, row_hash) "
                  "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
                  "iittititttttttiiiitt", seq, e.gen, req, ses, e.received_ms, lz_audit_decider_name(e.decided_by),
                  e.decided_ref, lz_audit_decision_name(e.decision), lz_audit_end_name(e.end_state), argv, edited, exe,
                  sha, cwd, (int64_t)e.exit_status, (int64_t)e.signal, e.output_bytes, e.ended_ms, prev_hex, hash_hex);
    if (r < 0 || (r = move_head(db, seq, hash_hex, err)) < 0)
        return r;
    if (ret_seq)
        *ret_seq = seq;
    return 0;
}

/* The addresses as stored: dotted quads joined by ",". */
static char *render_addrs(const uint32_t *addrs, size_t n) {
    char *out = lz_xcalloc(n * INET_ADDRSTRLEN + 1, 1);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        char a[INET_ADDRSTRLEN];
        addr_text(addrs[i], a);
        len += (size_t)snprintf(out + len, INET_ADDRSTRLEN + 1, "%s%s", i ? "," : "", a);
    }
    return out;
}

static int append_net_locked(struct lz_db *db, const struct lz_audit_net_entry *in, int64_t *ret_seq,
                             struct lz_error *err) {
    struct lz_audit_net_entry e = *in;
    if (!e.at_ms)
        e.at_ms = wall_ms();
    e.name = e.name ? e.name : "";
    e.ports = e.ports ? e.ports : "";
    e.detail = e.detail ? e.detail : "";
    int64_t seq;
    uint8_t prev[LZ_AUDIT_HASH_LEN], hash[LZ_AUDIT_HASH_LEN];
    int r;
    if ((r = chain_next(db, &seq, prev, err)) < 0)
        return r;
    lz_audit_net_row_hash(seq, &e, prev, hash);
    char prev_hex[2 * LZ_AUDIT_HASH_LEN + 1], hash_hex[2 * LZ_AUDIT_HASH_LEN + 1];
    lz_hex(prev, sizeof prev, prev_hex);
    lz_hex(hash, sizeof hash, hash_hex);
    _cleanup_free_ char *addrs = render_addrs(e.addrs, e.n_addrs);
    r = lz_db_run(db, err,
                  "INSERT INTO audit_net(seq, gen, at_ms, event, name, addrs, ports, detail, prev_hash, row_hash) "
                  "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                  "iiittttttt", seq, e.gen, e.at_ms, lz_audit_net_event_name(e.event), e.name, addrs, e.ports, e.detail,
                  prev_hex, hash_hex);
    if (r < 0 || (r = move_head(db, seq, hash_hex, err)) < 0)
        return r;
    if (ret_seq)
        *ret_seq = seq;
    return 0;
}

/* Runs one append in its own write transaction, or in the caller's. */
static int append_txn(struct lz_store *st, int (*locked)(struct lz_db *, const void *, int64_t *, struct lz_error *),
                      const void *e, int64_t *ret_seq, struct lz_error *err) {
    struct lz_db *db = lz_store_db(st);
    if (db->version < LZ_STORE_VERSION)
        return lz_error_set(err, -EROFS, "Domain Store %s: version %d has no audit table (opened read-only)", db->path,
                            db->version);
    if (db->in_txn)
        return locked(db, e, ret_seq, err);
    /* IMMEDIATE: the head read and the insert are one step for writers. */
    int r = lz_db_begin(db, true, err);
    if (r < 0)
        return r;
    if ((r = locked(db, e, ret_seq, err)) < 0) {
        lz_db_rollback(db);
        return r;
    }
    return lz_db_commit(db, err);
}

static int escalation_locked(struct lz_db *db, const void *e, int64_t *ret_seq, struct lz_error *err) {
    return append_locked(db, e, ret_seq, err);
}

static int net_locked(struct lz_db *db, const void *e, int64_t *ret_seq, struct lz_error *err) {
    return append_net_locked(db, e, ret_seq, err);
}

int lz_audit_append(struct lz_store *st, const struct lz_audit_entry *e, int64_t *ret_seq, struct lz_error *err) {
    int r = check_entry(e, err);
    return r < 0 ? r : append_txn(st, escalation_locked, e, ret_seq, err);
}

int lz_audit_append_net(struct lz_store *st, const struct lz_audit_net_entry *e, int64_t *ret_seq,
                        struct lz_error *err) {
    int r = check_net_entry(e, err);
    return r < 0 ? r : append_txn(st, net_locked, e, ret_seq, err);
}

/* ---- reading ---- */

/* The first problem of a row: what, followed by detail (may be ""). */
static void set_problem(struct lz_audit_row *w, const char *what, const char *detail) {
    if (!w->problem)
        w->problem = lz_xasprintf("%s%s", what, detail);
}

static void fill_row(void *elem, sqlite3_stmt *q) {
    struct lz_audit_row *w = elem;
    struct lz_audit_entry *e = &w->e;
    const char *why = NULL;
    w->seq = sqlite3_column_int64(q, 0);
    e->gen = sqlite3_column_int64(q, 1);
    const char *req = (const char *)sqlite3_column_text(q, 2), *ses = (const char *)sqlite3_column_text(q, 3);
    if (!unhex(req, e->request_id, LZ_RECORD_ID_LEN) || !unhex(ses, e->session_id, LZ_RECORD_ID_LEN))
        set_problem(w, "request_id or session_id is not 32 lowercase hex", "");
    e->received_ms = sqlite3_column_int64(q, 4);
    const char *by = (const char *)sqlite3_column_text(q, 5), *dec = (const char *)sqlite3_column_text(q, 7),
               *end = (const char *)sqlite3_column_text(q, 8);
    int i_by = name_index(decider_names, LZ_ARRAY_SIZE(decider_names), by),
        i_dec = name_index(decision_names, LZ_ARRAY_SIZE(decision_names), dec),
        i_end = name_index(end_names, LZ_ARRAY_SIZE(end_names), end);
    if (i_by < 0 || i_dec < 0 || i_end < 0)
        set_problem(w, "decided_by, decision or end_state is not a known name", "");
    e->decided_by = (enum lz_audit_decider)(i_by < 0 ? 0 : i_by);
    e->decision = (enum lz_audit_decision)(i_dec < 0 ? 0 : i_dec);
    e->end_state = (enum lz_outcome)(i_end < 0 ? 0 : i_end);
    e->decided_ref = sqlite3_column_int64(q, 6);
    w->argv_text = lz_db_col_dup(q, 9, true);
    w->edited_argv_text = lz_db_col_dup(q, 10, false);
    w->executable_text = lz_db_col_dup(q, 11, true);
    const char *sha = (const char *)sqlite3_column_text(q, 12);
    w->cwd_text = lz_db_col_dup(q, 13, true);
    e->exit_status = (int)sqlite3_column_int64(q, 14);
    e->signal = (int)sqlite3_column_int64(q, 15);
    e->output_bytes = sqlite3_column_int64(q, 16);
    e->ended_ms = sqlite3_column_int64(q, 17);
    if (!unhex((const char *)sqlite3_column_text(q, 18), w->prev_hash, LZ_AUDIT_HASH_LEN) ||
        !unhex((const char *)sqlite3_column_text(q, 19), w->row_hash, LZ_AUDIT_HASH_LEN))
        set_problem(w, "prev_hash or row_hash is not 64 lowercase hex", "");
    if (sha && sha[0]) {
        e->has_sha256 = true;
        if (!unhex(sha, e->executable_sha256, LZ_AUDIT_HASH_LEN))
            set_problem(w, "executable_sha256 is not 64 lowercase hex", "");
    }
    if ((int64_t)e->exit_status != sqlite3_column_int64(q, 14) || (int64_t)e->signal != sqlite3_column_int64(q, 15))
        set_problem(w, "exit_status or signal out of range", "");

    char **argv = unrender_argv(w->argv_text, &e->argc, &why);
    if (!argv)
        set_problem(w, "argv is ", why);
    e->argv = (const char *const *)argv;
    if (w->edited_argv_text) {
        char **ed = unrender_argv(w->edited_argv_text, &e->edited_argc, &why);
        if (!ed)
            set_problem(w, "edited_argv is ", why);
        /* Absent and unreadable must not look alike: an unreadable edit
         * is an empty, present one (the problem breaks the chain). */
        e->edited_argv = ed ? (const char *const *)ed : (const char *const *)lz_xcalloc(1, sizeof(char *));
        if (!ed)
            e->edited_argc = 0;
    }
    char *exe = unrender(w->executable_text, &why);
    if (!exe)
        set_problem(w, "executable is ", why);
    e->executable = exe;
    char *cwd = unrender(w->cwd_text, &why);
    if (!cwd)
        set_problem(w, "cwd is ", why);
    e->cwd = cwd;
}

/* A text column of a network row as stored ("" for NULL), and its problem. */
static char *net_col(struct lz_audit_row *w, sqlite3_stmt *q, int i, const char *field, size_t max, bool space) {
    const char *t = (const char *)sqlite3_column_text(q, i);
    size_t len = t ? (size_t)sqlite3_column_bytes(q, i) : 0;
    char *s = lz_xstrdup(t ? t : "");
    const char *why = len != strlen(s) ? "holds a NUL byte" : net_text_problem(s, len, max, space);
    if (why) {
        _cleanup_free_ char *what = lz_xasprintf("%s ", field);
        set_problem(w, what, why);
    }
    return s;
}

/* The stored addrs column: dotted quads in inet_ntop's form joined by ",";
 * NULL with *why on any other text. */
static uint32_t *unrender_addrs(const char *text, size_t *ret_n, const char **why) {
    uint32_t *v = lz_xcalloc(LZ_AUDIT_NET_ADDRS_MAX, sizeof *v);
    size_t n = 0;
    for (const char *p = *text ? text : NULL; p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char a[INET_ADDRSTRLEN], again[INET_ADDRSTRLEN];
        struct in_addr in;
        if (n == LZ_AUDIT_NET_ADDRS_MAX) {
            *why = "more than 32 addresses";
            goto fail;
        }
        if (!len || len >= sizeof a) {
            *why = "not IPv4 addresses in dotted-quad form joined by \",\"";
            goto fail;
        }
        memcpy(a, p, len);
        a[len] = '\0';
        if (inet_pton(AF_INET, a, &in) != 1 || (addr_text(ntohl(in.s_addr), again), strcmp(a, again) != 0)) {
            *why = "not IPv4 addresses in dotted-quad form joined by \",\"";
            goto fail;
        }
        v[n++] = ntohl(in.s_addr);
        p = comma ? comma + 1 : NULL;
    }
    *ret_n = n;
    return v;
fail:
    free(v);
    return NULL;
}

static void fill_net_row(void *elem, sqlite3_stmt *q) {
    struct lz_audit_row *w = elem;
    struct lz_audit_net_entry *e = &w->net;
    w->kind = LZ_AUDIT_NET;
    w->seq = sqlite3_column_int64(q, 0);
    e->gen = sqlite3_column_int64(q, 1);
    e->at_ms = sqlite3_column_int64(q, 2);
    const char *ev = (const char *)sqlite3_column_text(q, 3);
    int i_ev = name_index(net_event_names, LZ_ARRAY_SIZE(net_event_names), ev);
    if (i_ev < 0)
        set_problem(w, "event is not a known name", "");
    e->event = (enum lz_audit_net_event)(i_ev < 0 ? 0 : i_ev + 1);
    e->name = net_col(w, q, 4, "name", LZ_AUDIT_NET_NAME_MAX, false);
    w->addrs_text = net_col(w, q, 5, "addrs", LZ_AUDIT_NET_ADDRS_MAX * INET_ADDRSTRLEN, false);
    e->ports = net_col(w, q, 6, "ports", LZ_AUDIT_NET_PORTS_MAX, false);
    e->detail = net_col(w, q, 7, "detail", LZ_AUDIT_NET_DETAIL_MAX, true);
    if (!unhex((const char *)sqlite3_column_text(q, 8), w->prev_hash, LZ_AUDIT_HASH_LEN) ||
        !unhex((const char *)sqlite3_column_text(q, 9), w->row_hash, LZ_AUDIT_HASH_LEN))
        set_problem(w, "prev_hash or row_hash is not 64 lowercase hex", "");
    const char *why = NULL;
    uint32_t *addrs = unrender_addrs(w->addrs_text, &e->n_addrs, &why);
    if (!addrs)
        set_problem(w, "addrs are ", why);
    e->addrs = addrs;
    if (!addrs)
        e->n_addrs = 0;
}

static void clear_row(void *elem) {
    struct lz_audit_row *w = elem;
    free((uint32_t *)w->net.addrs);
    free((char *)w->net.name);
    free((char *)w->net.ports);
    free((char *)w->net.detail);
    free(w->addrs_text);
    free_vec((char **)w->e.argv, w->e.argc);
    free_vec((char **)w->e.edited_argv, w->e.edited_argc);
    free((char *)w->e.executable);
    free((char *)w->e.cwd);
    free(w->argv_text);
    free(w->edited_argv_text);
    free(w->executable_text);
    free(w->cwd_text);
    free(w->problem);
    *w = (struct lz_audit_row){ 0 };
}

void lz_audit_log_clear(struct lz_audit_log *log) {
    for (size_t i = 0; log->rows && i < log->n; i++)
        clear_row(&log->rows[i]);
    free(log->rows);
    free(log->head_problem);
    *log = (struct lz_audit_log){ 0 };
}

static int read_locked(struct lz_db *db, struct lz_audit_log *log, struct lz_error *err) {
    _cleanup_free_ char *id = NULL, *head = NULL;
    int r;
    if ((r = meta_text(db, "domain_id", &id, err)) < 0)
        return r;
    snprintf(log->domain_id, sizeof log->domain_id, "%s", id ? id : "");
    log->store_version = db->version;
    if (db->version < LZ_AUDIT_STORE_VERSION)
        return 0; /* before the audit table: no request was ever recorded */
    if ((r = meta_text(db, "audit_head", &head, err)) < 0)
        return r;
    if (head) {
        log->has_head = true;
        if (!parse_head(head, &log->head_seq, log->head_hash)) {
            _cleanup_free_ char *shown = NULL;
            (void)lz_escape(head, strlen(head), 0, &shown);
            log->head_problem = lz_xasprintf("the chain head \"%s\" is malformed", shown ? shown : "?");
        }
    }
    void *esc = NULL, *net = NULL;
    size_t n_esc = 0, n_net = 0;
    r = lz_db_read_rows(db, "audit",
                        "SELECT seq, gen, request_id, session_id, received_ms, decided_by, decided_ref, decision,"
                        " end_state, argv, edited_argv, executable, executable_sha256, cwd, exit_status, signal,"
                        " output_bytes, ended_ms, prev_hash, row_hash FROM audit ORDER BY seq",
                        LZ_AUDIT_ROWS_MAX, sizeof(struct lz_audit_row), fill_row, clear_row, &esc, &n_esc, err);
    if (r < 0)
        return r;
    if (db->version >= LZ_AUDIT_NET_STORE_VERSION)
        r = lz_db_read_rows(db, "audit_net",
                            "SELECT seq, gen, at_ms, event, name, addrs, ports, detail, prev_hash, row_hash"
                            " FROM audit_net ORDER BY seq",
                            LZ_AUDIT_ROWS_MAX - n_esc, sizeof(struct lz_audit_row), fill_net_row, clear_row, &net,
                            &n_net, err);
    if (r < 0) {
        for (size_t i = 0; i < n_esc; i++)
            clear_row((struct lz_audit_row *)esc + i);
        free(esc);
        return r;
    }
    /* One chain: the two tables merged in seq order (an escalation row
     * first when both hold a seq; verify reports the second). */
    struct lz_audit_row *a = esc, *b = net;
    log->n = n_esc + n_net;
    log->rows = lz_xcalloc(log->n ? log->n : 1, sizeof *log->rows);
    for (size_t i = 0, j = 0, k = 0; k < log->n; k++)
        log->rows[k] = j == n_net || (i < n_esc && a[i].seq <= b[j].seq) ? a[i++] : b[j++];
    free(esc);
    free(net);
    return 0;
}

int lz_audit_read(struct lz_store *st, struct lz_audit_log *ret, struct lz_error *err) {
    struct lz_db *db = lz_store_db(st);
    struct lz_audit_log log = { 0 };
    /* One read transaction: the rows and the head of one moment. */
    bool own = !db->in_txn;
    int r = own ? lz_db_begin(db, false, err) : 0;
    if (r == 0)
        r = read_locked(db, &log, err);
    if (own && db->in_txn)
        r = r < 0 ? (lz_db_rollback(db), r) : lz_db_commit(db, err);
    if (r < 0) {
        lz_audit_log_clear(&log);
        return r;
    }
    *ret = log;
    return 0;
}

int lz_audit_load(const char *data_root, const char *id, struct lz_audit_log *ret, struct lz_error *err) {
    /* No Domain flock: the coordinator of a running Domain holds it, and a
     * WAL reader needs none. The identity check still applies (SR-11). */
    _cleanup_store_ struct lz_store *st = NULL;
    int r = lz_domain_store_open_readonly(data_root, id, &st, err);
    if (r < 0)
        return r;
    return lz_audit_read(st, ret, err);
}

/* ---- verification ---- */

static int broken(int64_t row, int64_t *ret_first_bad, struct lz_error *err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int broken(int64_t row, int64_t *ret_first_bad, struct lz_error *err, const char *fmt, ...) {
    char why[LZ_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    if (ret_first_bad)
        *ret_first_bad = row;
    return lz_error_set(err, -EBADMSG, "audit chain broken at row %" PRId64 ": %s", row, why);
}

int lz_audit_verify(const struct lz_audit_log *log, int64_t *ret_first_bad, struct lz_error *err) {
    if (!lz_domain_id_valid(log->domain_id))
        return broken(1, ret_first_bad, err, "the store records no valid Domain ID to anchor the chain");
    uint8_t prev[LZ_AUDIT_HASH_LEN], h[LZ_AUDIT_HASH_LEN];
    lz_audit_genesis(log->domain_id, prev);
    for (size_t i = 0; i < log->n; i++) {
        const struct lz_audit_row *w = &log->rows[i];
        int64_t pos = (int64_t)i + 1;
        if (w->seq > pos)
            return broken(pos, ret_first_bad, err, "the row is missing (the next stored row is %" PRId64 ")", w->seq);
        if (w->seq != pos)
            return broken(pos, ret_first_bad, err, "stored with seq %" PRId64, w->seq);
        if (w->problem)
            return broken(pos, ret_first_bad, err, "%s", w->problem);
        if (sodium_memcmp(w->prev_hash, prev, sizeof prev) != 0) {
            if (!i)
                return broken(pos, ret_first_bad, err, "its prev_hash is not this Domain's genesis hash");
            return broken(pos, ret_first_bad, err,
                          "its prev_hash is not row %" PRId64 "'s hash: a row was removed, inserted or reordered",
                          pos - 1);
        }
        if (w->kind == LZ_AUDIT_NET)
            lz_audit_net_row_hash(w->seq, &w->net, w->prev_hash, h);
        else
            lz_audit_row_hash(w->seq, &w->e, w->prev_hash, h);
        if (sodium_memcmp(h, w->row_hash, sizeof h) != 0)
            return broken(pos, ret_first_bad, err,
                          "its contents do not match its row_hash: it was changed after it "
                          "was written");
        memcpy(prev, w->row_hash, sizeof prev);
    }
    int64_t n = (int64_t)log->n;
    if (log->head_problem)
        return broken(n ? n : 1, ret_first_bad, err, "%s", log->head_problem);
    if (!log->has_head) {
        if (n)
            return broken(n, ret_first_bad, err, "the chain head (meta audit_head) is missing");
        return 0;
    }
    if (log->head_seq > n)
        return broken(n + 1, ret_first_bad, err,
                      "the row is missing: the chain head records %" PRId64 " rows, the table ends at %" PRId64,
                      log->head_seq, n);
    if (log->head_seq < n)
        return broken(log->head_seq + 1, ret_first_bad, err,
                      "the chain head records %" PRId64 " rows: this row was added without moving it", log->head_seq);
    if (n && sodium_memcmp(log->head_hash, prev, sizeof prev) != 0)
        return broken(n, ret_first_bad, err, "its hash is not the one the chain head records");
    return 0;
}
