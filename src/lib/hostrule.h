/* hostrule.h — host-name rules of the egress policy by name (issue 23),
 * and the one canonical form of a host name.
 *
 * Canonical host name (lz_hostname_canon): what the policy compares, byte
 * for byte. ASCII only; upper case is folded to lower case; one trailing
 * dot (the root) is removed; then every label must be 1..63 bytes of
 * letters, digits and '-', not starting or ending with '-' (RFC 1123 LDH;
 * IDNs are written in their punycode form "xn--...", which is LDH); the
 * name is at most 253 bytes (255 on the wire); the last label must not be
 * all digits (an IPv4 literal or a numeric TLD is not a host name: use
 * allow_egress for addresses). Anything else is refused, never repaired:
 * '_', '*', '\', a second trailing dot, an empty label, a space, a byte
 * >= 0x80, a NUL. Text escapes ("a\.b", "\065") have no meaning here: the
 * backslash is a refused byte, and on the wire (dnsmsg.h) a label holding
 * '.' or '\' is refused the same way, so two spellings can never name one
 * host differently for the policy and the upstream resolver.
 *
 * A rule, as a profile writes it:
 *     NAME             the host NAME exactly ("api.anthropic.com")
 *     *.SUFFIX         every name strictly below SUFFIX, at any depth
 *                      ("*.githubusercontent.com" matches
 *                      "raw.githubusercontent.com" and "a.b.githubusercontent.com",
 *                      not "githubusercontent.com" nor "xgithubusercontent.com")
 *     ...:P[,P...]     only on these TCP ports (1..65535, at most
 *                      LZ_HOSTRULE_PORTS_MAX, no ranges); without it, every port
 * NAME and SUFFIX are canonicalised as above. Refused: "*", "*.", a '*'
 * anywhere but as the whole first label ("a*.b.c", "a.*.c", "**.b.c"), and
 * a wildcard over a single label ("*.com", "*.test"): it would allow a
 * whole top-level domain, i.e. any server a hostile agent registers a name
 * for. A wildcard over a public suffix of more labels ("*.co.uk") is not
 * detected (no public-suffix list); lazaret.toml(5) says so.
 *
 * Decision (lz_hostrule_decide), for a canonical name: if any deny rule
 * matches, the name is denied, whatever the allow rules say (deny wins,
 * exact or wildcard alike); otherwise the name is allowed if an allow rule
 * matches, on the union of the matching allow rules' ports (every port
 * when one of them names none); otherwise it is not allowed. Deny rules
 * name no ports (LZ_HOSTRULE_NO_PORTS): "deny this host on port 25 only"
 * would be an allow on the others, which is the allow list's job.
 *
 * Pure functions, no allocation; every input is bounded (a rule's text at
 * LZ_HOSTRULE_TEXT_MAX bytes).
 */
#pragma once

#include "util.h"

#include <stdbool.h>
#include <stdint.h>

#define LZ_HOSTNAME_MAX 253      /* canonical text, without the trailing dot */
#define LZ_HOSTNAME_LABEL_MAX 63 /* RFC 1035 */
#define LZ_HOSTRULE_PORTS_MAX 8  /* ports one rule may name */
#define LZ_HOSTRULE_TEXT_MAX 512 /* longest rule text looked at */
#define LZ_HOSTPORTS_MAX 64      /* ports a decision may union */

/* Parse flags */
#define LZ_HOSTRULE_NO_PORTS 1u /* a deny rule: ":PORT" is refused */

struct lz_hostrule {
    char name[LZ_HOSTNAME_MAX + 1]; /* canonical; the suffix (without "*.") when wildcard */
    bool wildcard;
    uint8_t n_ports;                       /* 0: every port */
    uint16_t ports[LZ_HOSTRULE_PORTS_MAX]; /* ascending, no duplicates */
};

/* What an allowed name may reach. */
struct lz_hostports {
    bool all; /* every port (then n is 0) */
    uint16_t n;
    uint16_t ports[LZ_HOSTPORTS_MAX]; /* ascending, no duplicates */
};

enum lz_host_verdict {
    LZ_HOST_UNLISTED = 0, /* no rule matches: refused */
    LZ_HOST_ALLOWED,
    LZ_HOST_DENIED, /* a deny rule matches */
};

/* Canonicalises the len bytes at in (no NUL needed; a NUL inside is
 * refused) into ret (LZ_HOSTNAME_MAX + 1 bytes, NUL-terminated).
 * -EINVAL with err naming what is wrong; ret untouched on failure. */
int lz_hostname_canon(const char *in, size_t len, char ret[static LZ_HOSTNAME_MAX + 1], struct lz_error *err);

/* Parses one rule (NUL-terminated text); flags: LZ_HOSTRULE_NO_PORTS.
 * -EINVAL with a message that quotes the rule and says what to write. */
int lz_hostrule_parse(const char *text, unsigned flags, struct lz_hostrule *ret, struct lz_error *err);

/* Writes the rule back as text ("*.example.com:443,8443"). */
int lz_hostrule_format(const struct lz_hostrule *r, char *buf, size_t cap);

/* Does the rule match the canonical name (ports aside)? */
bool lz_hostrule_match(const struct lz_hostrule *r, const char *canon);

/* The decision for a canonical name (see the top). ret_ports is filled
 * when the verdict is LZ_HOST_ALLOWED. Returns the verdict, or -E2BIG when
 * the matching allow rules name more than LZ_HOSTPORTS_MAX distinct ports
 * (the configuration check refuses such rule sets: lz_hostrule_check). */
int lz_hostrule_decide(const struct lz_hostrule *allow, size_t n_allow, const struct lz_hostrule *deny, size_t n_deny,
                       const char *canon, struct lz_hostports *ret_ports);

/* Checks a rule set as the configuration will: at most LZ_HOSTPORTS_MAX
 * distinct ports over all allow rules (so no decision can exceed it). */
int lz_hostrule_check(const struct lz_hostrule *allow, size_t n_allow, struct lz_error *err);

/* Is addr/port reachable under ports? */
bool lz_hostports_has(const struct lz_hostports *p, uint16_t port);
