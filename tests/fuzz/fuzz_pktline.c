/* libFuzzer target: the push command-list reader (pktline.c). The input
 * is parsed as the start of a receive-pack request body (the corpus holds
 * the bodies of captured pushes, packfile and all). Checked: the result
 * is one of the three, with a reason or a bound on the bytes needed; what
 * parses is sane (every span inside what was used, which ends in the
 * flush-pkt; IDs of the push's length in lower-case hex, the kind their
 * zeros say; ref names the name check takes, no two alike; capabilities
 * of visible ASCII) and parses the same from a buffer of exactly the
 * bytes it used; a prefix of a stream that parses or waits always waits,
 * asking for no more than the whole; a stream that is refused has no
 * prefix that parses. The helpers run on the input too: the name check
 * never takes a byte it forbids, and every accepted ref matches itself
 * and its prefix patterns. */
#include "pktline.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool span_eq(struct lz_pkt_span a, struct lz_pkt_span b) { return a.off == b.off && a.len == b.len; }

static bool same(const struct lz_pkt_push *a, const struct lz_pkt_push *b) {
    if (a->used != b->used || a->oid_len != b->oid_len || a->n_shallow != b->n_shallow ||
        a->push_options != b->push_options || a->n_commands != b->n_commands || a->n_caps != b->n_caps)
        return false;
    for (unsigned i = 0; i < a->n_commands; i++) {
        const struct lz_pkt_command *x = &a->commands[i], *y = &b->commands[i];
        if (x->kind != y->kind || !span_eq(x->old_id, y->old_id) || !span_eq(x->new_id, y->new_id) ||
            !span_eq(x->ref, y->ref))
            return false;
    }
    for (unsigned i = 0; i < a->n_caps; i++)
        if (!span_eq(a->caps[i], b->caps[i]))
            return false;
    return true;
}

static bool in(struct lz_pkt_span s, size_t used) { return s.off <= used && s.len <= used - s.off; }

/* An ID: its length, lower-case hex; *zero: all '0'. */
static bool oid_ok(const uint8_t *b, struct lz_pkt_span s, unsigned len, bool *zero) {
    if (s.len != len)
        return false;
    *zero = true;
    for (size_t i = 0; i < s.len; i++) {
        uint8_t c = b[s.off + i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return false;
        *zero &= c == '0';
    }
    return true;
}

static void check_ref(const uint8_t *r, size_t n) {
    if (!lz_pkt_refname_ok(r, n) || !lz_pkt_ref_match("*", r, n))
        __builtin_trap();
    for (size_t i = 0; i < n; i++)
        if (r[i] < 0x20 || r[i] == 0x7f || memchr(" ~^:?*[\\", r[i], 8))
            __builtin_trap();
    /* The pattern of its first k bytes and '*' matches it when k < n;
     * the name itself, exactly. */
    char pat[LZ_PKT_REF_MAX + 2];
    size_t k = n / 2;
    memcpy(pat, r, k);
    pat[k] = '*';
    pat[k + 1] = '\0';
    if (!memchr(pat, '\0', k) && !lz_pkt_ref_match(pat, r, n))
        __builtin_trap();
    memcpy(pat, r, n);
    pat[n] = '\0';
    if (!lz_pkt_ref_match(pat, r, n) || (n > 0 && lz_pkt_ref_match(pat, r, n - 1)))
        __builtin_trap();
}

static void check_sane(const uint8_t *b, const struct lz_pkt_push *p) {
    size_t u = p->used;
    if (u < LZ_PKT_HDR || u > LZ_PKT_LIST_MAX || memcmp(b + u - 4, "0000", 4) != 0)
        __builtin_trap();
    if ((p->oid_len != 40 && p->oid_len != 64) || p->n_commands > LZ_PKT_COMMANDS_MAX ||
        p->n_shallow > LZ_PKT_SHALLOW_MAX || p->n_caps > LZ_PKT_CAPS_MAX || (p->n_caps && !p->n_commands))
        __builtin_trap();
    for (unsigned i = 0; i < p->n_commands; i++) {
        const struct lz_pkt_command *c = &p->commands[i];
        bool oz, nz;
        if (!in(c->old_id, u) || !in(c->new_id, u) || !in(c->ref, u) || !oid_ok(b, c->old_id, p->oid_len, &oz) ||
            !oid_ok(b, c->new_id, p->oid_len, &nz) || (oz && nz) ||
            c->kind !=
                (oz       ? LZ_PKT_CREATE
                     : nz ? LZ_PKT_DELETE
                          : LZ_PKT_UPDATE))
            __builtin_trap();
        check_ref(b + c->ref.off, c->ref.len);
        for (unsigned j = 0; j < i; j++)
            if (c->ref.len == p->commands[j].ref.len &&
                memcmp(b + c->ref.off, b + p->commands[j].ref.off, c->ref.len) == 0)
                __builtin_trap();
    }
    for (unsigned i = 0; i < p->n_caps; i++) {
        if (!in(p->caps[i], u) || p->caps[i].len == 0)
            __builtin_trap();
        for (size_t k = 0; k < p->caps[i].len; k++)
            if (b[p->caps[i].off + k] < 0x21 || b[p->caps[i].off + k] > 0x7e)
                __builtin_trap();
    }
    if (p->push_options != lz_pkt_has_cap(p, b, "push-options"))
        __builtin_trap();
}

static void check_prefix(const uint8_t *data, size_t k, int r, size_t upto) {
    static struct lz_pkt_push p;
    enum lz_pkt_reason why = LZ_PKT_OK;
    size_t need = 0;
    int e = lz_pkt_push_parse(data, k, &p, &need, &why);
    if (r == -EBADMSG) {
        if (e == 0)
            __builtin_trap();
        return;
    }
    if (e != -EAGAIN || need <= k || need > upto)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > LZ_PKT_LIST_MAX + 1024)
        return 0;
    static struct lz_pkt_push p, p2;
    enum lz_pkt_reason why = LZ_PKT_OK;
    size_t need = 0, upto = 0;
    int r = lz_pkt_push_parse(data, size, &p, &need, &why);
    if (r == 0) {
        if (p.used > size)
            __builtin_trap();
        check_sane(data, &p);
        uint8_t *list = malloc(p.used);
        if (!list)
            return 0;
        memcpy(list, data, p.used);
        if (lz_pkt_push_parse(list, p.used, &p2, &need, &why) != 0 || !same(&p, &p2))
            __builtin_trap();
        free(list);
        upto = p.used;
    } else if (r == -EAGAIN) {
        if (need <= size || need > LZ_PKT_LIST_MAX)
            __builtin_trap();
        upto = need;
    } else if (r != -EBADMSG || why == LZ_PKT_OK || why >= LZ_PKT_R_MAX) {
        __builtin_trap();
    }
    size_t end = r == 0 ? p.used : size;
    if (end > 0) {
        check_prefix(data, end - 1, r, upto);
        check_prefix(data, end / 2, r, upto);
        check_prefix(data, (size_t)data[0] * 7 % end, r, upto);
    }
    /* The name check on the input as a name, from a buffer of its size. */
    if (size <= LZ_PKT_REF_MAX) {
        uint8_t *name = malloc(size ? size : 1);
        if (!name)
            return 0;
        memcpy(name, data, size);
        if (lz_pkt_refname_ok(name, size))
            check_ref(name, size);
        free(name);
    }
    return 0;
}
