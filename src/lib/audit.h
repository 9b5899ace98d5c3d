/* audit.h — the Domain's audit: one append-only, hash-chained log in the
 * Domain Store of two kinds of rows: one per escalation request and its end
 * state (table audit, store version 2), and one per network decision that
 * changes what the sandbox can reach by name (table audit_net, store
 * version 3; store.h). Both kinds share one chain: one seq space, one
 * head, one genesis hash; the rows of the two tables interleave in seq
 * order and lz_audit_verify walks them in that order.
 *
 * Who writes, who reads
 * ---------------------
 * The Host Coordinator appends one row when a request reaches its end state
 * (lz_audit_append on its open store, h->st), and one per network decision
 * of its resolver (lz_audit_append_net, from its own thread on the same
 * store). `lazaret audit` reads the rows through a read-only connection
 * (lz_audit_load), also while the Domain runs, and verifies the chain
 * (lz_audit_verify).
 *
 * A row (struct lz_audit_entry, the columns of table audit)
 * ---------------------------------------------------------
 *   seq              1, 2, 3, ... in append order, no gaps (assigned here)
 *   gen              the Domain generation that handled the request
 *   request_id       the Escalation Request ID (16 bytes; stored as 32 hex)
 *   session_id       the Client Session ID (16 bytes; stored as 32 hex)
 *   received_ms      when the Host Coordinator read the request (Unix ms)
 *   decided_by       "none" | "rule" | "developer"
 *   decided_ref      decided_by "rule": the 1-based index of the
 *                    [[escalation.auto_approve]] rule in the generation's
 *                    configuration; decision "session-approved": the seq of
 *                    the row whose "approved-for-session" it reused; else 0
 *   decision         "none" (no decision was made: cancelled or failed
 *                    before one, prompt timed out), "auto-approved",
 *                    "approved", "approved-for-session" (the developer's
 *                    [s]), "session-approved" (matched an earlier [s] of
 *                    the same Client Session), "edited" (the edited argv
 *                    was approved), "denied" (also Enter/Escape alone, [q])
 *   end_state        the request's terminal phase (OR-2, record.h
 *                    enum lz_outcome): "completed", "denied", "timed-out",
 *                    "cancelled", "failed"
 *   argv             the argv the sandbox asked for
 *   edited_argv      the argv that was approved after an edit, or absent
 *                    (NULL in the table) when there was no edit
 *   executable       the canonical host path that ran or would have run
 *                    ("" when never resolved)
 *   executable_sha256  its SHA-256 taken when the request was resolved
 *                    (stored as 64 hex, "" when absent)
 *   cwd              the host working directory ("" when never resolved)
 *   exit_status      0..255 when the host process exited, else -1
 *   signal           the signal that ended it (1..64), else 0
 *   output_bytes     stdout + stderr bytes of the host process
 *   ended_ms         when the request reached its end state (Unix ms)
 *   prev_hash        row_hash of row seq-1; for row 1 the genesis hash
 *   row_hash         SHA-256 of the row's canonical encoding (below)
 *
 * Byte strings in the table (argv, edited_argv, executable, cwd)
 * ---------------------------------------------------------------
 * argv elements are bytes the agent chose; host paths may be any bytes. Each
 * is stored as its lz_escape() rendering (escape.h, flags 0): printable
 * ASCII and visibly-drawing UTF-8 as themselves, everything else as \xNN or
 * \u{XXXX}, a backslash doubled. That rendering is injective and
 * lz_unescape() recovers the exact bytes, so nothing is lost; the table is
 * safe to dump on a terminal; and an argv is a JSON array of strings
 * (["/usr/bin/make", "-j\x1b[2J"]), as is edited_argv. The reader accepts
 * only what lz_escape itself produces (one stored form per value): any
 * other text in these columns breaks the chain at that row.
 *
 * The canonical encoding and row_hash
 * -----------------------------------
 *   row_hash = SHA-256(enc)
 *   enc = "lazaret/v1/audit-row" 0x00
 *         I(seq) I(gen) R16(request_id) R16(session_id) I(received_ms)
 *         S(decided_by) I(decided_ref) S(decision) S(end_state)
 *         V(argv) O(edited_argv)
 *         S(executable) H(executable_sha256) S(cwd)
 *         I(exit_status) I(signal) I(output_bytes) I(ended_ms)
 *         R32(prev_hash)
 * where
 *   I(x)    8 bytes, x as a two's-complement big-endian int64
 *   S(b)    u64 big-endian length of b || the bytes of b (the raw bytes,
 *           not their stored rendering; enum values as their names above)
 *   V(l)    u64 big-endian element count || S(e) for each element
 *   O(l)    0x00 when absent, or 0x01 || V(l)
 *   H(d)    0x00 when absent, or 0x01 || the 32 digest bytes
 *   Rn(b)   the n raw bytes (IDs and hashes, not their hex)
 * Every variable-length field is length-prefixed and every other one has a
 * fixed width, so no two different rows have the same encoding.
 *
 * A network row (struct lz_audit_net_entry, the columns of table audit_net)
 * ------------------------------------------------------------------------
 *   seq              as above: the same sequence as the escalation rows
 *   gen              the Domain generation whose resolver decided
 *   at_ms            when it decided (Unix ms)
 *   event            "learned" (routes to the answer's addresses on its
 *                    ports), "refused" (no rule allows the name; never
 *                    forwarded), "denied" (a deny rule matches it),
 *                    "filtered" (addresses of an answer dropped), "limited"
 *                    (a per-Domain bound was hit), "allowed" (the developer
 *                    allowed a host rule for the session), "suppressed"
 *                    (further rows of this kind in this generation are not
 *                    recorded)
 *   name             the canonical host name or the rule text
 *                    ("*.example.com:443"), "" when none
 *   addrs            IPv4 addresses, each in inet_ntop's dotted-quad form
 *                    (no leading zeros), joined by ","; "" when none; at
 *                    most LZ_AUDIT_NET_ADDRS_MAX, in the order given
 *   ports            "tcp/443,8443", "tcp/" "*" (every port; written
 *                    apart here only because C comments cannot hold it)
 *                    or ""
 *   detail           why / the TTL / which bound
 *   prev_hash, row_hash  as above
 * name, ports and detail are printable ASCII (0x20..0x7e; name and ports
 * without a space), so the stored text is the value itself and is safe on a
 * terminal; lz_audit_append_net refuses anything else (-EINVAL, the field
 * named), and a stored value outside that form (a control byte, a NUL, an
 * address not in its one dotted-quad form, a bound exceeded) breaks the
 * chain at its row when read.
 *
 *   enc = "lazaret/v1/audit-net-row" 0x00
 *         I(seq) I(gen) I(at_ms) S(event) S(name) V(addrs) S(ports)
 *         S(detail) R32(prev_hash)
 * with the encoders above; V(addrs) is the count and each address as S of
 * its dotted-quad text (as stored: "198.51.100.7").
 *
 * No two rows of either kind share an encoding: every encoding opens with
 * its kind's NUL-terminated domain-separation prefix, and neither prefix is
 * a prefix of the other ("lazaret/v1/audit-" continues with "row" 0x00 or
 * "net-row" 0x00), so the kind is fixed by the first 18 bytes; within a
 * kind, the fields are length-prefixed or of fixed width, as above. seq is
 * bound in both, so a row cannot be moved to another place in the chain,
 * nor from one table to the other, without its hash changing.
 *
 * The genesis hash (prev_hash of row 1) binds the chain to its Domain:
 *   SHA-256("lazaret/v1/audit-genesis" 0x00 || the Domain ID as 64 lowercase
 *           hex characters)
 * so rows copied into another Domain's store do not verify there.
 *
 * The chain head: meta key "audit_head" = "<seq> <row_hash hex>" of the
 * last row, written in the append's transaction. It makes the deletion of
 * the last rows visible, which the chain alone cannot show. It is the last
 * row of either table: deleting the last network row shows as deleting the
 * last escalation row does.
 *
 * What the chain proves, and what not
 * -----------------------------------
 * The Domain Store is host-private (the sandbox cannot reach it). The chain
 * is keyless: it detects a row changed, removed, inserted or reordered by
 * anything that did not recompute every later hash and the head (a mistake,
 * a tool, a careless edit, a partial restore), and reports the first such
 * row. Someone who can write the file as the developer can rewrite the whole
 * chain consistently; nothing inside one file can prevent that. The
 * triggers on the table refuse UPDATE and DELETE to every connection that
 * does not drop them first.
 *
 * Appending never hides a break: neither append verifies, each chains
 * onto the head (or onto the last row when that is newer), so a broken or
 * shortened chain stays broken at the same row and lz_audit_verify reports
 * it; a request is never left out of the audit because an earlier row was
 * damaged.
 */
#pragma once

#include "record.h" /* enum lz_outcome, LZ_RECORD_ID_LEN */
#include "store.h"
#include "util.h"

#define LZ_AUDIT_HASH_LEN 32
/* Bounds an appended row must keep (the record's own are smaller). */
#define LZ_AUDIT_ARGV_MAX 4096           /* elements */
#define LZ_AUDIT_BYTES_MAX (1024 * 1024) /* all byte strings of a row */
/* A bound on what reading one store's audit may hold (rows of both kinds). */
#define LZ_AUDIT_ROWS_MAX 1000000
/* Bounds of a network row. */
#define LZ_AUDIT_NET_NAME_MAX 260   /* bytes */
#define LZ_AUDIT_NET_ADDRS_MAX 32   /* addresses */
#define LZ_AUDIT_NET_PORTS_MAX 256  /* bytes */
#define LZ_AUDIT_NET_DETAIL_MAX 256 /* bytes */
/* The store versions that brought each table (store.h, LZ_STORE_VERSION). */
#define LZ_AUDIT_STORE_VERSION 2      /* table audit */
#define LZ_AUDIT_NET_STORE_VERSION 3  /* table audit_net */
#define LZ_AUDIT_TLS_STORE_VERSION 4  /* its event 'tls-refused' */
#define LZ_AUDIT_CRED_STORE_VERSION 5 /* its events 'credential-refused', 'git-push' */

enum lz_audit_decider {
    LZ_AUDIT_BY_NONE,
    LZ_AUDIT_BY_RULE,
    LZ_AUDIT_BY_DEVELOPER,
};

enum lz_audit_decision {
    LZ_AUDIT_DECISION_NONE,
    LZ_AUDIT_AUTO_APPROVED,
    LZ_AUDIT_APPROVED,
    LZ_AUDIT_APPROVED_FOR_SESSION,
    LZ_AUDIT_SESSION_APPROVED,
    LZ_AUDIT_EDITED,
    LZ_AUDIT_DENIED,
};

/* What the Host Coordinator appends. Pointers are borrowed; NULL executable
 * or cwd means "". */
struct lz_audit_entry {
    int64_t gen;
    uint8_t request_id[LZ_RECORD_ID_LEN];
    uint8_t session_id[LZ_RECORD_ID_LEN];
    int64_t received_ms;
    enum lz_audit_decider decided_by;
    int64_t decided_ref;
    enum lz_audit_decision decision;
    enum lz_outcome end_state;
    const char *const *argv; /* argc NUL-terminated elements */
    size_t argc;
    const char *const *edited_argv; /* NULL: not edited */
    size_t edited_argc;
    const char *executable;
    bool has_sha256;
    uint8_t executable_sha256[LZ_AUDIT_HASH_LEN];
    const char *cwd;
    int exit_status;      /* 0..255, or -1 */
    int signal;           /* 1..64, or 0 */
    int64_t output_bytes; /* >= 0 */
    int64_t ended_ms;     /* 0: now */
};

enum lz_audit_net_event {
    LZ_AUDIT_NET_LEARNED = 1,        /* a name's answer was learned: routes to its addresses on its ports */
    LZ_AUDIT_NET_REFUSED,            /* a name no rule allows was asked for (never forwarded) */
    LZ_AUDIT_NET_DENIED,             /* a name a deny rule matches was asked for */
    LZ_AUDIT_NET_FILTERED,           /* addresses of an answer dropped (rebinding, host address, deny prefix) */
    LZ_AUDIT_NET_LIMITED,            /* a per-Domain bound was hit */
    LZ_AUDIT_NET_ALLOWED,            /* the developer allowed a host rule for the session (escalation) */
    LZ_AUDIT_NET_SUPPRESSED,         /* further rows of this kind in this generation are not recorded (the bound) */
    LZ_AUDIT_NET_TLS_REFUSED,        /* the TLS gate refused a connection (name: its server name; detail: why) */
    LZ_AUDIT_NET_CREDENTIAL_REFUSED, /* the gate refused a request to a credential's host (detail: why) */
    LZ_AUDIT_NET_GIT_PUSH,           /* a ref a push updated through the gate, or one it refused (detail) */
};

/* What the resolver appends. Pointers are borrowed; NULL name, ports or
 * detail means "". */
struct lz_audit_net_entry {
    int64_t gen;
    int64_t at_ms; /* Unix ms; 0: now */
    enum lz_audit_net_event event;
    const char *name;      /* canonical host name or rule text ("*.example.com:443"), "" when none; at most 260 bytes */
    const uint32_t *addrs; /* IPv4, host byte order; at most 32 */
    size_t n_addrs;
    const char *ports;  /* "tcp/443,8443", "tcp/" "*" (every port), or "" */
    const char *detail; /* why / ttl / which bound; printable ASCII, at most 256 bytes */
};

enum lz_audit_kind {
    LZ_AUDIT_ESCALATION, /* table audit: e and the *_text renderings */
    LZ_AUDIT_NET,        /* table audit_net: net and addrs_text */
};

/* One stored row as read: the entry of its kind (its pointers owned by the
 * row; the other kind's entry all zero), the chain fields, and why it could
 * not be decoded (problem non-NULL: the entry is partial and the chain is
 * broken at this row). */
struct lz_audit_row {
    int64_t seq;
    struct lz_audit_entry e;
    uint8_t prev_hash[LZ_AUDIT_HASH_LEN];
    uint8_t row_hash[LZ_AUDIT_HASH_LEN];
    /* The stored renderings, as read (for display: already escaped). */
    char *argv_text, *edited_argv_text, *executable_text, *cwd_text;
    char *problem;
    enum lz_audit_kind kind;
    /* kind LZ_AUDIT_NET: name, ports and detail as stored (never NULL;
     * printable ASCII unless problem says otherwise), the addresses decoded
     * (n_addrs 0 when the column is unreadable), and the stored column. */
    struct lz_audit_net_entry net;
    char *addrs_text;
};

struct lz_audit_log {
    char domain_id[65];
    /* < LZ_AUDIT_STORE_VERSION: a store without either table (no rows);
     * LZ_AUDIT_STORE_VERSION: without audit_net (escalation rows only). */
    int store_version;
    struct lz_audit_row *rows; /* both kinds, in seq order */
    size_t n;
    bool has_head; /* meta audit_head */
    int64_t head_seq;
    uint8_t head_hash[LZ_AUDIT_HASH_LEN];
    char *head_problem; /* audit_head present but malformed */
};

const char *lz_audit_decider_name(enum lz_audit_decider d);
const char *lz_audit_decision_name(enum lz_audit_decision d);
const char *lz_audit_end_name(enum lz_outcome o);
/* "learned", "refused", "denied", "filtered", "limited", "allowed",
 * "suppressed"; NULL out of range. */
const char *lz_audit_net_event_name(enum lz_audit_net_event e);

/* Appends e as the next row, in its own write transaction (or in the
 * caller's, when one is open): reads the head, computes seq, prev_hash and
 * row_hash, inserts the row and moves the head. Returns 0 and the row's
 * seq in *ret_seq (may be NULL). -EINVAL for an entry out of its bounds
 * (the message says which field). */
int lz_audit_append(struct lz_store *st, const struct lz_audit_entry *e, int64_t *ret_seq, struct lz_error *err);
/* The same for a network row: the next seq of the one chain, whichever
 * table its predecessor is in. -EINVAL for an entry out of its bounds or
 * with a byte outside its field's form (the message names the field).
 * Like every use of one store connection (struct lz_db keeps its
 * transaction state unlocked), a caller on another thread than the store's
 * other users serialises its calls with theirs. */
int lz_audit_append_net(struct lz_store *st, const struct lz_audit_net_entry *e, int64_t *ret_seq,
                        struct lz_error *err);

/* Reads every row of both tables (merged in seq order), the head and the
 * Domain ID, in one read transaction. A row that does not decode is returned with its problem
 * set, not as an error. -EFBIG beyond LZ_AUDIT_ROWS_MAX rows. */
int lz_audit_read(struct lz_store *st, struct lz_audit_log *ret, struct lz_error *err);
void lz_audit_log_clear(struct lz_audit_log *log);
#define _cleanup_audit_log_ _cleanup_(lz_audit_log_clear)

/* Opens the store of Domain `id` under data_root read-only, without the
 * Domain flock (a running Domain is read as it is), and reads it.
 * -ENOENT when the Domain or its store does not exist. */
int lz_audit_load(const char *data_root, const char *id, struct lz_audit_log *ret, struct lz_error *err);

/* Verifies the chain of log: 0 when intact; -EBADMSG with *ret_first_bad
 * (may be NULL) the 1-based row number of the first broken row and err
 * "audit chain broken at row N: <why>". A missing row N is reported as N:
 * a gap in seq, or rows cut off after the last one that the head records
 * (then N = the number of rows read + 1). */
int lz_audit_verify(const struct lz_audit_log *log, int64_t *ret_first_bad, struct lz_error *err);

/* The row hash of e at seq with prev_hash (the canonical encoding above). */
void lz_audit_row_hash(int64_t seq, const struct lz_audit_entry *e, const uint8_t prev_hash[LZ_AUDIT_HASH_LEN],
                       uint8_t ret[LZ_AUDIT_HASH_LEN]);
/* The row hash of network entry e (its encoding above; addresses in the
 * order given). */
void lz_audit_net_row_hash(int64_t seq, const struct lz_audit_net_entry *e, const uint8_t prev_hash[LZ_AUDIT_HASH_LEN],
                           uint8_t ret[LZ_AUDIT_HASH_LEN]);
/* The genesis hash of a Domain (64 hex). */
void lz_audit_genesis(const char *domain_id, uint8_t ret[LZ_AUDIT_HASH_LEN]);
