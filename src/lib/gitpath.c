/* gitpath.c — Git's path rules for index entries (see gitpath.h).
 *
 * Git's verify_path() (read-cache.c) with the strictest platform variants:
 * '.'/'..' and ".git" components, and their HFS+ (case-folded, ignorable
 * code points dropped) and NTFS (trailing dots and spaces, streams, 8.3
 * short names) spellings; for symlinks also the files Git reads from the
 * work tree (.gitmodules, .gitattributes, .gitignore, .mailmap).
 */
#include "gitpath.h"
#include "gitindex.h"

#include <sys/stat.h>

static bool is_sep(uint8_t c) { return c == '/' || c == '\\'; }

/* Decodes one UTF-8 sequence for the HFS+ comparison; returns the code
 * point, 0 at the end or on a malformed sequence (Git's next_hfs_char()
 * also gives 0 there). Overlong forms decode to their value: that only
 * makes more names look like ".git", never fewer. */
static uint32_t utf8_next(const uint8_t **pp, const uint8_t *end) {
    const uint8_t *p = *pp;
    if (p >= end)
        return 0;
    uint8_t b = *p;
    unsigned n = b < 0x80 ? 0 : b >= 0xc0 && b < 0xe0 ? 1 : b >= 0xe0 && b < 0xf0 ? 2 : b >= 0xf0 && b < 0xf8 ? 3 : 9;
    if (n == 9 || (size_t)(end - p) <= n)
        return *pp = end, 0;
    uint32_t c = n ? b & (0x3f >> n) : b;
    for (unsigned i = 1; i <= n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return *pp = end, 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    *pp = p + n + 1;
    return c;
}

/* HFS+ ignores these code points when comparing names (utf8.c). */
static bool hfs_ignorable(uint32_t c) {
    return (c >= 0x200c && c <= 0x200f) || (c >= 0x202a && c <= 0x202e) || (c >= 0x206a && c <= 0x206f) || c == 0xfeff;
}

static uint32_t hfs_next(const uint8_t **pp, const uint8_t *end) {
    uint32_t c;
    do
        c = utf8_next(pp, end);
    while (c && hfs_ignorable(c));
    return c;
}

/* Git's is_hfs_dot_generic(): does the component at p read as "." + needle
 * on HFS+ (case-folded, ignorables dropped)? A malformed byte after the
 * needle counts as a match, like Git. We also end components at '\\'. */
static bool hfs_dot(const uint8_t *p, const uint8_t *end, const char *needle) {
    if (hfs_next(&p, end) != '.')
        return false;
    for (; *needle; needle++) {
        uint32_t c = hfs_next(&p, end);
        if (c > 127 || (c | 0x20) != (uint32_t)*needle)
            return false;
    }
    uint32_t c = hfs_next(&p, end);
    return c == 0 || c == '/' || c == '\\';
}

static bool ieq(const uint8_t *p, const uint8_t *end, const char *s) {
    size_t n = strlen(s);
    if ((size_t)(end - p) < n)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((p[i] | 0x20) != (uint8_t)s[i] || (p[i] & 0x80))
            return false;
    return true;
}

/* NTFS drops trailing spaces and dots, and "name:stream" names a stream of
 * "name": true if p[i..] is such a tail up to the end of the component. */
static bool ntfs_tail(const uint8_t *p, const uint8_t *end, size_t i) {
    for (; p + i < end; i++) {
        uint8_t c = p[i];
        if (c == ':' || is_sep(c))
            return true;
        if (c != ' ' && c != '.')
            return false;
    }
    return true;
}

/* Git's is_ntfs_dotgit(): ".git" or its 8.3 short name "git~1", followed by
 * spaces/dots and a separator, a stream suffix or the end. */
static bool ntfs_dotgit(const uint8_t *p, const uint8_t *end) {
    if (p < end && p[0] == '.' && ieq(p + 1, end, "git"))
        return ntfs_tail(p, end, 4);
    if (ieq(p, end, "git~1"))
        return ntfs_tail(p, end, 5);
    return false;
}

/* Git's is_ntfs_dot_generic(): ".<name>" or one of its possible 8.3 short
 * names: the first six letters + "~1".."~4", or the hashed fall-back
 * `short_prefix` (e.g. "gi7eba~1" for .gitmodules). */
static bool ntfs_dot(const uint8_t *p, const uint8_t *end, const char *name, const char *short_prefix) {
    if (p < end && p[0] == '.' && ieq(p + 1, end, name))
        return ntfs_tail(p, end, 1 + strlen(name));
    char six[7];
    memcpy(six, name, 6);
    six[6] = '\0';
    if (ieq(p, end, six) && end - p >= 8 && p[6] == '~' && p[7] >= '1' && p[7] <= '4')
        return ntfs_tail(p, end, 8);
    bool tilde = false;
    for (size_t i = 0; i < 8; i++) {
        if (p + i >= end || p[i] == '\0')
            return false;
        if (tilde) {
            if (p[i] < '0' || p[i] > '9')
                return false;
        } else if (p[i] == '~') {
            if (p + i + 1 >= end || p[i + 1] < '1' || p[i + 1] > '9')
                return false;
            i++;
            tilde = true;
        } else if (i >= 6 || (p[i] & 0x80) || (p[i] | 0x20) != (uint8_t)short_prefix[i]) {
            return false;
        }
    }
    return ntfs_tail(p, end, 8);
}

/* Files Git reads from the work tree and must not follow as symlinks
 * (verify_path() refuses .gitmodules; fsck the others since Git 2.32). */
static const char *const dotfiles[][2] = {
    { "gitmodules", "gi7eba" },
    { "gitattributes", "gi7d29" },
    { "gitignore", "gi250a" },
    { "mailmap", "maba30" },
};

/* The checks Git's verify_path() makes at the start of each component; q
 * is the component start (after '/', or after '\\', which Windows treats as
 * a separator and Git's NTFS rules check after too). */
static const char *component_problem(const uint8_t *q, const uint8_t *end, unsigned mode) {
    if (q < end && q[0] == '.') {
        if (q + 1 == end || is_sep(q[1]))
            return "'.' component";
        if (q[1] == '.' && (q + 2 == end || is_sep(q[2])))
            return "'..' component";
    }
    if (hfs_dot(q, end, "git") || ntfs_dotgit(q, end))
        return ".git component (or an HFS+/NTFS spelling of it)";
    if (S_ISLNK(mode))
        for (size_t i = 0; i < LZ_ARRAY_SIZE(dotfiles); i++)
            if (hfs_dot(q, end, dotfiles[i][0]) || ntfs_dot(q, end, dotfiles[i][0], dotfiles[i][1]))
                return "symlink named like a file Git reads (.gitmodules, .gitattributes, .gitignore, .mailmap)";
    return NULL;
}

const char *lz_git_path_problem(const uint8_t *name, size_t len, unsigned mode) {
    const uint8_t *end = name + len;
    if (len == 0)
        return "empty path";
    if (memchr(name, '\0', len))
        return "NUL byte in path";
    if (len > LZ_GITINDEX_NAME_MAX)
        return "path too long";
    bool dir = S_ISDIR(mode);
    if (dir && name[len - 1] != '/')
        return "directory entry not ending in '/'";
    for (const uint8_t *s = name;;) {
        const uint8_t *e = memchr(s, '/', (size_t)(end - s));
        if (!e)
            e = end;
        if (s == e) {
            /* Only a sparse directory entry may end in '/'. */
            if (!(dir && s == end && s > name))
                return s == name ? "absolute path" : s == end ? "trailing '/'" : "empty component ('//')";
            return NULL;
        }
        for (const uint8_t *q = s; q; q = memchr(q, '\\', (size_t)(e - q)), q = q ? q + 1 : NULL) {
            const char *why = component_problem(q, end, mode);
            if (why)
                return why;
        }
        if (e == end)
            return NULL;
        s = e + 1;
    }
}

int lz_git_path_check(const char *name, size_t len, unsigned mode) {
    return lz_git_path_problem((const uint8_t *)name, len, mode) ? -EPERM : 0;
}
