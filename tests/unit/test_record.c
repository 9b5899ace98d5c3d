/* Unit tests for the signed mailbox record codec (record.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "record.h"

static uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
static uint8_t pk2[crypto_sign_PUBLICKEYBYTES], sk2[crypto_sign_SECRETKEYBYTES];

static int setup(void **state) {
    (void)state;
    if (sodium_init() < 0)
        return -1;
    crypto_sign_keypair(pk, sk);
    crypto_sign_keypair(pk2, sk2);
    return 0;
}

static char *req_argv[] = { "/usr/bin/make", "-C", "/work/x y", "caf\xc3\xa9", "", NULL };
static uint8_t chunk_data[] = { 'o', 'u', 't', 0, 0xff, '\n' };
static uint8_t stdin_data[] = { 'i', 'n', 0, 0x80, '\r', '\n', 0xff };

static void ids(struct lz_record *r) {
    for (int i = 0; i < LZ_RECORD_ID_LEN; i++) {
        r->request_id[i] = (uint8_t)(0xa0 + i);
        r->session_id[i] = (uint8_t)(0x10 + i);
    }
}

/* One valid record of each kind. */
static struct lz_record sample(unsigned kind) {
    struct lz_record r = { .kind = (enum lz_record_kind)kind };
    ids(&r);
    switch (r.kind) {
    case LZ_REC_ESCALATION_REQUEST:
        r.request.created_ms = 1764400000000ull;
        r.request.expires_ms = 1764400060000ull;
        r.request.argv = req_argv;
        r.request.argc = 5;
        r.request.cwd = "/workspace/sub";
        r.request.justification = "build the host tool\nbecause \x1b[31m";
        r.request.timeout_s = 600;
        r.request.stdin_wanted = true;
        r.request.terminal = true;
        break;
    case LZ_REC_REQUEST_ACK:
        memset(r.ack.request_digest, 0x5a, sizeof r.ack.request_digest);
        r.ack.received_ms = 1;
        r.ack.decide_by_ms = UINT64_MAX;
        break;
    case LZ_REC_DEVELOPER_DECISION:
        r.decision.decision = LZ_DECISION_EDITED;
        r.decision.argv = req_argv;
        r.decision.argc = 2;
        r.decision.decided_ms = 128;
        break;
    case LZ_REC_RESULT_CHUNK:
        r.chunk.seq = 300;
        r.chunk.stream = LZ_STREAM_STDERR;
        r.chunk.data = chunk_data;
        r.chunk.len = sizeof chunk_data;
        break;
    case LZ_REC_CHUNK_ACK: r.chunk_ack.next_seq = 0; break;
    case LZ_REC_RESULT_END:
        r.end.outcome = LZ_OUTCOME_COMPLETED;
        r.end.exit_status = 255;
        r.end.signal = 0;
        r.end.chunks = 7;
        r.end.ended_ms = 1764400001234ull;
        break;
    case LZ_REC_CANCEL:
        r.cancel.reason = LZ_CANCEL_CLIENT_TIMEOUT;
        r.cancel.cancelled_ms = 99;
        break;
    case LZ_REC_STDIN_CHUNK:
        r.stdin_chunk.seq = 129; /* a two-byte varint */
        r.stdin_chunk.data = stdin_data;
        r.stdin_chunk.len = sizeof stdin_data;
        r.stdin_chunk.eof = true;
        break;
    case LZ_REC_HOST_REQUEST:
        r.host.created_ms = 1764400000000ull;
        r.host.expires_ms = 1764400060000ull;
        r.host.host = "api.example.com:443,8443";
        r.host.justification = "fetch the docs\n\x1b[31m";
        break;
    }
    return r;
}

static void assert_same(const struct lz_record *a, const struct lz_record *b) {
    assert_int_equal(a->kind, b->kind);
    assert_memory_equal(a->request_id, b->request_id, LZ_RECORD_ID_LEN);
    assert_memory_equal(a->session_id, b->session_id, LZ_RECORD_ID_LEN);
    switch (a->kind) {
    case LZ_REC_ESCALATION_REQUEST:
        assert_int_equal(a->request.created_ms, b->request.created_ms);
        assert_int_equal(a->request.expires_ms, b->request.expires_ms);
        assert_int_equal(a->request.argc, b->request.argc);
        for (size_t i = 0; i < a->request.argc; i++)
            assert_string_equal(a->request.argv[i], b->request.argv[i]);
        assert_null(b->request.argv[b->request.argc]);
        assert_string_equal(a->request.cwd, b->request.cwd);
        assert_string_equal(a->request.justification, b->request.justification);
        assert_int_equal(a->request.timeout_s, b->request.timeout_s);
        assert_int_equal(a->request.stdin_wanted, b->request.stdin_wanted);
        assert_int_equal(a->request.terminal, b->request.terminal);
        break;
    case LZ_REC_REQUEST_ACK:
        assert_memory_equal(a->ack.request_digest, b->ack.request_digest, LZ_RECORD_DIGEST_LEN);
        assert_int_equal(a->ack.received_ms, b->ack.received_ms);
        assert_true(a->ack.decide_by_ms == b->ack.decide_by_ms);
        break;
    case LZ_REC_DEVELOPER_DECISION:
        assert_int_equal(a->decision.decision, b->decision.decision);
        assert_int_equal(a->decision.argc, b->decision.argc);
        for (size_t i = 0; i < a->decision.argc; i++)
            assert_string_equal(a->decision.argv[i], b->decision.argv[i]);
        assert_int_equal(a->decision.decided_ms, b->decision.decided_ms);
        break;
    case LZ_REC_RESULT_CHUNK:
        assert_int_equal(a->chunk.seq, b->chunk.seq);
        assert_int_equal(a->chunk.stream, b->chunk.stream);
        assert_int_equal(a->chunk.len, b->chunk.len);
        assert_memory_equal(a->chunk.data, b->chunk.data, a->chunk.len);
        break;
    case LZ_REC_CHUNK_ACK: assert_int_equal(a->chunk_ack.next_seq, b->chunk_ack.next_seq); break;
    case LZ_REC_RESULT_END:
        assert_int_equal(a->end.outcome, b->end.outcome);
        assert_int_equal(a->end.exit_status, b->end.exit_status);
        assert_int_equal(a->end.signal, b->end.signal);
        assert_int_equal(a->end.chunks, b->end.chunks);
        assert_int_equal(a->end.ended_ms, b->end.ended_ms);
        break;
    case LZ_REC_CANCEL:
        assert_int_equal(a->cancel.reason, b->cancel.reason);
        assert_int_equal(a->cancel.cancelled_ms, b->cancel.cancelled_ms);
        break;
    case LZ_REC_STDIN_CHUNK:
        assert_int_equal(a->stdin_chunk.seq, b->stdin_chunk.seq);
        assert_int_equal(a->stdin_chunk.len, b->stdin_chunk.len);
        assert_memory_equal(a->stdin_chunk.data, b->stdin_chunk.data, a->stdin_chunk.len);
        assert_int_equal(a->stdin_chunk.eof, b->stdin_chunk.eof);
        break;
    case LZ_REC_HOST_REQUEST:
        assert_int_equal(a->host.created_ms, b->host.created_ms);
        assert_int_equal(a->host.expires_ms, b->host.expires_ms);
        assert_string_equal(a->host.host, b->host.host);
        assert_string_equal(a->host.justification, b->host.justification);
        break;
    }
}

static uint8_t buf[LZ_RECORD_MAX + 16];

static size_t seal(const struct lz_record *r) {
    size_t len;
    struct lz_error err = { 0 };
    if (lz_record_seal(sk, r, buf, LZ_RECORD_MAX, &len, &err) != 0)
        fail_msg("seal: %s", err.msg);
    return len;
}

static const unsigned all = LZ_REC_FROM_SANDBOX | LZ_REC_FROM_HOST;

static void test_names(void **state) {
    (void)state;
    assert_string_equal(lz_record_name(LZ_REC_ESCALATION_REQUEST), "escalation-request");
    assert_string_equal(lz_record_name(LZ_REC_REQUEST_ACK), "request-ack");
    assert_string_equal(lz_record_name(LZ_REC_DEVELOPER_DECISION), "developer-decision");
    assert_string_equal(lz_record_name(LZ_REC_RESULT_CHUNK), "result-chunk");
    assert_string_equal(lz_record_name(LZ_REC_CHUNK_ACK), "chunk-ack");
    assert_string_equal(lz_record_name(LZ_REC_RESULT_END), "result-end");
    assert_string_equal(lz_record_name(LZ_REC_CANCEL), "cancel");
    assert_string_equal(lz_record_name(LZ_REC_STDIN_CHUNK), "stdin-chunk");
    assert_string_equal(lz_record_name(LZ_REC_HOST_REQUEST), "host-request");
    assert_null(lz_record_name(0));
    assert_null(lz_record_name(10));
    /* a host request comes from the sandbox, never from the host */
    assert_true(LZ_REC_FROM_SANDBOX & LZ_REC_MASK(LZ_REC_HOST_REQUEST));
    assert_false(LZ_REC_FROM_HOST & LZ_REC_MASK(LZ_REC_HOST_REQUEST));
    /* stdin comes from the sandbox, never from the host */
    assert_true(LZ_REC_FROM_SANDBOX & LZ_REC_MASK(LZ_REC_STDIN_CHUNK));
    assert_false(LZ_REC_FROM_HOST & LZ_REC_MASK(LZ_REC_STDIN_CHUNK));
    assert_int_equal(LZ_REC_FROM_SANDBOX & LZ_REC_FROM_HOST, 0);
}

static void test_roundtrip_every_kind(void **state) {
    (void)state;
    for (unsigned k = 1; k <= LZ_REC_KIND_MAX; k++) {
        struct lz_record r = sample(k), d;
        size_t len = seal(&r);
        struct lz_error err = { 0 };
        if (lz_record_open(pk, buf, len, all, &d, &err) != 0)
            fail_msg("open %s: %s", lz_record_name(k), err.msg);
        assert_same(&r, &d);
        /* one record, one encoding: re-encoding gives the same bytes */
        uint8_t again[LZ_RECORD_PAYLOAD_MAX];
        size_t alen;
        assert_int_equal(lz_record_encode(&d, again, sizeof again, &alen, NULL), 0);
        assert_int_equal(alen, len - LZ_RECORD_HDR);
        assert_memory_equal(again, buf + LZ_RECORD_HDR, alen);
        lz_record_clear(&d);
    }
}

static void test_every_truncation_refused(void **state) {
    (void)state;
    for (unsigned k = 1; k <= LZ_REC_KIND_MAX; k++) {
        struct lz_record r = sample(k), d;
        size_t len = seal(&r);
        for (size_t cut = 0; cut < len; cut++) {
            assert_int_equal(lz_record_open(pk, buf, cut, all, &d, NULL), -EBADMSG);
            /* and the decoder itself, without the signature's help */
            if (cut >= LZ_RECORD_HDR)
                assert_true(lz_record_decode(k, buf + LZ_RECORD_HDR, cut - LZ_RECORD_HDR, &d, NULL) < 0);
        }
        /* positive control: the full length opens */
        assert_int_equal(lz_record_open(pk, buf, len, all, &d, NULL), 0);
        lz_record_clear(&d);
    }
}

static void test_every_bit_flip_refused(void **state) {
    (void)state;
    for (unsigned k = 1; k <= LZ_REC_KIND_MAX; k++) {
        struct lz_record r = sample(k), d;
        size_t len = seal(&r);
        for (size_t i = 0; i < len; i++)
            for (int bit = 0; bit < 8; bit++) {
                buf[i] ^= (uint8_t)(1 << bit);
                assert_int_equal(lz_record_open(pk, buf, len, all, &d, NULL), -EBADMSG);
                buf[i] ^= (uint8_t)(1 << bit);
            }
        assert_int_equal(lz_record_open(pk, buf, len, all, &d, NULL), 0);
        lz_record_clear(&d);
    }
}

static void test_wrong_key_and_mask(void **state) {
    (void)state;
    struct lz_record r = sample(LZ_REC_ESCALATION_REQUEST), d;
    size_t len = seal(&r);
    struct lz_error err = { 0 };
    assert_int_equal(lz_record_open(pk2, buf, len, all, &d, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "signature"));
    /* a request from the sandbox is not accepted where host kinds are expected */
    assert_int_equal(lz_record_open(pk, buf, len, LZ_REC_FROM_HOST, &d, NULL), -EBADMSG);
    assert_int_equal(lz_record_open(pk, buf, len, LZ_REC_FROM_SANDBOX, &d, NULL), 0);
    lz_record_clear(&d);
    /* trailing garbage after a valid record */
    buf[len] = 0;
    assert_int_equal(lz_record_open(pk, buf, len + 1, all, &d, NULL), -EBADMSG);
    buf[0] = 2;
    assert_int_equal(lz_record_open(pk, buf, len, all, &d, NULL), -EBADMSG);
}

/* A signature made for one kind replayed as another (a result-chunk's
 * signature presented on an escalation-request). */
static void test_cross_kind_replay(void **state) {
    (void)state;
    struct lz_record r = sample(LZ_REC_ESCALATION_REQUEST), d;
    size_t len = seal(&r);
    const uint8_t *payload = buf + LZ_RECORD_HDR;
    size_t plen = len - LZ_RECORD_HDR;
    uint8_t sig[crypto_sign_BYTES];
    /* The signer signs these exact bytes, but as a result-chunk. */
    assert_int_equal(lz_record_sign(sk, LZ_REC_RESULT_CHUNK, payload, plen, sig), 0);
    memcpy(buf + 2, sig, sizeof sig);
    struct lz_error err = { 0 };
    assert_int_equal(lz_record_open(pk, buf, len, all, &d, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "signature"));
    /* Positive control: the signature is valid for the kind it was made for. */
    assert_int_equal(lz_record_verify(pk, LZ_REC_RESULT_CHUNK, payload, plen, sig), 0);
    assert_int_equal(lz_record_verify(pk, LZ_REC_ESCALATION_REQUEST, payload, plen, sig), -EBADMSG);
    /* Relabeling the kind byte of a sealed chunk does not make it a request. */
    struct lz_record c = sample(LZ_REC_CHUNK_ACK);
    len = seal(&c);
    buf[1] = LZ_REC_CANCEL;
    assert_int_equal(lz_record_open(pk, buf, len, all, &d, NULL), -EBADMSG);
    buf[1] = LZ_REC_CHUNK_ACK;
    assert_int_equal(lz_record_open(pk, buf, len, all, &d, NULL), 0);
    lz_record_clear(&d);
}

/* --- hand-built payloads for the varint and bound checks --- */

struct pb {
    uint8_t b[LZ_RECORD_MAX * 2];
    size_t n;
};

static void pb_ids(struct pb *p) {
    memset(p->b, 7, 2 * LZ_RECORD_ID_LEN);
    p->n = 2 * LZ_RECORD_ID_LEN;
}

static void pb_raw(struct pb *p, const void *s, size_t n) {
    memcpy(p->b + p->n, s, n);
    p->n += n;
}

static void pb_var(struct pb *p, uint64_t v) {
    do {
        uint8_t b = v & 0x7f;
        v >>= 7;
        p->b[p->n++] = b | (v ? 0x80 : 0);
    } while (v);
}

static int dec(unsigned kind, const struct pb *p) {
    struct lz_record d;
    int r = lz_record_decode(kind, p->b, p->n, &d, NULL);
    if (r == 0)
        lz_record_clear(&d);
    return r;
}

static void test_varints(void **state) {
    (void)state;
    static const struct {
        const char *bytes;
        size_t n;
        int ok;
    } cases[] = {
        { "\x00", 1, 1 },
        { "\x7f", 1, 1 },
        { "\x80\x01", 2, 1 },
        { "\x80\x00", 2, 0 }, /* overlong 0 */
        { "\xff\x00", 2, 0 }, /* overlong 127 */
        { "\x81\x80\x00", 3, 0 },
        { "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10, 1 }, /* UINT64_MAX */
        { "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10, 0 }, /* 2^64 */
        { "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x81\x00", 11, 0 },
        { "\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x00", 11, 0 },
        { "\x80", 1, 0 }, /* truncated */
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
        struct pb p;
        pb_ids(&p);
        pb_raw(&p, cases[i].bytes, cases[i].n);
        assert_int_equal(dec(LZ_REC_CHUNK_ACK, &p) == 0, cases[i].ok);
    }
    /* A u32 field (cancel reason): a 5-byte varint above 2^32-1 is refused
     * as too wide, not truncated to a valid reason. */
    struct pb p;
    pb_ids(&p);
    pb_raw(&p, "\x80\x80\x80\x80\x10", 5); /* 2^32 */
    pb_var(&p, 5);
    assert_int_equal(dec(LZ_REC_CANCEL, &p), -EINVAL);
    pb_ids(&p);
    pb_raw(&p, "\x81\x80\x80\x80\x00", 5); /* overlong 1 */
    pb_var(&p, 5);
    assert_int_equal(dec(LZ_REC_CANCEL, &p), -EINVAL);
    /* positive control */
    pb_ids(&p);
    pb_var(&p, 1);
    pb_var(&p, 5);
    assert_int_equal(dec(LZ_REC_CANCEL, &p), 0);
    /* unknown enum value, trailing byte */
    pb_ids(&p);
    pb_var(&p, 2);
    pb_var(&p, 5);
    assert_int_equal(dec(LZ_REC_CANCEL, &p), -EINVAL);
    pb_ids(&p);
    pb_var(&p, 1);
    pb_var(&p, 5);
    pb_var(&p, 0);
    assert_int_equal(dec(LZ_REC_CANCEL, &p), -EINVAL);
}

static void test_zigzag_exit_status(void **state) {
    (void)state;
    struct lz_record r = sample(LZ_REC_RESULT_END);
    uint8_t out[64];
    size_t n;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), 0);
    /* outcome 0, then zigzag(255) = 510 = 0xfe 0x03 */
    assert_memory_equal(out + 32, "\x00\xfe\x03", 3);
    struct pb p;
    pb_ids(&p);
    pb_var(&p, LZ_OUTCOME_COMPLETED);
    pb_var(&p, 1); /* zigzag 1 = -1: not an exit status */
    pb_var(&p, 0);
    pb_var(&p, 0);
    pb_var(&p, 0);
    assert_int_equal(dec(LZ_REC_RESULT_END, &p), -EINVAL);
    p.b[33] = 2; /* zigzag 2 = 1 */
    assert_int_equal(dec(LZ_REC_RESULT_END, &p), 0);
    /* an exit status together with a signal is refused */
    r.end.signal = 9;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
    r.end.exit_status = 0;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), 0);
    r.end.signal = 65;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
}

/* A request payload with the given argv, cwd and justification. */
static void pb_request(struct pb *p, size_t argc, size_t elem_len, size_t cwd_len, size_t just_len,
                       uint8_t stdin_byte) {
    pb_ids(p);
    pb_var(p, 1);
    pb_var(p, 2);
    pb_var(p, argc);
    for (size_t i = 0; i < argc; i++) {
        pb_var(p, elem_len);
        memset(p->b + p->n, 'a', elem_len);
        p->n += elem_len;
    }
    pb_var(p, cwd_len);
    memset(p->b + p->n, 'c', cwd_len);
    p->b[p->n] = '/';
    p->n += cwd_len;
    pb_var(p, just_len);
    memset(p->b + p->n, 'j', just_len);
    p->n += just_len;
    pb_var(p, 0);
    p->b[p->n++] = stdin_byte;
    p->b[p->n++] = 0; /* terminal */
}

static void test_bounds(void **state) {
    (void)state;
    static struct pb p;
    /* argv count */
    pb_request(&p, LZ_RECORD_ARGV_MAX, 1, 1, 0, 0);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), 0);
    pb_request(&p, LZ_RECORD_ARGV_MAX + 1, 1, 1, 0, 0);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), -E2BIG);
    /* argv total bytes */
    pb_request(&p, 4, LZ_RECORD_ARGV_BYTES_MAX / 4, 1, 0, 0);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), 0);
    pb_request(&p, 1, LZ_RECORD_ARGV_BYTES_MAX + 1, 1, 0, 0);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), -E2BIG);
    pb_request(&p, 2, LZ_RECORD_ARGV_BYTES_MAX / 2, 1, 0, 0);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), 0);
    /* a huge claimed count with few bytes left is refused before allocating */
    pb_ids(&p);
    pb_var(&p, 1);
    pb_var(&p, 2);
    pb_var(&p, 200);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), -EINVAL);
    pb_ids(&p);
    pb_var(&p, 1);
    pb_var(&p, 2);
    pb_var(&p, UINT64_MAX);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), -E2BIG);
    /* cwd and justification */
    pb_request(&p, 1, 1, LZ_RECORD_PATH_MAX, LZ_RECORD_TEXT_MAX, 1);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), 0);
    pb_request(&p, 1, 1, LZ_RECORD_PATH_MAX + 1, 0, 0);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), -E2BIG);
    pb_request(&p, 1, 1, 1, LZ_RECORD_TEXT_MAX + 1, 0);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), -E2BIG);
    /* bool other than 0/1 */
    pb_request(&p, 1, 1, 1, 0, 2);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), -EINVAL);
    pb_request(&p, 1, 1, 1, 0, 0);
    p.b[p.n - 1] = 2; /* the terminal flag */
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), -EINVAL);
    p.n--; /* without it: truncated */
    assert_int_not_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), 0);
    /* empty argv, empty argv[0] */
    pb_request(&p, 0, 1, 1, 0, 0);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), -EINVAL);
    pb_request(&p, 1, 0, 1, 0, 0);
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), -EINVAL);

    /* result chunk: LZ_RECORD_CHUNK_MAX bytes pass, one more does not */
    for (size_t n = LZ_RECORD_CHUNK_MAX; n <= LZ_RECORD_CHUNK_MAX + 1; n++) {
        pb_ids(&p);
        pb_var(&p, 0);
        pb_var(&p, LZ_STREAM_STDOUT);
        pb_var(&p, n);
        memset(p.b + p.n, 'o', n);
        p.n += n;
        assert_int_equal(dec(LZ_REC_RESULT_CHUNK, &p), n == LZ_RECORD_CHUNK_MAX ? 0 : -E2BIG);
    }
    struct lz_record r = sample(LZ_REC_RESULT_CHUNK), d;
    static uint8_t big[LZ_RECORD_CHUNK_MAX + 1];
    r.chunk.data = big;
    r.chunk.len = LZ_RECORD_CHUNK_MAX;
    size_t len = seal(&r);
    assert_int_equal(lz_record_open(pk, buf, len, all, &d, NULL), 0);
    lz_record_clear(&d);
    r.chunk.len = LZ_RECORD_CHUNK_MAX + 1;
    assert_int_equal(lz_record_seal(sk, &r, buf, LZ_RECORD_MAX, &len, NULL), -E2BIG);

    /* a whole record: LZ_RECORD_MAX + 1 bytes is refused before verification */
    memset(buf, 0, sizeof buf);
    buf[0] = LZ_RECORD_FORMAT;
    buf[1] = LZ_REC_RESULT_CHUNK;
    struct lz_error err = { 0 };
    assert_int_equal(lz_record_open(pk, buf, LZ_RECORD_MAX + 1, all, &d, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "more than"));
    /* a request too large for one record cannot be sealed */
    static char elems[8][LZ_RECORD_ARGV_BYTES_MAX / 8 + 1];
    char *av[9];
    for (int i = 0; i < 8; i++) {
        memset(elems[i], 'x', LZ_RECORD_ARGV_BYTES_MAX / 8);
        av[i] = elems[i];
    }
    av[8] = NULL;
    struct lz_record q = sample(LZ_REC_ESCALATION_REQUEST);
    q.request.argv = av;
    q.request.argc = 8;
    assert_int_equal(lz_record_seal(sk, &q, buf, LZ_RECORD_MAX, &len, NULL), 0);
    assert_true(len <= LZ_RECORD_MAX);
    assert_int_equal(lz_record_seal(sk, &q, buf, 100, &len, NULL), -E2BIG);
}

static void test_content_rules(void **state) {
    (void)state;
    struct lz_record r = sample(LZ_REC_ESCALATION_REQUEST);
    uint8_t out[LZ_RECORD_PAYLOAD_MAX];
    size_t n;
    char *bad_utf8[] = { "/bin/echo", "\xc0\xaf", NULL };
    r.request.argv = bad_utf8;
    r.request.argc = 2;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
    r = sample(LZ_REC_ESCALATION_REQUEST);
    r.request.cwd = "relative";
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
    r = sample(LZ_REC_ESCALATION_REQUEST);
    r.request.expires_ms = r.request.created_ms;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
    r = sample(LZ_REC_ESCALATION_REQUEST);
    r.request.timeout_s = LZ_RECORD_TIMEOUT_MAX_S + 1;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
    /* a NUL inside an argv element on the wire */
    assert_int_equal(lz_record_encode(&(struct lz_record){ 0 }, out, sizeof out, &n, NULL), -EINVAL);
    struct pb p;
    pb_request(&p, 1, 3, 1, 0, 0);
    p.b[32 + 3 + 1] = 0; /* ids, created, expires, count, len, then 'a' -> NUL */
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), -EINVAL);
    p.b[32 + 3 + 1] = 'a';
    assert_int_equal(dec(LZ_REC_ESCALATION_REQUEST, &p), 0);
    /* decisions: a denial has no argv, an approval has one */
    r = sample(LZ_REC_DEVELOPER_DECISION);
    r.decision.decision = LZ_DECISION_DENIED;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
    r.decision.argc = 0;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), 0);
    r.decision.decision = LZ_DECISION_APPROVED;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
    /* chunks: empty, unknown stream */
    r = sample(LZ_REC_RESULT_CHUNK);
    r.chunk.len = 0;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
    r = sample(LZ_REC_RESULT_CHUNK);
    r.chunk.stream = LZ_STREAM_TERMINAL;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), 0);
    r.chunk.stream = 4;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
}

/* host-request (lazaret-escalate --allow-host): the exact encoding, the
 * form of its host (printable ASCII, bounded, not empty), both ways
 * (encoder and decoder refuse the same), and its signature bound to its
 * kind (it never opens as an escalation-request, nor one as it). */
static void test_host_request(void **state) {
    (void)state;
    struct lz_record r = sample(LZ_REC_HOST_REQUEST), d;
    uint8_t out[LZ_RECORD_PAYLOAD_MAX];
    size_t n;
    struct lz_error err = { 0 };
    r.host.created_ms = 1;
    r.host.expires_ms = 2;
    r.host.host = "a.b:1";
    r.host.justification = "";
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), 0);
    /* ids, created 1, expires 2, length 5 "a.b:1", length 0 */
    assert_int_equal(n, 32 + 1 + 1 + 1 + 5 + 1);
    assert_memory_equal(out + 32,
                        "\x01\x02\x05"
                        "a.b:1"
                        "\x00",
                        9);
    assert_int_equal(lz_record_decode(LZ_REC_HOST_REQUEST, out, n, &d, NULL), 0);
    assert_string_equal(d.host.host, "a.b:1");
    assert_string_equal(d.host.justification, "");
    assert_int_equal(lz_record_seq(&d), 0);
    lz_record_clear(&d);
    /* the same bytes are not an escalation-request (its argv count would be
     * 5 elements with 5 bytes left) */
    assert_int_not_equal(lz_record_decode(LZ_REC_ESCALATION_REQUEST, out, n, &d, NULL), 0);

    /* The form of the host, refused by the encoder ... */
    static const char *const bad[] = { "", "a b.com", "caf\xc3\xa9.com", "tab\t.com", "del\x7f.com" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = sample(LZ_REC_HOST_REQUEST);
        r.host.host = (char *)bad[i];
        err.msg[0] = '\0';
        assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "host"));
    }
    r = sample(LZ_REC_HOST_REQUEST);
    r.host.host = NULL;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
    static char longest[LZ_RECORD_HOST_MAX + 2];
    memset(longest, 'a', LZ_RECORD_HOST_MAX);
    r.host.host = longest;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), 0);
    longest[LZ_RECORD_HOST_MAX] = 'a';
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -E2BIG);
    longest[LZ_RECORD_HOST_MAX] = '\0';
    r = sample(LZ_REC_HOST_REQUEST);
    r.host.expires_ms = r.host.created_ms;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);
    r = sample(LZ_REC_HOST_REQUEST);
    r.host.justification = "\xc0\xaf";
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), -EINVAL);

    /* ... and by the decoder, on bytes no encoder would write. */
    struct pb p;
    static const struct {
        const char *host;
        size_t len;
        int want;
    } wire[] = {
        { "a.b", 3, 0 }, { "a\0b", 3, -EINVAL }, { "a b", 3, -EINVAL }, { "\x80", 1, -EINVAL }, { "", 0, -EINVAL }
    };
    for (size_t i = 0; i < sizeof wire / sizeof *wire; i++) {
        pb_ids(&p);
        pb_var(&p, 1);
        pb_var(&p, 2);
        pb_var(&p, wire[i].len);
        pb_raw(&p, wire[i].host, wire[i].len);
        pb_var(&p, 0);
        assert_int_equal(dec(LZ_REC_HOST_REQUEST, &p), wire[i].want);
    }
    /* a host longer than the bound is refused before anything is read */
    pb_ids(&p);
    pb_var(&p, 1);
    pb_var(&p, 2);
    pb_var(&p, LZ_RECORD_HOST_MAX + 1);
    memset(p.b + p.n, 'a', LZ_RECORD_HOST_MAX + 1);
    p.n += LZ_RECORD_HOST_MAX + 1;
    pb_var(&p, 0);
    assert_int_equal(dec(LZ_REC_HOST_REQUEST, &p), -E2BIG);
    /* trailing bytes */
    pb_ids(&p);
    pb_var(&p, 1);
    pb_var(&p, 2);
    pb_var(&p, 3);
    pb_raw(&p, "a.b", 3);
    pb_var(&p, 0);
    pb_var(&p, 0);
    assert_int_equal(dec(LZ_REC_HOST_REQUEST, &p), -EINVAL);

    /* Bound to its kind: a host-request's signature does not verify as an
     * escalation-request, nor the other way round. */
    r = sample(LZ_REC_HOST_REQUEST);
    size_t len = seal(&r);
    buf[1] = LZ_REC_ESCALATION_REQUEST;
    assert_int_equal(lz_record_open(pk, buf, len, all, &d, NULL), -EBADMSG);
    buf[1] = LZ_REC_HOST_REQUEST;
    assert_int_equal(lz_record_open(pk, buf, len, LZ_REC_FROM_HOST, &d, NULL), -EBADMSG);
    assert_int_equal(lz_record_open(pk, buf, len, LZ_REC_FROM_SANDBOX, &d, NULL), 0);
    lz_record_clear(&d);
    struct lz_record q = sample(LZ_REC_ESCALATION_REQUEST);
    len = seal(&q);
    buf[1] = LZ_REC_HOST_REQUEST;
    assert_int_equal(lz_record_open(pk, buf, len, all, &d, NULL), -EBADMSG);
}

/* stdin-chunk (lazaret-escalate --stdin): the exact encoding, the bounds
 * of its data, the rule that only an eof chunk may be empty, the strict
 * eof bool, the mailbox seq, and the signer. */
static void test_stdin_chunk(void **state) {
    (void)state;
    struct lz_record r = sample(LZ_REC_STDIN_CHUNK), d;
    uint8_t out[LZ_RECORD_PAYLOAD_MAX];
    size_t n;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), 0);
    /* ids, seq 129 = 0x81 0x01, length 7, the bytes, eof 1 */
    assert_int_equal(n, 32 + 2 + 1 + sizeof stdin_data + 1);
    assert_memory_equal(out + 32, "\x81\x01\x07", 3);
    assert_memory_equal(out + 35, stdin_data, sizeof stdin_data);
    assert_int_equal(out[n - 1], 1);
    assert_int_equal(lz_record_seq(&r), 129);
    struct lz_record c = sample(LZ_REC_RESULT_CHUNK), other = sample(LZ_REC_CANCEL);
    assert_int_equal(lz_record_seq(&c), 300);
    assert_int_equal(lz_record_seq(&other), 0);

    /* Empty: only as the end of input. */
    r.stdin_chunk.len = 0;
    r.stdin_chunk.data = NULL;
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, NULL), 0);
    r.stdin_chunk.eof = false;
    struct lz_error err = { 0 };
    assert_int_equal(lz_record_encode(&r, out, sizeof out, &n, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "empty stdin chunk"));
    struct pb p;
    pb_ids(&p);
    pb_var(&p, 3);
    pb_var(&p, 0);
    p.b[p.n++] = 0;
    assert_int_equal(dec(LZ_REC_STDIN_CHUNK, &p), -EINVAL);
    p.b[p.n - 1] = 1; /* positive control: the same with eof */
    assert_int_equal(dec(LZ_REC_STDIN_CHUNK, &p), 0);
    p.b[p.n - 1] = 2; /* a bool other than 0/1 */
    assert_int_equal(dec(LZ_REC_STDIN_CHUNK, &p), -EINVAL);
    p.b[p.n - 1] = 1;
    p.b[p.n++] = 0; /* trailing byte */
    assert_int_equal(dec(LZ_REC_STDIN_CHUNK, &p), -EINVAL);

    /* LZ_RECORD_CHUNK_MAX bytes pass, one more does not (decoder and encoder). */
    static struct pb big;
    for (size_t len = LZ_RECORD_CHUNK_MAX; len <= LZ_RECORD_CHUNK_MAX + 1; len++) {
        pb_ids(&big);
        pb_var(&big, 0);
        pb_var(&big, len);
        memset(big.b + big.n, 'i', len);
        big.n += len;
        big.b[big.n++] = 0;
        assert_int_equal(dec(LZ_REC_STDIN_CHUNK, &big), len == LZ_RECORD_CHUNK_MAX ? 0 : -E2BIG);
    }
    static uint8_t data[LZ_RECORD_CHUNK_MAX + 1];
    r = sample(LZ_REC_STDIN_CHUNK);
    r.stdin_chunk.data = data;
    r.stdin_chunk.len = LZ_RECORD_CHUNK_MAX;
    size_t len = seal(&r);
    assert_int_equal(lz_record_open(pk, buf, len, LZ_REC_FROM_SANDBOX, &d, NULL), 0);
    assert_int_equal(d.stdin_chunk.len, LZ_RECORD_CHUNK_MAX);
    lz_record_clear(&d);
    r.stdin_chunk.len = LZ_RECORD_CHUNK_MAX + 1;
    assert_int_equal(lz_record_seal(sk, &r, buf, LZ_RECORD_MAX, &len, NULL), -E2BIG);

    /* Only the sandbox's mask accepts it, only its signer's key opens it,
     * and its signature is not a result-chunk's (same field shapes). */
    r = sample(LZ_REC_STDIN_CHUNK);
    len = seal(&r);
    assert_int_equal(lz_record_open(pk, buf, len, LZ_REC_FROM_HOST, &d, NULL), -EBADMSG);
    assert_int_equal(lz_record_open(pk2, buf, len, LZ_REC_FROM_SANDBOX, &d, NULL), -EBADMSG);
    buf[1] = LZ_REC_RESULT_CHUNK;
    assert_int_equal(lz_record_open(pk, buf, len, all, &d, NULL), -EBADMSG);
    buf[1] = LZ_REC_STDIN_CHUNK;
    assert_int_equal(lz_record_open(pk, buf, len, LZ_REC_FROM_SANDBOX, &d, NULL), 0);
    lz_record_clear(&d);
}

static void test_digest(void **state) {
    (void)state;
    struct lz_record r = sample(LZ_REC_ESCALATION_REQUEST);
    size_t len = seal(&r);
    uint8_t d1[32], d2[32];
    lz_record_digest(buf, len, d1);
    buf[len - 1] ^= 1;
    lz_record_digest(buf, len, d2);
    assert_memory_not_equal(d1, d2, 32);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_roundtrip_every_kind),
        cmocka_unit_test(test_every_truncation_refused),
        cmocka_unit_test(test_every_bit_flip_refused),
        cmocka_unit_test(test_wrong_key_and_mask),
        cmocka_unit_test(test_cross_kind_replay),
        cmocka_unit_test(test_varints),
        cmocka_unit_test(test_zigzag_exit_status),
        cmocka_unit_test(test_bounds),
        cmocka_unit_test(test_content_rules),
        cmocka_unit_test(test_stdin_chunk),
        cmocka_unit_test(test_host_request),
        cmocka_unit_test(test_digest),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
