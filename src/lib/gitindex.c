/* gitindex.c — validation of Git index files written by the agent.
 *
 * Layout (Git's Documentation/gitformat-index.txt): a 12-byte header
 * "DIRC", version, entry count; the entries; extensions (4-byte signature,
 * 4-byte size, data); the checksum. All numbers are big-endian.
 *
 * What makes an index dangerous to the host's git, and where we stop it:
 *  - entry names: Git's verify_path() rules, which Git applies when adding
 *    entries but never when reading an index (lz_git_path_problem() in
 *    gitpath.c);
 *  - order: Git assumes entries sorted by (name, stage) and unique; the
 *    "nested below a symlink" check here relies on that order too;
 *  - names the host's git turns into paths from extensions: REUC (git
 *    checkout -m recreates those entries), TREE (git commit writes them as
 *    tree entries), UNTR (git status / git clean list them);
 *  - FSMN's token, handed to the developer's fsmonitor hook;
 *  - EOIE/IEOT, which let a threaded reader (index.threads) parse entries
 *    and extensions from other offsets than a sequential reader does: we
 *    require them to agree with our sequential parse.
 * Everything Git itself would refuse to read (it dies) is -EINVAL; all
 * else we refuse is -EPERM, so that lz_gitindex_verify()'s reading with the
 * other hash length cannot hide a dangerous entry behind a benign oddity.
 */
#include "gitindex.h"
#include "gitpath.h"

#include <ctype.h>
#include <sodium.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>

#define HDR_SIZE 12
#define ENTRY_FIXED 40 /* ctime..size: ten 32-bit fields before the object ID */
#define MODE_GITLINK 0160000u
#define F_EXTENDED 0x4000u
#define F2_KNOWN 0x6000u /* skip-worktree | intent-to-add: Git dies on other bits */
#define F2_SKIP_WORKTREE 0x4000u
#define NAME_IN_FLAGS 0xfffu
#define TREE_DEPTH_MAX 4096
#define STAT_DATA 36 /* ctime, mtime (sec+nsec), dev, ino, uid, gid, size */

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---- index parsing ------------------------------------------------------- */

struct ix {
    const uint8_t *b;
    size_t len, end; /* end: where the checksum starts */
    unsigned hl, version;
    uint32_t nr;
    size_t ents_end;
    uint32_t *offs;       /* entry start offsets; bit 31: v4 name fully stripped */
    uint32_t first_empty; /* first entry with an empty name, or UINT32_MAX */
    uint32_t first_dir;   /* first sparse-directory entry, or UINT32_MAX */
    bool has_link, has_sdir, hard;
    struct lz_error *err;
    struct lz_error worst; /* worst problem noted so far (see note()) */
};

/* Escapes a path for an error message: printable ASCII as is, the rest as
 * \xNN, so a name cannot forge log lines or terminal sequences. */
static const char *esc(const uint8_t *p, size_t n, char *out, size_t size) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < size; i++) {
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\' && p[i] != '"')
            out[o++] = (char)p[i];
        else
            o += (size_t)snprintf(out + o, size - o, "\\x%02x", p[i]);
    }
    if (n && o + 5 >= size && o + 3 < size)
        memcpy(out + o, "...", 3), o += 3;
    out[o] = '\0';
    return out;
}

/* Hard errors: Git could not read this either; stop at once. */
#define FAIL(x, code, ...) ((x)->hard = true, lz_error_set((x)->err, (code), "git index: " __VA_ARGS__))

/* Problems Git reads past are noted and parsing goes on: a dangerous one
 * (-EPERM) wins over a malformed one (-EINVAL), so no harmless oddity can
 * hide a dangerous entry after it from lz_gitindex_verify()'s second
 * reading, while that reading of a genuine index (garbage at the other hash
 * length) still ends in a hard error. Returns code. */
__attribute__((format(printf, 3, 4))) static int note(struct ix *x, int code, const char *fmt, ...) {
    if (x->worst.code == -EPERM || (x->worst.code && code != -EPERM))
        return code;
    va_list ap;
    va_start(ap, fmt);
    lz_error_vset(&x->worst, code, fmt, ap);
    va_end(ap);
    return code;
}
#define PERM(x, ...) note((x), -EPERM, "git index: " __VA_ARGS__)
#define SOFT(x, ...) note((x), -EINVAL, "git index: " __VA_ARGS__)

static int bad_path(struct ix *x, const char *what, const uint8_t *p, size_t n, const char *why) {
    char e[256];
    return PERM(x, "%s \"%s\": %s", what, esc(p, n, e, sizeof e), why);
}

/* Git's decode_varint() (offset encoding of pack files); false on
 * overflow past `max` or the end of the data. */
static bool varint(const uint8_t **pp, const uint8_t *end, uint64_t max, uint64_t *ret) {
    const uint8_t *p = *pp;
    if (p >= end)
        return false;
    uint64_t v = *p & 127;
    while (*p++ & 128) {
        if (p >= end || v >= max)
            return false;
        v = ((v + 1) << 7) | (*p & 127);
    }
    if (v > max)
        return false;
    *pp = p;
    *ret = v;
    return true;
}

/* Git's unsigned-byte order of names, then stage. */
static int name_cmp(const uint8_t *a, size_t an, const uint8_t *b, size_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : an < bn ? -1 : an > bn;
}

static bool valid_file_mode(uint32_t m) {
    return m == (S_IFREG | 0644) || m == (S_IFREG | 0755) || m == S_IFLNK || m == MODE_GITLINK;
}

static int parse_entries(struct ix *x) {
    const uint8_t *b = x->b;
    size_t o = HDR_SIZE, fixed = ENTRY_FIXED + x->hl + 2;
    /* prev: the previous name (v4 decodes against it); ordbuf: the last
     * non-empty one, for the order check (v2/3 point into b instead). */
    uint8_t prev[LZ_GITINDEX_NAME_MAX + 1], ordbuf[LZ_GITINDEX_NAME_MAX + 1];
    const uint8_t *ord = ordbuf;
    size_t prevn = 0, ordn = 0;
    unsigned ordstage = 0;
    bool have_ord = false;
    /* Lengths of symlink/gitlink names that are prefixes of the current
     * name (see below); strictly increasing, so bounded by the name cap. */
    uint16_t links[LZ_GITINDEX_NAME_MAX + 1];
    size_t nlinks = 0;

    for (uint32_t i = 0; i < x->nr; i++) {
        if (o + fixed > x->len)
            return FAIL(x, -EINVAL, "entry %u truncated", i);
        uint32_t mode = be32(b + o + 24);
        unsigned flags = (unsigned)b[o + fixed - 2] << 8 | b[o + fixed - 1];
        size_t p = o + fixed;
        bool skip_wt = false;
        if (flags & F_EXTENDED) {
            if (x->version < 3)
                SOFT(x, "entry %u: extended flags in a version 2 index", i);
            if (p + 2 > x->len)
                return FAIL(x, -EINVAL, "entry %u truncated", i);
            unsigned f2 = (unsigned)b[p] << 8 | b[p + 1];
            if (f2 & ~F2_KNOWN)
                return FAIL(x, -EINVAL, "entry %u: unknown extended flags 0x%04x", i, f2);
            skip_wt = f2 & F2_SKIP_WORKTREE;
            p += 2;
        }
        unsigned stage = (flags >> 12) & 3;
        size_t n = flags & NAME_IN_FLAGS, next;
        const uint8_t *name;
        bool full_strip = false;
        if (x->version == 4) {
            /* Name = previous name minus `strip` trailing bytes + a
             * NUL-terminated suffix. Git takes the length from the flags
             * when it is below 0xFFF and copies that many bytes, so the
             * suffix must be exactly that long. */
            const uint8_t *q = b + p;
            uint64_t strip;
            if (!varint(&q, b + x->len, prevn, &strip))
                return FAIL(x, -EINVAL, "entry %u: bad name prefix length", i);
            const uint8_t *nul = memchr(q, '\0', (size_t)(b + x->len - q));
            if (!nul)
                return FAIL(x, -EINVAL, "entry %u: name runs past the entries", i);
            size_t keep = prevn - (size_t)strip, sl = (size_t)(nul - q);
            if (n != NAME_IN_FLAGS && (n < keep || sl != n - keep))
                return FAIL(x, -EINVAL, "entry %u: name length does not match its flags", i);
            if (keep + sl > LZ_GITINDEX_NAME_MAX)
                return PERM(x, "entry %u: path longer than %d bytes", i, LZ_GITINDEX_NAME_MAX);
            memcpy(prev + keep, q, sl); /* prev[0..keep) is the kept prefix */
            full_strip = strip == prevn;
            n = prevn = keep + sl;
            name = prev;
            next = (size_t)(nul - b) + 1;
        } else {
            name = b + p;
            if (n == NAME_IN_FLAGS) {
                const uint8_t *nul = memchr(name, '\0', x->len - p);
                if (!nul)
                    return FAIL(x, -EINVAL, "entry %u: name runs past the entries", i);
                n = (size_t)(nul - name);
            }
            /* Padding: 1-8 NULs to a multiple of 8 (Git's ondisk_ce_size). */
            next = o + ((p - o + n + 8) & ~(size_t)7);
            if (next > x->len)
                return FAIL(x, -EINVAL, "entry %u truncated", i);
            if (name[n] != '\0')
                bad_path(x, "entry", name, n, "name not NUL-terminated at its length");
            if (n > LZ_GITINDEX_NAME_MAX)
                return PERM(x, "entry %u: path longer than %d bytes", i, LZ_GITINDEX_NAME_MAX);
        }
        x->offs[i] = (uint32_t)o | (full_strip ? 1u << 31 : 0);
        o = next;

        if (mode == S_IFDIR) {
            /* Sparse directory entries: always skip-worktree (sparse-index.c). */
            if (!skip_wt)
                SOFT(x, "entry %u: directory entry not marked skip-worktree", i);
            if (x->first_dir == UINT32_MAX)
                x->first_dir = i;
        } else if (!valid_file_mode(mode)) {
            SOFT(x, "entry %u: mode %o is not a Git file mode", i, mode);
        }
        if (n == 0) {
            /* Split index: replaced entries take their names from the
             * shared index; allowed only if a link extension follows. */
            if (x->first_empty == UINT32_MAX)
                x->first_empty = i;
            continue;
        }
        const char *why = lz_git_path_problem(name, n, mode);
        if (why)
            bad_path(x, "entry", name, n, why);

        /* Order: (name, stage) strictly increasing; a name at stage 0 has
         * no other stages (Git's check_ce_order()). */
        size_t common = 0;
        if (have_ord) {
            int c = name_cmp(ord, ordn, name, n);
            if (c > 0 || (c == 0 && (ordstage == 0 || stage == 0 || ordstage >= stage)))
                bad_path(x, c > 0 ? "unsorted entry" : "duplicate entry", name, n,
                         "entries must be sorted by name and stage, each once");
            while (common < ordn && common < n && ord[common] == name[common])
                common++;
        }
        /* Nothing may sit below a symlink or gitlink (a/b after symlink a):
         * checkout would write through the link. Sorted order puts such a
         * child after the link, possibly after siblings like "a-b" (bytes
         * below '/'), so keep a stack of the links that prefix the current
         * name and drop those the order proves can have no more children. */
        while (nlinks) {
            size_t l = links[nlinks - 1];
            if (l <= common && (l == n || name[l] <= '/')) {
                if (l < n && name[l] == '/')
                    bad_path(x, "entry", name, n, "below a symlink or submodule entry");
                break;
            }
            nlinks--;
        }
        if ((mode == S_IFLNK || mode == MODE_GITLINK) && (!nlinks || links[nlinks - 1] < n))
            links[nlinks++] = (uint16_t)n;
        /* Remember this name for the next comparison. */
        if (x->version == 4)
            memcpy(ordbuf, name, n);
        else
            ord = name;
        ordn = n;
        ordstage = stage;
        have_ord = true;
    }
    x->ents_end = o;
    return 0;
}

/* ---- extensions ---------------------------------------------------------- */

/* An EWAH bitmap (ewah/ewah_io.c): bit count, word count, words, and the
 * index of the last run-length word. Walks the run-length words the way
 * ewah_each_bit() does, which trusts them: every literal word must be in
 * the buffer, and no set bit may reach `limit` (callers index arrays by
 * bit position). Returns the bytes used and the number of set bits. */
static bool ewah(const uint8_t *p, size_t avail, uint64_t limit, size_t *ret_used, uint64_t *ret_set) {
    if (avail < 8)
        return false;
    uint64_t words = be32(p + 4);
    if (avail < 12 || words > (avail - 12) / 8)
        return false;
    const uint8_t *w = p + 8;
    uint32_t rlw = be32(w + words * 8);
    if (words ? rlw >= words : rlw != 0)
        return false;
    uint64_t pos = 0, set = 0, top = 0;
    for (uint64_t i = 0; i < words;) {
        uint64_t v = (uint64_t)be32(w + i * 8) << 32 | be32(w + i * 8 + 4);
        uint64_t run = ((v >> 1) & 0xffffffffu) * 64, lit = v >> 33;
        if ((v & 1) && run)
            set += run, top = pos + run;
        pos += run;
        if (lit > words - ++i)
            return false;
        for (uint64_t k = 0; k < lit; k++, i++, pos += 64) {
            uint64_t lv = (uint64_t)be32(w + i * 8) << 32 | be32(w + i * 8 + 4);
            if (lv)
                set += (uint64_t)__builtin_popcountll(lv), top = pos + 64 - (uint64_t)__builtin_clzll(lv);
        }
    }
    if (top > limit)
        return false;
    *ret_used = 12 + words * 8;
    *ret_set = set;
    return true;
}

/* A NUL-terminated string inside [p, end): its length, or -1. */
static ssize_t cstr(const uint8_t *p, const uint8_t *end) {
    const uint8_t *nul = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
    return nul ? nul - p : -1;
}

/* A single path component from an extension (TREE, UNTR): no '/' at all
 * (a trailing one only where `dir_ok`), and Git's per-component rules. */
static int check_component(struct ix *x, const char *what, const uint8_t *p, size_t n, bool dir_ok) {
    size_t body = dir_ok && n > 1 && p[n - 1] == '/' ? n - 1 : n;
    if (body == 0 || memchr(p, '/', body))
        return bad_path(x, what, p, n, "not a single path component");
    const char *why = lz_git_path_problem(p, n, body < n ? S_IFDIR : S_IFREG);
    return why ? bad_path(x, what, p, n, why) : 0;
}

/* Strict "%d" as Git writes it: optional '-', 1-10 digits, value below
 * 2^31; returns the next position or NULL. */
static const uint8_t *decimal(const uint8_t *p, const uint8_t *end, int64_t *ret) {
    bool neg = p < end && *p == '-';
    p += neg;
    int64_t v = 0;
    const uint8_t *s = p;
    while (p < end && *p >= '0' && *p <= '9' && p - s < 10)
        v = v * 10 + (*p++ - '0');
    if (p == s || v > INT32_MAX || (p < end && *p >= '0' && *p <= '9'))
        return NULL;
    *ret = neg ? -v : v;
    return p;
}

/* TREE (cache-tree.c): preorder nodes "name\0<count> <subtrees>\n[oid]".
 * Git's reader recurses without a bound, so we bound the depth too. */
static int ext_tree(struct ix *x, const uint8_t *p, const uint8_t *end) {
    uint32_t *pending = lz_xcalloc(TREE_DEPTH_MAX, sizeof *pending);
    size_t depth = 0;
    int r = 0;
    bool root = true;
    while (root || depth) {
        ssize_t nl = cstr(p, end);
        int64_t count, subs;
        const uint8_t *q;
        if (nl < 0 || !(q = decimal(p + nl + 1, end, &count)) || q >= end || *q++ != ' ' ||
            !(q = decimal(q, end, &subs)) || subs < 0 || q >= end || *q++ != '\n') {
            r = SOFT(x, "malformed TREE extension");
            break;
        }
        if (root ? nl != 0 : (r = check_component(x, "TREE entry", p, (size_t)nl, false)) < 0)
            break;
        if (count > (int64_t)x->nr && !x->has_link) {
            r = SOFT(x, "TREE extension covers more entries than the index has");
            break;
        }
        if (count >= 0) {
            if ((size_t)(end - q) < x->hl) {
                r = SOFT(x, "malformed TREE extension");
                break;
            }
            q += x->hl;
        }
        p = q;
        if (!root)
            pending[depth - 1]--;
        root = false;
        if (subs > 0) {
            if (depth == TREE_DEPTH_MAX || subs > (end - p) / 5) {
                r = SOFT(x, "TREE extension too deep or too many subtrees");
                break;
            }
            pending[depth++] = (uint32_t)subs;
        }
        while (depth && pending[depth - 1] == 0)
            depth--;
    }
    free(pending);
    if (r == 0 && p != end)
        r = SOFT(x, "trailing bytes in TREE extension");
    return r;
}

/* REUC (resolve-undo.c): "path\0" three octal modes "\0" each, then the
 * object IDs of the non-zero stages. git checkout -m recreates these
 * entries, so each path must pass the rules for each of its modes. */
static int ext_reuc(struct ix *x, const uint8_t *p, const uint8_t *end) {
    while (p < end) {
        ssize_t n = cstr(p, end);
        if (n <= 0)
            return SOFT(x, "malformed REUC extension");
        const uint8_t *path = p;
        p += n + 1;
        unsigned modes[3];
        for (int i = 0; i < 3; i++) {
            ssize_t m = cstr(p, end);
            if (m <= 0 || m > 7)
                return SOFT(x, "malformed REUC extension");
            modes[i] = 0;
            for (ssize_t k = 0; k < m; k++) {
                if (p[k] < '0' || p[k] > '7')
                    return SOFT(x, "malformed REUC extension");
                modes[i] = modes[i] * 8 + (unsigned)(p[k] - '0');
            }
            p += m + 1;
        }
        for (int i = 0; i < 3; i++) {
            if (!modes[i])
                continue;
            if (!valid_file_mode(modes[i]))
                return SOFT(x, "REUC extension: mode %o is not a Git file mode", modes[i]);
            const char *why = lz_git_path_problem(path, (size_t)n, modes[i]);
            if (why)
                return bad_path(x, "REUC entry", path, (size_t)n, why);
            if ((size_t)(end - p) < x->hl)
                return SOFT(x, "malformed REUC extension");
            p += x->hl;
        }
    }
    return 0;
}

/* UNTR (dir.c read_untracked_extension): untracked file names that
 * git status and git clean act on. Directory records are in preorder, so
 * counting pending children is enough; no recursion. */
static int ext_untr(struct ix *x, const uint8_t *p, const uint8_t *end) {
#define UNTR_BAD() SOFT(x, "malformed UNTR extension")
    uint64_t v, ndirs, set_valid, set_oid, set;
    size_t used;
    if (end - p < 2 || end[-1] != '\0')
        return UNTR_BAD();
    end--; /* the extension ends with a NUL */
    if (!varint(&p, end, (size_t)(end - p), &v))
        return UNTR_BAD();
    p += v; /* ident: "Location <path>, system <uname>" */
    if ((size_t)(end - p) < 2 * STAT_DATA + 4 + 2 * (size_t)x->hl + 1)
        return UNTR_BAD();
    p += 2 * STAT_DATA + 4 + 2 * x->hl;
    ssize_t n = cstr(p, end); /* exclude_per_dir, normally ".gitignore" */
    if (n < 0)
        return UNTR_BAD();
    if (n > 0 && check_component(x, "UNTR exclude file", p, (size_t)n, false) < 0)
        return -EPERM;
    p += n + 1;
    if (p == end)
        return 0;
    if (!varint(&p, end, (size_t)(end - p), &ndirs) || ndirs == 0)
        return UNTR_BAD();
    uint64_t seen = 0;
    for (uint64_t pending = 1; pending; pending--, seen++) {
        uint64_t nu, nd;
        if (!varint(&p, end, (size_t)(end - p), &nu) || !varint(&p, end, (size_t)(end - p), &nd))
            return UNTR_BAD();
        pending += nd; /* each child needs >= 3 bytes, so bounded by the data */
        if ((n = cstr(p, end)) < 0 || (seen == 0) != (n == 0))
            return UNTR_BAD();
        if (n && check_component(x, "UNTR directory", p, (size_t)n, false) < 0)
            return -EPERM;
        p += n + 1;
        for (uint64_t k = 0; k < nu; k++, p += n + 1)
            if ((n = cstr(p, end)) < 0 || check_component(x, "UNTR entry", p, (size_t)n, true) < 0)
                return n < 0 ? UNTR_BAD() : -EPERM;
    }
    if (seen != ndirs)
        return UNTR_BAD();
    /* valid, check-only and hash-valid bitmaps, indexed by directory; then
     * stat data per valid directory and a hash per hash-valid one. */
    if (!ewah(p, (size_t)(end - p), ndirs, &used, &set_valid))
        return UNTR_BAD();
    p += used;
    if (!ewah(p, (size_t)(end - p), ndirs, &used, &set))
        return UNTR_BAD();
    p += used;
    if (!ewah(p, (size_t)(end - p), ndirs, &used, &set_oid))
        return UNTR_BAD();
    p += used;
    if ((uint64_t)(end - p) != set_valid * STAT_DATA + set_oid * x->hl)
        return UNTR_BAD();
    return 0;
#undef UNTR_BAD
}

/* FSMN (fsmonitor.c): version 1 has a timestamp, version 2 an opaque token
 * that Git passes to the developer's core.fsmonitor hook; the token must
 * not be able to smuggle shell syntax or arguments. */
static int ext_fsmn(struct ix *x, const uint8_t *p, const uint8_t *end) {
    uint64_t set;
    size_t used;
    if (end - p < 4)
        return SOFT(x, "malformed FSMN extension");
    uint32_t ver = be32(p);
    p += 4;
    if (ver == 1) {
        if (end - p < 8)
            return SOFT(x, "malformed FSMN extension");
        p += 8;
    } else if (ver == 2) {
        ssize_t n = cstr(p, end);
        if (n < 0)
            return SOFT(x, "malformed FSMN extension");
        for (ssize_t i = 0; i < n; i++)
            if (p[i] <= ' ' || p[i] >= 0x7f || p[i] == '"' || p[i] == '\'' || p[i] == '\\')
                return bad_path(x, "FSMN token", p, (size_t)n, "not a plain printable token");
        p += n + 1;
    } else {
        return SOFT(x, "FSMN extension version %u unknown", ver);
    }
    if (end - p < 4 || be32(p) != (size_t)(end - p - 4))
        return SOFT(x, "malformed FSMN extension");
    p += 4;
    if (!ewah(p, (size_t)(end - p), x->has_link ? UINT64_MAX : x->nr, &used, &set) || used != (size_t)(end - p) ||
        (!x->has_link && be32(p) > x->nr))
        return SOFT(x, "malformed FSMN bitmap");
    return 0;
}

/* link (split-index.c): the shared index's hash, then optionally the
 * delete and replace bitmaps (positions in the shared index). */
static int ext_link(struct ix *x, const uint8_t *p, const uint8_t *end) {
    uint64_t set;
    size_t used;
    if ((size_t)(end - p) < x->hl)
        return FAIL(x, -EINVAL, "malformed link extension");
    p += x->hl;
    for (int i = 0; i < 2 && p < end; i++, p += used)
        if (!ewah(p, (size_t)(end - p), UINT64_MAX, &used, &set))
            return FAIL(x, -EINVAL, "malformed link extension bitmap");
    return p == end ? 0 : FAIL(x, -EINVAL, "malformed link extension");
}

/* IEOT: blocks of entries a threaded reader parses independently. Each
 * block must start where our sequential parse found that entry, together
 * they must cover every entry, and in v4 a block's first name must not
 * depend on the previous name (the threaded reader starts from ""). */
static int ext_ieot(struct ix *x, const uint8_t *p, const uint8_t *end) {
    size_t n = (size_t)(end - p);
    if (n < 4 || be32(p) != 1 || (n - 4) % 8)
        return PERM(x, "malformed IEOT extension");
    uint64_t at = 0;
    for (p += 4; p < end; p += 8) {
        uint32_t off = be32(p), cnt = be32(p + 4);
        uint32_t want = at < x->nr ? x->offs[at] & ~(1u << 31) : (uint32_t)x->ents_end;
        if (off != want || cnt > x->nr - at)
            return PERM(x, "IEOT extension does not match the entries");
        if (x->version == 4 && at > 0 && at < x->nr && !(x->offs[at] >> 31))
            return PERM(x, "IEOT block starts with a prefix-compressed name");
        at += cnt;
    }
    return at == x->nr ? 0 : PERM(x, "IEOT extension does not cover all entries");
}

enum { E_TREE, E_REUC, E_LINK, E_UNTR, E_FSMN, E_EOIE, E_IEOT, E_SDIR, E_N };
static const char ext_sig[E_N][5] = { "TREE", "REUC", "link", "UNTR", "FSMN", "EOIE", "IEOT", "sdir" };

static int parse_extensions(struct ix *x) {
    size_t o = x->ents_end, start[E_N];
    bool seen[E_N] = { false };
    int r = 0;
    /* First pass: framing, and which extensions there are (entries with
     * empty names and the TREE/FSMN bounds depend on link being present). */
    /* Git's loop stops when fewer than 8 bytes are left; an extension
     * running past the checksum makes its readers read past the file. */
    if (o > x->end)
        return SOFT(x, "entries run into the checksum");
    while (x->end - o >= 8) {
        if (be32(x->b + o + 4) > x->end - o - 8)
            return FAIL(x, -EINVAL, "extension at offset %zu runs past the end", o);
        const uint8_t *s = x->b + o;
        size_t k;
        for (k = 0; k < E_N && memcmp(s, ext_sig[k], 4) != 0; k++)
            ;
        if (k < E_N) {
            if (seen[k])
                PERM(x, "extension %s appears twice", ext_sig[k]);
            else
                start[k] = o;
            seen[k] = true;
        } else if (s[0] < 'A' || s[0] > 'Z') {
            char e[32];
            return FAIL(x, -EINVAL, "unknown required extension \"%s\"", esc(s, 4, e, sizeof e));
        }
        o += 8 + be32(s + 4);
    }
    if (o != x->end)
        SOFT(x, "%zu stray bytes after the extensions", x->end - o);
    x->has_link = seen[E_LINK];
    x->has_sdir = seen[E_SDIR];
    for (size_t k = 0; k < E_N && !x->hard; k++) {
        if (!seen[k])
            continue;
        const uint8_t *p = x->b + start[k] + 8, *end = p + be32(x->b + start[k] + 4);
        switch (k) {
        case E_TREE: r = ext_tree(x, p, end); break;
        case E_REUC: r = ext_reuc(x, p, end); break;
        case E_LINK: r = ext_link(x, p, end); break;
        case E_UNTR: r = ext_untr(x, p, end); break;
        case E_FSMN: r = ext_fsmn(x, p, end); break;
        case E_IEOT: r = ext_ieot(x, p, end); break;
        case E_SDIR:
            if (p != end)
                SOFT(x, "sdir extension is not empty");
            break;
        case E_EOIE:
            /* Offset of the first extension, for a threaded reader; Git
             * writes it last, hashing the extension headers. */
            if ((size_t)(end - p) != 4 + x->hl || end != x->b + x->end || be32(p) != x->ents_end)
                PERM(x, "EOIE extension does not match the index");
            break;
        default: break;
        }
    }
    if (x->hard)
        return r; /* link: Git dies on it */
    /* Git finds EOIE by looking at a fixed distance from the end, whatever
     * came before; bytes there that look like one (we cannot check its
     * SHA-1) must be the real, checked EOIE. */
    size_t at = x->len - x->hl - 12 - x->hl;
    if (x->len >= HDR_SIZE + 12 + 2 * (size_t)x->hl && at >= HDR_SIZE && !memcmp(x->b + at, "EOIE", 4) &&
        be32(x->b + at + 4) == 4 + x->hl && !(seen[E_EOIE] && start[E_EOIE] == at))
        return PERM(x, "bytes that read as an EOIE extension inside another extension");
    if (x->first_empty != UINT32_MAX && !x->has_link)
        return PERM(x, "entry %u has an empty name outside a split index", x->first_empty);
    if (x->first_dir != UINT32_MAX && !x->has_sdir)
        return PERM(x, "entry %u is a directory but the index has no sdir extension", x->first_dir);
    return 0;
}

int lz_gitindex_check(const void *buf, size_t len, unsigned hash_len, struct lz_error *err) {
    struct ix x = {
        .b = buf, .len = len, .hl = hash_len, .err = err, .first_empty = UINT32_MAX, .first_dir = UINT32_MAX
    };
    if (hash_len != 20 && hash_len != 32)
        return FAIL(&x, -EINVAL, "object ID length %u is neither SHA-1 nor SHA-256", hash_len);
    if (!buf || len < HDR_SIZE + hash_len)
        return FAIL(&x, -EINVAL, "file too short");
    /* IEOT offsets are 32-bit (and signed in Git). */
    if (len > INT32_MAX)
        return FAIL(&x, -EINVAL, "file larger than 2 GiB");
    if (memcmp(buf, "DIRC", 4) != 0)
        return FAIL(&x, -EINVAL, "not an index (no DIRC signature)");
    x.version = be32(x.b + 4);
    x.nr = be32(x.b + 8);
    x.end = len - hash_len;
    if (x.version < 2 || x.version > 4)
        return FAIL(&x, -EINVAL, "unsupported index version %u", x.version);
    /* Smallest entry: v2/3 fixed part + 1-byte name + padding = 8k bytes >=
     * fixed+2; v4: fixed part + varint + NUL. */
    size_t min = ENTRY_FIXED + hash_len + 2 + 2;
    if (x.nr > (len - HDR_SIZE) / min)
        return FAIL(&x, -EINVAL, "entry count %u does not fit in the file", x.nr);
    x.offs = lz_xmalloc(((size_t)x.nr + 1) * sizeof *x.offs);
    int r = parse_entries(&x);
    if (!x.hard)
        r = parse_extensions(&x);
    free(x.offs);
    if (x.hard)
        return r; /* already in err */
    return x.worst.code ? lz_error_set(err, x.worst.code, "%s", x.worst.msg) : 0;
}

/* Would a Git whose object IDs are SHA-256 read these bytes at all? It
 * verifies the trailing hash of the content unless that is all zero
 * (index.skipHash). Only SHA-256 is computed here (there is no SHA-1 in
 * the tree): for a 20-byte reading the answer is always "maybe". */
static bool trailer_readable(const uint8_t *b, size_t len, unsigned hash_len) {
    if (hash_len != 32 || len < 32)
        return true;
    static const uint8_t zero[32];
    if (!memcmp(b + len - 32, zero, 32))
        return true;
    uint8_t h[crypto_hash_sha256_BYTES];
    crypto_hash_sha256(h, b, len - 32);
    return !memcmp(h, b + len - 32, 32);
}

int lz_gitindex_verify(const void *buf, size_t len, unsigned hash_len, struct lz_error *err) {
    int r = lz_gitindex_check(buf, len, hash_len, err);
    if (r < 0)
        return r;
    unsigned other = hash_len == 20 ? 32 : 20;
    r = lz_gitindex_check(buf, len, other, err);
    /* A reading Git itself would refuse (its trailing hash is wrong for
     * that length) opens no hole; without this, a real SHA-1 index whose
     * bytes happen to parse as SHA-256 with an oddity was refused. Hashed
     * only then: the common case costs no digest. */
    if (r == -EPERM && trailer_readable(buf, len, other))
        return lz_error_prefix(err, r, "read with %u-byte object IDs", other);
    if (err)
        memset(err, 0, sizeof *err);
    return 0;
}

/* ---- repository config ---------------------------------------------------- */

/* Just enough of Git's config syntax (config.c) to find the last
 * extensions.objectFormat: sections and keys are case-insensitive, a
 * section with a subsection is another section, values may be quoted,
 * escaped and continued with backslash-newline, # and ; start comments
 * outside quotes. Anything it does not understand skips to the next line. */
unsigned lz_git_config_hash_len(const char *text, size_t len) {
    if (!text)
        return 20;
    const char *p = text, *end = text + len;
    bool in_ext = false;
    unsigned hash = 20;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
            p++;
        if (p == end)
            break;
        if (*p == '#' || *p == ';') {
            while (p < end && *p != '\n')
                p++;
            continue;
        }
        if (*p == '[') {
            const char *s = ++p;
            while (p < end && *p != ']' && *p != '"' && *p != '\n' && *p != ' ' && *p != '\t')
                p++;
            /* `[extensions "x"]` or `[extensions.x]` is not [extensions]. */
            in_ext = p < end && *p == ']' && p - s == 10 && !strncasecmp(s, "extensions", 10);
            while (p < end && *p != ']' && *p != '\n')
                p++;
            if (p < end && *p == ']')
                p++;
            continue; /* a key may follow on the same line */
        }
        const char *k = p;
        while (p < end && (isalnum((unsigned char)*p) || *p == '-'))
            p++;
        bool match = in_ext && p - k == 12 && !strncasecmp(k, "objectformat", 12);
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        if (p == k || p == end || *p != '=') {
            /* A bare key (boolean) or junk: skip the line. */
            while (p < end && *p != '\n')
                p++;
            continue;
        }
        p++;
        char val[16];
        size_t vn = 0, keep = 0; /* keep: length without trailing blanks */
        bool quoted = false, over = false;
        while (p < end && (*p == ' ' || *p == '\t'))
            p++;
        for (; p < end; p++) {
            char c = *p;
            if (c == '\n' && !quoted)
                break;
            if (!quoted && (c == '#' || c == ';')) {
                while (p < end && *p != '\n')
                    p++;
                break;
            }
            if (c == '"') {
                quoted = !quoted;
                keep = vn;
                continue;
            }
            if (c == '\\' && p + 1 < end) {
                c = *++p;
                if (c == '\n')
                    continue; /* continuation */
                c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'b' ? '\b' : c;
            } else if (!quoted && (c == ' ' || c == '\t' || c == '\r')) {
                if (vn < sizeof val)
                    val[vn++] = c;
                continue;
            }
            if (vn < sizeof val)
                val[vn++] = c, keep = vn;
            else
                over = true;
        }
        if (match)
            hash = !over && keep == 6 && !strncasecmp(val, "sha256", 6) ? 32 : 20;
    }
    return hash;
}

int lz_gitindex_verify_fd(int index_fd, int gitdir_fd, struct lz_error *err) {
    _cleanup_free_ char *buf = NULL, *cfg = NULL;
    size_t len = 0, cfglen = 0;
    int r = lz_read_fd(index_fd, LZ_GITINDEX_MAX, &buf, &len);
    if (r == -EFBIG)
        return lz_error_set(err, r, "larger than Lazaret checks (%zu MiB)", LZ_GITINDEX_MAX >> 20);
    if (r < 0)
        return lz_error_errno(err, r, "cannot read the index");
    unsigned hl = 20;
    _cleanup_close_ int cfd = openat(gitdir_fd, "config", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (cfd >= 0 && lz_read_fd(cfd, 1 << 20, &cfg, &cfglen) == 0)
        hl = lz_git_config_hash_len(cfg, cfglen);
    return lz_gitindex_verify(buf, len, hl, err);
}
