/* proto.h — the Client CLI <-> Host Coordinator session protocol.
 *
 * Transport: a SOCK_SEQPACKET Unix socket under $XDG_RUNTIME_DIR/lazaret/
 * (mode 0700), so every message arrives whole. A message is
 *
 *     u8 type | u8 channel | u16 reserved (0) | payload
 *
 * at most LZ_PROTO_MAX bytes in all. Integers are little-endian. The
 * coordinator treats every byte from a client as untrusted: lengths are
 * checked before use and unknown types refuse the session. The peer's
 * credentials are checked with SO_PEERCRED (same uid) before any decode.
 *
 * HELLO payload (client -> coordinator), a sequence of fields:
 *     u32 protocol version (LZ_PROTO_VERSION)
 *     32 bytes Domain ID, 32 bytes Configuration Fingerprint
 *     u32 flags (LZ_HELLO_TTY), u16 rows, u16 cols
 *     u32 argc, then argc strings; u32 envc, then envc "NAME=VALUE" strings
 *     u32 cwd string ("" = /workspace; otherwise /workspace or a path
 *         below it, in plain segments: no empty, "." or ".." one)
 * where a string is u32 length + bytes (no NUL inside, <= LZ_PROTO_STR_MAX).
 */
#pragma once

#include "util.h"

#define LZ_PROTO_VERSION 1
#define LZ_PROTO_MAX (64 * 1024)
#define LZ_PROTO_HDR 4
#define LZ_PROTO_DATA_MAX (LZ_PROTO_MAX - LZ_PROTO_HDR)
#define LZ_PROTO_STR_MAX 4096
#define LZ_PROTO_ARGV_MAX 1024
#define LZ_PROTO_ENV_MAX 64

enum lz_msg_type {
    LZ_MSG_HELLO = 1,   /* c->hc */
    LZ_MSG_READY = 2,   /* hc->c: session attached; payload: u32 session number (1, 2, ... per Domain) */
    LZ_MSG_REFUSED = 3, /* hc->c: payload: u32 code + message */
    LZ_MSG_DATA = 4,    /* both: channel 0 stdin, 1 stdout, 2 stderr */
    LZ_MSG_EOF = 5,     /* both: channel closed */
    LZ_MSG_WINSIZE = 6, /* c->hc: u16 rows, u16 cols */
    LZ_MSG_SIGNAL = 7,  /* c->hc: u32 signal number (non-tty sessions) */
    LZ_MSG_EXIT = 8,    /* hc->c: u32 status (code, or 128+signal) */
    LZ_MSG_NOTICE = 9,  /* hc->c: a line to print on stderr */
    /* Control connections (`lazaret ps`, `lazaret stop`): the first and
     * only message instead of HELLO. */
    LZ_MSG_STATUS = 10,       /* c->hc: no payload; reply STATUS_REPLY */
    LZ_MSG_STATUS_REPLY = 11, /* hc->c: JSON object (see docs/lazaret.1, ps --json) */
    LZ_MSG_STOP = 12,         /* c->hc: u32 flags (LZ_STOP_FORCE); reply EXIT 0 once accepted */
    LZ_MSG_NET = 13,          /* c->hc: no payload; reply NET_REPLY */
    LZ_MSG_NET_REPLY = 14,    /* hc->c: the Domain's names as text (`lazaret net`, resolver.h) */
    LZ_MSG_EVENTS = 15,       /* c->hc: no payload; reply EVENTS_REPLY */
    LZ_MSG_EVENTS_REPLY = 16, /* hc->c: JSON object, the routers' refusals (`lazaret events`, refusal.h) */
};

#define LZ_STOP_FORCE 0x1u
/* Stop only a Domain with no session (it lingers, or is already stopping):
 * the reply EXIT carries 0 when it stops, 1 when it has sessions and goes on. */
#define LZ_STOP_IF_LINGERING 0x2u

/* Refusal codes of LZ_MSG_REFUSED. */
enum lz_refusal {
    LZ_REFUSE_PROTOCOL = 1,
    LZ_REFUSE_CONFIG_MISMATCH = 2,
    LZ_REFUSE_STOPPING = 3,
    LZ_REFUSE_LAUNCH = 4,
};

#define LZ_HELLO_TTY 0x1u

struct lz_hello {
    uint32_t version;
    uint8_t domain_id[32];
    uint8_t fingerprint[32];
    uint32_t flags;
    uint16_t rows, cols;
    char **argv;
    size_t argc; /* NULL-terminated as well */
    char **envv;
    size_t envc; /* NULL-terminated as well */
    char *cwd;
};

int lz_hello_encode(const struct lz_hello *h, uint8_t *buf, size_t cap, size_t *ret_len);
/* Decodes an untrusted HELLO message (including header). */
int lz_hello_decode(const uint8_t *buf, size_t len, struct lz_hello *ret, struct lz_error *err);
void lz_hello_clear(struct lz_hello *h);

/* Decodes an untrusted control request (STATUS, NET, EVENTS or STOP, header
 * included): 0 and its type and flags, or -EBADMSG. */
int lz_control_decode(const uint8_t *buf, size_t len, uint8_t *ret_type, uint32_t *ret_flags);

/* Connects a SOCK_SEQPACKET, close-on-exec socket to the Unix socket at
 * path (a coordinator's control socket). fd or -errno. */
int lz_proto_connect(const char *path);

/* Sends one message; blocking unless the fd is non-blocking (then -EAGAIN). */
int lz_msg_send(int fd, uint8_t type, uint8_t channel, const void *payload, size_t len);
/* Receives one message into buf (cap >= LZ_PROTO_MAX). Returns its length,
 * 0 on orderly EOF, or -errno; -EBADMSG for a truncated/short message. */
ssize_t lz_msg_recv(int fd, uint8_t *buf, size_t cap);

static inline void lz_put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void lz_put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t lz_get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t lz_get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
