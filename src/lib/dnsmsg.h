/* dnsmsg.h — a strict, bounded DNS message codec (RFC 1035, EDNS0 RFC 6891)
 * for the resolver of the egress policy by name (issue 23).
 *
 * Both directions carry bytes Lazaret does not trust: queries come from the
 * Agent Sandbox, responses from the host's resolver (and whoever answers
 * it). Every read is checked against the message's length first; nothing
 * is allocated; every count is capped (LZ_DNS_*_MAX below); the work done
 * per message is bounded by its length times a constant (a name costs at
 * most LZ_DNS_PTR_HOPS pointer hops and 255 bytes).
 *
 * Names on the wire. A name is decoded into its uncompressed wire form
 * (length-prefixed labels and the root's 0, at most 255 bytes). A label
 * length byte 0x40..0xBF (extended/reserved label types, RFC 6891 §5) is
 * refused. A compression pointer (0xC0) must point inside the message,
 * past the header, and strictly before the start of the name segment it
 * sits in: a pointer to itself or into its own segment is a LOOP, one
 * past itself is FORWARD, one into the header or past the end is RANGE;
 * at most LZ_DNS_PTR_HOPS pointers per name. Because every hop goes
 * strictly backward, no loop can exist at all; the hop bound bounds the
 * work. A query's one name sits right after the header, so any pointer in
 * it is refused. Names are compared ASCII case-insensitively (a label
 * length is at most 63, below 'A', so folding the whole wire form is
 * exact).
 *
 * Query (lz_dns_parse_query): a header with QR=0, OPCODE=QUERY, TC=0;
 * exactly one question; no answer or authority records; at most one
 * additional record, which must be an EDNS0 OPT with the root as owner,
 * version 0 and well-formed options; no byte after it. These make the
 * parse fail with a reason (the resolver answers FORMERR, NOTIMP for an
 * opcode: lz_dns_reason_rcode). A well-formed query that cannot be
 * answered — class other than IN, or a name with no canonical host form
 * (hostrule.h: LDH labels; a '.' or '\' byte inside a label, '_', a byte
 * >= 0x80, the root name itself) — parses, with q->refuse set: the
 * resolver answers REFUSED with the question echoed, as a response to a
 * question should be (a client that matches the answer's question to its
 * own would discard one without it).
 * The canonical name q->name is what the host-name policy matches; the
 * client's own spelling (its case, for DNS 0x20) is only echoed back.
 *
 * Response (lz_dns_parse_response), against the query Lazaret sent: same
 * ID, QR=1, OPCODE=QUERY, exactly the same question (name case-insensitive,
 * type, class IN); TC=1 is a reason of its own (retry over TCP). The
 * answer section's IN records of type CNAME and A are collected (at most
 * LZ_DNS_RR_MAX; further ones are counted in `ignored` and dropped, which
 * only ever removes addresses), the others skipped after their bounds are
 * checked; authority and additional records are checked and skipped,
 * except that a second OPT is refused; no byte may follow. A TTL with the
 * top bit set counts as 0 (RFC 2181 §8). An A record's RDATA is exactly 4
 * bytes; a CNAME's RDATA exactly one name.
 *
 * CNAME chain (lz_dns_chain_walk): from the query name, follow the one
 * CNAME owned by the current name (two for one owner: refused), at most
 * LZ_DNS_CHAIN_MAX links, a name seen twice is a loop; then keep the A
 * records owned by the last name only. Records about other names are never
 * answered (they are what an off-path or hostile resolver would inject).
 *
 * Responses Lazaret builds (lz_dns_build_*): ID, RD and the question as the
 * client sent them, QR=1, RA=1, AA=0, with an OPT (payload size
 * LZ_DNS_UDP_OURS, version 0, no options) when the query had one. An
 * answer is the chain's CNAMEs then its A records, every TTL set to one
 * value (the filter's clamped lifetime), owners compressed to the question
 * or the previous CNAME target. Over UDP a message is at most the client's
 * payload size capped to LZ_DNS_UDP_OURS (512 without EDNS): an answer
 * that does not fit is sent with TC=1, its CNAMEs and the A records that
 * fit (none when the chain does not fit), and the client asks again over
 * TCP (2-byte length framing: lz_dns_tcp_*) or, if it never does (busybox,
 * older musl), uses those addresses, each of them learned.
 *
 * Errors: parse functions return 0 or -EBADMSG and, when why is non-NULL,
 * store the reason (lz_dns_reason_str). Out parameters are untouched on
 * failure, except the (large, caller-provided) answer of
 * lz_dns_parse_response, which is left empty (n = 0).
 */
#pragma once

#include "hostrule.h"

#include <stdbool.h>
#include <stdint.h>

#define LZ_DNS_HDR 12
#define LZ_DNS_WIRE_NAME_MAX 255 /* RFC 1035 §3.1, with the root's 0 */
#define LZ_DNS_MSG_MAX 65535     /* TCP's 2-byte length */
#define LZ_DNS_UDP_PLAIN 512     /* without EDNS0 */
#define LZ_DNS_UDP_OURS 1232     /* the payload size Lazaret sends and advertises (no IP fragmentation) */
#define LZ_DNS_PTR_HOPS 16       /* compression pointers followed per name */
#define LZ_DNS_RR_MAX 64         /* CNAME and A records collected from one answer section */
#define LZ_DNS_CHAIN_MAX 8       /* CNAME links from the query name */
/* The largest answer Lazaret builds: header, question, the chain, the A
 * records and the OPT. */
#define LZ_DNS_BUILD_MAX                                                                                               \
    (LZ_DNS_HDR + LZ_DNS_WIRE_NAME_MAX + 4 + LZ_DNS_CHAIN_MAX * (2 + 10 + LZ_DNS_WIRE_NAME_MAX) +                      \
     LZ_DNS_RR_MAX * (2 + 10 + 4) + 11)

enum {
    LZ_DNS_T_A = 1,
    LZ_DNS_T_NS = 2,
    LZ_DNS_T_CNAME = 5,
    LZ_DNS_T_SOA = 6,
    LZ_DNS_T_PTR = 12,
    LZ_DNS_T_MX = 15,
    LZ_DNS_T_TXT = 16,
    LZ_DNS_T_AAAA = 28,
    LZ_DNS_T_SRV = 33,
    LZ_DNS_T_OPT = 41,
    LZ_DNS_T_SVCB = 64,
    LZ_DNS_T_HTTPS = 65,
    LZ_DNS_T_ANY = 255,
    LZ_DNS_CLASS_IN = 1,
};

enum {
    LZ_DNS_NOERROR = 0,
    LZ_DNS_FORMERR = 1,
    LZ_DNS_SERVFAIL = 2,
    LZ_DNS_NXDOMAIN = 3,
    LZ_DNS_NOTIMP = 4,
    LZ_DNS_REFUSED = 5,
};

enum lz_dns_reason {
    LZ_DNS_OK = 0,
    LZ_DNS_R_SHORT,       /* shorter than its header, or a field runs past the end */
    LZ_DNS_R_LONG,        /* longer than LZ_DNS_MSG_MAX */
    LZ_DNS_R_DIRECTION,   /* QR=1 in a query, QR=0 in a response */
    LZ_DNS_R_OPCODE,      /* OPCODE other than QUERY */
    LZ_DNS_R_TC,          /* TC=1 (a query may not set it; a response: ask again over TCP) */
    LZ_DNS_R_QDCOUNT,     /* not exactly one question */
    LZ_DNS_R_SECTIONS,    /* a query with answer/authority records or an additional one that is not OPT */
    LZ_DNS_R_LABEL,       /* a label length byte 0x40..0xBF (extended label type / label > 63) */
    LZ_DNS_R_NAME_LONG,   /* a name longer than 255 bytes */
    LZ_DNS_R_PTR_RANGE,   /* a compression pointer into the header or past the end */
    LZ_DNS_R_PTR_FORWARD, /* a compression pointer past itself */
    LZ_DNS_R_PTR_LOOP,    /* a compression pointer into its own name segment */
    LZ_DNS_R_PTR_HOPS,    /* more than LZ_DNS_PTR_HOPS pointers in one name */
    LZ_DNS_R_OPT,         /* a malformed OPT, or two of them */
    LZ_DNS_R_OPT_VERSION, /* EDNS version other than 0 */
    LZ_DNS_R_TRAILING,    /* bytes after the last record */
    LZ_DNS_R_CLASS,       /* question class other than IN (query: q->refuse) */
    LZ_DNS_R_NAME_BYTES,  /* a name with no canonical host form (query: q->refuse) */
    LZ_DNS_R_ID,          /* a response to another query ID */
    LZ_DNS_R_QUESTION,    /* a response to another question */
    LZ_DNS_R_RDATA,       /* an A not 4 bytes long, a CNAME not exactly one name */
    LZ_DNS_R_CNAME_MULTI, /* two CNAMEs for one owner */
    LZ_DNS_R_CNAME_LOOP,  /* a CNAME chain that comes back to a name */
    LZ_DNS_R_CNAME_LONG,  /* more than LZ_DNS_CHAIN_MAX links */
    LZ_DNS_R_MAX,         /* not a reason */
};

struct lz_dns_query {
    uint16_t id;
    uint16_t flags;                      /* the header's flags as received (RD, CD) */
    uint8_t qname[LZ_DNS_WIRE_NAME_MAX]; /* the client's wire name (its case); qname_len 0: none */
    uint16_t qname_len;
    uint16_t qtype, qclass;
    bool edns;                      /* an OPT was present */
    bool edns_do;                   /* its DO bit */
    uint16_t udp_size;              /* its payload size (0 without EDNS) */
    enum lz_dns_reason refuse;      /* LZ_DNS_OK, LZ_DNS_R_CLASS or LZ_DNS_R_NAME_BYTES */
    char name[LZ_HOSTNAME_MAX + 1]; /* canonical (hostrule.h) when refuse is LZ_DNS_OK, else "" */
};

struct lz_dns_rr {
    uint16_t type; /* LZ_DNS_T_A or LZ_DNS_T_CNAME */
    uint32_t ttl;  /* top bit set: 0 */
    uint16_t owner_len, target_len;
    uint8_t owner[LZ_DNS_WIRE_NAME_MAX];
    uint8_t target[LZ_DNS_WIRE_NAME_MAX]; /* CNAME */
    uint32_t addr;                        /* A, host byte order */
};

struct lz_dns_answer {
    unsigned rcode; /* with the OPT's extended bits */
    uint16_t n;
    uint32_t ignored; /* CNAME/A records past LZ_DNS_RR_MAX, dropped */
    struct lz_dns_rr rr[LZ_DNS_RR_MAX];
};

struct lz_dns_chain {
    uint8_t n_cname;
    uint8_t cname[LZ_DNS_CHAIN_MAX]; /* indices into the answer's rr, from the query name on */
    uint8_t n_a;
    uint8_t a[LZ_DNS_RR_MAX]; /* indices of the A records owned by the chain's last name */
    uint32_t min_ttl;         /* smallest TTL of those records (0 when none) */
};

const char *lz_dns_reason_str(enum lz_dns_reason r);
/* The RCODE a resolver answers a query that failed to parse with. */
unsigned lz_dns_reason_rcode(enum lz_dns_reason r);
/* The ID of a message, 0 when it is shorter than 2 bytes (for a FORMERR). */
uint16_t lz_dns_peek_id(const uint8_t *buf, size_t len);

int lz_dns_parse_query(const uint8_t *buf, size_t len, struct lz_dns_query *ret, enum lz_dns_reason *why);
/* sent: the query Lazaret sent upstream (lz_dns_build_query, parsed). */
int lz_dns_parse_response(const uint8_t *buf, size_t len, const struct lz_dns_query *sent, struct lz_dns_answer *ret,
                          enum lz_dns_reason *why);
/* qname/qname_len: the query's wire name. */
int lz_dns_chain_walk(const struct lz_dns_answer *a, const uint8_t *qname, size_t qname_len, struct lz_dns_chain *ret,
                      enum lz_dns_reason *why);
bool lz_dns_name_eq(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);

/* A query for the canonical name, as Lazaret sends it upstream: RD=1, one
 * question of class IN, an OPT advertising LZ_DNS_UDP_OURS. -EINVAL for a
 * name that is not canonical, -ENOSPC when cap is too small. */
int lz_dns_build_query(uint16_t id, const char *canon, uint16_t qtype, uint8_t *buf, size_t cap, size_t *ret_len);
/* A response without records: rcode LZ_DNS_NOERROR is NODATA. A query with
 * qname_len 0 gives a header-only response (FORMERR for an unparsable
 * query: only its ID is known). tcp: no UDP size limit. */
int lz_dns_build_rcode(const struct lz_dns_query *q, unsigned rcode, bool tcp, uint8_t *buf, size_t cap,
                       size_t *ret_len);
/* The filtered answer: the chain's CNAMEs and A records (ch, indices into
 * a), every TTL set to ttl; NOERROR. -ENOSPC when cap is too small
 * (LZ_DNS_BUILD_MAX always suffices). */
/* How many of the chain's A records an answer to q carries: all of them,
 * or over UDP the most that fit the client's size with the chain (0 when
 * not even the chain fits). The resolver learns only those. */
size_t lz_dns_answer_room(const struct lz_dns_query *q, const struct lz_dns_answer *a, const struct lz_dns_chain *ch,
                          bool tcp);
int lz_dns_build_answer(const struct lz_dns_query *q, const struct lz_dns_answer *a, const struct lz_dns_chain *ch,
                        uint32_t ttl, bool tcp, uint8_t *buf, size_t cap, size_t *ret_len);

/* TCP framing (RFC 1035 §4.2.2): a 2-byte big-endian length, then the
 * message. _frame writes both; _next finds the first complete message in
 * buf: 1 with it (and the bytes it used), 0 when more bytes are needed,
 * -EBADMSG when the length announced is shorter than a header. */
int lz_dns_tcp_frame(const uint8_t *msg, size_t len, uint8_t *buf, size_t cap, size_t *ret_len);
int lz_dns_tcp_next(const uint8_t *buf, size_t len, const uint8_t **ret_msg, size_t *ret_msg_len, size_t *ret_used);
