/* record.h — signed mailbox records of the host escalation protocol.
 *
 * Wire form of one record (one mailbox file, at most LZ_RECORD_MAX bytes):
 *
 *     u8 format (LZ_RECORD_FORMAT = 1) | u8 kind | 64-byte Ed25519 signature | payload
 *
 * The signature (libsodium crypto_sign_detached, pure Ed25519) is over
 *
 *     "lazaret/v1/" || record-name || 0x00 || u32 little-endian payload length || payload
 *
 * where record-name is the lower-kebab name of the kind (lz_record_name).
 * The name puts the kind under the signature, so a signature made for one
 * kind (a result-chunk) never verifies as another (an escalation-request);
 * the NUL ends the name so no name/length pair can be read as another.
 * lz_record_open checks the format byte and maps the kind byte to its name
 * (both only select the signed context), verifies the signature over the
 * exact bytes it was given, and only then parses a single field.
 *
 * Payload: a Postcard-style encoding (docs/escalation.md has the table):
 * unsigned integers as LEB128 varints, signed ones zigzag-encoded first,
 * bool as one byte 0 or 1, enums as a varint discriminant, fixed arrays
 * (IDs, digests) as raw bytes, byte strings as a varint length + bytes,
 * vectors as a varint count + elements; no floats, no optional fields.
 * Decoding is strict so that one record has exactly one encoding: a varint
 * with a redundant trailing 0x80..0x00 group, a value wider than its field,
 * a bool other than 0/1, an unknown enum value, trailing bytes, or a
 * violated bound (checked before any allocation) is refused.
 *
 * Every record begins with the Escalation Request ID and the Session ID.
 *
 * Kinds are added, never changed: a new kind is a new name under the
 * signature (so LZ_RECORD_FORMAT stays 1), which an older peer refuses
 * as an unknown kind before it verifies anything. host-request (kind 9,
 * lazaret-escalate --allow-host) is such an addition: the sandbox asks to
 * reach a host by name; the Host Coordinator answers it with the same
 * request-ack, developer-decision and result-end as an escalation-request
 * (no result-chunk but a refusal's reason), and it is one request of its
 * session like any other (request-ID uniqueness, expiry, cancel).
 *
 * What the CALLER must check after lz_record_open (this module cannot):
 *   - the key: use the public key of the signer the schema names for the
 *     kind (sandbox session key for escalation-request, host-request,
 *     chunk-ack, cancel, stdin-chunk;
 *     the Host Coordinator's key for the others), and pass the matching
 *     accept mask;
 *   - session binding: the record's session_id is the registered Client
 *     Session whose key verified it (a key verifies only its own session's
 *     records, but the ID inside is what routes the prompt);
 *   - request-ID uniqueness: an escalation-request whose request_id was
 *     seen before in this Domain generation is a replay and is refused;
 *     every other kind refers to a known, active request_id;
 *   - expiry: created_ms <= now <= expires_ms for a request (of either
 *     kind), with the
 *     window no longer than the Host Coordinator's maximum; sequence
 *     numbers of result-chunk/chunk-ack/stdin-chunk are contiguous and in
 *     their window, and nothing follows a stdin-chunk with eof.
 * Signatures prove only which key signed; see docs/escalation.md for what
 * that means inside one sandbox.
 */
#pragma once

#include "util.h"

#include <sodium.h>

#define LZ_RECORD_FORMAT 1
#define LZ_RECORD_MAX 65536
#define LZ_RECORD_HDR (2 + crypto_sign_BYTES)
#define LZ_RECORD_PAYLOAD_MAX (LZ_RECORD_MAX - LZ_RECORD_HDR)
#define LZ_RECORD_CHUNK_MAX 49152
#define LZ_RECORD_ID_LEN 16
#define LZ_RECORD_DIGEST_LEN 32
#define LZ_RECORD_ARGV_MAX 256         /* elements */
#define LZ_RECORD_ARGV_BYTES_MAX 32768 /* sum of element lengths */
#define LZ_RECORD_PATH_MAX 4096
#define LZ_RECORD_TEXT_MAX 4096 /* justification */
#define LZ_RECORD_TIMEOUT_MAX_S 86400
#define LZ_RECORD_SIGNAL_MAX 64
/* host-request: the rule text (hostrule.h LZ_HOSTRULE_TEXT_MAX). */
#define LZ_RECORD_HOST_MAX 512
/* stdin-chunk records of one request that may wait in req/ at once: the
 * Escalation Client writes seq N only once seq N-8 is gone from req/ (the
 * Host Coordinator takes them strictly in order, one at a time, when the
 * host process's stdin pipe has room), and the Host Coordinator removes
 * any stdin-chunk named outside [next, next + 8). */
#define LZ_RECORD_STDIN_WINDOW 8

enum lz_record_kind {
    LZ_REC_ESCALATION_REQUEST = 1, /* sandbox -> HC */
    LZ_REC_REQUEST_ACK = 2,        /* HC -> sandbox */
    LZ_REC_DEVELOPER_DECISION = 3, /* HC -> sandbox */
    LZ_REC_RESULT_CHUNK = 4,       /* HC -> sandbox */
    LZ_REC_CHUNK_ACK = 5,          /* sandbox -> HC */
    LZ_REC_RESULT_END = 6,         /* HC -> sandbox */
    LZ_REC_CANCEL = 7,             /* sandbox -> HC */
    LZ_REC_STDIN_CHUNK = 8,        /* sandbox -> HC (lazaret-escalate --stdin) */
    LZ_REC_HOST_REQUEST = 9,       /* sandbox -> HC (lazaret-escalate --allow-host) */
};
#define LZ_REC_KIND_MAX 9
#define LZ_REC_MASK(kind) (1u << (kind))
/* The kinds each signer produces (the accept masks for lz_record_open). */
#define LZ_REC_FROM_SANDBOX                                                                                            \
    (LZ_REC_MASK(LZ_REC_ESCALATION_REQUEST) | LZ_REC_MASK(LZ_REC_CHUNK_ACK) | LZ_REC_MASK(LZ_REC_CANCEL) |             \
     LZ_REC_MASK(LZ_REC_STDIN_CHUNK) | LZ_REC_MASK(LZ_REC_HOST_REQUEST))
#define LZ_REC_FROM_HOST                                                                                               \
    (LZ_REC_MASK(LZ_REC_REQUEST_ACK) | LZ_REC_MASK(LZ_REC_DEVELOPER_DECISION) | LZ_REC_MASK(LZ_REC_RESULT_CHUNK) |     \
     LZ_REC_MASK(LZ_REC_RESULT_END))

enum lz_decision {
    LZ_DECISION_APPROVED = 0,      /* the requested argv, as shown */
    LZ_DECISION_EDITED = 1,        /* the developer's edited argv */
    LZ_DECISION_DENIED = 2,        /* argv empty */
    LZ_DECISION_AUTO_APPROVED = 3, /* matched a trusted auto-approval rule */
};

enum lz_stream {
    LZ_STREAM_STDOUT = 1,
    LZ_STREAM_STDERR = 2,
    /* The host process's terminal (route HostProcess): already shown on
     * the session's terminal as it came; the client does not print it. */
    LZ_STREAM_TERMINAL = 3,
};

/* The terminal request states (OR-2). */
enum lz_outcome {
    LZ_OUTCOME_COMPLETED = 0,
    LZ_OUTCOME_DENIED = 1,
    LZ_OUTCOME_TIMED_OUT = 2,
    LZ_OUTCOME_CANCELLED = 3,
    LZ_OUTCOME_FAILED = 4,
};

enum lz_cancel_reason {
    LZ_CANCEL_INTERRUPTED = 0,    /* the requester was interrupted */
    LZ_CANCEL_CLIENT_TIMEOUT = 1, /* the requester stopped waiting */
};

struct lz_record {
    enum lz_record_kind kind;
    uint8_t request_id[LZ_RECORD_ID_LEN];
    uint8_t session_id[LZ_RECORD_ID_LEN];
    union {
        struct {
            uint64_t created_ms, expires_ms; /* Unix time; expires_ms > created_ms */
            char **argv;                     /* 1..LZ_RECORD_ARGV_MAX UTF-8, NUL-free */
            size_t argc;
            char *cwd;           /* absolute, UTF-8 */
            char *justification; /* UTF-8, may be empty */
            uint32_t timeout_s;  /* 0 = the Host Coordinator's default */
            bool stdin_wanted;   /* forward the requester's stdin */
            bool terminal;       /* the requester is on a terminal: run on the session's (route HostProcess) */
        } request;
        struct {
            /* SHA-256 of the complete escalation-request record as read. */
            uint8_t request_digest[LZ_RECORD_DIGEST_LEN];
            uint64_t received_ms;
            uint64_t decide_by_ms; /* > received_ms */
        } ack;
        struct {
            enum lz_decision decision;
            char **argv; /* what will run; empty iff DENIED */
            size_t argc;
            uint64_t decided_ms;
        } decision;
        struct {
            uint64_t seq; /* 0, 1, 2, ... per request */
            enum lz_stream stream;
            uint8_t *data; /* 1..LZ_RECORD_CHUNK_MAX bytes */
            size_t len;
        } chunk;
        struct {
            uint64_t next_seq; /* chunks 0..next_seq-1 received */
        } chunk_ack;
        struct {
            enum lz_outcome outcome;
            int32_t exit_status; /* 0..255; 0 unless COMPLETED by exit */
            uint32_t signal;     /* 0 or the terminating signal (<= 64) */
            uint64_t chunks;     /* result-chunks sent in all */
            uint64_t ended_ms;
        } end;
        struct {
            enum lz_cancel_reason reason;
            uint64_t cancelled_ms;
        } cancel;
        struct {
            uint64_t seq;  /* 0, 1, 2, ... per request */
            uint8_t *data; /* 0..LZ_RECORD_CHUNK_MAX bytes; 0 only with eof */
            size_t len;
            bool eof; /* the last chunk: the requester's stdin ended */
        } stdin_chunk;
        struct {
            uint64_t created_ms, expires_ms; /* as for an escalation-request */
            /* The host rule asked for, as the sandbox wrote it
             * ("example.com:443"): 1..LZ_RECORD_HOST_MAX bytes of printable
             * ASCII (0x21..0x7e). Only its form is checked here; what it
             * names is the Host Coordinator's check (lz_hostrule_parse). */
            char *host;
            char *justification; /* UTF-8, may be empty */
        } host;
    };
};

/* "escalation-request", "request-ack", ...; NULL for an unknown kind. */
const char *lz_record_name(unsigned kind);

/* The seq that names rec's mailbox file: the chunk's seq for result-chunk
 * and stdin-chunk, 0 for every other kind. */
uint64_t lz_record_seq(const struct lz_record *rec);

/* Encodes rec's payload into buf. Refuses (-EINVAL, -E2BIG with a message)
 * any record the decoder would refuse, so every encoded record decodes. */
int lz_record_encode(const struct lz_record *rec, uint8_t *buf, size_t cap, size_t *ret_len, struct lz_error *err);

/* Decodes a payload of the given kind. Parses unauthenticated bytes only
 * for tests and fuzzing: production code calls lz_record_open, which
 * verifies first. On success *ret owns its allocations (lz_record_clear). */
int lz_record_decode(unsigned kind, const uint8_t *buf, size_t len, struct lz_record *ret, struct lz_error *err);

/* Signs payload bytes of the given kind (context as above). */
int lz_record_sign(const uint8_t sk[crypto_sign_SECRETKEYBYTES], unsigned kind, const uint8_t *payload, size_t len,
                   uint8_t ret_sig[crypto_sign_BYTES]);
/* 0 when sig is pk's signature of payload as kind; -EBADMSG otherwise. */
int lz_record_verify(const uint8_t pk[crypto_sign_PUBLICKEYBYTES], unsigned kind, const uint8_t *payload, size_t len,
                     const uint8_t sig[crypto_sign_BYTES]);

/* Encodes, signs and frames rec into buf (cap >= its size; LZ_RECORD_MAX
 * always suffices). */
int lz_record_seal(const uint8_t sk[crypto_sign_SECRETKEYBYTES], const struct lz_record *rec, uint8_t *buf, size_t cap,
                   size_t *ret_len, struct lz_error *err);

/* Verify-then-decode of one framed record (the bytes read once from the
 * mailbox file). accept is a mask of LZ_REC_MASK(kind) the caller expects
 * from this signer; other kinds are refused before verification. Errors:
 * -EBADMSG (framing, kind or signature), -EINVAL / -E2BIG (payload). */
int lz_record_open(const uint8_t pk[crypto_sign_PUBLICKEYBYTES], const uint8_t *bytes, size_t len, unsigned accept,
                   struct lz_record *ret, struct lz_error *err);

/* SHA-256 of a complete framed record (for request-ack's request_digest). */
void lz_record_digest(const uint8_t *bytes, size_t len, uint8_t ret[LZ_RECORD_DIGEST_LEN]);

/* Frees what lz_record_decode/lz_record_open allocated and zeroes rec.
 * Only for decoded records: an encoder's input owns nothing here. */
void lz_record_clear(struct lz_record *rec);
