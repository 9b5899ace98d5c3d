/* httphead.h — a strict, bounded reader of an HTTP/1.1 request head (RFC
 * 9112 §2-§6, RFC 9110 §5) for the TLS gate (issue 24): on a host a
 * profile binds a credential to, the gate ends TLS, swaps a per-Domain
 * placeholder for the real credential in one declared request header and
 * forwards the head to the real server.
 *
 * The bytes come from a client Lazaret does not trust and go on to a
 * server that parses them again, so the reader accepts only what every
 * HTTP/1.1 parser reads the same way: where RFC 9112 lets a recipient
 * choose between rejecting and repairing (bare LF, obs-fold, whitespace
 * before a colon, a repeated Content-Length), it rejects. Nothing is
 * allocated, there is no recursion, the work is linear in the length,
 * which is bounded (LZ_HTTP_HEAD_MAX); the parse uses about 2 KiB of
 * stack (the field table).
 *
 * Request line: `method SP request-target SP HTTP/1.1 CRLF`, nothing
 * before it (no leading empty line, RFC 9112 §2.2 lets a server skip
 * one; a gate parsing the first request must not). The method is a token
 * (case-sensitive); CONNECT (authority-form) is refused, and so is PRI
 * (RFC 9113 §3.4: the method of the HTTP/2 connection preface, not a
 * method of HTTP/1.1). The target is one of
 *   origin-form    `/path?query`;
 *   absolute-form  `http://authority/path?query` or `https://…` (scheme
 *                  case-insensitive), no userinfo, a non-empty authority
 *                  that must equal the Host field's value (ASCII case
 *                  ignored): RFC 9112 §3.2.2 has the server take the
 *                  authority and ignore Host, so a mismatch would let the
 *                  gate check one host and the server serve another;
 *   asterisk-form  `*`, with OPTIONS only.
 * A target is made of visible ASCII (0x21-0x7e) except '#' (a fragment is
 * never sent); what is between is not checked further (percent-encoding,
 * the character classes of RFC 3986): clients send `|`, `{`, `^` raw in
 * queries and servers take them. The version is exactly `HTTP/1.1`
 * (HTTP/1.0 and others refused: the framing rules below are 1.1's).
 *
 * Field lines: `name ":" OWS value OWS CRLF`; the name a token, nothing
 * between it and the colon; the value of visible ASCII, SP, HTAB and
 * obs-text (0x80-0xff), no other control (NUL, a bare CR, DEL). A line
 * starting with SP or HTAB (obs-fold, or whitespace before the first
 * field) is refused. Lines end in CRLF: a bare LF, or a CR not followed by
 * LF, is refused. The head ends at the first empty line; what follows
 * (the body) is not read.
 *
 * Bounds: the head, with its final CRLF CRLF, at most LZ_HTTP_HEAD_MAX
 * bytes; at most LZ_HTTP_FIELDS_MAX field lines; a line (request line or
 * field line, without its CRLF) at most LZ_HTTP_LINE_MAX bytes. More is
 * refused.
 *
 * Framing and connection fields, against request smuggling (RFC 9112
 * §6.3, §11.2) and protocol switches the gate does not follow:
 *   Host               exactly one, a non-empty value of the bytes of
 *                      uri-host [":" port] (letters, digits, "-._~%",
 *                      sub-delims, ':', '[', ']');
 *   Content-Length     at most one field (a repeated one is refused even
 *                      with the same value), 1 to 18 digits, nothing else
 *                      (no list, no sign);
 *   Transfer-Encoding  at most one field, its value exactly `chunked`
 *                      (case-insensitive): other codings and lists
 *                      (`gzip, chunked`, `chunked, chunked`, `identity`)
 *                      are refused — request senders use none of them
 *                      and each one is a decoder the server has and the
 *                      gate does not; with Content-Length: refused;
 *   Expect             at most one, `100-continue` (case-insensitive);
 *   Upgrade, HTTP2-Settings   refused (no h2c or WebSocket through the
 *                      gate for now);
 *   Connection         a comma-separated list of tokens; `upgrade`
 *                      refused; `close` clears keep_alive; naming Host,
 *                      Content-Length or Transfer-Encoding (a hop-by-hop
 *                      header a proxy between would strip, changing the
 *                      framing) refused.
 * A field whose name is one of these with '_' for '-' (Content_Length) is
 * refused: some servers (CGI-style environments) read it as the real one.
 * The body framing follows RFC 9112 §6.3: chunked, else the length, else
 * none (a request without either has no body).
 *
 * Incremental use. A prefix of a valid head never fails: with too few
 * bytes the parse returns -EAGAIN and *ret_need, the length the stream
 * must reach before it can parse (len < *ret_need <= LZ_HTTP_HEAD_MAX: the
 * bytes that complete the line and an empty line after it; more may be
 * needed). A refusal is reported as soon as the bytes seen allow no valid
 * continuation: a byte that cannot be where it is, a line or a head past
 * its bound, a field line that breaks a rule above once it is complete.
 *
 * Errors: lz_http_head_parse returns 0 (a complete, valid head), -EAGAIN
 * (more bytes needed: *ret_need) or -EBADMSG with the reason in *why
 * (lz_http_reason_str). ret is written only on success, *ret_need only on
 * -EAGAIN, *why only on -EBADMSG; ret_need and why may be NULL.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LZ_HTTP_HEAD_MAX 65536   /* the head with its final CRLF CRLF */
#define LZ_HTTP_LINE_MAX 16384   /* one request or field line, without its CRLF */
#define LZ_HTTP_FIELDS_MAX 128   /* field lines */
#define LZ_HTTP_LENGTH_DIGITS 18 /* of Content-Length: below 10^18, no overflow */

enum lz_http_reason {
    LZ_HTTP_OK = 0,
    LZ_HTTP_R_TOO_LONG,        /* a head longer than LZ_HTTP_HEAD_MAX */
    LZ_HTTP_R_LINE_TOO_LONG,   /* a line longer than LZ_HTTP_LINE_MAX */
    LZ_HTTP_R_TOO_MANY_FIELDS, /* more than LZ_HTTP_FIELDS_MAX field lines */
    LZ_HTTP_R_BARE_LF,         /* a line ending in LF without CR */
    LZ_HTTP_R_BARE_CR,         /* a CR not followed by LF */
    LZ_HTTP_R_REQUEST_LINE,    /* a request line without its three parts, or other whitespace in it */
    LZ_HTTP_R_METHOD,          /* an empty method or a byte that is not a token's */
    LZ_HTTP_R_CONNECT,         /* CONNECT (authority-form) */
    LZ_HTTP_R_H2_PREFACE,      /* PRI: the HTTP/2 connection preface */
    LZ_HTTP_R_TARGET,          /* a target of no accepted form, or with a byte not allowed */
    LZ_HTTP_R_ASTERISK,        /* asterisk-form with a method other than OPTIONS */
    LZ_HTTP_R_VERSION,         /* a version other than HTTP/1.1 */
    LZ_HTTP_R_OBS_FOLD,        /* a line starting with SP or HTAB */
    LZ_HTTP_R_FIELD_NAME,      /* an empty name, one with a byte not a token's, no colon, a '_' alias */
    LZ_HTTP_R_SPACE_COLON,     /* whitespace between a field name and its colon */
    LZ_HTTP_R_FIELD_VALUE,     /* a control character (NUL, DEL, ...) in a field value */
    LZ_HTTP_R_HOST_MISSING,    /* no Host field */
    LZ_HTTP_R_HOST_DUP,        /* Host twice */
    LZ_HTTP_R_HOST,            /* an empty Host value or a byte not allowed in it */
    LZ_HTTP_R_HOST_MISMATCH,   /* an absolute-form authority other than Host */
    LZ_HTTP_R_LENGTH,          /* a Content-Length other than 1 to 18 digits */
    LZ_HTTP_R_LENGTH_DUP,      /* Content-Length twice (same value or not) */
    LZ_HTTP_R_TE,              /* a Transfer-Encoding other than one `chunked` */
    LZ_HTTP_R_LENGTH_AND_TE,   /* both Content-Length and Transfer-Encoding */
    LZ_HTTP_R_EXPECT,          /* an Expect other than one 100-continue */
    LZ_HTTP_R_UPGRADE,         /* Upgrade, HTTP2-Settings or Connection: upgrade */
    LZ_HTTP_R_CONNECTION,      /* a malformed Connection list, or one naming a framing field */
    LZ_HTTP_R_MAX,             /* not a reason */
};

/* Bytes of the input: buf + off, len of them. */
struct lz_http_span {
    uint32_t off;
    uint32_t len;
};

struct lz_http_field {
    struct lz_http_span name;  /* the token as sent (case kept) */
    struct lz_http_span value; /* without the OWS around it; may be empty */
};

enum lz_http_form {
    LZ_HTTP_FORM_ORIGIN = 1, /* /path?query */
    LZ_HTTP_FORM_ABSOLUTE,   /* http[s]://authority/path?query */
    LZ_HTTP_FORM_ASTERISK,   /* * (OPTIONS) */
};

enum lz_http_framing {
    LZ_HTTP_BODY_NONE = 1, /* no Content-Length, no Transfer-Encoding */
    LZ_HTTP_BODY_LENGTH,   /* Content-Length: content_length bytes (may be 0) */
    LZ_HTTP_BODY_CHUNKED,  /* Transfer-Encoding: chunked */
};

struct lz_http_head {
    size_t used;                /* bytes of the head, its final CRLF CRLF included */
    struct lz_http_span method; /* the token */
    struct lz_http_span target; /* the request-target as sent */
    struct lz_http_span path;   /* of the target: from its path on (origin-form: all of it; absolute-form:
                                 * after the authority, empty for `http://host`; asterisk: empty) */
    struct lz_http_span host;   /* the Host value, exact bytes */
    enum lz_http_form form;
    enum lz_http_framing framing;
    uint64_t content_length; /* when framing is LZ_HTTP_BODY_LENGTH, else 0 */
    bool keep_alive;         /* false with Connection: close */
    bool expect_continue;    /* Expect: 100-continue */
    unsigned n_fields;       /* 0..LZ_HTTP_FIELDS_MAX, in order */
    struct lz_http_field fields[LZ_HTTP_FIELDS_MAX];
};

const char *lz_http_reason_str(enum lz_http_reason r);

/* The request head at the start of buf (see the top). */
int lz_http_head_parse(const uint8_t *buf, size_t len, struct lz_http_head *ret, size_t *ret_need,
                       enum lz_http_reason *why);

/* The index of the first field at or after from whose name is name (a
 * NUL-terminated string, ASCII case ignored), or -ENOENT. buf is the
 * input h was parsed from. */
int lz_http_field_find(const struct lz_http_head *h, const uint8_t *buf, const char *name, unsigned from);

/* How many fields are named name (ASCII case ignored). */
unsigned lz_http_field_count(const struct lz_http_head *h, const uint8_t *buf, const char *name);

/* Does placeholder (NUL-terminated, non-empty) occur in buf (len bytes,
 * any content)? Its first offset in *ret_off (may be NULL) when it does.
 * An empty placeholder is never found. Not constant-time: the placeholder
 * is not a secret (the credential is). */
bool lz_http_find_placeholder(const uint8_t *buf, size_t len, const char *placeholder, size_t *ret_off);
