/* dnsmsg.c — the strict DNS message codec (dnsmsg.h). */
#include "dnsmsg.h"

#include <errno.h>
#include <string.h>

#define F_QR 0x8000u
#define F_OPCODE(f) (((f) >> 11) & 0xfu)
#define F_TC 0x0200u
#define F_RD 0x0100u
#define F_RA 0x0080u
#define F_CD 0x0010u

static const char *const reasons[LZ_DNS_R_MAX] = {
    [LZ_DNS_OK] = "ok",
    [LZ_DNS_R_SHORT] = "truncated message",
    [LZ_DNS_R_LONG] = "message longer than 65535 bytes",
    [LZ_DNS_R_DIRECTION] = "wrong direction (QR bit)",
    [LZ_DNS_R_OPCODE] = "opcode other than QUERY",
    [LZ_DNS_R_TC] = "truncated (TC) flag",
    [LZ_DNS_R_QDCOUNT] = "not exactly one question",
    [LZ_DNS_R_SECTIONS] = "unexpected records in a query",
    [LZ_DNS_R_LABEL] = "label longer than 63 bytes or of an extended type",
    [LZ_DNS_R_NAME_LONG] = "name longer than 255 bytes",
    [LZ_DNS_R_PTR_RANGE] = "compression pointer out of the message",
    [LZ_DNS_R_PTR_FORWARD] = "compression pointer forward",
    [LZ_DNS_R_PTR_LOOP] = "compression pointer loop",
    [LZ_DNS_R_PTR_HOPS] = "too many compression pointers in a name",
    [LZ_DNS_R_OPT] = "malformed or repeated EDNS OPT record",
    [LZ_DNS_R_OPT_VERSION] = "EDNS version other than 0",
    [LZ_DNS_R_TRAILING] = "bytes after the last record",
    [LZ_DNS_R_CLASS] = "class other than IN",
    [LZ_DNS_R_NAME_BYTES] = "name is not a host name (letters, digits, '-')",
    [LZ_DNS_R_ID] = "response to another query ID",
    [LZ_DNS_R_QUESTION] = "response to another question",
    [LZ_DNS_R_RDATA] = "malformed A or CNAME data",
    [LZ_DNS_R_CNAME_MULTI] = "two CNAME records for one name",
    [LZ_DNS_R_CNAME_LOOP] = "CNAME loop",
    [LZ_DNS_R_CNAME_LONG] = "CNAME chain too long",
};

const char *lz_dns_reason_str(enum lz_dns_reason r) {
    return (unsigned)r < LZ_DNS_R_MAX && reasons[r] ? reasons[r] : "unknown reason";
}

unsigned lz_dns_reason_rcode(enum lz_dns_reason r) {
    switch (r) {
    case LZ_DNS_R_OPCODE: return LZ_DNS_NOTIMP;
    case LZ_DNS_R_CLASS:
    case LZ_DNS_R_NAME_BYTES: return LZ_DNS_REFUSED;
    case LZ_DNS_OK:
    case LZ_DNS_R_SHORT:
    case LZ_DNS_R_LONG:
    case LZ_DNS_R_DIRECTION:
    case LZ_DNS_R_TC:
    case LZ_DNS_R_QDCOUNT:
    case LZ_DNS_R_SECTIONS:
    case LZ_DNS_R_LABEL:
    case LZ_DNS_R_NAME_LONG:
    case LZ_DNS_R_PTR_RANGE:
    case LZ_DNS_R_PTR_FORWARD:
    case LZ_DNS_R_PTR_LOOP:
    case LZ_DNS_R_PTR_HOPS:
    case LZ_DNS_R_OPT:
    case LZ_DNS_R_OPT_VERSION:
    case LZ_DNS_R_TRAILING:
    case LZ_DNS_R_ID:
    case LZ_DNS_R_QUESTION:
    case LZ_DNS_R_RDATA:
    case LZ_DNS_R_CNAME_MULTI:
    case LZ_DNS_R_CNAME_LOOP:
    case LZ_DNS_R_CNAME_LONG:
    case LZ_DNS_R_MAX: break;
    }
    return LZ_DNS_FORMERR;
}

static uint16_t get16(const uint8_t *p) { return (uint16_t)((unsigned)p[0] << 8 | p[1]); }
static uint32_t get32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put16(uint8_t *p, unsigned v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}
static void put32(uint8_t *p, uint32_t v) {
    put16(p, v >> 16);
    put16(p + 2, v & 0xffff);
}

uint16_t lz_dns_peek_id(const uint8_t *buf, size_t len) { return len >= 2 ? get16(buf) : 0; }

static int fail(enum lz_dns_reason *why, enum lz_dns_reason r) {
    if (why)
        *why = r;
    return -EBADMSG;
}

/* Decodes the name at off into its uncompressed wire form (out, at most
 * LZ_DNS_WIRE_NAME_MAX bytes); *ret_next: the offset right after the name
 * where it starts (after its first pointer, if any). See dnsmsg.h for
 * the pointer rules. */
static int get_name(const uint8_t *m, size_t len, size_t off, uint8_t out[LZ_DNS_WIRE_NAME_MAX], uint16_t *ret_len,
                    size_t *ret_next, enum lz_dns_reason *why) {
    size_t pos = off, seg = off, next = 0, w = 0;
    unsigned hops = 0;
    bool jumped = false;
    for (;;) {
        if (pos >= len)
            return fail(why, LZ_DNS_R_SHORT);
        uint8_t c = m[pos];
        if (c == 0) {
            out[w++] = 0; /* w <= 254 here: see the label check */
            if (!jumped)
                next = pos + 1;
            break;
        }
        if ((c & 0xc0) == 0xc0) {
            if (pos + 1 >= len)
                return fail(why, LZ_DNS_R_SHORT);
            size_t t = (size_t)(c & 0x3f) << 8 | m[pos + 1];
            if (t < LZ_DNS_HDR || t >= len)
                return fail(why, LZ_DNS_R_PTR_RANGE);
            if (t > pos)
                return fail(why, LZ_DNS_R_PTR_FORWARD);
            if (t >= seg)
                return fail(why, LZ_DNS_R_PTR_LOOP);
            if (++hops > LZ_DNS_PTR_HOPS)
                return fail(why, LZ_DNS_R_PTR_HOPS);
            if (!jumped)
                next = pos + 2;
            jumped = true;
            seg = pos = t;
            continue;
        }
        if (c & 0xc0)
            return fail(why, LZ_DNS_R_LABEL);
        if (c > len - pos - 1)
            return fail(why, LZ_DNS_R_SHORT);
        /* The label, and the root's 0 still to come, within 255. */
        if (w + 1 + c + 1 > LZ_DNS_WIRE_NAME_MAX)
            return fail(why, LZ_DNS_R_NAME_LONG);
        memcpy(out + w, m + pos, 1 + (size_t)c);
        w += 1 + (size_t)c;
        pos += 1 + (size_t)c;
    }
    *ret_len = (uint16_t)w;
    *ret_next = next;
    return 0;
}

static uint8_t fold(uint8_t c) { return c >= 'A' && c <= 'Z' ? (uint8_t)(c - 'A' + 'a') : c; }

bool lz_dns_name_eq(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen) {
    if (alen != blen)
        return false;
    for (size_t i = 0; i < alen; i++)
        if (fold(a[i]) != fold(b[i]))
            return false;
    return true;
}

/* The canonical text of a wire name, or -EINVAL: a '.' inside a label
 * would turn one label into two in the text form, so it is refused here
 * before hostrule's canonicaliser sees the text. */
static int name_text(const uint8_t *w, size_t wlen, char ret[LZ_HOSTNAME_MAX + 1]) {
    char text[LZ_DNS_WIRE_NAME_MAX];
    size_t o = 0;
    for (size_t i = 0; i < wlen && w[i] != 0;) {
        size_t l = w[i];
        if (i + 1 + l > wlen || memchr(w + i + 1, '.', l))
            return -EINVAL;
        if (o)
            text[o++] = '.';
        memcpy(text + o, w + i + 1, l);
        o += l;
        i += 1 + l;
    }
    return lz_hostname_canon(text, o, ret, NULL);
}

struct rr_head {
    uint16_t type, class;
    uint32_t ttl;
    size_t rdata, rdlen, next;
};

/* One record: owner (into owner/owner_len), fixed fields, RDATA bounds. */
static int get_rr(const uint8_t *m, size_t len, size_t off, uint8_t owner[LZ_DNS_WIRE_NAME_MAX], uint16_t *owner_len,
                  struct rr_head *h, enum lz_dns_reason *why) {
    size_t p;
    int r = get_name(m, len, off, owner, owner_len, &p, why);
    if (r < 0)
        return r;
    if (len - p < 10)
        return fail(why, LZ_DNS_R_SHORT);
    h->type = get16(m + p);
    h->class = get16(m + p + 2);
    h->ttl = get32(m + p + 4);
    h->rdlen = get16(m + p + 8);
    h->rdata = p + 10;
    if (h->rdlen > len - h->rdata)
        return fail(why, LZ_DNS_R_SHORT);
    h->next = h->rdata + h->rdlen;
    return 0;
}

/* An OPT record (already known to be type 41): root owner, version 0,
 * options that fill its RDATA exactly. */
static int check_opt(const uint8_t *m, const uint8_t *owner, uint16_t owner_len, const struct rr_head *h,
                     enum lz_dns_reason *why) {
    (void)owner;
    if (owner_len != 1)
        return fail(why, LZ_DNS_R_OPT);
    if (((h->ttl >> 16) & 0xff) != 0)
        return fail(why, LZ_DNS_R_OPT_VERSION);
    size_t o = h->rdata, end = h->rdata + h->rdlen;
    while (o < end) {
        if (end - o < 4 || get16(m + o + 2) > end - o - 4)
            return fail(why, LZ_DNS_R_OPT);
        o += 4 + get16(m + o + 2);
    }
    return 0;
}

int lz_dns_parse_query(const uint8_t *buf, size_t len, struct lz_dns_query *ret, enum lz_dns_reason *why) {
    if (len < LZ_DNS_HDR)
        return fail(why, LZ_DNS_R_SHORT);
    if (len > LZ_DNS_MSG_MAX)
        return fail(why, LZ_DNS_R_LONG);
    struct lz_dns_query q = { .id = get16(buf), .flags = get16(buf + 2) };
    if (q.flags & F_QR)
        return fail(why, LZ_DNS_R_DIRECTION);
    if (F_OPCODE(q.flags) != 0)
        return fail(why, LZ_DNS_R_OPCODE);
    if (q.flags & F_TC)
        return fail(why, LZ_DNS_R_TC);
    if (get16(buf + 4) != 1)
        return fail(why, LZ_DNS_R_QDCOUNT);
    unsigned an = get16(buf + 6), ns = get16(buf + 8), ar = get16(buf + 10);
    if (an || ns || ar > 1)
        return fail(why, LZ_DNS_R_SECTIONS);
    size_t p;
    int r = get_name(buf, len, LZ_DNS_HDR, q.qname, &q.qname_len, &p, why);
    if (r < 0)
        return r;
    if (len - p < 4)
        return fail(why, LZ_DNS_R_SHORT);
    q.qtype = get16(buf + p);
    q.qclass = get16(buf + p + 2);
    p += 4;
    if (ar) {
        uint8_t owner[LZ_DNS_WIRE_NAME_MAX];
        uint16_t olen;
        struct rr_head h;
        if ((r = get_rr(buf, len, p, owner, &olen, &h, why)) < 0)
            return r;
        if (h.type != LZ_DNS_T_OPT)
            return fail(why, LZ_DNS_R_SECTIONS);
        if ((r = check_opt(buf, owner, olen, &h, why)) < 0)
            return r;
        q.edns = true;
        q.edns_do = (h.ttl & 0x8000u) != 0;
        /* Below 512 means 512 (RFC 6891 §6.2.3). */
        q.udp_size = h.class < LZ_DNS_UDP_PLAIN ? LZ_DNS_UDP_PLAIN : h.class;
        p = h.next;
    }
    if (p != len)
        return fail(why, LZ_DNS_R_TRAILING);
    if (q.qclass != LZ_DNS_CLASS_IN)
        q.refuse = LZ_DNS_R_CLASS;
    else if (name_text(q.qname, q.qname_len, q.name) < 0)
        q.refuse = LZ_DNS_R_NAME_BYTES;
    if (q.refuse != LZ_DNS_OK)
        q.name[0] = '\0';
    *ret = q;
    return 0;
}

static int skip_section(const uint8_t *m, size_t len, size_t *off, unsigned count, unsigned *n_opt,
                        enum lz_dns_reason *why) {
    for (unsigned i = 0; i < count; i++) {
        uint8_t owner[LZ_DNS_WIRE_NAME_MAX];
        uint16_t olen;
        struct rr_head h;
        int r = get_rr(m, len, *off, owner, &olen, &h, why);
        if (r < 0)
            return r;
        if (n_opt && h.type == LZ_DNS_T_OPT) {
            if (++*n_opt > 1)
                return fail(why, LZ_DNS_R_OPT);
            if ((r = check_opt(m, owner, olen, &h, why)) < 0)
                return r;
        }
        *off = h.next;
    }
    return 0;
}

int lz_dns_parse_response(const uint8_t *buf, size_t len, const struct lz_dns_query *sent, struct lz_dns_answer *ret,
                          enum lz_dns_reason *why) {
    /* The answer is large (LZ_DNS_RR_MAX records): the caller's. Filled in
     * place, so it is emptied first and on every failure rather than left
     * half-written. */
    struct lz_dns_answer *a = ret;
    a->n = 0;
    a->ignored = 0;
    if (len < LZ_DNS_HDR)
        return fail(why, LZ_DNS_R_SHORT);
    if (len > LZ_DNS_MSG_MAX)
        return fail(why, LZ_DNS_R_LONG);
    unsigned flags = get16(buf + 2);
    if (get16(buf) != sent->id)
        return fail(why, LZ_DNS_R_ID);
    if (!(flags & F_QR))
        return fail(why, LZ_DNS_R_DIRECTION);
    if (F_OPCODE(flags) != 0)
        return fail(why, LZ_DNS_R_OPCODE);
    if (flags & F_TC)
        return fail(why, LZ_DNS_R_TC);
    if (get16(buf + 4) != 1)
        return fail(why, LZ_DNS_R_QDCOUNT);
    unsigned an = get16(buf + 6), ns = get16(buf + 8), ar = get16(buf + 10);
    uint8_t qn[LZ_DNS_WIRE_NAME_MAX];
    uint16_t qlen;
    size_t p;
    int r = get_name(buf, len, LZ_DNS_HDR, qn, &qlen, &p, why);
    if (r < 0)
        return r;
    if (len - p < 4)
        return fail(why, LZ_DNS_R_SHORT);
    if (!lz_dns_name_eq(qn, qlen, sent->qname, sent->qname_len) || get16(buf + p) != sent->qtype ||
        get16(buf + p + 2) != LZ_DNS_CLASS_IN)
        return fail(why, LZ_DNS_R_QUESTION);
    p += 4;
    a->rcode = flags & 0xfu;
    for (unsigned i = 0; i < an; i++) {
        /* Past the cap, a record is still checked, into scratch. */
        struct lz_dns_rr scratch = { 0 };
        struct lz_dns_rr *rr = a->n < LZ_DNS_RR_MAX ? &a->rr[a->n] : &scratch;
        struct rr_head h;
        if ((r = get_rr(buf, len, p, rr->owner, &rr->owner_len, &h, why)) < 0)
            goto bad;
        p = h.next;
        if (h.class != LZ_DNS_CLASS_IN || (h.type != LZ_DNS_T_A && h.type != LZ_DNS_T_CNAME))
            continue;
        rr->type = h.type;
        rr->ttl = h.ttl & 0x80000000u ? 0 : h.ttl;
        rr->target_len = 0;
        rr->addr = 0;
        if (h.type == LZ_DNS_T_A) {
            if (h.rdlen != 4) {
                r = fail(why, LZ_DNS_R_RDATA);
                goto bad;
            }
            rr->addr = get32(buf + h.rdata);
        } else {
            size_t end;
            /* The name may point back into the message, but its own
             * bytes must end exactly at the end of the RDATA. */
            if ((r = get_name(buf, h.rdata + h.rdlen, h.rdata, rr->target, &rr->target_len, &end, why)) < 0)
                goto bad;
            if (end != h.next) {
                r = fail(why, LZ_DNS_R_RDATA);
                goto bad;
            }
        }
        if (a->n < LZ_DNS_RR_MAX)
            a->n++;
        else
            a->ignored++;
    }
    unsigned n_opt = 0;
    if ((r = skip_section(buf, len, &p, ns, NULL, why)) < 0 || (r = skip_section(buf, len, &p, ar, &n_opt, why)) < 0)
        goto bad;
    if (p != len) {
        r = fail(why, LZ_DNS_R_TRAILING);
        goto bad;
    }
    return 0;
bad:
    a->n = 0;
    a->ignored = 0;
    return r;
}

int lz_dns_chain_walk(const struct lz_dns_answer *a, const uint8_t *qname, size_t qname_len, struct lz_dns_chain *ret,
                      enum lz_dns_reason *why) {
    struct lz_dns_chain ch = { 0 };
    const uint8_t *cur = qname;
    size_t cur_len = qname_len;
    for (;;) {
        int found = -1;
        for (size_t i = 0; i < a->n; i++) {
            const struct lz_dns_rr *rr = &a->rr[i];
            if (rr->type != LZ_DNS_T_CNAME || !lz_dns_name_eq(rr->owner, rr->owner_len, cur, cur_len))
                continue;
            if (found >= 0)
                return fail(why, LZ_DNS_R_CNAME_MULTI);
            found = (int)i;
        }
        if (found < 0)
            break;
        if (ch.n_cname >= LZ_DNS_CHAIN_MAX)
            return fail(why, LZ_DNS_R_CNAME_LONG);
        const struct lz_dns_rr *c = &a->rr[found];
        if (lz_dns_name_eq(c->target, c->target_len, qname, qname_len))
            return fail(why, LZ_DNS_R_CNAME_LOOP);
        for (size_t k = 0; k < ch.n_cname; k++) {
            const struct lz_dns_rr *o = &a->rr[ch.cname[k]];
            if (lz_dns_name_eq(c->target, c->target_len, o->target, o->target_len))
                return fail(why, LZ_DNS_R_CNAME_LOOP);
        }
        ch.cname[ch.n_cname++] = (uint8_t)found;
        cur = c->target;
        cur_len = c->target_len;
    }
    bool any = false;
    uint32_t min = UINT32_MAX;
    for (size_t k = 0; k < ch.n_cname; k++) {
        min = a->rr[ch.cname[k]].ttl < min ? a->rr[ch.cname[k]].ttl : min;
        any = true;
    }
    for (size_t i = 0; i < a->n; i++) {
        const struct lz_dns_rr *rr = &a->rr[i];
        if (rr->type != LZ_DNS_T_A || !lz_dns_name_eq(rr->owner, rr->owner_len, cur, cur_len))
            continue;
        ch.a[ch.n_a++] = (uint8_t)i;
        min = rr->ttl < min ? rr->ttl : min;
        any = true;
    }
    ch.min_ttl = any ? min : 0;
    *ret = ch;
    return 0;
}

/* Writes the canonical name as a wire name; returns its length or -EINVAL. */
static int text_to_wire(const char *canon, uint8_t out[LZ_DNS_WIRE_NAME_MAX]) {
    char c[LZ_HOSTNAME_MAX + 1];
    size_t n = strnlen(canon, LZ_HOSTNAME_MAX + 1);
    if (lz_hostname_canon(canon, n, c, NULL) < 0 || strcmp(c, canon) != 0)
        return -EINVAL;
    size_t w = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i < n && c[i] != '.')
            continue;
        out[w++] = (uint8_t)(i - start);
        memcpy(out + w, c + start, i - start);
        w += i - start;
        start = i + 1;
    }
    out[w++] = 0;
    return (int)w;
}

int lz_dns_build_query(uint16_t id, const char *canon, uint16_t qtype, uint8_t *buf, size_t cap, size_t *ret_len) {
    uint8_t wire[LZ_DNS_WIRE_NAME_MAX];
    int wl = text_to_wire(canon, wire);
    if (wl < 0)
        return wl;
    size_t len = LZ_DNS_HDR + (size_t)wl + 4 + 11;
    if (cap < len)
        return -ENOSPC;
    memset(buf, 0, LZ_DNS_HDR);
    put16(buf, id);
    put16(buf + 2, F_RD);
    put16(buf + 4, 1);
    put16(buf + 10, 1);
    size_t p = LZ_DNS_HDR;
    memcpy(buf + p, wire, (size_t)wl);
    p += (size_t)wl;
    put16(buf + p, qtype);
    put16(buf + p + 2, LZ_DNS_CLASS_IN);
    p += 4;
    buf[p] = 0; /* OPT: root owner, type, payload size, TTL 0, no RDATA */
    put16(buf + p + 1, LZ_DNS_T_OPT);
    put16(buf + p + 3, LZ_DNS_UDP_OURS);
    put32(buf + p + 5, 0);
    put16(buf + p + 9, 0);
    *ret_len = len;
    return 0;
}

static size_t udp_limit(const struct lz_dns_query *q, bool tcp) {
    if (tcp)
        return LZ_DNS_MSG_MAX;
    if (!q->edns)
        return LZ_DNS_UDP_PLAIN;
    return q->udp_size > LZ_DNS_UDP_OURS ? LZ_DNS_UDP_OURS
        : q->udp_size < LZ_DNS_UDP_PLAIN ? LZ_DNS_UDP_PLAIN
                                         : q->udp_size;
}

/* Header and question; returns the offset after the question. */
static size_t put_head(const struct lz_dns_query *q, unsigned rcode, bool tc, unsigned an, uint8_t *buf) {
    put16(buf, q->id);
    put16(buf + 2, F_QR | (q->flags & (F_RD | F_CD)) | F_RA | (tc ? F_TC : 0) | (rcode & 0xf));
    put16(buf + 4, q->qname_len ? 1 : 0);
    put16(buf + 6, an);
    put16(buf + 8, 0);
    put16(buf + 10, q->edns ? 1 : 0);
    size_t p = LZ_DNS_HDR;
    if (q->qname_len) {
        memcpy(buf + p, q->qname, q->qname_len);
        p += q->qname_len;
        put16(buf + p, q->qtype);
        put16(buf + p + 2, q->qclass);
        p += 4;
    }
    return p;
}

static size_t put_opt(const struct lz_dns_query *q, unsigned rcode, uint8_t *buf, size_t p) {
    if (!q->edns)
        return p;
    buf[p] = 0;
    put16(buf + p + 1, LZ_DNS_T_OPT);
    put16(buf + p + 3, LZ_DNS_UDP_OURS);
    put32(buf + p + 5, (uint32_t)((rcode >> 4) & 0xff) << 24);
    put16(buf + p + 9, 0);
    return p + 11;
}

static size_t head_size(const struct lz_dns_query *q) {
    return LZ_DNS_HDR + (q->qname_len ? (size_t)q->qname_len + 4 : 0) + (q->edns ? 11 : 0);
}

int lz_dns_build_rcode(const struct lz_dns_query *q, unsigned rcode, bool tcp, uint8_t *buf, size_t cap,
                       size_t *ret_len) {
    (void)tcp; /* a record-less response always fits 512 bytes */
    if (q->qname_len > LZ_DNS_WIRE_NAME_MAX)
        return -EINVAL;
    if (cap < head_size(q))
        return -ENOSPC;
    size_t p = put_head(q, rcode, false, 0, buf);
    *ret_len = put_opt(q, rcode, buf, p);
    return 0;
}

size_t lz_dns_answer_room(const struct lz_dns_query *q, const struct lz_dns_answer *a, const struct lz_dns_chain *ch,
                          bool tcp) {
    size_t need = head_size(q), limit = udp_limit(q, tcp), rec = 2 + 10 + 4;
    for (size_t k = 0; k < ch->n_cname; k++)
        need += 2 + 10 + (ch->cname[k] < a->n ? a->rr[ch->cname[k]].target_len : 0);
    if (need + ch->n_a * rec <= limit)
        return ch->n_a;
    return need + rec <= limit ? (limit - need) / rec : 0;
}

int lz_dns_build_answer(const struct lz_dns_query *q, const struct lz_dns_answer *a, const struct lz_dns_chain *ch,
                        uint32_t ttl, bool tcp, uint8_t *buf, size_t cap, size_t *ret_len) {
    if (q->qname_len == 0 || q->qname_len > LZ_DNS_WIRE_NAME_MAX || ch->n_cname > LZ_DNS_CHAIN_MAX)
        return -EINVAL;
    size_t need = head_size(q);
    for (size_t k = 0; k < ch->n_cname; k++) {
        if (ch->cname[k] >= a->n || a->rr[ch->cname[k]].target_len == 0 ||
            a->rr[ch->cname[k]].target_len > LZ_DNS_WIRE_NAME_MAX)
            return -EINVAL;
        need += 2 + 10 + a->rr[ch->cname[k]].target_len;
    }
    for (size_t k = 0; k < ch->n_a; k++)
        if (ch->a[k] >= a->n)
            return -EINVAL;
    size_t n_a = lz_dns_answer_room(q, a, ch, tcp);
    bool tc = n_a < ch->n_a;
    if (tc) {
        /* Does not fit: TC=1 (RFC 2181 §9) so that the client asks again
         * over TCP, with the chain and as many of the addresses as fit
         * (any of them serves a client that does not ask again, as
         * busybox's and older musl's do not), or no records when not
         * even the chain does. */
        if (n_a == 0) {
            if (cap < head_size(q))
                return -ENOSPC;
            size_t p = put_head(q, LZ_DNS_NOERROR, true, 0, buf);
            *ret_len = put_opt(q, LZ_DNS_NOERROR, buf, p);
            return 0;
        }
    }
    need += n_a * (2 + 10 + 4);
    if (cap < need)
        return -ENOSPC;
    size_t p = put_head(q, LZ_DNS_NOERROR, tc, (unsigned)(ch->n_cname + n_a), buf);
    size_t owner = LZ_DNS_HDR; /* the question's name; then each CNAME's target */
    for (size_t k = 0; k < ch->n_cname; k++) {
        const struct lz_dns_rr *rr = &a->rr[ch->cname[k]];
        put16(buf + p, 0xc000u | (unsigned)owner);
        put16(buf + p + 2, LZ_DNS_T_CNAME);
        put16(buf + p + 4, LZ_DNS_CLASS_IN);
        put32(buf + p + 6, ttl);
        put16(buf + p + 10, rr->target_len);
        owner = p + 12; /* < 0x4000: the chain is at most LZ_DNS_BUILD_MAX bytes in */
        memcpy(buf + p + 12, rr->target, rr->target_len);
        p += 12 + rr->target_len;
    }
    for (size_t k = 0; k < n_a; k++) {
        put16(buf + p, 0xc000u | (unsigned)owner);
        put16(buf + p + 2, LZ_DNS_T_A);
        put16(buf + p + 4, LZ_DNS_CLASS_IN);
        put32(buf + p + 6, ttl);
        put16(buf + p + 10, 4);
        put32(buf + p + 12, a->rr[ch->a[k]].addr);
        p += 16;
    }
    *ret_len = put_opt(q, LZ_DNS_NOERROR, buf, p);
    return 0;
}

int lz_dns_tcp_frame(const uint8_t *msg, size_t len, uint8_t *buf, size_t cap, size_t *ret_len) {
    if (len > LZ_DNS_MSG_MAX)
        return -EMSGSIZE;
    if (cap < len + 2)
        return -ENOSPC;
    memmove(buf + 2, msg, len);
    put16(buf, (unsigned)len);
    *ret_len = len + 2;
    return 0;
}

int lz_dns_tcp_next(const uint8_t *buf, size_t len, const uint8_t **ret_msg, size_t *ret_msg_len, size_t *ret_used) {
    if (len < 2)
        return 0;
    size_t n = get16(buf);
    if (n < LZ_DNS_HDR)
        return -EBADMSG;
    if (len - 2 < n)
        return 0;
    *ret_msg = buf + 2;
    *ret_msg_len = n;
    *ret_used = n + 2;
    return 1;
}
