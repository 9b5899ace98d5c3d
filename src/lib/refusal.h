/* refusal.h — refusals of the workspace routers, for the developer (pure).
 *
 * When lazaret-router refuses an operation of the sandbox (the Git
 * property, docs/security-git.md; the Ignored Workspace State's moves,
 * docs/ignored-state.md; a volume's shape rules), the agent sees only
 * `Operation not permitted` or `Invalid cross-device link`. So each
 * refusal also goes, as one record, to the Host Coordinator, which keeps
 * a bounded history per Domain (`lazaret events`) and shows one line per
 * kind of refusal on the terminal of each session that is a plain shell.
 *
 * The path (lazaret-router --refusal-fd, supervisor.c, hc_refusal.c):
 *
 *   router --(one datagram per refusal, MSG_DONTWAIT)--> socketpair --> HC
 *
 * The router never waits: a full socket (the kernel's buffer, a few
 * hundred records) drops the record and counts it, and the next record
 * that goes through carries the count. The coordinator reads a bounded
 * number per turn of its loop. Nothing grows with what the agent does:
 * the kernel bounds the socket, the history is a ring of
 * LZ_REFUSAL_HISTORY entries with totals per kind.
 *
 * A record (little-endian; written by the router, decoded by the
 * coordinator as untrusted bytes, fuzzed: tests/fuzz/fuzz_refusal.c):
 *
 *   u8  version (1)
 *   u8  why      enum lz_refusal_why
 *   u8  op       enum lz_refusal_op
 *   u8  tag      which router: 0 the workspace, 1 + i volume router i
 *   u16 err      the errno the sandbox got (EPERM, EXDEV, ...)
 *   u32 dropped  records this router could not send before this one
 *   u16 len + bytes, three times: path, path2 (a rename's or link's other
 *       end, or ""), detail (what a check said, or "")
 *
 * and nothing after. Paths are relative to the router's root and are the
 * agent's bytes: anything but NUL. The coordinator renders them with
 * lz_escape (escape.h) before they go anywhere: no terminal escape and no
 * invalid UTF-8 reaches a terminal or a JSON string.
 */
#pragma once

#include "router.h"
#include "util.h"

#define LZ_REFUSAL_VERSION 1
#define LZ_REFUSAL_PATH_MAX LZ_ROUTER_PATH_MAX
#define LZ_REFUSAL_DETAIL_MAX 256
#define LZ_REFUSAL_HDR 10
#define LZ_REFUSAL_MAX (LZ_REFUSAL_HDR + 6 + 2 * LZ_REFUSAL_PATH_MAX + LZ_REFUSAL_DETAIL_MAX)
#define LZ_REFUSAL_TAGS 17 /* the workspace and LZ_RS_VOLUMES_MAX volumes */

/* Why: the Git policy's reasons (router.h, the same numbers), then the
 * router's own. */
enum lz_refusal_why {
    LZ_REFW_NONE = LZ_RWHY_NONE,
    LZ_REFW_GITNAME = LZ_RWHY_GITNAME,
    LZ_REFW_GIT_SHAPE = LZ_RWHY_GIT_SHAPE,
    LZ_REFW_PROTECTED = LZ_RWHY_PROTECTED,
    LZ_REFW_ANCESTOR = LZ_RWHY_ANCESTOR,
    LZ_REFW_CHECKED = LZ_RWHY_CHECKED,
    LZ_REFW_GITDIR_ENTRY = LZ_RWHY_GITDIR_ENTRY,
    LZ_REFW_MOVE_REPO = LZ_RWHY_MOVE_REPO,
    LZ_REFW_LINK_SOURCE = LZ_RWHY_LINK_SOURCE,
    LZ_REFW_INDEX = 32,   /* a file renamed to a Git index that the host's git must not read */
    LZ_REFW_PACKED_REFS,  /* a packed-refs with replace refs or notes */
    LZ_REFW_STICKY,       /* a file once seen under a protected name, or a sealed index */
    LZ_REFW_IGNORED_XDEV, /* a move or link between a shared path and a git-ignored one */
    LZ_REFW_HIDDEN_XDEV,  /* a move that would reveal a hidden host file */
    LZ_REFW_LINK_TARGET,  /* a symlink into Lazaret's storage (--deny-link-target) */
    LZ_REFW_TOO_BIG,      /* a directory move too large to check: copy instead */
    LZ_REFW_SHAPE,        /* devices, sockets, the root, other owners (router_volume.h) */
    LZ_REFW_END
};

/* Kinds: what the developer is told once per session. */
enum lz_refusal_kind {
    LZ_REFK_NEW_REPO = 0,  /* git init, clone, submodule, worktree add in the shared tree */
    LZ_REFK_GIT_PROTECTED, /* Git configuration and code the host's git reads or runs */
    LZ_REFK_GIT_CONTENT,   /* what may enter a Git directory, checked files */
    LZ_REFK_IGNORED,       /* moves across the Ignored Workspace State */
    LZ_REFK_LINK,          /* symlinks into Lazaret's storage */
    LZ_REFK_OTHER,
    LZ_REFK_COUNT
};

/* The operation: lz_router_op's values, then these. */
enum lz_refusal_op {
    LZ_REFOP_OTHER = 16,
};

struct lz_refusal_rec {
    uint8_t why, op, tag;
    uint16_t err;
    uint32_t dropped;
    const uint8_t *path, *path2, *detail; /* into the decoded buffer; not NUL-terminated */
    size_t path_len, path2_len, detail_len;
};

/* Encodes one record into buf (cap >= LZ_REFUSAL_MAX is always enough):
 * its length, or -EINVAL (a field out of range; paths and detail longer
 * than their maximum are cut, which the record cannot show). path2 and
 * detail may be NULL. */
ssize_t lz_refusal_encode(uint8_t *buf, size_t cap, uint8_t why, uint8_t op, uint8_t tag, int err, uint32_t dropped,
                          const char *path, const char *path2, const char *detail);

/* Decodes untrusted bytes: 0, or -EBADMSG (short, long, an unknown
 * version, why, op or tag, a NUL byte in a string, trailing bytes). */
int lz_refusal_decode(const uint8_t *buf, size_t len, struct lz_refusal_rec *ret);

enum lz_refusal_kind lz_refusal_kind_of(uint8_t why);
const char *lz_refusal_kind_name(enum lz_refusal_kind k); /* "new-repository", ... */
const char *lz_refusal_why_name(uint8_t why);             /* "git-name", ... */
const char *lz_refusal_op_name(uint8_t op);
/* One sentence: what the rule protects. */
const char *lz_refusal_why_text(uint8_t why);
/* One sentence: what to do instead (for the kind). */
const char *lz_refusal_kind_hint(enum lz_refusal_kind k);

/* ---- the coordinator's history of one Domain ---- */

#define LZ_REFUSAL_HISTORY 256
#define LZ_REFUSAL_SHOWN_MAX 512 /* bytes of a path kept (before escaping) */

struct lz_refusal_entry {
    uint64_t seq; /* 1, 2, ... in this history */
    int64_t at_ms;
    uint8_t why, op;
    uint16_t err;
    enum lz_refusal_kind kind;
    char *path;   /* escaped, with the router's prefix ("/workspace/..."); a cut path ends in "..." */
    char *path2;  /* escaped, or NULL */
    char *detail; /* escaped, or NULL */
};

struct lz_refusal_history {
    struct lz_refusal_entry e[LZ_REFUSAL_HISTORY]; /* a ring: the last `n` added */
    size_t next, n;
    uint64_t total; /* refusals recorded */
    uint64_t by_kind[LZ_REFK_COUNT];
    uint64_t dropped; /* refusals the routers could not send (counted by them) */
};

/* Adds a decoded record: paths joined to prefix (the router's root inside
 * the sandbox, e.g. "/workspace"; "" for none), cut and escaped. The
 * oldest entry goes when the ring is full. Returns the new entry. */
const struct lz_refusal_entry *lz_refusal_history_add(struct lz_refusal_history *h, const struct lz_refusal_rec *r,
                                                      const char *prefix, int64_t at_ms);
void lz_refusal_history_clear(struct lz_refusal_history *h);
/* The entries, oldest first: the i-th (i < h->n). */
const struct lz_refusal_entry *lz_refusal_history_at(const struct lz_refusal_history *h, size_t i);

/* The terminal notice for an entry (one line, printable ASCII and
 * escaped text only) into buf. */
void lz_refusal_notice(const struct lz_refusal_entry *e, char *buf, size_t cap);

/* ---- full-screen programs on a session's terminal ---- */

/* Follows a terminal's output for the alternate screen (ESC [ ? 1049 h/l,
 * 1047, 47), which full-screen programs (editors, agents' TUIs) switch
 * to: a notice must not be drawn into their screen. Sequences may be
 * split across calls. */
struct lz_altscreen {
    uint8_t state;  /* parser state */
    uint16_t param; /* the parameter being read */
    bool hit;       /* one of the parameters is 47, 1047 or 1049 */
    bool on;        /* the alternate screen is active */
};
void lz_altscreen_feed(struct lz_altscreen *a, const uint8_t *p, size_t n);
