/* tlshello.h — a strict, bounded reader of a TLS ClientHello (RFC 8446
 * §4.1.2, RFC 5246 §7.4.1.2) for the TLS gate (issue 24 §1): the name
 * check of TCP/443 connections to learned addresses.
 *
 * The gate peeks (MSG_PEEK) at the first bytes a sandboxed client sends and
 * lets the connection through only if the server name it asks for is one
 * the policy allows; the bytes come from a client Lazaret does not trust.
 * Every read is checked against the length of its container first (the
 * record, the handshake message, the extension block, the extension, the
 * list inside it); nothing is allocated; there is no recursion; the work
 * is linear in the length, which is bounded (LZ_TLS_PEEK_MAX). The parser
 * uses about LZ_TLS_HELLO_MAX + 8 KiB of stack.
 *
 * Records. The input is the start of the TCP stream: TLS records of
 * content type handshake (22), record version 0x0301..0x0303, each 1 to
 * LZ_TLS_RECORD_MAX bytes long, whose fragments concatenated hold exactly
 * one handshake message, a ClientHello (type 1) of at most
 * LZ_TLS_HELLO_MAX bytes with its 4-byte header. The hello may span up to
 * LZ_TLS_RECORDS_MAX records (RFC 8446 §5.1 lets a sender fragment any
 * handshake message; every client we know sends it in one record, a
 * post-quantum hybrid key share such as X25519MLKEM768 included, ~1.8 KB):
 * more records are refused, which also refuses the record-splitting trick
 * that hides a name from readers that look at one record only. The last
 * record must end where the hello ends (the client sends nothing else
 * before the server answers; what follows that record — a
 * change_cipher_spec, early data — is not looked at). A first byte that is
 * not 22 (plain HTTP, an SSLv2-style hello) is refused.
 *
 * Incremental use. A prefix of a valid stream never fails: with too few
 * bytes the parse returns -EAGAIN and the total number of bytes the stream
 * must have before the answer can change (*ret_need > len, and always <=
 * LZ_TLS_PEEK_MAX, so a peek buffer of that size is enough). A stream
 * that no continuation can make valid fails at once, without waiting for
 * the rest: a wrong record type or version, a record length out of range,
 * a handshake type other than client_hello, a hello longer than
 * LZ_TLS_HELLO_MAX or shorter than the smallest possible one, a
 * legacy_version other than 0x0303, a record that runs past the hello's
 * end, a record beyond LZ_TLS_RECORDS_MAX.
 *
 * The ClientHello. legacy_version 0x0303 (TLS 1.0 and 1.1, RFC 8996, and
 * SSL 3 are refused; a TLS 1.3 client sends 0x0303 too); a session ID of
 * at most 32 bytes; a non-empty, even cipher-suite list; a non-empty
 * compression list that holds null (0); then either nothing (a hello
 * without extensions) or an extension block that fills the rest exactly.
 * No extension type may appear twice (GREASE types, RFC 8701, are types
 * like any other); pre_shared_key must be the last one (RFC 8446 §4.2.11).
 * Extensions read:
 *   server_name (0, RFC 6066 §3): a non-empty list that fills the
 *       extension; every entry of type host_name (0) — another type is
 *       refused; at most one host_name. The name must have a canonical
 *       host form (hostrule.h: LDH labels, case folded, one trailing dot
 *       dropped); an IPv4 literal (digits and dots, a digit at least) or anything with
 *       a ':' (an IPv6 literal, bracketed or not) is refused with a reason
 *       of its own (RFC 6066 forbids literals; the gate checks names, and
 *       addresses are allow_egress's job).
 *   application_layer_protocol_negotiation (16, RFC 7301): a non-empty
 *       list that fills the extension, of non-empty names; at most
 *       LZ_TLS_ALPN_MAX names of at most LZ_TLS_ALPN_NAME_MAX bytes each
 *       (every registered protocol ID is far shorter) or the hello is
 *       refused: the gate must see every protocol the client offers.
 *   supported_versions (43, RFC 8446 §4.2.1): a list of 1 to 127
 *       versions that fills the extension. Without it the client offers
 *       TLS 1.2 only. The hello must offer TLS 1.2 (0x0303) or TLS 1.3
 *       (0x0304); other values (older versions, drafts, GREASE) are
 *       skipped.
 *   pre_shared_key (41), early_data (42), encrypted_client_hello (0xfe0d):
 *       noted as present; their contents are not read.
 * Every other extension is skipped after its length is checked.
 *
 * Errors: lz_tls_hello_parse returns 0 (a complete ClientHello), -EAGAIN
 * (more bytes needed: *ret_need) or -EBADMSG with the reason in *why
 * (lz_tls_reason_str). ret is written only on success, *ret_need only on
 * -EAGAIN, *why only on -EBADMSG; ret_need and why may be NULL.
 */
#pragma once

#include "hostrule.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LZ_TLS_RECORD_HDR 5      /* type, version, length */
#define LZ_TLS_RECORD_MAX 16384  /* a record's fragment, RFC 8446 §5.1 */
#define LZ_TLS_HELLO_MAX 16384   /* the ClientHello with its 4-byte handshake header */
#define LZ_TLS_RECORDS_MAX 4     /* records one ClientHello may span */
#define LZ_TLS_ALPN_MAX 16       /* ALPN protocol names kept (more: refused) */
#define LZ_TLS_ALPN_NAME_MAX 32  /* bytes of one ALPN protocol name (longer: refused) */
#define LZ_TLS_HELLO_BODY_MIN 41 /* version, random, empty session ID, one suite, one compression method */
/* The most bytes a parse can ask for: every record header and the hello. */
#define LZ_TLS_PEEK_MAX (LZ_TLS_RECORDS_MAX * LZ_TLS_RECORD_HDR + LZ_TLS_HELLO_MAX)

#define LZ_TLS_CT_HANDSHAKE 22
#define LZ_TLS_HS_CLIENT_HELLO 1
#define LZ_TLS_VERSION_12 0x0303
#define LZ_TLS_VERSION_13 0x0304

enum {
    LZ_TLS_EXT_SERVER_NAME = 0,
    LZ_TLS_EXT_ALPN = 16,
    LZ_TLS_EXT_PRE_SHARED_KEY = 41,
    LZ_TLS_EXT_EARLY_DATA = 42,
    LZ_TLS_EXT_SUPPORTED_VERSIONS = 43,
    LZ_TLS_EXT_KEY_SHARE = 51,
    LZ_TLS_EXT_ECH = 0xfe0d,
};

/* What the client offers (lz_tls_hello.versions). */
#define LZ_TLS_V12 1u
#define LZ_TLS_V13 2u

enum lz_tls_reason {
    LZ_TLS_OK = 0,
    LZ_TLS_R_NOT_HANDSHAKE,  /* a record of another content type (not TLS, or not a handshake) */
    LZ_TLS_R_RECORD_VERSION, /* a record version other than 0x0301..0x0303 */
    LZ_TLS_R_RECORD_LENGTH,  /* a record of 0 or more than LZ_TLS_RECORD_MAX bytes */
    LZ_TLS_R_RECORDS,        /* a ClientHello over more than LZ_TLS_RECORDS_MAX records */
    LZ_TLS_R_NOT_HELLO,      /* a handshake message other than client_hello */
    LZ_TLS_R_TOO_LONG,       /* a ClientHello longer than LZ_TLS_HELLO_MAX */
    LZ_TLS_R_TOO_SHORT,      /* a ClientHello shorter than LZ_TLS_HELLO_BODY_MIN */
    LZ_TLS_R_TRAILING,       /* bytes after the hello in its last record, or after its extensions */
    LZ_TLS_R_LENGTH,         /* a length that runs past its container */
    LZ_TLS_R_VERSION,        /* legacy_version not 0x0303, or neither TLS 1.2 nor 1.3 offered */
    LZ_TLS_R_SESSION_ID,     /* a session ID longer than 32 bytes */
    LZ_TLS_R_CIPHERS,        /* an empty or odd-length cipher-suite list */
    LZ_TLS_R_COMPRESSION,    /* an empty compression list, or one without null */
    LZ_TLS_R_EXT_DUP,        /* an extension type twice */
    LZ_TLS_R_PSK_LAST,       /* pre_shared_key not the last extension */
    LZ_TLS_R_SNI_LIST,       /* a malformed server_name list (empty, not filling it, a type other than host_name) */
    LZ_TLS_R_SNI_MULTI,      /* more than one host_name */
    LZ_TLS_R_SNI_NAME,       /* a host_name with no canonical host form (hostrule.h) */
    LZ_TLS_R_SNI_IP,         /* an IP address literal as host_name */
    LZ_TLS_R_ALPN,           /* a malformed ALPN list (empty, not filling it, an empty name) */
    LZ_TLS_R_ALPN_LIMIT,     /* more than LZ_TLS_ALPN_MAX ALPN names, or one longer than LZ_TLS_ALPN_NAME_MAX */
    LZ_TLS_R_VERSIONS,       /* a malformed supported_versions list */
    LZ_TLS_R_MAX,            /* not a reason */
};

struct lz_tls_alpn {
    uint8_t len;                         /* 1..LZ_TLS_ALPN_NAME_MAX */
    char name[LZ_TLS_ALPN_NAME_MAX + 1]; /* the bytes as sent, then a NUL (a NUL inside is possible: use len) */
};

struct lz_tls_hello {
    size_t used;                   /* bytes of the records that hold the hello (what follows is not read) */
    uint8_t n_records;             /* 1..LZ_TLS_RECORDS_MAX */
    uint16_t legacy_version;       /* always LZ_TLS_VERSION_12 */
    unsigned versions;             /* LZ_TLS_V12 | LZ_TLS_V13: what the client offers (never 0) */
    bool has_sni;                  /* a host_name was sent */
    char sni[LZ_HOSTNAME_MAX + 1]; /* canonical (hostrule.h) when has_sni, else "" */
    bool ech;                      /* encrypted_client_hello: sni is the outer (public) name, not the real one */
    bool psk;                      /* pre_shared_key: the client offers to resume a session */
    bool early_data;               /* early_data: 0-RTT data may follow the hello */
    bool has_alpn;                 /* an ALPN extension was sent (then n_alpn >= 1) */
    uint8_t n_alpn;                /* protocol names, in the client's order */
    struct lz_tls_alpn alpn[LZ_TLS_ALPN_MAX];
};

const char *lz_tls_reason_str(enum lz_tls_reason r);

/* The ClientHello at the start of a TLS stream (see the top). */
int lz_tls_hello_parse(const uint8_t *buf, size_t len, struct lz_tls_hello *ret, size_t *ret_need,
                       enum lz_tls_reason *why);

/* A ClientHello's body alone (after the handshake header: legacy_version
 * to the end of the extensions), exactly len bytes: 0 or -EBADMSG. The
 * record fields of ret (used, n_records) are 0. For callers that
 * reassemble the handshake themselves, and for the fuzzer. */
int lz_tls_hello_parse_body(const uint8_t *body, size_t len, struct lz_tls_hello *ret, enum lz_tls_reason *why);

/* Does the hello offer this ALPN protocol ("http/1.1")? */
bool lz_tls_hello_offers_alpn(const struct lz_tls_hello *h, const char *proto);
