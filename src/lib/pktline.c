/* pktline.c — the strict reader of a push's command list (pktline.h). */
#include "pktline.h"

#include <errno.h>
#include <string.h>

#define SHA1_HEX 40
#define SHA256_HEX 64

static const char *const reasons[LZ_PKT_R_MAX] = {
    [LZ_PKT_OK] = "ok",
    [LZ_PKT_R_LENGTH] = "pkt-line length not 4 lower-case hex digits",
    [LZ_PKT_R_SPECIAL] = "delim, response-end or empty pkt-line",
    [LZ_PKT_R_TOO_LONG] = "pkt-line too long",
    [LZ_PKT_R_TOO_MANY] = "more than 256 ref updates in one push",
    [LZ_PKT_R_SHALLOW] = "malformed or misplaced shallow line, or too many",
    [LZ_PKT_R_PUSH_CERT] = "signed push (push-cert) not supported",
    [LZ_PKT_R_COMMAND] = "malformed ref update command",
    [LZ_PKT_R_OID] = "malformed object ID, or not of the push's object format",
    [LZ_PKT_R_OBJECT_FORMAT] = "unknown or conflicting object-format",
    [LZ_PKT_R_CAPS] = "malformed or too many capabilities",
    [LZ_PKT_R_REF_NAME] = "ref name git refuses",
    [LZ_PKT_R_REF_TOO_LONG] = "ref name longer than 1024 bytes",
    [LZ_PKT_R_REF_DUP] = "the same ref updated twice",
};

const char *lz_pkt_reason_str(enum lz_pkt_reason r) {
    return (unsigned)r < LZ_PKT_R_MAX && reasons[r] ? reasons[r] : "unknown reason";
}

static int fail(enum lz_pkt_reason *why, enum lz_pkt_reason r) {
    if (why)
        *why = r;
    return -EBADMSG;
}

static int again(size_t need, size_t *ret_need) {
    if (ret_need)
        *ret_need = need;
    return -EAGAIN;
}

/* Lower case only: git writes pkt lengths and object IDs that way. */
static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* The length of the run of hex digits at p (n bytes at most). */
static size_t hex_run(const uint8_t *p, size_t n) {
    size_t i = 0;
    while (i < n && hexval(p[i]) >= 0)
        i++;
    return i;
}

static bool oid_len_ok(size_t n) { return n == SHA1_HEX || n == SHA256_HEX; }

static bool all_zero(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != '0')
            return false;
    return true;
}

static struct lz_pkt_span span(size_t off, size_t len) {
    return (struct lz_pkt_span){ .off = (uint32_t)off, .len = (uint32_t)len };
}

/* git's check_refname_format (refs.c) with the `refs/` that receive-pack
 * adds; the byte set is its refname_disposition table. */
bool lz_pkt_refname_ok(const uint8_t *name, size_t len) {
    if (len <= 5 || len > LZ_PKT_REF_MAX || memcmp(name, "refs/", 5) != 0 || name[len - 1] == '.')
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || name[i] == '/') {
            size_t cl = i - start;
            if (cl == 0 || name[start] == '.' || (cl >= 5 && memcmp(name + i - 5, ".lock", 5) == 0))
                return false;
            start = i + 1;
            continue;
        }
        uint8_t c = name[i];
        if (c < 0x20 || c == 0x7f || strchr(" ~^:?*[\\", c))
            return false;
        if (i + 1 < len && ((c == '.' && name[i + 1] == '.') || (c == '@' && name[i + 1] == '{')))
            return false;
    }
    return true;
}

/* The capability list of the first command (d[0..n)): kept; the object
 * format it names in *ret_oid_len. */
static int caps(struct lz_pkt_push *p, const uint8_t *buf, size_t off, size_t n, unsigned *ret_oid_len,
                enum lz_pkt_reason *why) {
    const uint8_t *d = buf + off;
    unsigned fmt = 0;
    size_t i = 0;
    while (i < n) {
        if (d[i] == ' ') {
            i++;
            continue;
        }
        size_t s = i;
        while (i < n && d[i] != ' ') {
            if (d[i] < 0x21 || d[i] > 0x7e)
                return fail(why, LZ_PKT_R_CAPS);
            i++;
        }
        if (p->n_caps == LZ_PKT_CAPS_MAX)
            return fail(why, LZ_PKT_R_CAPS);
        p->caps[p->n_caps++] = span(off + s, i - s);
        /* As git's parse_feature_value reads them: the name, then
         * nothing or '=' and a value. */
        const uint8_t *c = d + s, *eq = memchr(c, '=', i - s);
        size_t nl = eq ? (size_t)(eq - c) : i - s, vl = eq ? i - s - nl - 1 : 0;
        if (nl == 13 && memcmp(c, "object-format", 13) == 0) {
            unsigned f = 0;
            if (eq && vl == 4 && memcmp(eq + 1, "sha1", 4) == 0)
                f = SHA1_HEX;
            else if (eq && vl == 6 && memcmp(eq + 1, "sha256", 6) == 0)
                f = SHA256_HEX;
            if (f == 0 || (fmt && fmt != f))
                return fail(why, LZ_PKT_R_OBJECT_FORMAT);
            fmt = f;
        } else if (nl == 12 && memcmp(c, "push-options", 12) == 0) {
            p->push_options = true;
        }
    }
    *ret_oid_len = fmt ? fmt : SHA1_HEX;
    return 0;
}

/* FNV-1a: the duplicate check compares names whose hashes match only. */
static uint32_t hash(const uint8_t *p, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

/* What the lines read so far left for the next. */
struct state {
    unsigned shallow_len;                   /* ID length of the shallow lines (0: none) */
    uint32_t ref_hash[LZ_PKT_COMMANDS_MAX]; /* of commands[i].ref */
};

/* One whole pkt-line's payload (buf + off, n bytes, its LF dropped):
 * a shallow line or a command. */
static int line(struct lz_pkt_push *p, struct state *st, const uint8_t *buf, size_t off, size_t n,
                enum lz_pkt_reason *why) {
    unsigned *shallow_len = &st->shallow_len;
    const uint8_t *d = buf + off;
    if (n >= 8 && memcmp(d, "shallow ", 8) == 0) {
        size_t l = n - 8;
        if (p->n_commands || p->n_shallow == LZ_PKT_SHALLOW_MAX || !oid_len_ok(l) || hex_run(d + 8, l) != l)
            return fail(why, LZ_PKT_R_SHALLOW);
        if (*shallow_len && *shallow_len != l)
            return fail(why, LZ_PKT_R_OID);
        *shallow_len = (unsigned)l;
        p->n_shallow++;
        return 0;
    }
    if (p->n_commands == 0 && n >= 9 && memcmp(d, "push-cert", 9) == 0)
        return fail(why, LZ_PKT_R_PUSH_CERT);

    /* old-id SP new-id SP refname [NUL capabilities] */
    const uint8_t *sp = memchr(d, ' ', n);
    if (!sp)
        return fail(why, LZ_PKT_R_COMMAND);
    size_t ol = (size_t)(sp - d);
    if (!oid_len_ok(ol) || hex_run(d, ol) != ol)
        return fail(why, LZ_PKT_R_OID);
    size_t ns = ol + 1;
    sp = memchr(d + ns, ' ', n - ns);
    if (!sp)
        return fail(why, LZ_PKT_R_COMMAND);
    size_t nl = (size_t)(sp - d) - ns;
    if (nl != ol || hex_run(d + ns, nl) != nl)
        return fail(why, LZ_PKT_R_OID);
    size_t rs = ns + nl + 1;
    const uint8_t *nul = memchr(d + rs, '\0', n - rs);
    size_t re = nul ? (size_t)(nul - d) : n;
    if ((p->n_commands == 0) != (nul != NULL))
        return fail(why, LZ_PKT_R_COMMAND);
    if (p->n_commands == 0) {
        unsigned fmt;
        int e = caps(p, buf, off + re + 1, n - re - 1, &fmt, why);
        if (e < 0)
            return e;
        if (*shallow_len && *shallow_len != fmt)
            return fail(why, LZ_PKT_R_OID);
        p->oid_len = fmt;
    }
    if (ol != p->oid_len)
        return fail(why, LZ_PKT_R_OID);

    bool old_zero = all_zero(d, ol), new_zero = all_zero(d + ns, nl);
    if (old_zero && new_zero)
        return fail(why, LZ_PKT_R_COMMAND);
    enum lz_pkt_kind kind = old_zero ? LZ_PKT_CREATE : new_zero ? LZ_PKT_DELETE : LZ_PKT_UPDATE;

    const uint8_t *ref = d + rs;
    size_t rl = re - rs;
    if (rl > LZ_PKT_REF_MAX)
        return fail(why, LZ_PKT_R_REF_TOO_LONG);
    if (!lz_pkt_refname_ok(ref, rl))
        return fail(why, LZ_PKT_R_REF_NAME);
    /* receive-pack: only a delete may name a one-level ref (refs/foo). */
    const uint8_t *second = memchr(ref + 5, '/', rl - 5);
    if (kind != LZ_PKT_DELETE && !second)
        return fail(why, LZ_PKT_R_REF_NAME);
    uint32_t rh = hash(ref, rl);
    for (unsigned i = 0; i < p->n_commands; i++) {
        const struct lz_pkt_span *o = &p->commands[i].ref;
        if (st->ref_hash[i] == rh && o->len == rl && memcmp(buf + o->off, ref, rl) == 0)
            return fail(why, LZ_PKT_R_REF_DUP);
    }
    st->ref_hash[p->n_commands] = rh;
    p->commands[p->n_commands++] = (struct lz_pkt_command){
        .kind = kind,
        .old_id = span(off, ol),
        .new_id = span(off + ns, nl),
        .ref = span(off + rs, rl),
    };
    return 0;
}

int lz_pkt_push_parse(const uint8_t *buf, size_t len, struct lz_pkt_push *ret, size_t *ret_need,
                      enum lz_pkt_reason *why) {
    struct lz_pkt_push p;
    memset(&p, 0, sizeof p);
    struct state st;
    st.shallow_len = 0;
    size_t off = 0;
    for (;;) {
        size_t avail = len - off;
        const uint8_t *h = buf + off;
        size_t pl = 0;
        for (size_t i = 0; i < LZ_PKT_HDR && i < avail; i++) {
            int v = hexval(h[i]);
            if (v < 0)
                return fail(why, LZ_PKT_R_LENGTH);
            pl = pl << 4 | (size_t)v;
        }
        if (avail < LZ_PKT_HDR)
            return again(off + LZ_PKT_HDR, ret_need);
        if (pl == 0) {
            off += LZ_PKT_HDR;
            break;
        }
        if (pl <= LZ_PKT_HDR)
            return fail(why, LZ_PKT_R_SPECIAL);
        if (pl > LZ_PKT_LEN_MAX || (p.n_commands > 0 && pl > LZ_PKT_CMD_MAX))
            return fail(why, LZ_PKT_R_TOO_LONG);
        if (p.n_commands == LZ_PKT_COMMANDS_MAX)
            return fail(why, LZ_PKT_R_TOO_MANY);
        if (avail < pl)
            return again(off + pl, ret_need);
        size_t n = pl - LZ_PKT_HDR;
        if (h[pl - 1] == '\n')
            n--;
        int e = line(&p, &st, buf, off + LZ_PKT_HDR, n, why);
        if (e < 0)
            return e;
        off += pl;
    }
    if (p.n_commands == 0)
        p.oid_len = st.shallow_len ? st.shallow_len : SHA1_HEX;
    p.used = off;
    *ret = p;
    return 0;
}

bool lz_pkt_has_cap(const struct lz_pkt_push *p, const uint8_t *buf, const char *cap) {
    size_t cl = strlen(cap);
    bool bare = strchr(cap, '=') == NULL;
    for (unsigned i = 0; i < p->n_caps; i++) {
        const uint8_t *t = buf + p->caps[i].off;
        size_t tl = p->caps[i].len;
        if (tl >= cl && memcmp(t, cap, cl) == 0 && (tl == cl || (bare && t[cl] == '=')))
            return true;
    }
    return false;
}

bool lz_pkt_ref_match(const char *pattern, const uint8_t *ref, size_t len) {
    size_t pl = strlen(pattern);
    if (pl > 0 && pattern[pl - 1] == '*')
        return len > pl - 1 && memcmp(ref, pattern, pl - 1) == 0;
    return len == pl && memcmp(ref, pattern, pl) == 0;
}
