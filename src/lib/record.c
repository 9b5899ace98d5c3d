/* record.c — see record.h. */
#include "record.h"

#include "escape.h"

#include <inttypes.h>

static const char *const names[LZ_REC_KIND_MAX + 1] = {
    [LZ_REC_ESCALATION_REQUEST] = "escalation-request",
    [LZ_REC_REQUEST_ACK] = "request-ack",
    [LZ_REC_DEVELOPER_DECISION] = "developer-decision",
    [LZ_REC_RESULT_CHUNK] = "result-chunk",
    [LZ_REC_CHUNK_ACK] = "chunk-ack",
    [LZ_REC_RESULT_END] = "result-end",
    [LZ_REC_CANCEL] = "cancel",
    [LZ_REC_STDIN_CHUNK] = "stdin-chunk",
    [LZ_REC_HOST_REQUEST] = "host-request",
};

const char *lz_record_name(unsigned kind) { return kind <= LZ_REC_KIND_MAX ? names[kind] : NULL; }

uint64_t lz_record_seq(const struct lz_record *rec) {
    if (rec->kind == LZ_REC_RESULT_CHUNK)
        return rec->chunk.seq;
    if (rec->kind == LZ_REC_STDIN_CHUNK)
        return rec->stdin_chunk.seq;
    return 0;
}

/* ---- validation shared by encoder and decoder ---- */

static int check_text(const char *s, size_t len, size_t max, bool nonempty, const char *what, struct lz_error *err) {
    if (len > max)
        return lz_error_set(err, -E2BIG, "%s is %zu bytes, more than %zu", what, len, max);
    if (nonempty && len == 0)
        return lz_error_set(err, -EINVAL, "%s is empty", what);
    if (memchr(s, '\0', len))
        return lz_error_set(err, -EINVAL, "%s contains a NUL byte", what);
    if (!lz_utf8_wellformed(s, len))
        return lz_error_set(err, -EINVAL, "%s is not valid UTF-8", what);
    return 0;
}

static int check_argv(char *const *argv, size_t argc, bool allow_empty, struct lz_error *err) {
    if (argc > LZ_RECORD_ARGV_MAX)
        return lz_error_set(err, -E2BIG, "argv has %zu elements, more than %d", argc, LZ_RECORD_ARGV_MAX);
    if (argc == 0 && !allow_empty)
        return lz_error_set(err, -EINVAL, "argv is empty");
    size_t total = 0;
    for (size_t i = 0; i < argc; i++) {
        size_t l = strlen(argv[i]);
        total += l;
        if (total > LZ_RECORD_ARGV_BYTES_MAX)
            return lz_error_set(err, -E2BIG, "argv is more than %d bytes", LZ_RECORD_ARGV_BYTES_MAX);
        int r = check_text(argv[i], l, LZ_RECORD_ARGV_BYTES_MAX, i == 0, "an argv element", err);
        if (r < 0)
            return r;
    }
    return 0;
}

static int check_record(const struct lz_record *rec, struct lz_error *err) {
    int r;
    switch (rec->kind) {
    case LZ_REC_ESCALATION_REQUEST: {
        if ((r = check_argv(rec->request.argv, rec->request.argc, false, err)) < 0)
            return r;
        const char *cwd = rec->request.cwd ? rec->request.cwd : "";
        if ((r = check_text(cwd, strlen(cwd), LZ_RECORD_PATH_MAX, true, "cwd", err)) < 0)
            return r;
        if (cwd[0] != '/')
            return lz_error_set(err, -EINVAL, "cwd is not an absolute path");
        const char *j = rec->request.justification ? rec->request.justification : "";
        if ((r = check_text(j, strlen(j), LZ_RECORD_TEXT_MAX, false, "justification", err)) < 0)
            return r;
        if (rec->request.expires_ms <= rec->request.created_ms)
            return lz_error_set(err, -EINVAL, "the request expires before it was created");
        if (rec->request.timeout_s > LZ_RECORD_TIMEOUT_MAX_S)
            return lz_error_set(err, -EINVAL, "timeout %u s is more than %d s", rec->request.timeout_s,
                                LZ_RECORD_TIMEOUT_MAX_S);
        return 0;
    }
    case LZ_REC_REQUEST_ACK:
        if (rec->ack.decide_by_ms <= rec->ack.received_ms)
            return lz_error_set(err, -EINVAL, "the decision deadline is before the receipt");
        return 0;
    case LZ_REC_DEVELOPER_DECISION:
        if ((unsigned)rec->decision.decision > LZ_DECISION_AUTO_APPROVED)
            return lz_error_set(err, -EINVAL, "unknown decision %u", (unsigned)rec->decision.decision);
        if (rec->decision.decision == LZ_DECISION_DENIED && rec->decision.argc != 0)
            return lz_error_set(err, -EINVAL, "a denial carries an argv");
        return check_argv(rec->decision.argv, rec->decision.argc, rec->decision.decision == LZ_DECISION_DENIED, err);
    case LZ_REC_RESULT_CHUNK:
        if (rec->chunk.stream != LZ_STREAM_STDOUT && rec->chunk.stream != LZ_STREAM_STDERR &&
            rec->chunk.stream != LZ_STREAM_TERMINAL)
            return lz_error_set(err, -EINVAL, "unknown stream %u", (unsigned)rec->chunk.stream);
        if (rec->chunk.len == 0)
            return lz_error_set(err, -EINVAL, "an empty result chunk");
        if (rec->chunk.len > LZ_RECORD_CHUNK_MAX)
            return lz_error_set(err, -E2BIG, "a result chunk of %zu bytes, more than %d", rec->chunk.len,
                                LZ_RECORD_CHUNK_MAX);
        return 0;
    case LZ_REC_CHUNK_ACK: return 0;
    case LZ_REC_RESULT_END:
        if ((unsigned)rec->end.outcome > LZ_OUTCOME_FAILED)
            return lz_error_set(err, -EINVAL, "unknown outcome %u", (unsigned)rec->end.outcome);
        if (rec->end.exit_status < 0 || rec->end.exit_status > 255)
            return lz_error_set(err, -EINVAL, "exit status %d is not 0..255", rec->end.exit_status);
        if (rec->end.signal > LZ_RECORD_SIGNAL_MAX)
            return lz_error_set(err, -EINVAL, "signal %u is not 0..%d", rec->end.signal, LZ_RECORD_SIGNAL_MAX);
        /* A command ends by exit or by signal, not both; only a completed
         * command has an exit status. */
        if (rec->end.exit_status != 0 && (rec->end.outcome != LZ_OUTCOME_COMPLETED || rec->end.signal != 0))
            return lz_error_set(err, -EINVAL, "an exit status with a signal or without completion");
        return 0;
    case LZ_REC_CANCEL:
        if ((unsigned)rec->cancel.reason > LZ_CANCEL_CLIENT_TIMEOUT)
            return lz_error_set(err, -EINVAL, "unknown cancel reason %u", (unsigned)rec->cancel.reason);
        return 0;
    case LZ_REC_STDIN_CHUNK:
        /* An empty chunk carries nothing but the end of input: without eof
         * it would only be a way to use up sequence numbers. */
        if (rec->stdin_chunk.len == 0 && !rec->stdin_chunk.eof)
            return lz_error_set(err, -EINVAL, "an empty stdin chunk that does not end the input");
        if (rec->stdin_chunk.len > LZ_RECORD_CHUNK_MAX)
            return lz_error_set(err, -E2BIG, "a stdin chunk of %zu bytes, more than %d", rec->stdin_chunk.len,
                                LZ_RECORD_CHUNK_MAX);
        return 0;
    case LZ_REC_HOST_REQUEST: {
        const char *host = rec->host.host ? rec->host.host : "";
        size_t hl = strlen(host);
        if (hl == 0)
            return lz_error_set(err, -EINVAL, "the host is empty");
        if (hl > LZ_RECORD_HOST_MAX)
            return lz_error_set(err, -E2BIG, "the host is %zu bytes, more than %d", hl, LZ_RECORD_HOST_MAX);
        for (size_t i = 0; i < hl; i++)
            if (host[i] < 0x21 || host[i] > 0x7e)
                return lz_error_set(err, -EINVAL, "the host holds a byte that is not printable ASCII");
        const char *j = rec->host.justification ? rec->host.justification : "";
        if ((r = check_text(j, strlen(j), LZ_RECORD_TEXT_MAX, false, "justification", err)) < 0)
            return r;
        if (rec->host.expires_ms <= rec->host.created_ms)
            return lz_error_set(err, -EINVAL, "the request expires before it was created");
        return 0;
    }
    }
    return lz_error_set(err, -EINVAL, "unknown record kind %u", (unsigned)rec->kind);
}

/* ---- encoder ---- */

static void w_varint(struct lz_wbuf *w, uint64_t v) {
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    lz_wbuf_put(w, b, n);
}

static void w_i32(struct lz_wbuf *w, int32_t v) {
    /* zigzag: 0, -1, 1, -2, ... -> 0, 1, 2, 3, ... */
    uint32_t u = (uint32_t)v;
    w_varint(w, (u << 1) ^ (0u - (u >> 31)));
}

static void w_str(struct lz_wbuf *w, const void *p, size_t n) {
    w_varint(w, n);
    lz_wbuf_put(w, p, n);
}

static void w_argv(struct lz_wbuf *w, char *const *argv, size_t argc) {
    w_varint(w, argc);
    for (size_t i = 0; i < argc; i++)
        w_str(w, argv[i], strlen(argv[i]));
}

int lz_record_encode(const struct lz_record *rec, uint8_t *buf, size_t cap, size_t *ret_len, struct lz_error *err) {
    int r = check_record(rec, err);
    if (r < 0)
        return r;
    struct lz_wbuf w = { .p = buf, .cap = cap };
    lz_wbuf_put(&w, rec->request_id, LZ_RECORD_ID_LEN);
    lz_wbuf_put(&w, rec->session_id, LZ_RECORD_ID_LEN);
    switch (rec->kind) {
    case LZ_REC_ESCALATION_REQUEST: {
        const char *j = rec->request.justification ? rec->request.justification : "";
        w_varint(&w, rec->request.created_ms);
        w_varint(&w, rec->request.expires_ms);
        w_argv(&w, rec->request.argv, rec->request.argc);
        w_str(&w, rec->request.cwd, strlen(rec->request.cwd));
        w_str(&w, j, strlen(j));
        w_varint(&w, rec->request.timeout_s);
        uint8_t flags[2] = { rec->request.stdin_wanted ? 1 : 0, rec->request.terminal ? 1 : 0 };
        lz_wbuf_put(&w, flags, sizeof flags);
        break;
    }
    case LZ_REC_REQUEST_ACK:
        lz_wbuf_put(&w, rec->ack.request_digest, LZ_RECORD_DIGEST_LEN);
        w_varint(&w, rec->ack.received_ms);
        w_varint(&w, rec->ack.decide_by_ms);
        break;
    case LZ_REC_DEVELOPER_DECISION:
        w_varint(&w, rec->decision.decision);
        w_argv(&w, rec->decision.argv, rec->decision.argc);
        w_varint(&w, rec->decision.decided_ms);
        break;
    case LZ_REC_RESULT_CHUNK:
        w_varint(&w, rec->chunk.seq);
        w_varint(&w, rec->chunk.stream);
        w_str(&w, rec->chunk.data, rec->chunk.len);
        break;
    case LZ_REC_CHUNK_ACK: w_varint(&w, rec->chunk_ack.next_seq); break;
    case LZ_REC_RESULT_END:
        w_varint(&w, rec->end.outcome);
        w_i32(&w, rec->end.exit_status);
        w_varint(&w, rec->end.signal);
        w_varint(&w, rec->end.chunks);
        w_varint(&w, rec->end.ended_ms);
        break;
    case LZ_REC_CANCEL:
        w_varint(&w, rec->cancel.reason);
        w_varint(&w, rec->cancel.cancelled_ms);
        break;
    case LZ_REC_STDIN_CHUNK: {
        w_varint(&w, rec->stdin_chunk.seq);
        w_str(&w, rec->stdin_chunk.data, rec->stdin_chunk.len);
        uint8_t flag = rec->stdin_chunk.eof ? 1 : 0;
        lz_wbuf_put(&w, &flag, 1);
        break;
    }
    case LZ_REC_HOST_REQUEST: {
        const char *j = rec->host.justification ? rec->host.justification : "";
        w_varint(&w, rec->host.created_ms);
        w_varint(&w, rec->host.expires_ms);
        w_str(&w, rec->host.host, strlen(rec->host.host));
        w_str(&w, j, strlen(j));
        break;
    }
    }
    if (w.overflow || w.len > LZ_RECORD_PAYLOAD_MAX)
        return lz_error_set(err, -E2BIG, "the %s record does not fit in %zu bytes", lz_record_name(rec->kind),
                            cap < LZ_RECORD_PAYLOAD_MAX ? cap : (size_t)LZ_RECORD_PAYLOAD_MAX);
    *ret_len = w.len;
    return 0;
}

/* ---- decoder ---- */

struct rd {
    const uint8_t *p;
    size_t len, off;
    struct lz_error *err;
};

static int r_fail(struct rd *r, const char *what) {
    return lz_error_set(r->err, -EINVAL, "malformed record at byte %zu: %s", r->off, what);
}

static int r_bytes(struct rd *r, void *out, size_t n) {
    if (n > r->len - r->off)
        return r_fail(r, "truncated");
    memcpy(out, r->p + r->off, n);
    r->off += n;
    return 0;
}

/* LEB128 with at most `bits` significant bits, canonical form only. */
static int r_varint(struct rd *r, unsigned bits, uint64_t *ret) {
    uint64_t v = 0;
    unsigned shift = 0;
    for (;;) {
        if (r->off >= r->len)
            return r_fail(r, "truncated varint");
        uint8_t b = r->p[r->off++];
        uint64_t payload = b & 0x7f;
        if (shift >= bits || (bits - shift < 7 && (payload >> (bits - shift)) != 0))
            return r_fail(r, "varint wider than its field");
        v |= payload << shift;
        if (!(b & 0x80)) {
            /* A last group of 0 after the first adds nothing: an overlong
             * encoding of a shorter varint. */
            if (b == 0 && shift > 0)
                return r_fail(r, "overlong varint");
            *ret = v;
            return 0;
        }
        shift += 7;
    }
}

static int r_u64(struct rd *r, uint64_t *ret) { return r_varint(r, 64, ret); }

static int r_u32(struct rd *r, uint32_t *ret) {
    uint64_t v;
    int e = r_varint(r, 32, &v);
    if (e < 0)
        return e;
    *ret = (uint32_t)v;
    return 0;
}

static int r_i32(struct rd *r, int32_t *ret) {
    uint32_t u;
    int e = r_u32(r, &u);
    if (e < 0)
        return e;
    *ret = (int32_t)((u >> 1) ^ (0u - (u & 1)));
    return 0;
}

static int r_bool(struct rd *r, bool *ret) {
    uint8_t b = 0;
    int e = r_bytes(r, &b, 1);
    if (e < 0)
        return e;
    if (b > 1)
        return r_fail(r, "bool is not 0 or 1");
    *ret = b;
    return 0;
}

/* A length-prefixed string of at most max bytes, checked against the bytes
 * left before anything is allocated; returned NUL-terminated. The caller
 * validates content (check_record). */
static int r_str(struct rd *r, size_t max, char **ret, size_t *ret_len) {
    uint64_t n;
    int e = r_u64(r, &n);
    if (e < 0)
        return e;
    if (n > max)
        return lz_error_set(r->err, -E2BIG,
                            "malformed record at byte %zu: a string of %" PRIu64 " bytes, more than %zu", r->off, n,
                            max);
    if (n > r->len - r->off)
        return r_fail(r, "truncated string");
    char *s = lz_xmalloc((size_t)n + 1);
    memcpy(s, r->p + r->off, (size_t)n);
    s[n] = '\0';
    r->off += (size_t)n;
    *ret = s;
    if (ret_len)
        *ret_len = (size_t)n;
    return 0;
}

static void free_argv(char **argv, size_t argc) {
    if (!argv)
        return;
    for (size_t i = 0; i < argc; i++)
        free(argv[i]);
    free(argv);
}

static int r_argv(struct rd *r, char ***ret, size_t *ret_argc) {
    uint64_t n;
    int e = r_u64(r, &n);
    if (e < 0)
        return e;
    if (n > LZ_RECORD_ARGV_MAX)
        return lz_error_set(r->err, -E2BIG, "malformed record: argv has %" PRIu64 " elements, more than %d", n,
                            LZ_RECORD_ARGV_MAX);
    /* Each element takes at least its one-byte length. */
    if (n > r->len - r->off)
        return r_fail(r, "truncated argv");
    char **argv = lz_xcalloc((size_t)n + 1, sizeof *argv);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        size_t l = 0;
        e = r_str(r, LZ_RECORD_ARGV_BYTES_MAX - total, &argv[i], &l);
        if (e < 0) {
            free_argv(argv, i);
            return e;
        }
        /* Keep NUL-free here: the elements become C strings. */
        if (memchr(argv[i], '\0', l)) {
            free_argv(argv, i + 1);
            return r_fail(r, "an argv element contains a NUL byte");
        }
        total += l;
    }
    *ret = argv;
    *ret_argc = (size_t)n;
    return 0;
}

int lz_record_decode(unsigned kind, const uint8_t *buf, size_t len, struct lz_record *ret, struct lz_error *err) {
    if (!lz_record_name(kind))
        return lz_error_set(err, -EBADMSG, "unknown record kind %u", kind);
    if (len > LZ_RECORD_PAYLOAD_MAX)
        return lz_error_set(err, -E2BIG, "a record payload of %zu bytes, more than %d", len, LZ_RECORD_PAYLOAD_MAX);
    struct rd r = { .p = buf, .len = len, .err = err };
    struct lz_record rec = { .kind = (enum lz_record_kind)kind };
    int e;
    uint32_t u;
    size_t l;
    if ((e = r_bytes(&r, rec.request_id, LZ_RECORD_ID_LEN)) < 0 ||
        (e = r_bytes(&r, rec.session_id, LZ_RECORD_ID_LEN)) < 0)
        return e;
    switch (rec.kind) {
    case LZ_REC_ESCALATION_REQUEST:
        if ((e = r_u64(&r, &rec.request.created_ms)) < 0 || (e = r_u64(&r, &rec.request.expires_ms)) < 0 ||
            (e = r_argv(&r, &rec.request.argv, &rec.request.argc)) < 0 ||
            (e = r_str(&r, LZ_RECORD_PATH_MAX, &rec.request.cwd, &l)) < 0)
            goto fail;
        if (memchr(rec.request.cwd, '\0', l)) {
            e = r_fail(&r, "cwd contains a NUL byte");
            goto fail;
        }
        if ((e = r_str(&r, LZ_RECORD_TEXT_MAX, &rec.request.justification, &l)) < 0)
            goto fail;
        if (memchr(rec.request.justification, '\0', l)) {
            e = r_fail(&r, "justification contains a NUL byte");
            goto fail;
        }
        if ((e = r_u32(&r, &rec.request.timeout_s)) < 0 || (e = r_bool(&r, &rec.request.stdin_wanted)) < 0 ||
            (e = r_bool(&r, &rec.request.terminal)) < 0)
            goto fail;
        break;
    case LZ_REC_REQUEST_ACK:
        if ((e = r_bytes(&r, rec.ack.request_digest, LZ_RECORD_DIGEST_LEN)) < 0 ||
            (e = r_u64(&r, &rec.ack.received_ms)) < 0 || (e = r_u64(&r, &rec.ack.decide_by_ms)) < 0)
            goto fail;
        break;
    case LZ_REC_DEVELOPER_DECISION:
        if ((e = r_u32(&r, &u)) < 0)
            goto fail;
        rec.decision.decision = (enum lz_decision)u;
        if ((e = r_argv(&r, &rec.decision.argv, &rec.decision.argc)) < 0 ||
            (e = r_u64(&r, &rec.decision.decided_ms)) < 0)
            goto fail;
        break;
    case LZ_REC_RESULT_CHUNK: {
        char *data;
        if ((e = r_u64(&r, &rec.chunk.seq)) < 0 || (e = r_u32(&r, &u)) < 0)
            goto fail;
        rec.chunk.stream = (enum lz_stream)u;
        if ((e = r_str(&r, LZ_RECORD_CHUNK_MAX, &data, &rec.chunk.len)) < 0)
            goto fail;
        rec.chunk.data = (uint8_t *)data;
        break;
    }
    case LZ_REC_CHUNK_ACK:
        if ((e = r_u64(&r, &rec.chunk_ack.next_seq)) < 0)
            goto fail;
        break;
    case LZ_REC_RESULT_END:
        if ((e = r_u32(&r, &u)) < 0)
            goto fail;
        rec.end.outcome = (enum lz_outcome)u;
        if ((e = r_i32(&r, &rec.end.exit_status)) < 0 || (e = r_u32(&r, &rec.end.signal)) < 0 ||
            (e = r_u64(&r, &rec.end.chunks)) < 0 || (e = r_u64(&r, &rec.end.ended_ms)) < 0)
            goto fail;
        break;
    case LZ_REC_CANCEL:
        if ((e = r_u32(&r, &u)) < 0)
            goto fail;
        rec.cancel.reason = (enum lz_cancel_reason)u;
        if ((e = r_u64(&r, &rec.cancel.cancelled_ms)) < 0)
            goto fail;
        break;
    case LZ_REC_STDIN_CHUNK: {
        char *data;
        if ((e = r_u64(&r, &rec.stdin_chunk.seq)) < 0 ||
            (e = r_str(&r, LZ_RECORD_CHUNK_MAX, &data, &rec.stdin_chunk.len)) < 0)
            goto fail;
        rec.stdin_chunk.data = (uint8_t *)data;
        if ((e = r_bool(&r, &rec.stdin_chunk.eof)) < 0)
            goto fail;
        break;
    }
    case LZ_REC_HOST_REQUEST:
        /* Each string is checked for a NUL before it is used as a C
         * string (check_record reads it with strlen). */
        if ((e = r_u64(&r, &rec.host.created_ms)) < 0 || (e = r_u64(&r, &rec.host.expires_ms)) < 0 ||
            (e = r_str(&r, LZ_RECORD_HOST_MAX, &rec.host.host, &l)) < 0)
            goto fail;
        if (memchr(rec.host.host, '\0', l)) {
            e = r_fail(&r, "the host contains a NUL byte");
            goto fail;
        }
        if ((e = r_str(&r, LZ_RECORD_TEXT_MAX, &rec.host.justification, &l)) < 0)
            goto fail;
        if (memchr(rec.host.justification, '\0', l)) {
            e = r_fail(&r, "justification contains a NUL byte");
            goto fail;
        }
        break;
    }
    if (r.off != r.len) {
        e = r_fail(&r, "trailing bytes");
        goto fail;
    }
    if ((e = check_record(&rec, err)) < 0)
        goto fail;
    *ret = rec;
    return 0;
fail:
    lz_record_clear(&rec);
    return e;
}

/* ---- signatures and framing ---- */

#define CONTEXT_PREFIX "lazaret/v1/"

/* The signed message: prefix || name || NUL || u32le(len) || payload. */
static uint8_t *signed_message(unsigned kind, const uint8_t *payload, size_t len, size_t *ret_len) {
    const char *name = lz_record_name(kind);
    size_t pl = strlen(CONTEXT_PREFIX), nl = strlen(name);
    size_t n = pl + nl + 1 + 4 + len;
    uint8_t *m = lz_xmalloc(n);
    memcpy(m, CONTEXT_PREFIX, pl);
    memcpy(m + pl, name, nl);
    m[pl + nl] = 0;
    uint32_t l32 = (uint32_t)len;
    for (int i = 0; i < 4; i++)
        m[pl + nl + 1 + i] = (uint8_t)(l32 >> (8 * i));
    if (len)
        memcpy(m + pl + nl + 5, payload, len);
    *ret_len = n;
    return m;
}

int lz_record_sign(const uint8_t sk[crypto_sign_SECRETKEYBYTES], unsigned kind, const uint8_t *payload, size_t len,
                   uint8_t ret_sig[crypto_sign_BYTES]) {
    if (!lz_record_name(kind) || len > LZ_RECORD_PAYLOAD_MAX)
        return -EINVAL;
    size_t mlen;
    _cleanup_free_ uint8_t *m = signed_message(kind, payload, len, &mlen);
    crypto_sign_detached(ret_sig, NULL, m, mlen, sk);
    return 0;
}

int lz_record_verify(const uint8_t pk[crypto_sign_PUBLICKEYBYTES], unsigned kind, const uint8_t *payload, size_t len,
                     const uint8_t sig[crypto_sign_BYTES]) {
    if (!lz_record_name(kind) || len > LZ_RECORD_PAYLOAD_MAX)
        return -EBADMSG;
    size_t mlen;
    _cleanup_free_ uint8_t *m = signed_message(kind, payload, len, &mlen);
    return crypto_sign_verify_detached(sig, m, mlen, pk) == 0 ? 0 : -EBADMSG;
}

int lz_record_seal(const uint8_t sk[crypto_sign_SECRETKEYBYTES], const struct lz_record *rec, uint8_t *buf, size_t cap,
                   size_t *ret_len, struct lz_error *err) {
    if (cap < LZ_RECORD_HDR)
        return lz_error_set(err, -E2BIG, "no room for a record header");
    size_t plen;
    int r = lz_record_encode(rec, buf + LZ_RECORD_HDR, cap - LZ_RECORD_HDR, &plen, err);
    if (r < 0)
        return r;
    buf[0] = LZ_RECORD_FORMAT;
    buf[1] = (uint8_t)rec->kind;
    if ((r = lz_record_sign(sk, rec->kind, buf + LZ_RECORD_HDR, plen, buf + 2)) < 0)
        return lz_error_set(err, r, "cannot sign the %s record", lz_record_name(rec->kind));
    *ret_len = LZ_RECORD_HDR + plen;
    return 0;
}

int lz_record_open(const uint8_t pk[crypto_sign_PUBLICKEYBYTES], const uint8_t *bytes, size_t len, unsigned accept,
                   struct lz_record *ret, struct lz_error *err) {
    if (len > LZ_RECORD_MAX)
        return lz_error_set(err, -EBADMSG, "a record of %zu bytes, more than %d", len, LZ_RECORD_MAX);
    if (len < LZ_RECORD_HDR)
        return lz_error_set(err, -EBADMSG, "a record of %zu bytes is shorter than its header", len);
    if (bytes[0] != LZ_RECORD_FORMAT)
        return lz_error_set(err, -EBADMSG, "record format %u is not %d", bytes[0], LZ_RECORD_FORMAT);
    unsigned kind = bytes[1];
    if (!lz_record_name(kind) || !(accept & LZ_REC_MASK(kind)))
        return lz_error_set(err, -EBADMSG, "record kind %u is not expected from this signer", kind);
    /* Nothing of the payload is parsed before this: the signature covers
     * the name of the kind and the exact payload bytes we hold. */
    if (lz_record_verify(pk, kind, bytes + LZ_RECORD_HDR, len - LZ_RECORD_HDR, bytes + 2) < 0)
        return lz_error_set(err, -EBADMSG, "the %s record's signature does not verify", lz_record_name(kind));
    return lz_record_decode(kind, bytes + LZ_RECORD_HDR, len - LZ_RECORD_HDR, ret, err);
}

void lz_record_digest(const uint8_t *bytes, size_t len, uint8_t ret[LZ_RECORD_DIGEST_LEN]) {
    crypto_hash_sha256(ret, bytes, len);
}

void lz_record_clear(struct lz_record *rec) {
    switch (rec->kind) {
    case LZ_REC_ESCALATION_REQUEST:
        free_argv(rec->request.argv, rec->request.argc);
        free(rec->request.cwd);
        free(rec->request.justification);
        break;
    case LZ_REC_DEVELOPER_DECISION: free_argv(rec->decision.argv, rec->decision.argc); break;
    case LZ_REC_RESULT_CHUNK: free(rec->chunk.data); break;
    case LZ_REC_STDIN_CHUNK: free(rec->stdin_chunk.data); break;
    case LZ_REC_HOST_REQUEST:
        free(rec->host.host);
        free(rec->host.justification);
        break;
    case LZ_REC_REQUEST_ACK:
    case LZ_REC_CHUNK_ACK:
    case LZ_REC_RESULT_END:
    case LZ_REC_CANCEL: break;
    }
    sodium_memzero(rec, sizeof *rec);
}
