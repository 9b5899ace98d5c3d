/* credstream.h — the byte streams of a credential host's connection
 * through the TLS gate (issue 24 §2-§3): the sandbox holds a placeholder
 * (`lzph_` and 32 hex digits) where a profile binds a credential to a
 * host; the gate ends TLS for that host and, in one declared request
 * header, swaps the placeholder for the real value. This module is the
 * part that reads and rewrites the bytes: no I/O, no clock, no logging;
 * the gate feeds it what it reads and writes what it is given.
 *
 * Two directions, one state each per connection:
 *   lz_credreq   client (sandbox) -> server: requests, rewritten;
 *   lz_credscan  server -> client: responses, checked for the value.
 *
 * The request bytes come from an agent Lazaret does not trust and go on
 * to a real server that parses them again: what could be read two ways
 * is refused, and the real value is written into the one header and
 * nowhere else.
 *
 * Requests. Each request head is read whole (httphead.h, bounded by
 * LZ_HTTP_HEAD_MAX) and checked:
 *   - Host (and an absolute-form authority, which httphead makes equal
 *     to Host) is the host, with or without `:443`, ASCII case ignored;
 *   - for each bind whose header field is there: a value that is exactly
 *     prefix placeholder suffix (TEMPLATE), or `Basic ` (scheme case
 *     ignored, one SP) and the canonical padded base64 of
 *     `username:placeholder` (BASIC), is rewritten to the same with the
 *     value; such a field must be the only field of that name;
 *   - the placeholder anywhere else in the head is refused: in another
 *     field, in the declared field in any other form, in the target or a
 *     field name, percent-encoded, or base64-encoded at any alignment
 *     (standard or URL alphabet: `Basic` values, cookies, tokens);
 *   - a declared field whose value does not hold the placeholder goes on
 *     unchanged (the agent's own login still works).
 * The rewritten head is the head as sent with the swapped value spans
 * replaced, every other byte kept. The body (Content-Length or chunked,
 * as httphead found) is passed on as it came while it is scanned for
 * every bind's placeholder: the bytes as sent and, chunked, the payload
 * without its framing, across feeds and chunks. The chunked framing is
 * read strictly: 1 to 16 hex digits, chunk extensions without
 * whitespace (`;name`, `;name=token`, `;name="quoted"`) of at most
 * LZ_CRED_CHUNK_EXT_MAX bytes a line, CRLF everywhere, trailer fields as
 * field lines (at most LZ_CRED_TRAILER_MAX bytes and LZ_HTTP_FIELDS_MAX
 * fields; framing fields and the declared headers refused there). After
 * a body the next bytes are the next request's head (keep-alive,
 * pipelining); after a request with `Connection: close`, more bytes are
 * refused.
 *
 * Pushes (Git hosts). When a bind has push_refs, a request whose path
 * (before '?', percent-decoded, ASCII case ignored) contains
 * `git-receive-pack` must be a POST with a body and no Content-Encoding.
 * Its body is held back (not written to out) until its command list
 * (pktline.h; de-chunked first) is read; then every command's ref must
 * match a pattern of a bind with push_refs (lz_cred_ref_match) and a
 * delete needs that bind's push_delete. All allowed: the held bytes go
 * out and the body streams on. Else the push is refused and
 * lz_credreq_push_report writes the answer git reads.
 *
 * Responses. lz_credscan never lets a whole needle reach the client:
 * each bind's value, for BASIC also base64(`username:value`), and when
 * the value is long enough that it cannot happen by chance, the base64
 * of the value at each of the three alignments (both alphabets). It
 * holds back only the longest end of the stream that is a proper prefix
 * of a needle: nothing while no needle has begun, so streamed responses
 * (server-sent events) do not stall.
 *
 * Errors. lz_credreq_feed returns 0, or a refusal: -EBADMSG (bytes that
 * are not HTTP/1.1 as the gate reads it), -EACCES (a policy refusal),
 * with a one-line reason in why (LZ_CRED_WHY_MAX bytes, printable ASCII,
 * NUL-terminated); or -ENOMEM. A refusal is final: every later call
 * gives it again. On any error out->len is what it was before the call
 * (the bytes of a refused call are not to be sent). Functions that take
 * binds return -EINVAL for a bind this header does not allow.
 *
 * Memory. A lz_credreq holds the head being read (LZ_HTTP_HEAD_MAX), a
 * push's command list and the bytes held with it (LZ_CRED_PUSH_HOLD_MAX)
 * and the trailer line: about 520 KiB at most. out grows by at most the
 * bytes fed, plus what a rewrite adds to the heads completed in the
 * call, plus a released push (LZ_CRED_PUSH_HOLD_MAX); it never grows
 * past LZ_CRED_OUT_MAX (-ENOMEM): the caller drains it (out->len = 0)
 * after each call. lz_credscan holds the longest needle less one byte.
 * Copies of the values are wiped when freed (out is the caller's).
 */
#pragma once

#include "pktline.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LZ_CRED_WHY_MAX 256       /* the reason of a refusal, with its NUL */
#define LZ_CRED_BINDS_MAX 16      /* credentials of one host */
#define LZ_CRED_PLACEHOLDER_MIN 8 /* bytes of [A-Za-z0-9_-] */
#define LZ_CRED_PLACEHOLDER_MAX 64
#define LZ_CRED_VALUE_MIN 8                             /* a shorter secret would cut ordinary responses */
#define LZ_CRED_VALUE_MAX 4096                          /* a long JWT */
#define LZ_CRED_AFFIX_MAX 256                           /* a prefix, suffix or username */
#define LZ_CRED_PUSH_REFS_MAX 64                        /* patterns of one bind */
#define LZ_CRED_CHUNK_EXT_MAX 1024                      /* the extensions of one chunk line */
#define LZ_CRED_TRAILER_MAX 16384                       /* the trailer section of a chunked body */
#define LZ_CRED_PUSH_HOLD_MAX (LZ_PKT_LIST_MAX + 65536) /* body bytes held for a command list */
#define LZ_CRED_OUT_MAX (16u << 20)                     /* out->cap, at most */

enum lz_cred_format {
    LZ_CRED_TEMPLATE = 1, /* prefix placeholder suffix ("Bearer " "", "" "") */
    LZ_CRED_BASIC,        /* "Basic " base64(username ":" placeholder) */
};

/* One credential of the connection's host. Copied by the _new functions:
 * the caller's strings need not outlive the call. */
struct lz_cred_bind {
    const char *header; /* field name (a token, not a framing field), ASCII case ignored */
    enum lz_cred_format format;
    const char *prefix, *suffix; /* TEMPLATE (NULL: ""): visible ASCII and SP, no SP at the ends of the whole */
    const char *username;        /* BASIC: visible ASCII, no ':' */
    const char *placeholder;     /* what the sandbox holds: LZ_CRED_PLACEHOLDER_MIN..MAX bytes of [A-Za-z0-9_-] */
    const uint8_t *value;        /* the real value (secret); TEMPLATE: visible ASCII and inner SP */
    size_t value_len;            /* LZ_CRED_VALUE_MIN..LZ_CRED_VALUE_MAX */
    /* Push policy (Git hosts): NULL/0: pushes not inspected. Patterns as
     * lz_cred_ref_match reads them. */
    const char *const *push_refs;
    size_t n_push_refs;
    bool push_delete; /* may a push delete a ref its patterns allow */
};

/* A growable buffer the caller owns (zero it to start; free(p) at the
 * end). The module appends, reallocating. */
struct lz_credout {
    uint8_t *p;
    size_t len, cap;
};

/* ---- Requests (client -> server) ---- */

struct lz_credreq;

/* host: the one host of binds (a DNS name, as the profile has it). */
int lz_credreq_new(const char *host, const struct lz_cred_bind *binds, size_t n, struct lz_credreq **ret);
void lz_credreq_free(struct lz_credreq *s);

/* Consumes all of in[0..len) and appends to out what is to go to the
 * server (see the top: 0, -EBADMSG, -EACCES or -ENOMEM). */
int lz_credreq_feed(struct lz_credreq *s, const uint8_t *in, size_t len, struct lz_credout *out, char *why);

/* The client closed its side: -EBADMSG if a request was cut in its head
 * or body, the refusal if there was one, else 0. */
int lz_credreq_end(struct lz_credreq *s, char *why);

struct lz_credreq_counts {
    uint64_t requests; /* request heads passed on */
    uint64_t swaps;    /* placeholders swapped for a value */
    uint64_t pushes;   /* pushes whose command list was read (allowed or refused) */
};
void lz_credreq_counts(const struct lz_credreq *s, struct lz_credreq_counts *ret);

/* A command of the last push read, for the audit. */
struct lz_cred_push_cmd {
    enum lz_pkt_kind kind;
    const uint8_t *ref; /* ref_len bytes */
    size_t ref_len;
    const uint8_t *old_id, *new_id; /* id_len lower-case hex digits each */
    size_t id_len;
    bool allowed;
    const char *why; /* NULL when allowed; else "ref not allowed by push_refs", "delete not allowed by
                      * push_delete" or "push refused as a whole" (this one allowed, another not) */
};

/* The commands of the last push whose list was read (counts.pushes went
 * up in that call), in the order sent. Valid from the lz_credreq_feed
 * call that read the list until the next lz_credreq_feed call or
 * lz_credreq_free: one call never reads two lists (a second push's list
 * in the same call is refused). lz_credreq_push_get: -ENOENT for i out
 * of range. */
unsigned lz_credreq_push_n(const struct lz_credreq *s);
int lz_credreq_push_get(const struct lz_credreq *s, unsigned i, struct lz_cred_push_cmd *ret);

/* After a push refused for its refs (-EACCES from lz_credreq_feed, and
 * a list was read): appends the whole HTTP/1.1 answer for git to out:
 * 200, Content-Type application/x-git-receive-pack-result,
 * Content-Length, Connection: close; a body as receive-pack writes it
 * (gitprotocol-pack(5)): with report-status or report-status-v2,
 * `unpack ok` and an `ng REF lazaret: REASON` for every command, then a
 * flush-pkt, all in band-1 pkt-lines when side-band-64k was asked for;
 * with side-band-64k, a final flush-pkt. -ENOENT when the refusal was
 * not such a push's (use lz_cred_forbidden), -ENOMEM. */
int lz_credreq_push_report(const struct lz_credreq *s, struct lz_credout *out);

/* The answer to every other refusal: `HTTP/1.1 403 Forbidden`,
 * Content-Type text/plain, Content-Length, Connection: close, the body
 * `lazaret: refused: WHY\n` (why cut at LZ_CRED_WHY_MAX, bytes outside
 * printable ASCII as '?'). 0 or -ENOMEM. */
int lz_cred_forbidden(const char *why, struct lz_credout *out);

/* ---- Responses (server -> client) ---- */

struct lz_credscan;

int lz_credscan_new(const struct lz_cred_bind *binds, size_t n, struct lz_credscan **ret);
/* Appends to out the bytes safe to send (all but the end that could
 * begin a needle, kept inside); -EACCES when a needle is complete (also
 * across calls): nothing of that call is appended, the refusal is final.
 * -ENOMEM. */
int lz_credscan_feed(struct lz_credscan *s, const uint8_t *in, size_t len, struct lz_credout *out);
/* The server closed: appends the bytes held (no needle is whole in them).
 * 0, -EACCES after a refusal, -ENOMEM. */
int lz_credscan_end(struct lz_credscan *s, struct lz_credout *out);
/* How many bytes are held back now. */
size_t lz_credscan_held(const struct lz_credscan *s);
void lz_credscan_free(struct lz_credscan *s);

/* ---- Ref patterns ---- */

/* A push_refs pattern: `refs/` and components of the bytes a ref name may
 * hold (pktline.h) or '*', none empty, at most LZ_PKT_REF_MAX bytes. */
bool lz_cred_ref_pattern_ok(const char *pattern);

/* Does ref (len bytes) match pattern? Component by component: in a
 * component '*' matches any run of bytes (no '/'); a component that is
 * `**` matches any number of components, at least one when it is the
 * last (`refs/heads/agent` then `/` and `**` matches refs/heads/agent/x
 * and refs/heads/agent/x/y, not refs/heads/agent); all other bytes
 * exactly. */
bool lz_cred_ref_match(const char *pattern, const uint8_t *ref, size_t len);
