/* Unit tests for the push command-list reader (pktline.c): the bodies of
 * real `git push` requests over smart HTTP captured on loopback
 * (tests/unit/data/http/capture.py: creates, an update and a delete with
 * push options, SHA-256, a push from a shallow clone), lists written by
 * hand, every prefix of each (fed byte by byte), every refusal with a
 * well-formed control next to it, and the ref-name rules checked against
 * the host's `git check-ref-format`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "pktline.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static bool seen[LZ_PKT_R_MAX];

/* A byte writer for the tests: pkt-lines and raw bytes. */
struct pk {
    uint8_t b[LZ_PKT_LIST_MAX + 4096];
    size_t n;
};
static void raw(struct pk *p, const void *s, size_t n) {
    memcpy(p->b + p->n, s, n);
    p->n += n;
}
static void pkt_n(struct pk *p, const void *payload, size_t n) {
    char h[5];
    snprintf(h, sizeof h, "%04zx", n + 4);
    raw(p, h, 4);
    raw(p, payload, n);
}
static void pkt(struct pk *p, const char *payload) { pkt_n(p, payload, strlen(payload)); }
static void flush(struct pk *p) { raw(p, "0000", 4); }

static const char Z40[] = "0000000000000000000000000000000000000000";
static const char A40[] = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1";
static const char B40[] = "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2";
static const char A64[] = "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1";

/* A command line old SP new SP ref, then (caps not NULL) NUL caps. */
static void cmd(struct pk *p, const char *old, const char *new_id, const char *ref, const char *caps) {
    char l[LZ_PKT_LEN_MAX];
    int n = snprintf(l, sizeof l, "%s %s %s", old, new_id, ref);
    if (caps) {
        l[n++] = '\0';
        n += snprintf(l + n, sizeof l - (size_t)n, "%s", caps);
    }
    pkt_n(p, l, (size_t)n);
}

static struct lz_pkt_push parse_ok(const uint8_t *b, size_t n) {
    static struct lz_pkt_push p;
    enum lz_pkt_reason why = LZ_PKT_OK;
    size_t need = 0;
    int r = lz_pkt_push_parse(b, n, &p, &need, &why);
    if (r != 0)
        fail_msg("list refused (%d): %s", r, r == -EAGAIN ? "need more" : lz_pkt_reason_str(why));
    assert_true(p.used <= n);
    return p;
}

static bool span_eq(struct lz_pkt_span a, struct lz_pkt_span b) { return a.off == b.off && a.len == b.len; }

static void assert_same(const struct lz_pkt_push *a, const struct lz_pkt_push *b) {
    assert_int_equal(a->used, b->used);
    assert_int_equal(a->oid_len, b->oid_len);
    assert_int_equal(a->n_shallow, b->n_shallow);
    assert_int_equal(a->push_options, b->push_options);
    assert_int_equal(a->n_commands, b->n_commands);
    for (unsigned i = 0; i < a->n_commands; i++) {
        const struct lz_pkt_command *x = &a->commands[i], *y = &b->commands[i];
        assert_int_equal(x->kind, y->kind);
        assert_true(span_eq(x->old_id, y->old_id) && span_eq(x->new_id, y->new_id) && span_eq(x->ref, y->ref));
    }
    assert_int_equal(a->n_caps, b->n_caps);
    for (unsigned i = 0; i < a->n_caps; i++)
        assert_true(span_eq(a->caps[i], b->caps[i]));
}

/* Fed one byte at a time: -EAGAIN up to the flush-pkt, asking for more
 * than there is and no more than the list; then the same answer from the
 * list alone. */
static struct lz_pkt_push fed(const uint8_t *b, size_t n) {
    static struct lz_pkt_push whole, alone, p;
    whole = parse_ok(b, n);
    for (size_t k = 0; k < whole.used; k++) {
        memset(&p, 0x5a, sizeof p);
        enum lz_pkt_reason why = LZ_PKT_OK;
        size_t need = 0;
        int r = lz_pkt_push_parse(b, k, &p, &need, &why);
        if (r != -EAGAIN)
            fail_msg("prefix %zu of %zu: %d (%s)", k, whole.used, r, lz_pkt_reason_str(why));
        assert_true(need > k && need <= whole.used && need <= LZ_PKT_LIST_MAX);
        assert_int_equal(why, LZ_PKT_OK);
        assert_int_equal(p.n_commands, 0x5a5a5a5a);
    }
    alone = parse_ok(b, whole.used);
    assert_same(&alone, &whole);
    return whole;
}
static struct lz_pkt_push ok_pk(const struct pk *p) { return fed(p->b, p->n); }

/* A refusal: ret and need untouched, a known reason; the prefixes wait
 * until the refusal, then all give it. */
static enum lz_pkt_reason refused(const uint8_t *b, size_t n) {
    static struct lz_pkt_push p;
    memset(&p, 0x5a, sizeof p);
    enum lz_pkt_reason why = LZ_PKT_OK;
    size_t need = 77;
    assert_int_equal(lz_pkt_push_parse(b, n, &p, &need, &why), -EBADMSG);
    assert_int_equal(p.n_commands, 0x5a5a5a5a);
    assert_int_equal(need, 77);
    assert_true(why > LZ_PKT_OK && why < LZ_PKT_R_MAX);
    if (n <= 8192) {
        bool bad = false;
        for (size_t k = 0; k < n; k++) {
            enum lz_pkt_reason w = LZ_PKT_OK;
            int r = lz_pkt_push_parse(b, k, &p, &need, &w);
            if (r == -EBADMSG) {
                bad = true;
                if (w != why)
                    fail_msg("prefix %zu of %zu: %s, the whole: %s", k, n, lz_pkt_reason_str(w),
                             lz_pkt_reason_str(why));
            } else if (r != -EAGAIN || bad) {
                fail_msg("prefix %zu of %zu: %d after a refusal", k, n, r);
            }
        }
    }
    seen[why] = true;
    return why;
}
static enum lz_pkt_reason refused_pk(const struct pk *p) { return refused(p->b, p->n); }

static const char *str(const uint8_t *buf, struct lz_pkt_span s) {
    static char out[4][LZ_PKT_REF_MAX + 1];
    static unsigned k;
    char *o = out[k++ % 4];
    assert_true(s.len < sizeof out[0]);
    memcpy(o, buf + s.off, s.len);
    o[s.len] = '\0';
    return o;
}

/* The body of a captured POST (after its head; its length is given). */
static const uint8_t *captured_body(const char *file, uint8_t *buf, size_t cap, size_t *ret_len) {
    const char *src = getenv("LZ_TEST_SRCDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/unit/data/http/%s", src ? src : ".", file);
    FILE *f = fopen(path, "rbe");
    if (!f)
        fail_msg("cannot open %s", path);
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    assert_true(n > 0 && n < cap);
    const uint8_t *e = memmem(buf, n, "\r\n\r\n", 4);
    assert_non_null(e);
    *ret_len = n - (size_t)(e + 4 - buf);
    return e + 4;
}

static void test_real_pushes(void **state) {
    (void)state;
    static uint8_t file[8192];
    const uint8_t *b;
    size_t n;
    struct lz_pkt_push p;

    /* git push URL HEAD~1:refs/heads/main HEAD:refs/heads/agent/x */
    b = captured_body("git-push.bin", file, sizeof file, &n);
    p = fed(b, n);
    assert_int_equal(p.oid_len, 40);
    assert_int_equal(p.n_shallow, 0);
    assert_int_equal(p.n_commands, 2);
    assert_int_equal(p.commands[0].kind, LZ_PKT_CREATE);
    assert_string_equal(str(b, p.commands[0].ref), "refs/heads/main");
    assert_string_equal(str(b, p.commands[0].old_id), Z40);
    assert_int_equal(p.commands[0].new_id.len, 40);
    assert_int_equal(p.commands[1].kind, LZ_PKT_CREATE);
    assert_string_equal(str(b, p.commands[1].ref), "refs/heads/agent/x");
    /* git's list starts with a SP after the NUL. */
    assert_int_equal(b[p.caps[0].off - 1], ' ');
    assert_int_equal(b[p.caps[0].off - 2], '\0');
    assert_int_equal(p.n_caps, 5);
    assert_string_equal(str(b, p.caps[0]), "report-status-v2");
    assert_string_equal(str(b, p.caps[3]), "object-format=sha1");
    assert_string_equal(str(b, p.caps[4]), "agent=git/2.39.5");
    assert_true(lz_pkt_has_cap(&p, b, "side-band-64k"));
    assert_true(lz_pkt_has_cap(&p, b, "agent"));
    assert_true(lz_pkt_has_cap(&p, b, "object-format=sha1"));
    assert_false(lz_pkt_has_cap(&p, b, "object-format=sha256"));
    assert_false(lz_pkt_has_cap(&p, b, "report-status"));
    assert_false(lz_pkt_has_cap(&p, b, "atomic"));
    assert_false(lz_pkt_has_cap(&p, b, "agent=git"));
    assert_false(p.push_options);
    /* The packfile follows the flush-pkt. */
    assert_memory_equal(b + p.used - 4, "0000PACK", 8);
    assert_true(lz_pkt_ref_match("refs/heads/agent/*", b + p.commands[1].ref.off, p.commands[1].ref.len));
    assert_false(lz_pkt_ref_match("refs/heads/agent/*", b + p.commands[0].ref.off, p.commands[0].ref.len));

    /* git push --atomic -o ci.skip URL HEAD:refs/heads/main :refs/heads/agent/x */
    b = captured_body("git-push-options.bin", file, sizeof file, &n);
    p = fed(b, n);
    assert_int_equal(p.n_commands, 2);
    assert_int_equal(p.commands[0].kind, LZ_PKT_DELETE);
    assert_string_equal(str(b, p.commands[0].ref), "refs/heads/agent/x");
    assert_string_equal(str(b, p.commands[0].new_id), Z40);
    assert_int_equal(p.commands[1].kind, LZ_PKT_UPDATE);
    assert_string_equal(str(b, p.commands[1].ref), "refs/heads/main");
    assert_true(p.push_options);
    assert_true(lz_pkt_has_cap(&p, b, "atomic"));
    /* The push options, then their flush, then the pack: not read. */
    assert_memory_equal(b + p.used, "000bci.skip0000PACK", 19);

    /* A SHA-256 repository. */
    b = captured_body("git-push-sha256.bin", file, sizeof file, &n);
    p = fed(b, n);
    assert_int_equal(p.oid_len, 64);
    assert_int_equal(p.n_commands, 2);
    assert_int_equal(p.commands[0].old_id.len, 64);
    assert_int_equal(p.commands[0].kind, LZ_PKT_CREATE);
    assert_true(lz_pkt_has_cap(&p, b, "object-format=sha256"));
    assert_memory_equal(b + p.used, "PACK", 4);

    /* From a shallow clone: a shallow line (with its LF) first. */
    b = captured_body("git-push-shallow.bin", file, sizeof file, &n);
    p = fed(b, n);
    assert_int_equal(p.n_shallow, 1);
    assert_int_equal(p.n_commands, 1);
    assert_string_equal(str(b, p.commands[0].ref), "refs/heads/agent/shallow");
    assert_memory_equal(b + p.used, "PACK", 4);
}

static void test_commands(void **state) {
    (void)state;
    static struct pk k;
    struct lz_pkt_push p;

    /* The three kinds; LF at the end of a line or not; caps split at any
     * number of SPs. */
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "report-status  atomic  ");
    cmd(&k, Z40, A40, "refs/tags/v1\n", NULL);
    cmd(&k, B40, Z40, "refs/heads/old", NULL);
    flush(&k);
    raw(&k, "PACK", 4);
    p = ok_pk(&k);
    assert_int_equal(p.used, k.n - 4);
    assert_int_equal(p.n_commands, 3);
    assert_int_equal(p.commands[0].kind, LZ_PKT_UPDATE);
    assert_int_equal(p.commands[1].kind, LZ_PKT_CREATE);
    assert_string_equal(str(k.b, p.commands[1].ref), "refs/tags/v1");
    assert_int_equal(p.commands[2].kind, LZ_PKT_DELETE);
    assert_int_equal(p.n_caps, 2);
    assert_string_equal(str(k.b, p.caps[1]), "atomic");
    /* The first line's LF ends its caps. */
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "quiet\n");
    flush(&k);
    p = ok_pk(&k);
    assert_int_equal(p.n_caps, 1);
    assert_string_equal(str(k.b, p.caps[0]), "quiet");
    /* No capability at all. */
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "");
    flush(&k);
    assert_int_equal(ok_pk(&k).n_caps, 0);
    /* Nothing to update: a flush-pkt alone. */
    p = fed((const uint8_t *)"0000PACK", 8);
    assert_int_equal(p.used, 4);
    assert_int_equal(p.n_commands, 0);
    assert_int_equal(p.oid_len, 40);
    /* A delete may name a one-level ref (receive-pack lets one be removed). */
    k.n = 0;
    cmd(&k, A40, Z40, "refs/stash", "");
    flush(&k);
    assert_int_equal(ok_pk(&k).commands[0].kind, LZ_PKT_DELETE);
    k.n = 0;
    cmd(&k, Z40, A40, "refs/stash", "");
    flush(&k);
    assert_int_equal(refused_pk(&k), LZ_PKT_R_REF_NAME);
    k.n = 0;
    cmd(&k, B40, A40, "refs/stash", "");
    flush(&k);
    assert_int_equal(refused_pk(&k), LZ_PKT_R_REF_NAME);

    /* Malformed commands. */
    k.n = 0;
    cmd(&k, Z40, Z40, "refs/heads/main", "");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_COMMAND); /* both zero */
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", NULL); /* no NUL in the first */
    assert_int_equal(refused_pk(&k), LZ_PKT_R_COMMAND);
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "");
    cmd(&k, A40, B40, "refs/heads/next", "atomic"); /* caps in a later one */
    assert_int_equal(refused_pk(&k), LZ_PKT_R_COMMAND);
    k.n = 0;
    pkt(&k, A40);
    assert_int_equal(refused_pk(&k), LZ_PKT_R_COMMAND);
    k.n = 0;
    pkt(&k, "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_COMMAND);
    k.n = 0;
    pkt(&k, "xyz refs/heads/main");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OID);
    k.n = 0;
    pkt(&k, "\n");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_COMMAND);
    k.n = 0;
    pkt_n(&k, "a\0", 2);
    assert_int_equal(refused_pk(&k), LZ_PKT_R_COMMAND);

    /* Object IDs: lower-case hex, 40 or 64, one length, the format's. */
    k.n = 0;
    cmd(&k, "A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1A1", B40, "refs/heads/main", "");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OID);
    k.n = 0;
    cmd(&k, A40 + 1, B40 + 1, "refs/heads/main", "");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OID);
    k.n = 0;
    cmd(&k, A40, A64, "refs/heads/main", "");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OID);
    k.n = 0;
    cmd(&k, A40, "b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2bX", "refs/heads/main", "");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OID);
    k.n = 0;
    cmd(&k, A64, A64, "refs/heads/main", "agent=x"); /* SHA-256 IDs without object-format */
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OID);
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "object-format=sha256");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OID);
    k.n = 0;
    cmd(&k, A64, A64, "refs/heads/main", "object-format=sha256");
    cmd(&k, A40, B40, "refs/heads/next", NULL);
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OID);
    k.n = 0;
    cmd(&k, A64, A64, "refs/heads/main", "object-format=sha256");
    flush(&k);
    assert_int_equal(ok_pk(&k).oid_len, 64);
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "object-format=md5");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OBJECT_FORMAT);
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "object-format=sha1 object-format=sha256");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OBJECT_FORMAT);
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "object-format");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OBJECT_FORMAT);
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "object-format=");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OBJECT_FORMAT);
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "object-format=sha1 object-format=sha1 object-formats=x");
    flush(&k);
    (void)ok_pk(&k);
    /* push-options with a value is push-options to git. */
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "push-options=x");
    flush(&k);
    p = ok_pk(&k);
    assert_true(p.push_options);
    assert_true(lz_pkt_has_cap(&p, k.b, "push-options"));
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "push-optionsx no-push-options");
    flush(&k);
    p = ok_pk(&k);
    assert_false(p.push_options);
    assert_false(lz_pkt_has_cap(&p, k.b, "push-options"));

    /* Capabilities. */
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "quiet\tatomic");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_CAPS);
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "agent=caf\xc3\xa9");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_CAPS);
    static char many[LZ_PKT_CAPS_MAX * 4 + 8];
    size_t o = 0;
    for (int i = 0; i < LZ_PKT_CAPS_MAX; i++)
        o += (size_t)snprintf(many + o, sizeof many - o, "c%d ", i);
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", many);
    flush(&k);
    assert_int_equal(ok_pk(&k).n_caps, LZ_PKT_CAPS_MAX);
    memcpy(many + o, "x", 2);
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", many);
    assert_int_equal(refused_pk(&k), LZ_PKT_R_CAPS);

    /* Shallow lines: before the commands, well formed, one ID length. */
    k.n = 0;
    pkt(&k, "shallow a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1");
    pkt(&k, "shallow b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2\n");
    flush(&k);
    p = ok_pk(&k);
    assert_int_equal(p.n_shallow, 2);
    assert_int_equal(p.n_commands, 0);
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "");
    pkt(&k, "shallow a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_SHALLOW);
    k.n = 0;
    pkt(&k, "shallow a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_SHALLOW);
    k.n = 0;
    pkt(&k, "shallow  a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_SHALLOW);
    k.n = 0;
    pkt(&k, "shallow a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1");
    cmd(&k, A40, B40, "refs/heads/main", "");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OID);
    k.n = 0;
    pkt(&k, "shallow a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1");
    pkt(&k, "shallow a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_OID);
    k.n = 0;
    for (int i = 0; i < LZ_PKT_SHALLOW_MAX; i++)
        pkt(&k, "shallow a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1\n");
    raw(&k, "0000", 4);
    assert_int_equal(ok_pk(&k).n_shallow, LZ_PKT_SHALLOW_MAX);
    k.n -= 4;
    pkt(&k, "shallow a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1\n");
    assert_int_equal(refused(k.b, k.n), LZ_PKT_R_SHALLOW);

    /* A signed push. */
    k.n = 0;
    pkt_n(&k, "push-cert\0report-status\n", 24);
    pkt(&k, "certificate version 0.1\n");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_PUSH_CERT);

    /* The same ref twice. */
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "");
    cmd(&k, Z40, B40, "refs/heads/mainx", NULL);
    cmd(&k, B40, Z40, "refs/heads/main", NULL);
    assert_int_equal(refused_pk(&k), LZ_PKT_R_REF_DUP);

    /* LZ_PKT_COMMANDS_MAX commands, and one more (refused at its length). */
    k.n = 0;
    for (int i = 0; i < LZ_PKT_COMMANDS_MAX; i++) {
        char ref[64];
        snprintf(ref, sizeof ref, "refs/heads/agent/%d", i);
        cmd(&k, Z40, A40, ref, i == 0 ? "" : NULL);
    }
    size_t end = k.n;
    flush(&k);
    p = parse_ok(k.b, k.n);
    assert_int_equal(p.n_commands, LZ_PKT_COMMANDS_MAX);
    assert_string_equal(str(k.b, p.commands[255].ref), "refs/heads/agent/255");
    k.n = end;
    cmd(&k, Z40, A40, "refs/heads/agent/x", NULL);
    assert_int_equal(refused(k.b, end + 4), LZ_PKT_R_TOO_MANY);
    assert_int_equal(refused(k.b, k.n), LZ_PKT_R_TOO_MANY);
}

static void test_lengths(void **state) {
    (void)state;
    static struct pk k;
    struct lz_pkt_push p;
    size_t need = 0;

    static const struct {
        const char *s;
        size_t need;
    } waits[] = {
        { "", 4 }, { "0", 4 }, { "00af", 0xaf }, { "00af0000", 0xaf }, { "fff0", 0xfff0 },
    };
    for (size_t i = 0; i < sizeof waits / sizeof waits[0]; i++) {
        assert_int_equal(lz_pkt_push_parse((const uint8_t *)waits[i].s, strlen(waits[i].s), &p, &need, NULL), -EAGAIN);
        assert_int_equal(need, waits[i].need);
    }
    assert_int_equal(refused((const uint8_t *)"00G0", 4), LZ_PKT_R_LENGTH);
    assert_int_equal(refused((const uint8_t *)"00A0", 2 + 1), LZ_PKT_R_LENGTH); /* refused at the 'A' */
    assert_int_equal(refused((const uint8_t *)" 0a0", 4), LZ_PKT_R_LENGTH);
    assert_int_equal(refused((const uint8_t *)"0001", 4), LZ_PKT_R_SPECIAL);
    assert_int_equal(refused((const uint8_t *)"0002", 4), LZ_PKT_R_SPECIAL);
    assert_int_equal(refused((const uint8_t *)"0003", 4), LZ_PKT_R_SPECIAL);
    assert_int_equal(refused((const uint8_t *)"0004", 4), LZ_PKT_R_SPECIAL);
    assert_int_equal(refused((const uint8_t *)"fff1", 4), LZ_PKT_R_TOO_LONG);
    assert_int_equal(refused((const uint8_t *)"ffff", 4), LZ_PKT_R_TOO_LONG);
    /* After the first command, no line is longer than a command can be. */
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", "");
    char h[5];
    snprintf(h, sizeof h, "%04x", LZ_PKT_CMD_MAX + 1);
    raw(&k, h, 4);
    assert_int_equal(refused_pk(&k), LZ_PKT_R_TOO_LONG);
    /* A first command of LZ_PKT_LEN_MAX bytes (capabilities) passes. */
    static char caps[LZ_PKT_LEN_MAX];
    size_t cl = LZ_PKT_LEN_MAX - 4 - (40 + 1 + 40 + 1 + 15 + 1);
    memset(caps, 'c', cl);
    for (size_t i = 100; i < cl; i += 100)
        caps[i] = ' ';
    caps[cl] = '\0';
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", caps);
    assert_int_equal(k.n, LZ_PKT_LEN_MAX);
    assert_int_equal(refused(k.b, k.n), LZ_PKT_R_CAPS); /* more than 64 of them */
    for (size_t i = 100; i < cl; i += 100)
        caps[i] = 'c';
    k.n = 0;
    cmd(&k, A40, B40, "refs/heads/main", caps);
    flush(&k);
    p = parse_ok(k.b, k.n);
    assert_int_equal(p.caps[0].len, cl);
    /* The longest list: every bound at once; no need beyond LZ_PKT_LIST_MAX. */
    k.n = 0;
    for (int i = 0; i < LZ_PKT_SHALLOW_MAX; i++)
        pkt(&k, "shallow a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1\n");
    static char ref[LZ_PKT_REF_MAX + 1];
    memset(ref, 'r', LZ_PKT_REF_MAX);
    memcpy(ref, "refs/heads/", 11);
    size_t cl64 = LZ_PKT_LEN_MAX - 4 - (64 + 1 + 64 + 1 + LZ_PKT_REF_MAX + 1);
    memset(caps, 'c', cl64);
    memcpy(caps, "object-format=sha256 ", 21);
    caps[cl64] = '\0';
    for (int i = 0; i < LZ_PKT_COMMANDS_MAX; i++) {
        snprintf(ref + LZ_PKT_REF_MAX - 4, 5, "%04d", i);
        char line[LZ_PKT_CMD_MAX];
        if (i == 0) {
            cmd(&k, A64, A64, ref, caps);
            continue;
        }
        int n = snprintf(line, sizeof line, "%s %s %s\n", A64, A64, ref);
        pkt_n(&k, line, (size_t)n);
    }
    flush(&k);
    p = parse_ok(k.b, k.n);
    assert_int_equal(p.n_commands, LZ_PKT_COMMANDS_MAX);
    assert_int_equal(p.n_shallow, LZ_PKT_SHALLOW_MAX);
    assert_int_equal(p.commands[9].ref.len, LZ_PKT_REF_MAX);
    assert_int_equal(p.used, LZ_PKT_LIST_MAX);
    for (size_t i = 0; i < LZ_PKT_LIST_MAX; i += 997) {
        assert_int_equal(lz_pkt_push_parse(k.b, i, &p, &need, NULL), -EAGAIN);
        assert_true(need > i && need <= LZ_PKT_LIST_MAX);
    }
}

/* Runs git check-ref-format NAME: does git take it? */
static bool git_takes(const char *name) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY | O_CLOEXEC);
        dup2(dn, 1);
        dup2(dn, 2);
        execlp("git", "git", "check-ref-format", name, (char *)NULL);
        _exit(127);
    }
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
        skip();
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void test_refnames(void **state) {
    (void)state;
    static const struct {
        const char *name;
        bool ok;
    } names[] = {
        { "refs/heads/main", true },    { "refs/heads/agent/x/y", true },
        { "refs/tags/v1.0", true },     { "refs/heads/caf\xc3\xa9", true },
        { "refs/heads/x@y", true },     { "refs/heads/@", true },
        { "refs/heads/a.lockx", true }, { "refs/heads/a-b_c+d=e,f#g%h!i'j\"k", true },
        { "refs/heads/x{y}", true },    { "refs/x", true },
        { "refs/heads/a.lock", false }, { "refs/heads/a.lock/b", false },
        { "refs/heads/.lock", false },  { "refs/heads/.a", false },
        { "refs/.heads/a", false },     { "refs/heads/a..b", false },
        { "refs/heads/a/", false },     { "refs/heads//a", false },
        { "refs/heads/a.", false },     { "refs/heads/a/.", false },
        { "refs/heads/a@{1}", false },  { "refs/heads/@{", false },
        { "refs/heads/a b", false },    { "refs/heads/a~1", false },
        { "refs/heads/a^", false },     { "refs/heads/a:b", false },
        { "refs/heads/a?", false },     { "refs/heads/a*", false },
        { "refs/heads/a[b", false },    { "refs/heads/a\\b", false },
        { "refs/heads/a\x7f", false },  { "refs/heads/a\tb", false },
        { "refs/heads/a\nb", false },   { "refs/heads/a\x01", false },
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *n = names[i].name;
        if (lz_pkt_refname_ok((const uint8_t *)n, strlen(n)) != names[i].ok)
            fail_msg("\"%s\": %s", n, names[i].ok ? "refused" : "accepted");
        /* The host's git agrees (it does not ask for "refs/"). */
        if (git_takes(n) != names[i].ok)
            fail_msg("\"%s\": git check-ref-format says %s", n, names[i].ok ? "no" : "yes");
    }
    /* What git takes and a push may not carry: outside refs/. */
    static const char *const outside[] = { "heads/main", "HEAD/x", "refs", "refs/", "Refs/heads/x", "x/refs/heads/y" };
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++)
        assert_false(lz_pkt_refname_ok((const uint8_t *)outside[i], strlen(outside[i])));
    assert_false(lz_pkt_refname_ok((const uint8_t *)"refs/heads/a\0b", 14));

    /* In a command, with the reason; the length bound. */
    static struct pk k;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (names[i].ok)
            continue;
        k.n = 0;
        cmd(&k, A40, B40, names[i].name, "");
        assert_int_equal(refused_pk(&k), LZ_PKT_R_REF_NAME);
    }
    /* One LF ends a line; one more is in the name. */
    k.n = 0;
    pkt_n(&k, "a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1 b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2b2 refs/heads/a\n\0\n",
          97);
    assert_int_equal(refused_pk(&k), LZ_PKT_R_REF_NAME);
    static char ref[LZ_PKT_REF_MAX + 2];
    memset(ref, 'r', LZ_PKT_REF_MAX);
    memcpy(ref, "refs/heads/", 11);
    ref[LZ_PKT_REF_MAX] = '\0';
    assert_true(lz_pkt_refname_ok((const uint8_t *)ref, LZ_PKT_REF_MAX));
    k.n = 0;
    cmd(&k, A40, B40, ref, "");
    flush(&k);
    assert_int_equal(ok_pk(&k).commands[0].ref.len, LZ_PKT_REF_MAX);
    ref[LZ_PKT_REF_MAX] = 'r';
    ref[LZ_PKT_REF_MAX + 1] = '\0';
    assert_false(lz_pkt_refname_ok((const uint8_t *)ref, LZ_PKT_REF_MAX + 1));
    k.n = 0;
    cmd(&k, A40, B40, ref, "");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_REF_TOO_LONG);
    k.n = 0;
    cmd(&k, A40, B40, "", "");
    assert_int_equal(refused_pk(&k), LZ_PKT_R_REF_NAME);
}

static void test_match(void **state) {
    (void)state;
    static const struct {
        const char *pattern, *ref;
        bool match;
    } cases[] = {
        { "refs/heads/agent/*", "refs/heads/agent/x", true },
        { "refs/heads/agent/*", "refs/heads/agent/x/y", true },
        { "refs/heads/agent/*", "refs/heads/agent/", false },
        { "refs/heads/agent/*", "refs/heads/agent", false },
        { "refs/heads/agent/*", "refs/heads/agentx", false },
        { "refs/heads/agent/*", "refs/heads/Agent/x", false },
        { "refs/heads/agent/*", "refs/heads/main", false },
        { "refs/heads/agent*", "refs/heads/agent-1", true },
        { "refs/heads/agent*", "refs/heads/agent", false },
        { "refs/heads/main", "refs/heads/main", true },
        { "refs/heads/main", "refs/heads/main2", false },
        { "refs/heads/main", "refs/heads/mai", false },
        { "refs/heads/*/x", "refs/heads/a/x", false }, /* '*' inside: a byte like any other */
        { "refs/heads/*/x", "refs/heads/*/x", true },
        { "*", "refs/heads/x", true },
        { "*", "", false },
        { "", "", true },
        { "", "refs/heads/x", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (lz_pkt_ref_match(cases[i].pattern, (const uint8_t *)cases[i].ref, strlen(cases[i].ref)) != cases[i].match)
            fail_msg("%s against %s: not %s", cases[i].ref, cases[i].pattern, cases[i].match ? "a match" : "apart");
}

static void test_reasons(void **state) {
    (void)state;
    for (int r = 1; r < LZ_PKT_R_MAX; r++)
        if (!seen[r])
            fail_msg("no test for reason %d: %s", r, lz_pkt_reason_str((enum lz_pkt_reason)r));
    for (int r = 0; r < LZ_PKT_R_MAX; r++)
        assert_string_not_equal(lz_pkt_reason_str((enum lz_pkt_reason)r), "unknown reason");
    assert_string_equal(lz_pkt_reason_str(LZ_PKT_R_MAX), "unknown reason");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_pushes), cmocka_unit_test(test_commands), cmocka_unit_test(test_lengths),
        cmocka_unit_test(test_refnames),    cmocka_unit_test(test_match),    cmocka_unit_test(test_reasons),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
