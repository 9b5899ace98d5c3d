/* pktline.h — a strict, bounded reader of the command list a `git push`
 * sends (gitprotocol-pack(5) "Reference Update Request", carried as the
 * body of the POST to .../git-receive-pack in smart HTTP,
 * gitprotocol-http(5)) for the TLS gate (issue 24): on a Git host the gate
 * reads which refs a push updates and lets it through only if the profile
 * allows every one.
 *
 * The bytes come from a client Lazaret does not trust and go on to the
 * real server: the reader accepts only what git's receive-pack reads the
 * same way, and refuses what it would refuse. Nothing is allocated, there
 * is no recursion, the work is linear in the length, which is bounded
 * (LZ_PKT_LIST_MAX), but for the duplicate-ref check (pairs of at most
 * LZ_PKT_COMMANDS_MAX names, compared when their hashes match). The parse
 * uses about 9 KiB of stack.
 *
 * pkt-lines (gitprotocol-common(5)): 4 lower-case hex digits giving the
 * length with themselves, then the payload; `0000` is the flush-pkt. The
 * other special lengths (0001 delim, 0002 response-end, 0003, 0004 the
 * empty line) are refused, and so is a length above LZ_PKT_LEN_MAX
 * (git's LARGE_PACKET_MAX) or, after the first command, one longer than
 * any command can be (LZ_PKT_CMD_MAX). One LF at the end of a payload is
 * dropped: git's send-pack sends none, the protocol allows it.
 *
 * The list (update-requests = *shallow command-list):
 *   `shallow SP obj-id` lines first (a push from a shallow clone), at most
 *       LZ_PKT_SHALLOW_MAX; counted, not kept;
 *   a push certificate (`push-cert NUL ...`) is refused: the gate does not
 *       read signed pushes (the refs are inside the certificate's text);
 *   the first command `old-id SP new-id SP refname NUL capability-list`;
 *   then `old-id SP new-id SP refname` lines, at most LZ_PKT_COMMANDS_MAX
 *       commands in all;
 *   then the flush-pkt, where the parse ends (ret->used). What follows is
 *       not read: the push-option lines and their flush-pkt when the
 *       push-options capability is sent (ret->push_options), then the
 *       packfile (none for a push of deletes only).
 * A flush-pkt alone (after any shallow lines) is an empty list: git sends
 * that when there is nothing to update; n_commands is 0 then.
 *
 * Object IDs are 40 (SHA-1) or 64 (SHA-256) lower-case hex digits, all of
 * one push the same length, the one the object-format capability names
 * (absent: sha1; another value refused). An all-zero old-id is a create,
 * an all-zero new-id a delete, both zero is refused.
 *
 * Capabilities: the bytes after the NUL, split at SP (git's send-pack
 * starts the list with one); every capability of visible ASCII; at most
 * LZ_PKT_CAPS_MAX. As git reads them, a capability is a name alone or
 * `name=value`: `push-options=x` turns push options on as `push-options`
 * does, and an object-format without a value is refused as git refuses
 * it.
 *
 * Ref names, as receive-pack checks them (`refs/` and
 * check_refname_format): at most LZ_PKT_REF_MAX bytes; `refs/` and at
 * least two components after it (one is enough for a delete); no empty
 * component (`//`, a trailing '/'); no component starting with '.' or
 * ending with `.lock`; no `..`, no `@{`; no control character, SP, DEL or
 * any of `~^:?*[\`; no '.' at the end. Bytes 0x80-0xff are allowed, as
 * git allows them. The same ref twice in one push is refused.
 *
 * Incremental use. A prefix of a valid list never fails: with too few
 * bytes the parse returns -EAGAIN and the total number of bytes the
 * stream must have before the answer can change (*ret_need > len, always
 * <= LZ_PKT_LIST_MAX): the rest of the pkt-line being read. A pkt-line is
 * checked once it is whole; its length as soon as its digits arrive.
 *
 * Errors: lz_pkt_push_parse returns 0 (a complete command list), -EAGAIN
 * (more bytes needed: *ret_need) or -EBADMSG with the reason in *why
 * (lz_pkt_reason_str). ret is written only on success, *ret_need only on
 * -EAGAIN, *why only on -EBADMSG; ret_need and why may be NULL.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LZ_PKT_HDR 4               /* the hex length */
#define LZ_PKT_LEN_MAX 65520       /* a pkt-line with its length (git's LARGE_PACKET_MAX) */
#define LZ_PKT_COMMANDS_MAX 256    /* commands of one push (more: refused) */
#define LZ_PKT_SHALLOW_MAX 256     /* shallow lines before them (more: refused) */
#define LZ_PKT_CAPS_MAX 64         /* capabilities (more: refused) */
#define LZ_PKT_REF_MAX 1024        /* bytes of a ref name */
#define LZ_PKT_OID_MAX 64          /* hex digits of an object ID (SHA-256) */
#define LZ_PKT_SHALLOW_LINE_MAX 77 /* "shallow " and an ID, LF, with the length */
/* A command pkt-line after the first: two IDs, the name, SPs, an LF. */
#define LZ_PKT_CMD_MAX (LZ_PKT_HDR + 2 * LZ_PKT_OID_MAX + 2 + LZ_PKT_REF_MAX + 1)
/* The longest list: every shallow line, the first command (capabilities
 * and all), the other commands, the flush-pkt. No *ret_need exceeds it. */
#define LZ_PKT_LIST_MAX                                                                                                \
    (LZ_PKT_SHALLOW_MAX * LZ_PKT_SHALLOW_LINE_MAX + LZ_PKT_LEN_MAX + (LZ_PKT_COMMANDS_MAX - 1) * LZ_PKT_CMD_MAX +      \
     LZ_PKT_HDR)

enum lz_pkt_reason {
    LZ_PKT_OK = 0,
    LZ_PKT_R_LENGTH,        /* a pkt-line length that is not 4 lower-case hex digits */
    LZ_PKT_R_SPECIAL,       /* a delim-pkt, response-end-pkt, 0003 or an empty pkt-line (0004) */
    LZ_PKT_R_TOO_LONG,      /* a pkt-line longer than LZ_PKT_LEN_MAX, or than a command can be */
    LZ_PKT_R_TOO_MANY,      /* more than LZ_PKT_COMMANDS_MAX commands */
    LZ_PKT_R_SHALLOW,       /* a malformed shallow line, one after a command, or more than LZ_PKT_SHALLOW_MAX */
    LZ_PKT_R_PUSH_CERT,     /* a signed push (push-cert) */
    LZ_PKT_R_COMMAND,       /* not `old SP new SP ref` (NUL and capabilities in the first only), or both IDs zero */
    LZ_PKT_R_OID,           /* an ID not of 40 or 64 lower-case hex digits, or not of the push's object format */
    LZ_PKT_R_OBJECT_FORMAT, /* an object-format other than sha1 or sha256 (or none), or two different ones */
    LZ_PKT_R_CAPS,          /* a capability with a byte not visible ASCII, or more than LZ_PKT_CAPS_MAX */
    LZ_PKT_R_REF_NAME,      /* a ref name receive-pack refuses (see the top) */
    LZ_PKT_R_REF_TOO_LONG,  /* a ref name longer than LZ_PKT_REF_MAX */
    LZ_PKT_R_REF_DUP,       /* the same ref in two commands */
    LZ_PKT_R_MAX,           /* not a reason */
};

/* Bytes of the input: buf + off, len of them. */
struct lz_pkt_span {
    uint32_t off;
    uint32_t len;
};

enum lz_pkt_kind {
    LZ_PKT_CREATE = 1, /* old-id zero */
    LZ_PKT_UPDATE,
    LZ_PKT_DELETE, /* new-id zero */
};

struct lz_pkt_command {
    enum lz_pkt_kind kind;
    struct lz_pkt_span old_id; /* oid_len hex digits */
    struct lz_pkt_span new_id;
    struct lz_pkt_span ref; /* a checked ref name (see the top) */
};

struct lz_pkt_push {
    size_t used;         /* bytes up to and including the flush-pkt */
    unsigned oid_len;    /* 40 or 64 (also with no command: from the object format) */
    unsigned n_shallow;  /* shallow lines, 0..LZ_PKT_SHALLOW_MAX */
    unsigned n_commands; /* 0..LZ_PKT_COMMANDS_MAX, in order */
    struct lz_pkt_command commands[LZ_PKT_COMMANDS_MAX];
    unsigned n_caps; /* of the first command, in order */
    struct lz_pkt_span caps[LZ_PKT_CAPS_MAX];
    bool push_options; /* the push-options capability: push-option lines follow the flush-pkt */
};

const char *lz_pkt_reason_str(enum lz_pkt_reason r);

/* The command list at the start of a receive-pack request body (see the
 * top). */
int lz_pkt_push_parse(const uint8_t *buf, size_t len, struct lz_pkt_push *ret, size_t *ret_need,
                      enum lz_pkt_reason *why);

/* Is name (len bytes) a ref name a push may carry: `refs/` and at least
 * one component after it, the rules at the top? (The parse also wants a
 * second component for a create or update.) */
bool lz_pkt_refname_ok(const uint8_t *name, size_t len);

/* Does the push send capability cap (NUL-terminated): a capability equal
 * to it, or, for a cap without '=', one of the form `cap=value`? buf is
 * the input p was parsed from. */
bool lz_pkt_has_cap(const struct lz_pkt_push *p, const uint8_t *buf, const char *cap);

/* Does ref (len bytes) match pattern (NUL-terminated)? A pattern ending
 * in '*' matches every ref that starts with what is before the '*' and
 * has at least one byte more: `refs/heads/agent/` then '*' matches
 * `refs/heads/agent/x` and `refs/heads/agent/x/y`, not `refs/heads/agent/`
 * nor `refs/heads/agent`. Any other pattern matches itself only. A '*' anywhere else is an ordinary byte (no ref name
 * holds one). Bytes are compared exactly (ref names are case-sensitive). */
bool lz_pkt_ref_match(const char *pattern, const uint8_t *ref, size_t len);
