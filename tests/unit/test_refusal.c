/* Unit tests for the routers' refusal records and the coordinator's
 * history of them (refusal.c), and the policy's reasons (router.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "refusal.h"

#include <sys/stat.h>

static ssize_t enc(uint8_t *buf, uint8_t why, uint8_t op, const char *p, const char *p2, const char *d) {
    return lz_refusal_encode(buf, LZ_REFUSAL_MAX, why, op, 0, EPERM, 0, p, p2, d);
}

static void test_roundtrip(void **state) {
    (void)state;
    uint8_t buf[LZ_REFUSAL_MAX];
    ssize_t n =
        lz_refusal_encode(buf, sizeof buf, LZ_REFW_GITNAME, LZ_ROP_MKDIR, 3, EPERM, 7, "newrepo/.git", NULL, "d");
    assert_true(n > 0);
    struct lz_refusal_rec r;
    assert_int_equal(lz_refusal_decode(buf, (size_t)n, &r), 0);
    assert_int_equal(r.why, LZ_REFW_GITNAME);
    assert_int_equal(r.op, LZ_ROP_MKDIR);
    assert_int_equal(r.tag, 3);
    assert_int_equal(r.err, EPERM);
    assert_int_equal(r.dropped, 7);
    assert_int_equal(r.path_len, strlen("newrepo/.git"));
    assert_memory_equal(r.path, "newrepo/.git", r.path_len);
    assert_int_equal(r.path2_len, 0);
    assert_int_equal(r.detail_len, 1);
    /* Every reason and operation the router sends has a name and a kind. */
    for (unsigned w = 0; w < 256; w++) {
        ssize_t k = enc(buf, (uint8_t)w, LZ_ROP_CREATE, "a", NULL, NULL);
        if (k < 0)
            continue;
        assert_int_equal(lz_refusal_decode(buf, (size_t)k, &r), 0);
        assert_string_not_equal(lz_refusal_why_name(r.why), "other");
        assert_string_not_equal(lz_refusal_why_text(r.why), "refused");
    }
    assert_true(enc(buf, LZ_REFW_NONE, LZ_ROP_CREATE, "a", NULL, NULL) < 0);
    assert_true(enc(buf, LZ_REFW_END, LZ_ROP_CREATE, "a", NULL, NULL) < 0);
    assert_true(enc(buf, LZ_REFW_SHAPE, 9, "a", NULL, NULL) < 0);
    assert_true(lz_refusal_encode(buf, sizeof buf, LZ_REFW_SHAPE, 0, LZ_REFUSAL_TAGS, EPERM, 0, "a", NULL, NULL) < 0);
    /* Too small a buffer. */
    assert_true(lz_refusal_encode(buf, 12, LZ_REFW_SHAPE, 0, 0, EPERM, 0, "abc", NULL, NULL) < 0);
}

static void test_decode_rejects(void **state) {
    (void)state;
    uint8_t buf[LZ_REFUSAL_MAX + 8];
    ssize_t n = enc(buf, LZ_REFW_PROTECTED, LZ_ROP_WRITE, "x/.git/config", "", "");
    struct lz_refusal_rec r;
    assert_int_equal(lz_refusal_decode(buf, (size_t)n, &r), 0);
    /* Every truncation, and a byte more. */
    for (ssize_t k = 0; k < n; k++)
        assert_int_equal(lz_refusal_decode(buf, (size_t)k, &r), -EBADMSG);
    buf[n] = 0;
    assert_int_equal(lz_refusal_decode(buf, (size_t)n + 1, &r), -EBADMSG);
    uint8_t c[LZ_REFUSAL_MAX];
    /* Version, why, op, tag, errno 0. */
    int idx[] = { 0, 1, 2, 3 };
    uint8_t bad[] = { 2, 200, 99, LZ_REFUSAL_TAGS };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(idx); i++) {
        memcpy(c, buf, (size_t)n);
        c[idx[i]] = bad[i];
        assert_int_equal(lz_refusal_decode(c, (size_t)n, &r), -EBADMSG);
    }
    memcpy(c, buf, (size_t)n);
    c[4] = c[5] = 0;
    assert_int_equal(lz_refusal_decode(c, (size_t)n, &r), -EBADMSG);
    /* A NUL inside the path; a length past the end. */
    memcpy(c, buf, (size_t)n);
    c[LZ_REFUSAL_HDR + 2 + 1] = 0;
    assert_int_equal(lz_refusal_decode(c, (size_t)n, &r), -EBADMSG);
    memcpy(c, buf, (size_t)n);
    c[LZ_REFUSAL_HDR] = 0xff;
    assert_int_equal(lz_refusal_decode(c, (size_t)n, &r), -EBADMSG);
    /* The longest record decodes; a path longer than the maximum is cut
     * by the encoder, never sent long. */
    static char longp[LZ_REFUSAL_PATH_MAX + 100];
    memset(longp, 'a', sizeof longp - 1);
    uint8_t big[LZ_REFUSAL_MAX];
    n = lz_refusal_encode(big, sizeof big, LZ_REFW_SHAPE, 0, 0, EPERM, 0, longp, longp, longp);
    assert_int_equal(n, LZ_REFUSAL_MAX);
    assert_int_equal(lz_refusal_decode(big, (size_t)n, &r), 0);
    assert_int_equal(r.path_len, LZ_REFUSAL_PATH_MAX);
    assert_int_equal(r.detail_len, LZ_REFUSAL_DETAIL_MAX);
}

static const struct lz_refusal_entry *add(struct lz_refusal_history *h, uint8_t why, uint8_t op, const char *p,
                                          const char *p2) {
    uint8_t buf[LZ_REFUSAL_MAX];
    ssize_t n = enc(buf, why, op, p, p2, NULL);
    assert_true(n > 0);
    struct lz_refusal_rec r;
    assert_int_equal(lz_refusal_decode(buf, (size_t)n, &r), 0);
    return lz_refusal_history_add(h, &r, "/workspace", 1000);
}

static void test_history_bounded(void **state) {
    (void)state;
    static struct lz_refusal_history h;
    const struct lz_refusal_entry *e = add(&h, LZ_REFW_GITNAME, LZ_ROP_MKDIR, "newrepo/.git", NULL);
    assert_string_equal(e->path, "/workspace/newrepo/.git");
    assert_null(e->path2);
    assert_int_equal(e->kind, LZ_REFK_NEW_REPO);
    char line[1024];
    lz_refusal_notice(e, line, sizeof line);
    assert_non_null(strstr(line, "refused mkdir /workspace/newrepo/.git (Operation not permitted)"));
    assert_non_null(strstr(line, "git-ignored directory"));
    assert_non_null(strstr(line, "lazaret events"));
    /* A flood: the ring keeps the newest, the totals count all. */
    char p[64];
    for (int i = 0; i < 3 * LZ_REFUSAL_HISTORY; i++) {
        snprintf(p, sizeof p, "d%d/.git", i);
        add(&h, LZ_REFW_GITNAME, LZ_ROP_MKDIR, p, NULL);
    }
    assert_int_equal(h.n, LZ_REFUSAL_HISTORY);
    assert_int_equal(h.total, 3 * LZ_REFUSAL_HISTORY + 1);
    assert_int_equal(h.by_kind[LZ_REFK_NEW_REPO], h.total);
    snprintf(p, sizeof p, "/workspace/d%d/.git", 2 * LZ_REFUSAL_HISTORY);
    assert_string_equal(lz_refusal_history_at(&h, 0)->path, p);
    snprintf(p, sizeof p, "/workspace/d%d/.git", 3 * LZ_REFUSAL_HISTORY - 1);
    assert_string_equal(lz_refusal_history_at(&h, LZ_REFUSAL_HISTORY - 1)->path, p);
    assert_int_equal(lz_refusal_history_at(&h, LZ_REFUSAL_HISTORY - 1)->seq, h.total);
    assert_null(lz_refusal_history_at(&h, LZ_REFUSAL_HISTORY));
    lz_refusal_history_clear(&h);
    assert_int_equal(h.n, 0);
}

static void test_escaped(void **state) {
    (void)state;
    static struct lz_refusal_history h;
    /* The agent chooses the bytes: an escape sequence, a bidi override,
     * invalid UTF-8. */
    const struct lz_refusal_entry *e =
        add(&h, LZ_REFW_GITNAME, LZ_ROP_MKDIR, "a\x1b]0;pwned\x07\xe2\x80\xae\xff/.git", NULL);
    assert_string_equal(e->path, "/workspace/a\\x1b]0;pwned\\x07\\u{202E}\\xff/.git");
    char line[1024];
    lz_refusal_notice(e, line, sizeof line);
    for (const char *s = line; *s; s++)
        assert_true((unsigned char)*s >= 0x20 && (unsigned char)*s < 0x7f);
    /* A rename's other end is in the same tree; a symlink's target is the
     * agent's text. */
    e = add(&h, LZ_REFW_IGNORED_XDEV, LZ_ROP_RENAME, "a", "node_modules/a");
    assert_string_equal(e->path2, "/workspace/node_modules/a");
    assert_int_equal(e->kind, LZ_REFK_IGNORED);
    e = add(&h, LZ_REFW_LINK_TARGET, LZ_ROP_SYMLINK, "l", "/home/u/.local");
    assert_string_equal(e->path2, "/home/u/.local");
    /* A long path is cut before it is escaped. */
    static char longp[LZ_REFUSAL_PATH_MAX];
    memset(longp, '\x1b', sizeof longp - 1);
    e = add(&h, LZ_REFW_SHAPE, LZ_ROP_CREATE, longp, NULL);
    assert_int_equal(strlen(e->path), strlen("/workspace/") + 4 * LZ_REFUSAL_SHOWN_MAX + 3);
    lz_refusal_notice(e, line, sizeof line);
    assert_true(strlen(line) < 700);
    lz_refusal_history_clear(&h);
}

static void test_altscreen(void **state) {
    (void)state;
    struct lz_altscreen a = { 0 };
    const char *on = "text\x1b[?1049hscreen";
    lz_altscreen_feed(&a, (const uint8_t *)on, strlen(on));
    assert_true(a.on);
    /* Split across reads, with another parameter. */
    const char *off1 = "\x1b[?25;10", *off2 = "49l$ ";
    lz_altscreen_feed(&a, (const uint8_t *)off1, strlen(off1));
    assert_true(a.on);
    lz_altscreen_feed(&a, (const uint8_t *)off2, strlen(off2));
    assert_false(a.on);
    const char *other = "\x1b[?25h\x1b[2J\x1b[?47h";
    lz_altscreen_feed(&a, (const uint8_t *)other, strlen(other));
    assert_true(a.on);
    const char *o2 = "\x1b[?1047l";
    lz_altscreen_feed(&a, (const uint8_t *)o2, strlen(o2));
    assert_false(a.on);
    /* Not private, or not those numbers: nothing. */
    const char *n = "\x1b[1049h\x1b[?104h\x1b\x1b[?1049";
    lz_altscreen_feed(&a, (const uint8_t *)n, strlen(n));
    assert_false(a.on);
    lz_altscreen_feed(&a, (const uint8_t *)"h", 1);
    assert_true(a.on);
}

/* The policy names the rule that refused. */
static int fake_has(void *ctx, const char *dir, const char *name) {
    (void)ctx;
    /* "bare" has HEAD and objects; "repo" holds .git. */
    if (!strcmp(dir, "bare"))
        return !strcmp(name, "HEAD") || !strcmp(name, "objects");
    if (!strcmp(dir, "repo"))
        return !strcmp(name, ".git");
    return 0;
}

static enum lz_router_why why_of(enum lz_router_op op, const char *path, const char *path2, unsigned type,
                                 int want_rc) {
    static const struct lz_router_fs fs = { .has_entry = fake_has };
    struct lz_router_policy pol = { .fs = &fs };
    struct lz_router_req q = { .op = op, .path = path, .path2 = path2, .type = type, .is_dir = S_ISDIR(type) };
    enum lz_router_why w = 99;
    assert_int_equal(lz_router_check_why(&pol, &q, &w), want_rc);
    return w;
}

static void test_policy_why(void **state) {
    (void)state;
    assert_int_equal(why_of(LZ_ROP_MKDIR, "newrepo/.git", NULL, S_IFDIR, -EPERM), LZ_RWHY_GITNAME);
    assert_int_equal(why_of(LZ_ROP_MKDIR, "bare/refs", NULL, S_IFDIR, -EPERM), LZ_RWHY_GIT_SHAPE);
    assert_int_equal(why_of(LZ_ROP_WRITE, ".git/config", NULL, 0, -EPERM), LZ_RWHY_PROTECTED);
    assert_int_equal(why_of(LZ_ROP_CREATE, ".git/hooks/pre-commit", NULL, 0, -EPERM), LZ_RWHY_PROTECTED);
    assert_int_equal(why_of(LZ_ROP_RMDIR, ".git/objects", NULL, 0, -EPERM), LZ_RWHY_ANCESTOR);
    assert_int_equal(why_of(LZ_ROP_WRITE, ".git/index", NULL, 0, -EPERM), LZ_RWHY_CHECKED);
    assert_int_equal(why_of(LZ_ROP_SYMLINK, ".git/COMMIT_EDITMSG", NULL, S_IFLNK, -EPERM), LZ_RWHY_GITDIR_ENTRY);
    assert_int_equal(why_of(LZ_ROP_RENAME, "repo", "repo2", S_IFDIR, -EPERM), LZ_RWHY_MOVE_REPO);
    assert_int_equal(why_of(LZ_ROP_LINK, "x", ".git/config", 0, -EPERM), LZ_RWHY_LINK_SOURCE);
    assert_int_equal(why_of(LZ_ROP_MKDIR, "src", NULL, S_IFDIR, 0), LZ_RWHY_NONE);
    /* Each has a kind the developer is told about. */
    assert_int_equal(lz_refusal_kind_of(LZ_RWHY_GITNAME), LZ_REFK_NEW_REPO);
    assert_int_equal(lz_refusal_kind_of(LZ_RWHY_PROTECTED), LZ_REFK_GIT_PROTECTED);
    assert_int_equal(lz_refusal_kind_of(LZ_REFW_HIDDEN_XDEV), LZ_REFK_IGNORED);
    assert_int_equal(lz_refusal_kind_of(LZ_REFW_SHAPE), LZ_REFK_OTHER);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip), cmocka_unit_test(test_decode_rejects), cmocka_unit_test(test_history_bounded),
        cmocka_unit_test(test_escaped),   cmocka_unit_test(test_altscreen),      cmocka_unit_test(test_policy_why),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
