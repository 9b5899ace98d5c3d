/* Unit tests for gitindex.c: real indexes written by the host's git pass;
 * crafted ones are refused. The crafted ones come from a small builder
 * (build()); test_control_* prove that the host's git reads the builder's
 * bytes and acts on them (writes .git/hooks/post-checkout), so a refusal
 * here is a refusal of something Git would really do. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <sodium.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "gitindex.h"
#include "util.h"

static char tmp[256];

/* ---- running git ---- */

/* Runs git with argv (NULL-terminated) in dir; returns its exit status and,
 * if out is non-NULL, its stdout (malloc'd, NUL-terminated). */
static int git_v(const char *dir, char **out, const char *const *argv) {
    int pfd[2];
    assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (chdir(dir) < 0)
            _exit(126);
        dup2(pfd[1], 1);
        int dn = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (!out)
            dup2(dn, 1);
        dup2(dn, 2);
        execvp("git", (char *const *)argv);
        _exit(127);
    }
    close(pfd[1]);
    size_t n = 0, cap = 4096;
    char *buf = lz_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap)
            buf = lz_xrealloc(buf, cap *= 2);
        ssize_t r = read(pfd[0], buf + n, cap - n - 1);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    buf[n] = '\0';
    close(pfd[0]);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (out)
        *out = buf;
    else
        free(buf);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

#define GIT_RC(dir, ...) git_v(dir, NULL, (const char *const[]){ "git", __VA_ARGS__, NULL })
#define GIT(dir, ...)                                                                                                  \
    do {                                                                                                               \
        if (GIT_RC(dir, __VA_ARGS__) != 0)                                                                             \
            fail_msg("git %s failed in %s", ((const char *const[]){ __VA_ARGS__ })[0], dir);                           \
    } while (0)

static char *git_out(const char *dir, const char *const *argv) {
    char *out = NULL;
    if (git_v(dir, &out, argv) != 0)
        fail_msg("git %s failed", argv[1]);
    size_t n = strlen(out);
    while (n && out[n - 1] == '\n')
        out[--n] = '\0';
    return out;
}
#define GIT_OUT(dir, ...) git_out(dir, (const char *const[]){ "git", __VA_ARGS__, NULL })

static char *path_in(const char *a, const char *b) { return lz_xasprintf("%s/%s", a, b); }

static void write_file(const char *dir, const char *name, const char *text) {
    _cleanup_free_ char *p = path_in(dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(lz_write_full(fd, text, strlen(text)), 0);
    close(fd);
}

static uint8_t *read_all(const char *dir, const char *name, size_t *len) {
    char *buf = NULL;
    _cleanup_free_ char *p = path_in(dir, name);
    assert_int_equal(lz_read_file_at(AT_FDCWD, p, 1u << 30, &buf, len), 0);
    return (uint8_t *)buf;
}

static char *new_repo(const char *name, const char *fmt) {
    char *dir = path_in(tmp, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    if (fmt)
        GIT(dir, "init", "-q", "--object-format", fmt);
    else
        GIT(dir, "init", "-q");
    return dir;
}

static bool has_ext(const uint8_t *b, size_t n, const char *sig) { return memmem(b, n, sig, 4) != NULL; }

/* The index of dir must pass with its hash length (and the router's rule). */
static void expect_ok(const char *dir, const char *file, unsigned hl) {
    size_t n;
    _cleanup_free_ uint8_t *b = read_all(dir, file, &n);
    struct lz_error err = { 0 };
    int r = lz_gitindex_verify(b, n, hl, &err);
    if (r != 0)
        fail_msg("%s/%s: %d %s", dir, file, r, err.msg);
}

/* ---- real indexes ---- */

static void test_real_indexes(void **state) {
    (void)state;
    _cleanup_free_ char *d = new_repo("real", NULL);
    _cleanup_free_ char *sub = path_in(d, "b");
    assert_int_equal(mkdir(sub, 0755), 0);
    write_file(d, "a", "a\n");
    write_file(d, "b/c", "c\n");
    write_file(d, "a-b", "x\n");
    _cleanup_free_ char *l = path_in(d, "l");
    assert_int_equal(symlink("a", l), 0);
    GIT(d, "add", ".");
    GIT(d, "commit", "-qm", "one");
    expect_ok(d, ".git/index", 20);

    /* gitlink and symlink entries */
    _cleanup_free_ char *head = GIT_OUT(d, "rev-parse", "HEAD");
    _cleanup_free_ char *ci = lz_xasprintf("160000,%s,sub", head);
    GIT(d, "update-index", "--add", "--cacheinfo", ci);
    expect_ok(d, ".git/index", 20);

    /* v3: an intent-to-add entry needs extended flags */
    write_file(d, "new", "n\n");
    GIT(d, "add", "-N", "new");
    GIT(d, "update-index", "--index-version", "3");
    size_t n;
    _cleanup_free_ uint8_t *b = read_all(d, ".git/index", &n);
    assert_int_equal(b[7], 3);
    expect_ok(d, ".git/index", 20);

    /* v4 */
    GIT(d, "update-index", "--index-version", "4");
    free(b);
    b = read_all(d, ".git/index", &n);
    assert_int_equal(b[7], 4);
    expect_ok(d, ".git/index", 20);

    /* untracked cache */
    write_file(d, "untracked", "u\n");
    write_file(d, "b/untracked2", "u\n");
    GIT(d, "update-index", "--untracked-cache");
    GIT(d, "-c", "core.untrackedCache=true", "status", "--porcelain");
    free(b);
    b = read_all(d, ".git/index", &n);
    assert_true(has_ext(b, n, "UNTR"));
    expect_ok(d, ".git/index", 20);

    /* EOIE and IEOT (threaded readers) */
    GIT(d, "-c", "index.threads=2", "-c", "index.recordEndOfIndexEntries=true", "-c", "index.recordOffsetTable=true",
        "update-index", "--index-version", "2");
    free(b);
    b = read_all(d, ".git/index", &n);
    assert_true(has_ext(b, n, "EOIE"));
    expect_ok(d, ".git/index", 20);
    /* a threaded reader must see the same entries: tampered offsets are
     * refused (the untampered index above is the control) */
    uint8_t *ie = memmem(b, n, "IEOT", 4), *eo = memmem(b, n, "EOIE", 4);
    assert_non_null(ie);
    assert_non_null(eo);
    ie[8 + 4 + 8 + 3] ^= 8; /* second block's offset */
    assert_int_equal(lz_gitindex_verify(b, n, 20, NULL), -EPERM);
    ie[8 + 4 + 8 + 3] ^= 8;
    eo[8 + 3] ^= 8; /* EOIE's offset of the first extension */
    assert_int_equal(lz_gitindex_verify(b, n, 20, NULL), -EPERM);
    eo[8 + 3] ^= 8;

    /* split index, and its shared index */
    GIT(d, "update-index", "--split-index");
    write_file(d, "a", "changed\n");
    GIT(d, "add", "a");
    free(b);
    b = read_all(d, ".git/index", &n);
    assert_true(has_ext(b, n, "link"));
    expect_ok(d, ".git/index", 20);
    _cleanup_free_ char *gd = path_in(d, ".git");
    int found = 0;
    DIR *dp = opendir(gd);
    assert_non_null(dp);
    for (struct dirent *de; (de = readdir(dp));)
        if (!strncmp(de->d_name, "sharedindex.", 12)) {
            _cleanup_free_ char *f = lz_xasprintf(".git/%s", de->d_name);
            expect_ok(d, f, 20);
            found++;
        }
    closedir(dp);
    assert_true(found > 0);
}

static void test_real_sparse_sha256_conflict(void **state) {
    (void)state;
    /* sparse index */
    _cleanup_free_ char *d = new_repo("sparse", NULL);
    for (int i = 0; i < 3; i++) {
        _cleanup_free_ char *dn = lz_xasprintf("%s/d%d", d, i);
        assert_int_equal(mkdir(dn, 0755), 0);
        _cleanup_free_ char *f = lz_xasprintf("d%d/f", i);
        write_file(d, f, "f\n");
    }
    write_file(d, "top", "t\n");
    GIT(d, "add", ".");
    GIT(d, "commit", "-qm", "one");
    GIT(d, "sparse-checkout", "init", "--cone", "--sparse-index");
    GIT(d, "sparse-checkout", "set", "d0");
    size_t n;
    _cleanup_free_ uint8_t *b = read_all(d, ".git/index", &n);
    assert_true(has_ext(b, n, "sdir"));
    assert_non_null(memmem(b, n, "d1/", 4)); /* "d1/\0": a directory entry */
    expect_ok(d, ".git/index", 20);

    /* SHA-256 */
    _cleanup_free_ char *s = new_repo("sha256", "sha256");
    write_file(s, "x", "x\n");
    GIT(s, "add", "x");
    GIT(s, "commit", "-qm", "one");
    expect_ok(s, ".git/index", 32);
    _cleanup_free_ char *cfg_path = path_in(s, ".git/config");
    size_t cn;
    _cleanup_free_ uint8_t *cfg = read_all(s, ".git/config", &cn);
    assert_int_equal(lz_git_config_hash_len((const char *)cfg, cn), 32);

    /* conflict: stages 1-3, then resolve-undo after resolving */
    _cleanup_free_ char *c = new_repo("conflict", NULL);
    write_file(c, "f", "base\n");
    GIT(c, "add", "f");
    GIT(c, "commit", "-qm", "base");
    GIT(c, "checkout", "-qb", "side");
    write_file(c, "f", "side\n");
    GIT(c, "commit", "-qam", "side");
    GIT(c, "checkout", "-q", "-");
    write_file(c, "f", "main\n");
    GIT(c, "commit", "-qam", "main");
    assert_int_not_equal(GIT_RC(c, "merge", "-q", "side"), 0);
    _cleanup_free_ char *stages = GIT_OUT(c, "ls-files", "-s");
    assert_non_null(strstr(stages, " 3\tf"));
    expect_ok(c, ".git/index", 20);
    write_file(c, "f", "resolved\n");
    GIT(c, "add", "f");
    free(b);
    b = read_all(c, ".git/index", &n);
    assert_true(has_ext(b, n, "REUC"));
    expect_ok(c, ".git/index", 20);

    /* every prefix of a real index with extensions is refused as
     * malformed, or (cut exactly at an extension boundary, where the
     * checksum we do not verify would be wrong) accepted; never -EPERM */
    free(b);
    b = read_all(c, ".git/index", &n);
    int zeros = 0;
    for (size_t k = 0; k < n; k++) {
        uint8_t *cp = lz_xmalloc(k ? k : 1);
        memcpy(cp, b, k);
        int r = lz_gitindex_verify(cp, k, 20, NULL);
        free(cp);
        if (r != -EINVAL && r != 0)
            fail_msg("prefix %zu: %d", k, r);
        zeros += r == 0;
    }
    assert_true(zeros <= 3);
}

/* ---- the builder ---- */

struct ent {
    const char *name;
    unsigned mode, stage, f2;
    size_t nlen; /* 0: strlen(name) */
};

struct bld {
    uint8_t *b;
    size_t n, cap;
};

static void put(struct bld *o, const void *p, size_t n) {
    if (o->n + n > o->cap)
        o->b = lz_xrealloc(o->b, o->cap = (o->n + n) * 2 + 64);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}
static void put32(struct bld *o, uint32_t v) {
    uint8_t x[4] = { v >> 24, v >> 16, v >> 8, v };
    put(o, x, 4);
}
static void put16(struct bld *o, unsigned v) {
    uint8_t x[2] = { (uint8_t)(v >> 8), (uint8_t)v };
    put(o, x, 2);
}

static uint8_t oid[32];

/* Emits an index of version ver with hash length hl, the entries, the
 * extension bytes ext (already framed) and a zero checksum (Git does not
 * verify it on reads). */
static struct bld build(unsigned ver, unsigned hl, const struct ent *e, size_t ne, const void *ext, size_t extn) {
    struct bld o = { 0 };
    put(&o, "DIRC", 4);
    put32(&o, ver);
    put32(&o, (uint32_t)ne);
    const char *prev = "";
    size_t prevn = 0;
    for (size_t i = 0; i < ne; i++) {
        size_t nl = e[i].nlen ? e[i].nlen : strlen(e[i].name), start = o.n;
        uint8_t stat[24] = { 0 };
        put(&o, stat, 24);
        put32(&o, e[i].mode);
        put(&o, stat, 12);
        put(&o, oid, hl);
        put16(&o, (e[i].f2 ? 0x4000u : 0) | e[i].stage << 12 | (nl < 0xfff ? nl : 0xfff));
        if (e[i].f2)
            put16(&o, e[i].f2);
        if (ver == 4) {
            size_t common = 0;
            while (common < prevn && common < nl && prev[common] == e[i].name[common])
                common++;
            uint64_t v = prevn - common;
            uint8_t vb[16];
            unsigned pos = sizeof vb - 1;
            vb[pos] = v & 127;
            while (v >>= 7)
                vb[--pos] = 128 | (--v & 127);
            put(&o, vb + pos, sizeof vb - pos);
            put(&o, e[i].name + common, nl - common);
            put(&o, "", 1);
        } else {
            put(&o, e[i].name, nl);
            uint8_t pad[8] = { 0 };
            put(&o, pad, 8 - (o.n - start) % 8);
        }
        prev = e[i].name;
        prevn = nl;
    }
    if (extn)
        put(&o, ext, extn);
    uint8_t sum[32] = { 0 };
    put(&o, sum, hl);
    return o;
}

#define REG (S_IFREG | 0644)
#define ENTS(...) ((const struct ent[]){ __VA_ARGS__ }), LZ_ARRAY_SIZE(((const struct ent[]){ __VA_ARGS__ }))

static int check_ents_e(unsigned ver, const struct ent *e, size_t ne, struct lz_error *err) {
    struct bld o = build(ver, 20, e, ne, NULL, 0);
    int r = lz_gitindex_verify(o.b, o.n, 20, err);
    free(o.b);
    return r;
}

static int check_ents(unsigned ver, const struct ent *e, size_t ne) { return check_ents_e(ver, e, ne, NULL); }

static void expect_refused(unsigned ver, const struct ent *e, size_t ne) {
    struct lz_error err = { 0 };
    int r = check_ents_e(ver, e, ne, &err);
    if (r != -EPERM)
        fail_msg("v%u %s: got %d, want -EPERM", ver, e[ne - 1].name, r);
    assert_true(err.msg[0] != '\0');
}

static void test_builder_benign(void **state) {
    (void)state;
    for (unsigned v = 2; v <= 4; v++) {
        assert_int_equal(check_ents(v,
                                    ENTS({ "a", REG }, { "a-b", S_IFLNK }, { "a.c", REG }, { "b/c", REG },
                                         { "b/d", S_IFREG | 0755 }, { "sub", 0160000 })),
                         0);
        /* conflict stages */
        assert_int_equal(check_ents(v, ENTS({ "f", REG, 1 }, { "f", REG, 2 }, { "f", REG, 3 })), 0);
    }
    assert_int_equal(check_ents(3, ENTS({ "a", REG, 0, 0x2000 })), 0);
}

static void test_bad_paths(void **state) {
    (void)state;
    static const char *const bad[] = {
        ".git/hooks/post-checkout",
        ".GIT/config",
        "../x",
        "a/../../x",
        "/abs",
        "a//b",
        "a/",
        ".git./config",
        ".git . ./config",
        "git~1/config",
        "GIT~1/config",
        ".g\xe2\x80\x8cit/config",
        "\xef\xbb\xbf.git/config",
        ".git::$INDEX_ALLOCATION/config",
        "a\\.git\\config",
        "a/.",
        ".",
        "..",
        "x/.git",
        ".git",
    };
    for (unsigned v = 2; v <= 4; v++)
        for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++)
            expect_refused(v, (const struct ent[]){ { bad[i], REG } }, 1);
    /* NUL inside a name (v2/3 take the length from the flags) */
    expect_refused(2, ENTS({ "a\0b", REG, 0, 0, 3 }));
    /* symlinks Git reads through */
    static const char *const links[] = {
        ".gitmodules", ".GITMODULES", "gitmod~1",      "gi7eba~1",      ".gitattributes",
        ".gitignore",  ".mailmap",    "d/.gitmodules", ".gitmodules .", ".git\xe2\x80\x8dmodules"
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(links); i++)
        expect_refused(2, (const struct ent[]){ { links[i], S_IFLNK } }, 1);
    /* ... which are fine as files */
    assert_int_equal(check_ents(2, ENTS({ ".gitmodules", REG })), 0);
    assert_int_equal(lz_git_path_check(".github/x", 9, REG), 0);
    assert_int_equal(lz_git_path_check("a.git", 5, REG), 0);
    assert_int_equal(lz_git_path_check("d/", 2, S_IFDIR), 0);
    assert_int_equal(lz_git_path_check("d/", 2, REG), -EPERM);
    /* order, duplicates, nesting below links */
    expect_refused(2, ENTS({ "b", REG }, { "a", REG }));
    expect_refused(2, ENTS({ "a", REG }, { "a", REG }));
    expect_refused(2, ENTS({ "a", REG, 0 }, { "a", REG, 2 }));
    expect_refused(2, ENTS({ "a", S_IFLNK }, { "a/b", REG }));
    expect_refused(4, ENTS({ "a", S_IFLNK }, { "a-b", REG }, { "a.c", S_IFLNK }, { "a/b", REG }));
    expect_refused(2, ENTS({ "a", S_IFLNK }, { "a-b", S_IFLNK }, { "a-b/c", REG }));
    expect_refused(2, ENTS({ "sub", 0160000 }, { "sub/x", REG }));
    /* empty names only in a split index; directories only in a sparse one */
    expect_refused(2, ENTS({ "", REG }));
    expect_refused(3, ENTS({ "d/", S_IFDIR, 0, 0x4000 }));
}

static void test_structure(void **state) {
    (void)state;
    /* Git finds EOIE at a fixed distance from the end: a look-alike inside
     * an optional extension would send a threaded reader elsewhere */
    uint8_t look[8 + 32] = "Zzzz\0\0\0\x20"
                           "EOIE\0\0\0\x18";
    struct bld lo = build(2, 20, ENTS({ "a", REG }), look, sizeof look);
    assert_int_equal(lz_gitindex_verify(lo.b, lo.n, 20, NULL), -EPERM);
    lo.b[lo.n - 20 - 32 + 3] = 'F'; /* control: "EOIF" is just data */
    assert_int_equal(lz_gitindex_verify(lo.b, lo.n, 20, NULL), 0);
    free(lo.b);
    /* v4 + IEOT: a threaded reader starts each block from an empty name, so
     * a block starting with a prefix-compressed name reads differently */
    static const uint8_t two[] = "IEOT\0\0\0\x14"
                                 "\0\0\0\1"
                                 "\0\0\0\x0c\0\0\0\1"
                                 "\0\0\0\x4d\0\0\0\1";
    lo = build(4, 20, ENTS({ "a", REG }, { "ab", REG }), two, sizeof two - 1);
    struct lz_error ie = { 0 };
    assert_int_equal(lz_gitindex_verify(lo.b, lo.n, 20, &ie), -EPERM);
    assert_non_null(strstr(ie.msg, "IEOT block starts with a prefix-compressed name"));
    free(lo.b);
    static const uint8_t one_block[] = "IEOT\0\0\0\x0c"
                                       "\0\0\0\1"
                                       "\0\0\0\x0c\0\0\0\2";
    lo = build(4, 20, ENTS({ "a", REG }, { "ab", REG }), one_block, sizeof one_block - 1);
    assert_int_equal(lz_gitindex_verify(lo.b, lo.n, 20, NULL), 0); /* control */
    free(lo.b);
    struct bld o = build(2, 20, ENTS({ "a", REG }), NULL, 0);
    assert_int_equal(lz_gitindex_check(o.b, o.n, 20, NULL), 0);
    o.b[7] = 5;
    assert_int_equal(lz_gitindex_check(o.b, o.n, 20, NULL), -EINVAL);
    o.b[7] = 1;
    assert_int_equal(lz_gitindex_check(o.b, o.n, 20, NULL), -EINVAL);
    o.b[7] = 2;
    memset(o.b + 8, 0xff, 4); /* huge count */
    assert_int_equal(lz_gitindex_check(o.b, o.n, 20, NULL), -EINVAL);
    free(o.b);
    /* extension length overflow; unknown required / optional extension */
    static const uint8_t over[] = { 'T', 'R', 'E', 'E', 0xff, 0xff, 0xff, 0xf0 };
    o = build(2, 20, ENTS({ "a", REG }), over, sizeof over);
    assert_int_equal(lz_gitindex_check(o.b, o.n, 20, NULL), -EINVAL);
    free(o.b);
    static const uint8_t req[] = { 'z', 'z', 'z', 'z', 0, 0, 0, 0 };
    o = build(2, 20, ENTS({ "a", REG }), req, sizeof req);
    assert_int_equal(lz_gitindex_check(o.b, o.n, 20, NULL), -EINVAL);
    o.b[o.n - 20 - 8] = 'Z';
    assert_int_equal(lz_gitindex_check(o.b, o.n, 20, NULL), 0);
    free(o.b);
    /* TREE with a bad name */
    static const uint8_t tree[] = "TREE\0\0\0\x10"
                                  "\0-1 1\n"
                                  ".git\0-1 0\n";
    o = build(2, 20, ENTS({ "a", REG }), tree, sizeof tree - 1);
    assert_int_equal(lz_gitindex_check(o.b, o.n, 20, NULL), -EPERM);
    memcpy(o.b + o.n - 20 - 10, "ok", 2); /* ".git" -> "okit": the control */
    assert_int_equal(lz_gitindex_check(o.b, o.n, 20, NULL), 0);
    free(o.b);
    /* REUC with a bad path */
    static const uint8_t reuc[] = "REUC\0\0\0\x14"
                                  "../x\0"
                                  "100644\0"
                                  "0\0"
                                  "0\0";
    struct bld e = { 0 };
    put(&e, reuc, sizeof reuc - 1);
    put(&e, oid, 20);
    e.b[7] = (uint8_t)(e.n - 8);
    o = build(2, 20, ENTS({ "a", REG }), e.b, e.n);
    assert_int_equal(lz_gitindex_check(o.b, o.n, 20, NULL), -EPERM);
    free(o.b);
    free(e.b);
}

/* FSMN version 2 with a token, and an empty bitmap. */
static int fsmn(const char *token) {
    struct bld e = { 0 };
    put(&e, "FSMN", 4);
    put32(&e, (uint32_t)(4 + strlen(token) + 1 + 4 + 12));
    put32(&e, 2);
    put(&e, token, strlen(token) + 1);
    put32(&e, 12);
    put32(&e, 1);
    put32(&e, 0);
    put32(&e, 0);
    struct bld o = build(2, 20, ENTS({ "a", REG }), e.b, e.n);
    int r = lz_gitindex_verify(o.b, o.n, 20, NULL);
    free(o.b);
    free(e.b);
    return r;
}

static void test_fsmn(void **state) {
    (void)state;
    assert_int_equal(fsmn("builtin:fake:1234:0"), 0);
    assert_int_equal(fsmn("1;touch x"), -EPERM);
    assert_int_equal(fsmn("a\"b"), -EPERM);
    assert_int_equal(fsmn("$(id)\n"), -EPERM);
}

/* Bytes that read as a safe SHA-256 index (entry "x") and as a SHA-1 index
 * whose entry is ".git/hooks": lz_gitindex_verify() refuses it either way. */
static void test_hash_confusion(void **state) {
    (void)state;
    uint8_t b[92 + 32] = { 0 };
    memcpy(b, "DIRC\0\0\0\2\0\0\0\1", 12);
    b[12 + 24] = 0x00, b[12 + 25] = 0x00, b[12 + 26] = 0x81, b[12 + 27] = 0xa4; /* 0100644 */
    b[72] = 0, b[73] = 10;                                                      /* SHA-1 flags: 10-byte name */
    memcpy(b + 74, ".git/hooks", 10);                                           /* SHA-1 name, NUL at 84 */
    b[84] = 0, b[85] = 1;                                                       /* SHA-256 flags: 1-byte name */
    b[86] = 'x';                                                                /* SHA-256 name, padded to 92 */
    memcpy(b + 92, "Zzzz\0\0\0\4", 8);                                          /* SHA-1: optional extension... */
    assert_int_equal(lz_gitindex_check(b, sizeof b, 32, NULL), 0);
    assert_int_equal(lz_gitindex_check(b, sizeof b, 20, NULL), -EPERM);
    struct lz_error err = { 0 };
    assert_int_equal(lz_gitindex_verify(b, sizeof b, 32, &err), -EPERM);
    assert_non_null(strstr(err.msg, ".git/hooks"));
    assert_int_equal(lz_gitindex_verify(b, sizeof b, 20, NULL), -EPERM);
}

/* The other way round: safe as SHA-1 (entry "x", then an optional
 * extension), ".git/hooks" as SHA-256. Refused when a SHA-256 Git would
 * read it (its trailer the SHA-256 of the content, or all zero:
 * index.skipHash); accepted when its trailer is wrong for SHA-256, which
 * Git refuses to read (a real SHA-1 index misread so was refused before). */
static void test_hash_confusion_trailer(void **state) {
    (void)state;
    uint8_t b[132] = { 0 };
    memcpy(b, "DIRC\0\0\0\2\0\0\0\1", 12);
    b[12 + 24] = 0x00, b[12 + 25] = 0x00, b[12 + 26] = 0x81, b[12 + 27] = 0xa4; /* 0100644 */
    b[72] = 0, b[73] = 1;                                                       /* SHA-1 flags: 1-byte name */
    b[74] = 'x';                                                                /* NUL at 75, padded to 76 */
    memcpy(b + 76, "Zzzz\0\0\0\x1c", 8); /* SHA-1: optional extension over 84..112 */
    b[84] = 0, b[85] = 10;               /* SHA-256 flags: 10-byte name */
    memcpy(b + 86, ".git/hooks", 10);    /* SHA-256 name, NUL at 96, padded to 100 */
    assert_int_equal(lz_gitindex_check(b, sizeof b, 20, NULL), 0);
    assert_int_equal(lz_gitindex_check(b, sizeof b, 32, NULL), -EPERM);
    /* all-zero trailer (skipHash): a SHA-256 Git reads it */
    assert_int_equal(lz_gitindex_verify(b, sizeof b, 20, NULL), -EPERM);
    /* its real SHA-256 */
    crypto_hash_sha256(b + 100, b, 100);
    struct lz_error err = { 0 };
    assert_int_equal(lz_gitindex_verify(b, sizeof b, 20, &err), -EPERM);
    assert_non_null(strstr(err.msg, ".git/hooks"));
    /* a trailer wrong for SHA-256: Git would die reading it that way */
    b[131] ^= 1;
    assert_int_equal(lz_gitindex_check(b, sizeof b, 32, NULL), -EPERM); /* the content still reads so */
    assert_int_equal(lz_gitindex_verify(b, sizeof b, 20, NULL), 0);
    assert_int_equal(lz_gitindex_verify(b, sizeof b, 32, NULL), -EPERM);
}

static void test_config(void **state) {
    (void)state;
    static const struct {
        const char *text;
        unsigned want;
    } cases[] = {
        { "[core]\n\tbare = false\n", 20 },
        { "[extensions]\n\tobjectformat = sha256\n", 32 },
        { "[Extensions]\nObjectFormat=\"sha256\" ; comment\n", 32 },
        { "[extensions] objectFormat = sha256\n", 32 },
        { "[extensions \"x\"]\nobjectformat = sha256\n", 20 },
        { "[extensions]\n# objectformat = sha256\n", 20 },
        { "[extensions]\nobjectformat = sha256\nobjectformat = sha1\n", 20 },
        { "[extensions]\nobjectformat = sha1\n[extensions]\nobjectformat = sha256\n", 32 },
        { "[core]\nobjectformat = sha256\n", 20 },
        { "[extensions]\nobjectformat = sha\\\n256\n", 32 },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++)
        if (lz_git_config_hash_len(cases[i].text, strlen(cases[i].text)) != cases[i].want)
            fail_msg("config %zu: want %u", i, cases[i].want);
}

/* Positive control: the host's git reads the builder's bytes and writes
 * the hook, in versions 2, 3 and 4. */
static void test_control_checkout_index(void **state) {
    (void)state;
    for (unsigned v = 2; v <= 4; v++) {
        _cleanup_free_ char *name = lz_xasprintf("control%u", v);
        _cleanup_free_ char *d = new_repo(name, NULL);
        write_file(d, "payload", "#!/bin/sh\necho pwned\n");
        _cleanup_free_ char *hex = GIT_OUT(d, "hash-object", "-w", "payload");
        for (int i = 0; i < 20; i++)
            sscanf(hex + 2 * i, "%2hhx", &oid[i]);
        /* v3 needs an entry with extended flags: an intent-to-add one */
        struct bld o = v == 3
            ? build(3, 20, ENTS({ ".git/hooks/post-checkout", S_IFREG | 0755 }, { "z", REG, 0, 0x2000 }), NULL, 0)
            : build(v, 20, ENTS({ ".git/hooks/post-checkout", S_IFREG | 0755 }), NULL, 0);
        _cleanup_free_ char *idx = path_in(d, ".git/index");
        assert_int_equal(lz_write_file_atomic_at(AT_FDCWD, idx, o.b, o.n, 0644), 0);
        struct lz_error err = { 0 };
        assert_int_equal(lz_gitindex_verify(o.b, o.n, 20, &err), -EPERM);
        free(o.b);
        _cleanup_free_ char *hook = path_in(d, ".git/hooks/post-checkout");
        assert_int_equal(access(hook, F_OK), -1);
        GIT_RC(d, "checkout-index", "-a", "-f");
        if (access(hook, F_OK) != 0)
            fail_msg("v%u: git did not write the hook: the builder does not make what Git acts on", v);
    }
    memset(oid, 0, sizeof oid);
}

/* ---- performance ---- */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void test_perf_30k(void **state) {
    (void)state;
    _cleanup_free_ char *d = new_repo("big", NULL);
    for (int i = 0; i < 300; i++) {
        _cleanup_free_ char *dn = lz_xasprintf("%s/dir%03d", d, i);
        assert_int_equal(mkdir(dn, 0755), 0);
        for (int j = 0; j < 100; j++) {
            _cleanup_free_ char *f = lz_xasprintf("dir%03d/file-%03d.c", i, j);
            write_file(d, f, "");
        }
    }
    GIT(d, "add", ".");
    static const char *const vers[] = { "4", "2" };
    for (size_t k = 0; k < 2; k++) {
        GIT(d, "-c", "index.threads=4", "-c", "index.recordEndOfIndexEntries=true", "-c",
            "index.recordOffsetTable=true", "update-index", "--index-version", vers[k]);
        size_t n;
        _cleanup_free_ uint8_t *b = read_all(d, ".git/index", &n);
        assert_true(has_ext(b, n, "IEOT"));
        double best = 1e9;
        for (int it = 0; it < 10; it++) {
            double t0 = now_ms();
            assert_int_equal(lz_gitindex_verify(b, n, 20, NULL), 0);
            double t = now_ms() - t0;
            best = t < best ? t : best;
        }
        print_message("30000-entry v%s index (%zu bytes): lz_gitindex_verify %.2f ms (best of 10)\n", vers[k], n, best);
        assert_true(best < 100);
    }
}

static int setup(void **state) {
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/lz-test-gitindex-XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    setenv("HOME", tmp, 1);
    setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
    unsetenv("GIT_DIR");
    unsetenv("GIT_INDEX_FILE");
    setenv("GIT_AUTHOR_NAME", "t", 1);
    setenv("GIT_AUTHOR_EMAIL", "t@example.invalid", 1);
    setenv("GIT_COMMITTER_NAME", "t", 1);
    setenv("GIT_COMMITTER_EMAIL", "t@example.invalid", 1);
    write_file(tmp, ".gitconfig", "[init]\n\tdefaultBranch = main\n[advice]\n\tdetachedHead = false\n");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    lz_rm_rf_at(AT_FDCWD, tmp);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_indexes),   cmocka_unit_test(test_real_sparse_sha256_conflict),
        cmocka_unit_test(test_builder_benign), cmocka_unit_test(test_bad_paths),
        cmocka_unit_test(test_structure),      cmocka_unit_test(test_fsmn),
        cmocka_unit_test(test_hash_confusion), cmocka_unit_test(test_hash_confusion_trailer),
        cmocka_unit_test(test_config),         cmocka_unit_test(test_control_checkout_index),
        cmocka_unit_test(test_perf_30k),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
