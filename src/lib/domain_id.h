/* domain_id.h — Domain ID v1 and Configuration Fingerprint v1.
 *
 * Notation: u32be(n) is n as 4 bytes big-endian; S(x) = u32be(len(x)) || x
 * (x's raw bytes, no terminator); B(b) = one byte 0x01 for true, 0x00 for
 * false; L(x1..xn) = u32be(n) || S(x1) || ... || S(xn); O(x) = 0x00 when x is
 * absent, else 0x01 || S(x). "||" is concatenation; SHA-256 is libsodium's
 * crypto_hash_sha256.
 *
 * Domain ID v1
 * ------------
 *   DomainIdV1 = SHA-256( "lazaret-domain-id-v1" || S(profile) || S(workspace) )
 * The context string is hashed as its 20 raw ASCII bytes with no length
 * prefix and no terminator; profile is the selected profile name and
 * workspace the canonical workspace pathname bytes (no trailing slash).
 * {domain_hash} is the first 12 lowercase hex characters of the ID.
 *
 * Configuration Fingerprint v1
 * ----------------------------
 *   ConfigurationFingerprintV1 = SHA-256(
 *       "lazaret-config-fingerprint-v1"      29 raw bytes, no prefix
 *    || domain_id                            32 raw bytes
 *    || S(data_root)                         canonical Storage Root
 *    || L(default_allow)                     canonical prefixes, deduplicated,
 *    || L(default_deny)                        sorted bytewise (strcmp order)
 *    || B(escalation_enabled)
 *    || O(escalation_socket_dir)             canonical path or absent
 *    || u32be(n_rules) || for each auto_approve rule in file order:
 *           u32be(argc) || S(argv[0]) || ... || B(flags)
 *                                            flags: bit 0 allow_extra_args,
 *                                            bit 1 cwd = "workspace"
 *                                            argv[0] the canonical executable
 *                                            resolved at load, not as written
 *    || S(profile name)
 *    || S(image)
 *    || L(persistent_dirs)                   sorted bytewise
 *    || L(allow_egress) || L(deny_egress)    canonical, deduplicated, sorted
 *    || u32be(n_env) || for each env entry sorted by name (strcmp):
 *           S(name) || 0x01 || S(reference)  for "env:VAR" (the reference
 *                                            text, never the host value), or
 *           S(name) || 0x00 || S(value)      for a literal
 *    || u32be(n_volumes) || for each volume in file order:
 *           S(canonical host) || S(container) || S(mode)
 *                                            mode normalized: "ro" or "rw"
 *                                            ("z" counts as "rw")
 *    || B(ignored_state)
 *    [|| S("host_ca_certificates=false")]   only when off
 *    [|| S("host_tool_paths") || u32be(n) || S(path)...]
 *                                            the set in effect, only when
 *                                            the profile changed the
 *                                            default set
 *    [|| S("egress") || S(preset)            only when the egress policy is
 *        || L(effective allow_hosts)         not the prefix policy alone
 *        || L(deny_hosts)                    (preset "open", no host rule,
 *        || O("A.B.C.D:PORT" resolver) ]     no [network] resolver): rules
 *                                            as lz_hostrule_format writes
 *                                            them, sorted, deduplicated;
 *                                            under "balanced" the preset's
 *                                            rules are in allow_hosts )
 * The workspace enters through domain_id. The egress keys and the resolver
 * change the fingerprint (a changed policy is a new generation) but not the
 * Domain ID: the Domain (its store, its persistent layers) is the same
 * sandbox of the same workspace, whatever it may reach, as with the
 * prefix lists. A resolver taken from the host's /etc/resolv.conf is not
 * configuration and does not enter. Changing the host value behind an
 * env: reference does not change the fingerprint; every other input does.
 */
#pragma once

#include "config.h"
#include "util.h"

#define LZ_DOMAIN_ID_CONTEXT "lazaret-domain-id-v1"
#define LZ_FINGERPRINT_CONTEXT "lazaret-config-fingerprint-v1"
#define LZ_DOMAIN_ID_LEN 32
#define LZ_DOMAIN_HASH_LEN 12

/* Computes DomainIdV1. Returns 0, -EINVAL when a length does not fit in 32
 * bits, or -EIO when libsodium cannot initialize. */
int lz_domain_id_v1(const char *profile, const char *workspace, uint8_t ret_id[static LZ_DOMAIN_ID_LEN]);

/* The 12-character {domain_hash} of an ID, NUL-terminated. */
void lz_domain_hash(const uint8_t id[static LZ_DOMAIN_ID_LEN], char ret[static LZ_DOMAIN_HASH_LEN + 1]);

/* Computes ConfigurationFingerprintV1 of a loaded configuration (uses
 * c->domain_id, which must already be set). Returns 0 or -EINVAL/-EIO. */
int lz_config_fingerprint_v1(const struct lz_config *c, uint8_t ret_fp[static 32]);
