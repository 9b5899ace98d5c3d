/* refusal.c — see refusal.h. */
#include "refusal.h"
#include "escape.h"

static void put_u16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static uint16_t get_u16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static bool why_known(unsigned why) {
    return (why > LZ_REFW_NONE && why <= LZ_REFW_LINK_SOURCE) || (why >= LZ_REFW_INDEX && why < LZ_REFW_END);
}
static bool op_known(unsigned op) { return op <= LZ_ROP_RENAME || op == LZ_REFOP_OTHER; }

ssize_t lz_refusal_encode(uint8_t *buf, size_t cap, uint8_t why, uint8_t op, uint8_t tag, int err, uint32_t dropped,
                          const char *path, const char *path2, const char *detail) {
    if (!why_known(why) || !op_known(op) || tag >= LZ_REFUSAL_TAGS || err <= 0 || err > 0xffff || !path)
        return -EINVAL;
    const char *s[3] = { path, path2 ? path2 : "", detail ? detail : "" };
    size_t max[3] = { LZ_REFUSAL_PATH_MAX, LZ_REFUSAL_PATH_MAX, LZ_REFUSAL_DETAIL_MAX };
    size_t l[3], need = LZ_REFUSAL_HDR;
    for (int i = 0; i < 3; i++) {
        l[i] = strnlen(s[i], max[i]);
        need += 2 + l[i];
    }
    if (need > cap)
        return -EINVAL;
    buf[0] = LZ_REFUSAL_VERSION;
    buf[1] = why;
    buf[2] = op;
    buf[3] = tag;
    put_u16(buf + 4, (uint16_t)err);
    put_u32(buf + 6, dropped);
    size_t o = LZ_REFUSAL_HDR;
    for (int i = 0; i < 3; i++) {
        put_u16(buf + o, (uint16_t)l[i]);
        memcpy(buf + o + 2, s[i], l[i]);
        o += 2 + l[i];
    }
    return (ssize_t)o;
}

int lz_refusal_decode(const uint8_t *buf, size_t len, struct lz_refusal_rec *ret) {
    if (len < LZ_REFUSAL_HDR + 6 || len > LZ_REFUSAL_MAX || buf[0] != LZ_REFUSAL_VERSION || !why_known(buf[1]) ||
        !op_known(buf[2]) || buf[3] >= LZ_REFUSAL_TAGS)
        return -EBADMSG;
    struct lz_refusal_rec r = {
        .why = buf[1], .op = buf[2], .tag = buf[3], .err = get_u16(buf + 4), .dropped = get_u32(buf + 6)
    };
    if (r.err == 0)
        return -EBADMSG;
    const uint8_t **s[3] = { &r.path, &r.path2, &r.detail };
    size_t *l[3] = { &r.path_len, &r.path2_len, &r.detail_len };
    const size_t max[3] = { LZ_REFUSAL_PATH_MAX, LZ_REFUSAL_PATH_MAX, LZ_REFUSAL_DETAIL_MAX };
    size_t o = LZ_REFUSAL_HDR;
    for (int i = 0; i < 3; i++) {
        if (len - o < 2)
            return -EBADMSG;
        size_t n = get_u16(buf + o);
        o += 2;
        if (n > max[i] || n > len - o || memchr(buf + o, '\0', n))
            return -EBADMSG;
        *s[i] = buf + o;
        *l[i] = n;
        o += n;
    }
    if (o != len)
        return -EBADMSG;
    *ret = r;
    return 0;
}

enum lz_refusal_kind lz_refusal_kind_of(uint8_t why) {
    switch ((enum lz_refusal_why)why) {
    case LZ_REFW_GITNAME:
    case LZ_REFW_GIT_SHAPE: return LZ_REFK_NEW_REPO;
    case LZ_REFW_PROTECTED:
    case LZ_REFW_ANCESTOR:
    case LZ_REFW_MOVE_REPO:
    case LZ_REFW_STICKY: return LZ_REFK_GIT_PROTECTED;
    case LZ_REFW_CHECKED:
    case LZ_REFW_GITDIR_ENTRY:
    case LZ_REFW_LINK_SOURCE:
    case LZ_REFW_INDEX:
    case LZ_REFW_PACKED_REFS: return LZ_REFK_GIT_CONTENT;
    case LZ_REFW_IGNORED_XDEV:
    case LZ_REFW_HIDDEN_XDEV:
    case LZ_REFW_TOO_BIG: return LZ_REFK_IGNORED;
    case LZ_REFW_LINK_TARGET: return LZ_REFK_LINK;
    case LZ_REFW_NONE:
    case LZ_REFW_SHAPE:
    case LZ_REFW_END: break;
    }
    return LZ_REFK_OTHER;
}

const char *lz_refusal_kind_name(enum lz_refusal_kind k) {
    switch (k) {
    case LZ_REFK_NEW_REPO: return "new-repository";
    case LZ_REFK_GIT_PROTECTED: return "git-protected";
    case LZ_REFK_GIT_CONTENT: return "git-content";
    case LZ_REFK_IGNORED: return "ignored-move";
    case LZ_REFK_LINK: return "link-target";
    case LZ_REFK_OTHER:
    case LZ_REFK_COUNT: break;
    }
    return "other";
}

const char *lz_refusal_why_name(uint8_t why) {
    switch ((enum lz_refusal_why)why) {
    case LZ_REFW_GITNAME: return "git-name";
    case LZ_REFW_GIT_SHAPE: return "git-shape";
    case LZ_REFW_PROTECTED: return "protected";
    case LZ_REFW_ANCESTOR: return "ancestor";
    case LZ_REFW_CHECKED: return "checked-file";
    case LZ_REFW_GITDIR_ENTRY: return "git-dir-entry";
    case LZ_REFW_MOVE_REPO: return "moves-repository";
    case LZ_REFW_LINK_SOURCE: return "link-source";
    case LZ_REFW_INDEX: return "index";
    case LZ_REFW_PACKED_REFS: return "packed-refs";
    case LZ_REFW_STICKY: return "sticky";
    case LZ_REFW_IGNORED_XDEV: return "across-backings";
    case LZ_REFW_HIDDEN_XDEV: return "hidden-host-entry";
    case LZ_REFW_LINK_TARGET: return "link-target";
    case LZ_REFW_TOO_BIG: return "too-big";
    case LZ_REFW_SHAPE: return "shape";
    case LZ_REFW_NONE:
    case LZ_REFW_END: break;
    }
    return "other";
}

const char *lz_refusal_op_name(uint8_t op) {
    return op <= LZ_ROP_RENAME ? lz_router_op_name((enum lz_router_op)op) : "operation";
}

const char *lz_refusal_why_text(uint8_t why) {
    switch ((enum lz_refusal_why)why) {
    case LZ_REFW_GITNAME: return "no new .git (a repository or gitfile) may appear in the shared workspace";
    case LZ_REFW_GIT_SHAPE:
        return "no directory of the shared workspace may become shaped like a Git directory (a bare repository)";
    case LZ_REFW_PROTECTED:
        return "Git configuration and code the host's git reads or runs (config, hooks/, modules/, worktrees/, "
               "info/exclude, refs/replace/, ...) are read-only";
    case LZ_REFW_ANCESTOR:
        return "a directory on the way to protected Git files (objects/, refs/, info/) is made by mkdir only, "
               "never moved or removed";
    case LZ_REFW_CHECKED: return "a Git index or packed-refs changes only by Git's own rename of its lock file";
    case LZ_REFW_GITDIR_ENTRY:
        return "only real directories and single-link files may enter a Git directory (no symlink, hard link or "
               "FIFO)";
    case LZ_REFW_MOVE_REPO: return "a directory that holds a repository (.git) does not move";
    case LZ_REFW_LINK_SOURCE:
        return "a protected Git file, or a file inside a Git directory, gets no second name (hard link)";
    case LZ_REFW_INDEX: return "this index names entries the host's git must not check out";
    case LZ_REFW_PACKED_REFS: return "replace refs and notes change what the host's git shows, not what it pushes";
    case LZ_REFW_STICKY: return "this file was seen under a protected name (or is a checked index) and stays read-only";
    case LZ_REFW_IGNORED_XDEV:
        return "a move or hard link between a shared path and a git-ignored one (the Domain's own) crosses two "
               "backings, as between file systems";
    case LZ_REFW_HIDDEN_XDEV: return "the move would show a host file the sandbox cannot see at its new path";
    case LZ_REFW_LINK_TARGET:
        return "a symlink into Lazaret's storage or runtime directory (or an ancestor of them) is refused";
    case LZ_REFW_TOO_BIG: return "the directory is too large to check before a move";
    case LZ_REFW_SHAPE:
        return "device nodes, sockets, set-id bits and other owners are not served; the root does not move";
    case LZ_REFW_NONE:
    case LZ_REFW_END: break;
    }
    return "refused";
}

const char *lz_refusal_kind_hint(enum lz_refusal_kind k) {
    switch (k) {
    case LZ_REFK_NEW_REPO:
        return "clone or init in a git-ignored directory (the Domain's own: node_modules/, build/, ...) or "
               "outside /workspace, e.g. /tmp";
    case LZ_REFK_GIT_PROTECTED:
        return "use `git -c key=value` or GIT_CONFIG_* variables in the sandbox; the developer changes Git "
               "configuration on the host";
    case LZ_REFK_GIT_CONTENT: return "let Git write its own files; copy instead of linking";
    case LZ_REFK_IGNORED: return "mv copies across (it handles EXDEV); or copy, then remove";
    case LZ_REFK_LINK: return "link to a path inside the workspace instead";
    case LZ_REFK_OTHER:
    case LZ_REFK_COUNT: break;
    }
    return "see docs/security-git.md";
}

/* ---- the history ---- */

/* prefix + "/" + the first LZ_REFUSAL_SHOWN_MAX bytes of p, escaped. */
static char *shown(const char *prefix, const uint8_t *p, size_t n) {
    bool cut = n > LZ_REFUSAL_SHOWN_MAX;
    if (cut)
        n = LZ_REFUSAL_SHOWN_MAX;
    char *e = NULL;
    if (lz_escape(p, n, 0, &e) < 0)
        return lz_xstrdup("(unprintable)");
    char *t = lz_xasprintf("%s%s%s%s", prefix, prefix[0] && n ? "/" : "", e, cut ? "..." : "");
    free(e);
    return t;
}

static void entry_clear(struct lz_refusal_entry *e) {
    free(e->path);
    free(e->path2);
    free(e->detail);
    *e = (struct lz_refusal_entry){ 0 };
}

const struct lz_refusal_entry *lz_refusal_history_add(struct lz_refusal_history *h, const struct lz_refusal_rec *r,
                                                      const char *prefix, int64_t at_ms) {
    struct lz_refusal_entry *e = &h->e[h->next];
    entry_clear(e);
    h->next = (h->next + 1) % LZ_REFUSAL_HISTORY;
    if (h->n < LZ_REFUSAL_HISTORY)
        h->n++;
    h->total++;
    h->dropped += r->dropped;
    e->seq = h->total;
    e->at_ms = at_ms;
    e->why = r->why;
    e->op = r->op;
    e->err = r->err;
    e->kind = lz_refusal_kind_of(r->why);
    h->by_kind[e->kind]++;
    e->path = shown(prefix ? prefix : "", r->path, r->path_len);
    /* The other end of a rename or link is a path of the same tree; a
     * symlink's target is the agent's text, shown as it is. */
    if (r->path2_len)
        e->path2 =
            shown(prefix && (r->op == LZ_ROP_RENAME || r->op == LZ_ROP_LINK) ? prefix : "", r->path2, r->path2_len);
    if (r->detail_len)
        e->detail = shown("", r->detail, r->detail_len);
    return e;
}

void lz_refusal_history_clear(struct lz_refusal_history *h) {
    for (size_t i = 0; i < LZ_REFUSAL_HISTORY; i++)
        entry_clear(&h->e[i]);
    *h = (struct lz_refusal_history){ 0 };
}

const struct lz_refusal_entry *lz_refusal_history_at(const struct lz_refusal_history *h, size_t i) {
    if (i >= h->n)
        return NULL;
    size_t first = (h->next + LZ_REFUSAL_HISTORY - h->n) % LZ_REFUSAL_HISTORY;
    return &h->e[(first + i) % LZ_REFUSAL_HISTORY];
}

void lz_refusal_notice(const struct lz_refusal_entry *e, char *buf, size_t cap) {
    /* The path is cut for the one line; `lazaret events` has it whole. */
    char path[160];
    size_t l = strlen(e->path);
    if (l < sizeof path)
        memcpy(path, e->path, l + 1);
    else
        snprintf(path, sizeof path, "%.*s...", (int)sizeof path - 4, e->path);
    snprintf(buf, cap, "refused %s %s (%s): %s; %s (`lazaret events`)", lz_refusal_op_name(e->op), path,
             strerror(e->err), lz_refusal_why_text(e->why), lz_refusal_kind_hint(e->kind));
}

/* ---- the alternate screen ---- */

enum { AS_GROUND, AS_ESC, AS_CSI, AS_PRIV };

void lz_altscreen_feed(struct lz_altscreen *a, const uint8_t *p, size_t n) {
    const uint8_t *end = p + n;
    while (p < end) {
        if (a->state == AS_GROUND) {
            const uint8_t *esc = memchr(p, 0x1b, (size_t)(end - p));
            if (!esc)
                return;
            p = esc + 1;
            a->state = AS_ESC;
            continue;
        }
        uint8_t c = *p++;
        switch (a->state) {
        case AS_ESC: a->state = c == '[' ? AS_CSI : c == 0x1b ? AS_ESC : AS_GROUND; break;
        case AS_CSI:
            a->param = 0;
            a->hit = false;
            a->state = c == '?' ? AS_PRIV : c == 0x1b ? AS_ESC : AS_GROUND;
            break;
        case AS_PRIV:
            if (c >= '0' && c <= '9') {
                if (a->param < 10000)
                    a->param = (uint16_t)(a->param * 10 + (c - '0'));
            } else if (c == ';' || c == 'h' || c == 'l') {
                if (a->param == 47 || a->param == 1047 || a->param == 1049)
                    a->hit = true;
                a->param = 0;
                if (c != ';') {
                    if (a->hit)
                        a->on = c == 'h';
                    a->state = AS_GROUND;
                }
            } else {
                a->state = c == 0x1b ? AS_ESC : AS_GROUND;
            }
            break;
        default: a->state = AS_GROUND; break;
        }
    }
}
