/* test_prepare.c — the preparer (SR-15) and the image store (FR-22).
 * Layers are built in memory with libarchive's writer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <locale.h>
#include <sodium.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "image.h"
#include "imgtool.h"
#include "prepare.h"

/* ---- helpers ---- */

struct ent {
    char type; /* f d l h c b p */
    const char *path;
    const char *data; /* file content, symlink or hard link target */
    mode_t mode;      /* 0: default */
};

enum { F_NONE, F_GZIP, F_ZSTD };

static void *build_tar(const struct ent *e, size_t n, int filter, size_t *ret_len) {
    size_t cap = 8 << 20, used = 0;
    void *buf = lz_xmalloc(cap);
    struct archive *a = archive_write_new();
    assert_non_null(a);
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    if (filter == F_GZIP)
        assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    else if (filter == F_ZSTD)
        assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_memory(a, buf, cap, &used), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *ae = archive_entry_new();
        archive_entry_set_pathname(ae, e[i].path);
        archive_entry_set_mtime(ae, 1700000000, 0);
        size_t len = 0;
        switch (e[i].type) {
        case 'f':
            len = e[i].data ? strlen(e[i].data) : 0;
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_set_perm(ae, e[i].mode ? e[i].mode : 0644);
            archive_entry_set_size(ae, (la_int64_t)len);
            break;
        case 'd':
            archive_entry_set_filetype(ae, AE_IFDIR);
            archive_entry_set_perm(ae, e[i].mode ? e[i].mode : 0755);
            break;
        case 'l':
            archive_entry_set_filetype(ae, AE_IFLNK);
            archive_entry_set_perm(ae, 0777);
            archive_entry_set_symlink(ae, e[i].data);
            break;
        case 'h':
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_set_perm(ae, 0644);
            archive_entry_set_hardlink(ae, e[i].data);
            break;
        case 'c':
        case 'b':
            archive_entry_set_filetype(ae, e[i].type == 'c' ? AE_IFCHR : AE_IFBLK);
            archive_entry_set_perm(ae, 0666);
            archive_entry_set_rdevmajor(ae, 1);
            archive_entry_set_rdevminor(ae, 3);
            break;
        case 'p':
            archive_entry_set_filetype(ae, AE_IFIFO);
            archive_entry_set_perm(ae, e[i].mode ? e[i].mode : 0600);
            break;
        default: fail();
        }
        assert_int_equal(archive_write_header(a, ae), ARCHIVE_OK);
        if (len)
            assert_int_equal(archive_write_data(a, e[i].data, len), (la_ssize_t)len);
        archive_entry_free(ae);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    *ret_len = used;
    return buf;
}

struct fixture {
    char parent[64]; /* scratch dir; holds rootfs/ and outside/ */
    char rootfs[96];
    char outside[96];
    int root;
};

static int setup(void **state) {
    struct fixture *f = lz_xcalloc(1, sizeof *f);
    snprintf(f->parent, sizeof f->parent, "/tmp/lz-test-prepare-XXXXXX");
    if (!mkdtemp(f->parent))
        return -1;
    snprintf(f->rootfs, sizeof f->rootfs, "%s/rootfs", f->parent);
    snprintf(f->outside, sizeof f->outside, "%s/outside", f->parent);
    if (mkdir(f->rootfs, 0755) < 0 || mkdir(f->outside, 0755) < 0)
        return -1;
    f->root = open(f->rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    *state = f;
    return f->root < 0 ? -1 : 0;
}

static int teardown(void **state) {
    struct fixture *f = *state;
    close(f->root);
    lz_rm_rf_at(AT_FDCWD, f->parent);
    free(f);
    return 0;
}

static int apply(struct fixture *f, const struct ent *e, size_t n, int filter, struct lz_prepare_stats *st,
                 struct lz_error *err) {
    size_t len;
    void *buf = build_tar(e, n, filter, &len);
    struct lz_layer_opts o = { .stats = st };
    int r = lz_prepare_apply_layer_mem_opts(f->root, buf, len, &o, err);
    free(buf);
    return r;
}

#define APPLY_OK(f, ...)                                                                                               \
    do {                                                                                                               \
        const struct ent _e[] = { __VA_ARGS__ };                                                                       \
        struct lz_error _err = { 0 };                                                                                  \
        int _r = apply(f, _e, LZ_ARRAY_SIZE(_e), F_NONE, NULL, &_err);                                                 \
        if (_r < 0)                                                                                                    \
            fail_msg("apply: %d %s", _r, _err.msg);                                                                    \
    } while (0)

static int apply_expect_fail(struct fixture *f, const struct ent *e, size_t n, struct lz_error *err) {
    int r = apply(f, e, n, F_NONE, NULL, err);
    assert_true(r < 0);
    assert_true(err->msg[0] != '\0');
    return r;
}

static bool exists_in(struct fixture *f, const char *path) {
    struct stat st;
    return fstatat(f->root, path, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static bool dir_empty(const char *path) {
    DIR *d = opendir(path);
    assert_non_null(d);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n == 0;
}

/* Only rootfs/ and outside/ (empty) under the scratch parent. */
static void assert_nothing_outside(struct fixture *f) {
    assert_true(dir_empty(f->outside));
    DIR *d = opendir(f->parent);
    assert_non_null(d);
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "rootfs") &&
            strcmp(de->d_name, "outside"))
            fail_msg("unexpected %s in %s", de->d_name, f->parent);
    closedir(d);
}

static char *read_in(struct fixture *f, const char *path) {
    char *buf = NULL;
    if (lz_read_file_at(f->root, path, 1 << 20, &buf, NULL) < 0)
        return NULL;
    return buf;
}

/* ---- preparer ---- */

static void test_whiteout_removes_lower(void **state) {
    struct fixture *f = *state;
    APPLY_OK(f, { 'd', "etc", NULL, 0 }, { 'f', "etc/a", "A", 0 }, { 'f', "etc/b", "B", 0 },
             { 'd', "etc/dir", NULL, 0 }, { 'f', "etc/dir/x", "X", 0 });
    APPLY_OK(f, { 'f', "etc/.wh.a", NULL, 0 }, { 'f', "etc/.wh.dir", NULL, 0 }, { 'f', "etc/.wh.nothere", NULL, 0 });
    assert_false(exists_in(f, "etc/a"));
    assert_false(exists_in(f, "etc/dir"));
    assert_false(exists_in(f, "etc/.wh.a"));
    assert_false(exists_in(f, "etc/.wh.nothere"));
    assert_true(exists_in(f, "etc/b"));
}

static void test_whiteout_keeps_same_layer(void **state) {
    struct fixture *f = *state;
    APPLY_OK(f, { 'f', "x/a", "new", 0 }, { 'f', "x/.wh.a", NULL, 0 });
    char *s = read_in(f, "x/a");
    assert_non_null(s);
    assert_string_equal(s, "new");
    free(s);
}

static void opaque_case(struct fixture *f, bool opq_first) {
    APPLY_OK(f, { 'f', "d/lower1", "1", 0 }, { 'f', "d/sub/lower2", "2", 0 }, { 'f', "e/keep", "k", 0 },
             { 'f', "d/sub2/lower3", "3", 0 });
    if (opq_first)
        APPLY_OK(f, { 'f', "d/.wh..wh..opq", NULL, 0 }, { 'f', "d/new", "n", 0 }, { 'd', "d/sub", NULL, 0 },
                 { 'f', "d/sub/new2", "n2", 0 });
    else
        APPLY_OK(f, { 'f', "d/new", "n", 0 }, { 'd', "d/sub", NULL, 0 }, { 'f', "d/sub/new2", "n2", 0 },
                 { 'f', "d/.wh..wh..opq", NULL, 0 });
    assert_true(exists_in(f, "d/new"));
    assert_true(exists_in(f, "d/sub/new2"));
    assert_false(exists_in(f, "d/lower1"));
    assert_false(exists_in(f, "d/sub/lower2"));
    assert_false(exists_in(f, "d/sub2"));
    assert_false(exists_in(f, "d/.wh..wh..opq"));
    assert_true(exists_in(f, "e/keep"));
}

static void test_opaque_after(void **state) { opaque_case(*state, false); }
static void test_opaque_before(void **state) { opaque_case(*state, true); }

static void test_hardlink(void **state) {
    struct fixture *f = *state;
    APPLY_OK(f, { 'f', "a/file", "data", 0 }, { 'h', "a/link", "a/file", 0 }, { 'h', "b/link2", "./a/file", 0 });
    struct stat s1, s2, s3;
    assert_int_equal(fstatat(f->root, "a/file", &s1, 0), 0);
    assert_int_equal(fstatat(f->root, "a/link", &s2, 0), 0);
    assert_int_equal(fstatat(f->root, "b/link2", &s3, 0), 0);
    assert_int_equal(s1.st_ino, s2.st_ino);
    assert_int_equal(s1.st_ino, s3.st_ino);
    /* A hard link to a lower layer's file. */
    APPLY_OK(f, { 'h', "c/link3", "a/file", 0 });
    assert_int_equal(fstatat(f->root, "c/link3", &s3, 0), 0);
    assert_int_equal(s1.st_ino, s3.st_ino);
}

static void test_hardlink_outside_refused(void **state) {
    struct fixture *f = *state;
    struct lz_error err = { 0 };
    char target[200];
    snprintf(target, sizeof target, "%s/secret", f->outside);
    int fd = open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);
    const struct ent dotdot[] = { { 'h', "link", "../outside/secret", 0 } };
    assert_int_equal(apply_expect_fail(f, dotdot, 1, &err), -EPERM);
    /* An absolute target is taken inside the rootfs, where it is absent. */
    const struct ent absolute[] = { { 'h', "link", target, 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, absolute, 1, &err), -ENOENT);
    /* Through a symlinked parent. */
    const struct ent l1[] = { { 'l', "s", f->outside, 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply(f, l1, 1, F_NONE, NULL, &err), 0);
    const struct ent via[] = { { 'h', "link", "s/secret", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, via, 1, &err), -EPERM);
    /* To a directory. */
    const struct ent todir[] = { { 'd', "dir", NULL, 0 }, { 'h', "link", "dir", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, todir, 2, &err), -EPERM);
    assert_false(exists_in(f, "link"));
    struct stat st;
    assert_int_equal(stat(target, &st), 0);
    assert_int_equal(st.st_nlink, 1);
}

static void test_dotdot_refused(void **state) {
    struct fixture *f = *state;
    struct lz_error err = { 0 };
    const struct ent a[] = { { 'f', "../x", "bad", 0 } };
    assert_int_equal(apply_expect_fail(f, a, 1, &err), -EPERM);
    const struct ent b[] = { { 'f', "a/../../x", "bad", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, b, 1, &err), -EPERM);
    const struct ent c[] = { { 'd', "a", NULL, 0 }, { 'f', "a/..", "bad", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, c, 2, &err), -EPERM);
    const struct ent d[] = { { 'l', "ok", "../../../../etc", 0 }, { 'f', "./../outside/x", "bad", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, d, 2, &err), -EPERM);
    assert_nothing_outside(f);
}

static void test_absolute_stripped(void **state) {
    struct fixture *f = *state;
    APPLY_OK(f, { 'f', "/etc/x", "abs", 0 }, { 'f', "//./etc//y", "y", 0 }, { 'd', "./", NULL, 0700 },
             { 'd', "/", NULL, 0700 });
    char *s = read_in(f, "etc/x");
    assert_non_null(s);
    assert_string_equal(s, "abs");
    free(s);
    assert_true(exists_in(f, "etc/y"));
    /* The root entry does not change the rootfs directory. */
    struct stat st;
    assert_int_equal(fstat(f->root, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
}

static void test_symlink_parent_escape(void **state) {
    struct fixture *f = *state;
    struct lz_error err = { 0 };
    char name[64];
    snprintf(name, sizeof name, "a/tmp/lz-escape-%d", (int)getpid());
    APPLY_OK(f, { 'l', "a", "/", 0 }, { 'l', "b", f->outside, 0 }, { 'l', "c", "../../../../../..", 0 },
             { 'd', "d", NULL, 0 }, { 'l', "d/e", "..", 0 });
    const struct ent l2a[] = { { 'f', "a/etc/passwd", "pwned", 0 } };
    assert_int_equal(apply_expect_fail(f, l2a, 1, &err), -EPERM);
    const struct ent l2b[] = { { 'f', name, "pwned", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, l2b, 1, &err), -EPERM);
    const struct ent l2c[] = { { 'f', "b/passwd", "pwned", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, l2c, 1, &err), -EPERM);
    const struct ent l2d[] = { { 'd', "c/tmp", NULL, 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, l2d, 1, &err), -EPERM);
    const struct ent l2e[] = { { 'f', "d/e/x", "x", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, l2e, 1, &err), -EPERM);
    /* Whiteouts through a symlink are refused too. */
    const struct ent l2f[] = { { 'f', "b/.wh.anything", NULL, 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, l2f, 1, &err), -EPERM);
    /* Same layer: symlink then a path through it. */
    const struct ent same[] = { { 'l', "z", f->outside, 0 }, { 'f', "z/passwd", "pwned", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, same, 2, &err), -EPERM);
    struct stat st;
    char esc[96];
    snprintf(esc, sizeof esc, "/tmp/lz-escape-%d", (int)getpid());
    assert_int_equal(stat(esc, &st), -1);
    assert_nothing_outside(f);
    /* The symlinks themselves are as in the layer. */
    char buf[64];
    ssize_t n = readlinkat(f->root, "a", buf, sizeof buf - 1);
    assert_int_equal(n, 1);
}

static void test_no_write_through_symlink(void **state) {
    struct fixture *f = *state;
    char target[200];
    snprintf(target, sizeof target, "%s/victim", f->outside);
    APPLY_OK(f, { 'l', "p", target, 0 });
    APPLY_OK(f, { 'f', "p", "data", 0600 });
    struct stat st;
    assert_int_equal(fstatat(f->root, "p", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_nothing_outside(f);
}

static void test_replace_types(void **state) {
    struct fixture *f = *state;
    APPLY_OK(f, { 'f', "x", "file", 0 }, { 'f', "y/inner", "i", 0 });
    APPLY_OK(f, { 'd', "x", NULL, 0 }, { 'f', "x/child", "c", 0 }, { 'f', "y", "now a file", 0 });
    struct stat st;
    assert_int_equal(fstatat(f->root, "x", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(fstatat(f->root, "y", &st, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISREG(st.st_mode));
}

static void test_devices_and_fifo(void **state) {
    struct fixture *f = *state;
    struct lz_prepare_stats st = { 0 };
    struct lz_error err = { 0 };
    const struct ent e[] = { { 'c', "dev/null", NULL, 0 },
                             { 'b', "dev/sda", NULL, 0 },
                             { 'p', "run/fifo", NULL, 0640 } };
    assert_int_equal(apply(f, e, 3, F_NONE, &st, &err), 0);
    assert_int_equal(st.devices_skipped, 2);
    assert_int_equal(st.fifos, 1);
    assert_false(exists_in(f, "dev/null"));
    assert_false(exists_in(f, "dev/sda"));
    struct stat s;
    assert_int_equal(fstatat(f->root, "run/fifo", &s, AT_SYMLINK_NOFOLLOW), 0);
    assert_true(S_ISFIFO(s.st_mode));
    assert_int_equal(s.st_mode & 07777, 0640);
}

static void compressed_case(struct fixture *f, int filter) {
    const struct ent e[] = { { 'd', "usr", NULL, 0 },
                             { 'f', "usr/hello", "hello world", 0 },
                             { 'l', "usr/link", "hello", 0 } };
    struct lz_error err = { 0 };
    assert_int_equal(apply(f, e, 3, filter, NULL, &err), 0);
    char *s = read_in(f, "usr/hello");
    assert_non_null(s);
    assert_string_equal(s, "hello world");
    free(s);
}

static void test_gzip(void **state) { compressed_case(*state, F_GZIP); }
static void test_zstd(void **state) { compressed_case(*state, F_ZSTD); }

static void test_garbage_refused(void **state) {
    struct fixture *f = *state;
    struct lz_error err = { 0 };
    static const char junk[] = "this is not a tar archive at all, not even close..........";
    assert_true(lz_prepare_apply_layer_mem(f->root, junk, sizeof junk, &err) < 0);
    /* An empty stream is an empty layer. */
    memset(&err, 0, sizeof err);
    assert_int_equal(lz_prepare_apply_layer_mem(f->root, "", 0, &err), 0);
}

static void test_modes_and_setid(void **state) {
    struct fixture *f = *state;
    APPLY_OK(f, { 'd', "ro", NULL, 0555 }, { 'f', "ro/file", "x", 0444 }, { 'f', "suid", "s", 04755 },
             { 'd', "sgid", NULL, 02775 });
    struct stat st;
    assert_int_equal(fstatat(f->root, "ro", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0555);
    assert_int_equal(st.st_mtime, 1700000000);
    assert_int_equal(fstatat(f->root, "ro/file", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0444);
    assert_int_equal(st.st_mtime, 1700000000);
    assert_int_equal(fstatat(f->root, "suid", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, lz_prepare_keeps_setid() ? 04755 : 0755);
    assert_int_equal(fstatat(f->root, "sgid", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, lz_prepare_keeps_setid() ? 02775 : 0775);
    /* A later layer can still write into the read-only directory. */
    APPLY_OK(f, { 'f', "ro/second", "y", 0 });
    assert_int_equal(fstatat(f->root, "ro", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 0555);
    assert_int_equal(fchmodat(f->root, "ro", 0755, 0), 0);
}

static void test_bad_names_refused(void **state) {
    struct fixture *f = *state;
    struct lz_error err = { 0 };
    char longname[PATH_MAX + 16];
    memset(longname, 'a', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    const struct ent a[] = { { 'f', longname, "x", 0 } };
    assert_int_equal(apply_expect_fail(f, a, 1, &err), -ENAMETOOLONG);
    char comp[NAME_MAX + 8];
    memset(comp, 'b', sizeof comp - 1);
    comp[sizeof comp - 1] = '\0';
    const struct ent b[] = { { 'f', comp, "x", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, b, 1, &err), -ENAMETOOLONG);
    const struct ent c[] = { { 'f', ".wh.dir/file", "x", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, c, 1, &err), -EPERM);
    const struct ent d[] = { { 'f', ".wh.", NULL, 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, d, 1, &err), -EPERM);
    /* Names are quoted in messages without their control characters. */
    const struct ent esc[] = { { 'f', "\x1b]0;owned\x07/\x1b[2J/../x", "x", 0 } };
    memset(&err, 0, sizeof err);
    assert_int_equal(apply_expect_fail(f, esc, 1, &err), -EPERM);
    assert_null(strchr(err.msg, '\x1b'));
    assert_null(strchr(err.msg, '\x07'));
}

/* Non-ASCII names, in the C locale: pax UTF-8 and raw ustar bytes. */
static void test_non_ascii_names(void **state) {
    struct fixture *f = *state;
    for (int fmt = 0; fmt < 2; fmt++) {
        size_t cap = 1 << 20, used = 0;
        void *buf = lz_xmalloc(cap);
        /* The writer needs a UTF-8 locale to emit a pax UTF-8 name; the
         * reader below runs in the C locale again. */
        if (fmt == 0 && !setlocale(LC_CTYPE, "C.UTF-8"))
            skip();
        struct archive *a = archive_write_new();
        if (fmt == 0)
            archive_write_set_format_pax_restricted(a);
        else
            archive_write_set_format_gnutar(a);
        archive_write_open_memory(a, buf, cap, &used);
        struct archive_entry *e = archive_entry_new();
        if (fmt == 0)
            archive_entry_set_pathname_utf8(e, "caf\xc3\xa9-\xe2\x82\xac");
        else
            archive_entry_set_pathname(e, "raw-\xe9t\xe9");
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, 1);
        assert_true(archive_write_header(a, e) >= ARCHIVE_WARN);
        archive_write_data(a, "x", 1);
        archive_entry_free(e);
        archive_write_close(a);
        archive_write_free(a);
        setlocale(LC_CTYPE, "C");
        struct lz_error err = { 0 };
        int r = lz_prepare_apply_layer_mem(f->root, buf, used, &err);
        if (r < 0)
            fail_msg("apply: %s", err.msg);
        free(buf);
    }
    assert_true(exists_in(f, "caf\xc3\xa9-\xe2\x82\xac"));
    assert_true(exists_in(f, "raw-\xe9t\xe9"));
}

/* A directory entry declaring gigabytes of data (a decompression bomb
 * shape) is refused before libarchive skips it. */
static void test_absurd_sizes(void **state) {
    struct fixture *f = *state;
    size_t cap = 1 << 20, used = 0;
    void *buf = lz_xmalloc(cap);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_open_memory(a, buf, cap, &used);
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, "big");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, (la_int64_t)(LZ_PREPARE_MAX_FILE_SIZE + 1));
    archive_write_header(a, e);
    archive_entry_free(e);
    archive_write_free(a); /* no close: the data would never come */
    struct lz_error err = { 0 };
    assert_int_equal(lz_prepare_apply_layer_mem(f->root, buf, used, &err), -EFBIG);
    assert_false(exists_in(f, "big"));
    free(buf);
}

static void test_remove_tree(void **state) {
    struct fixture *f = *state;
    APPLY_OK(f, { 'd', "t/ro", NULL, 0555 }, { 'f', "t/ro/file", "x", 0444 }, { 'd', "t/none", NULL, 0 },
             { 'l', "t/link", "/", 0 }, { 'd', "t/ro/inner", NULL, 0500 });
    assert_int_equal(fchmodat(f->root, "t/none", 0, 0), 0);
    assert_int_equal(lz_prepare_remove_tree(f->root, "t"), 0);
    assert_false(exists_in(f, "t"));
    assert_int_equal(lz_prepare_remove_tree(f->root, "t"), 0);
}

static void test_digest_check_in_preparer(void **state) {
    struct fixture *f = *state;
    const struct ent e[] = { { 'f', "a", "a", 0 } };
    size_t len;
    void *buf = build_tar(e, 1, F_NONE, &len);
    uint8_t md[32];
    char digest[80] = "sha256:";
    crypto_hash_sha256(md, buf, len);
    lz_hex(md, 32, digest + 7);
    struct lz_error err = { 0 };
    struct lz_layer_opts o = { .expected_digest = digest };
    assert_int_equal(lz_prepare_apply_layer_mem_opts(f->root, buf, len, &o, &err), 0);
    digest[10] ^= 1;
    assert_int_equal(lz_prepare_apply_layer_mem_opts(f->root, buf, len, &o, &err), -EBADMSG);
    free(buf);
}

/* ---- the image store ---- */

static void write_file(const char *path, const void *buf, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(lz_write_full(fd, buf, len), 0);
    close(fd);
}

static void put_blob(const char *layout, const void *buf, size_t len, char digest[80]) {
    uint8_t md[32];
    crypto_hash_sha256(md, buf, len);
    memcpy(digest, "sha256:", 8);
    lz_hex(md, 32, digest + 7);
    char *p = lz_xasprintf("%s/blobs/sha256", layout);
    assert_int_equal(lz_mkdir_p(p, 0755), 0);
    free(p);
    p = lz_xasprintf("%s/blobs/sha256/%s", layout, digest + 7);
    write_file(p, buf, len);
    free(p);
}

static const struct ent test_layer[] = {
    { 'd', "bin", NULL, 0 },
    { 'f', "bin/tool", "#!/bin/sh\necho hi\n", 0755 },
    { 'f', "etc/passwd", "root:x:0:0::/root:/bin/sh\n", 0 },
};

/* An OCI layout with one image; returns the manifest digest. With
 * multiarch, index.json points at a nested index (arm64 + amd64). */
static void make_layout(const char *dir, bool multiarch, char mdigest[80], char ldigest[80]) {
    assert_int_equal(lz_mkdir_p(dir, 0755), 0);
    size_t len;
    void *layer = build_tar(test_layer, LZ_ARRAY_SIZE(test_layer), F_GZIP, &len);
    put_blob(dir, layer, len, ldigest);
    free(layer);
    size_t tlen;
    void *tar = build_tar(test_layer, LZ_ARRAY_SIZE(test_layer), F_NONE, &tlen);
    char diff[80];
    uint8_t md[32];
    crypto_hash_sha256(md, tar, tlen);
    memcpy(diff, "sha256:", 8);
    lz_hex(md, 32, diff + 7);
    free(tar);
    char *cfg = lz_xasprintf("{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{},"
                             "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"%s\"]}}",
                             diff);
    char cdigest[80];
    put_blob(dir, cfg, strlen(cfg), cdigest);
    char *man = lz_xasprintf(
        "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\","
        "\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\"digest\":\"%s\",\"size\":%zu},"
        "\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\"digest\":\"%s\",\"size\":%zu}]}",
        cdigest, strlen(cfg), ldigest, len);
    put_blob(dir, man, strlen(man), mdigest);
    char top[80];
    size_t top_size = strlen(man);
    const char *top_mt = "application/vnd.oci.image.manifest.v1+json";
    char *nested = NULL;
    if (multiarch) {
        nested = lz_xasprintf(
            "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\"manifests\":["
            "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"sha256:%064d\",\"size\":10,"
            "\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
            "{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\"digest\":\"%s\",\"size\":%zu,"
            "\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}",
            0, mdigest, strlen(man));
        put_blob(dir, nested, strlen(nested), top);
        top_size = strlen(nested);
        top_mt = "application/vnd.oci.image.index.v1+json";
    } else {
        memcpy(top, mdigest, strlen(mdigest) + 1);
    }
    char *index =
        lz_xasprintf("{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%zu,"
                     "\"annotations\":{\"org.opencontainers.image.ref.name\":\"v1\"}}]}",
                     top_mt, top, top_size);
    char *p = lz_xasprintf("%s/index.json", dir);
    write_file(p, index, strlen(index));
    free(p);
    p = lz_xasprintf("%s/oci-layout", dir);
    write_file(p, "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
    free(p);
    free(index);
    free(nested);
    free(man);
    free(cfg);
}

struct counter {
    int prepare, import;
};

static void count_progress(void *ud, const char *phase, uint64_t done, uint64_t total) {
    struct counter *c = ud;
    if (!strcmp(phase, "prepare"))
        c->prepare++;
    if (!strcmp(phase, "import"))
        c->import++;
    assert_true(total == 0 || done <= total);
}

static void test_import_and_reuse(void **state) {
    struct fixture *f = *state;
    char *layout = lz_xasprintf("%s/layout", f->outside);
    char *data_root = lz_xasprintf("%s/data", f->outside);
    assert_int_equal(lz_mkdir_p(data_root, 0755), 0);
    char mdigest[80], ldigest[80];
    make_layout(layout, false, mdigest, ldigest);
    char *ref = lz_xasprintf("oci:%s:v1", layout);
    struct lz_prepared p1 = { 0 }, p2 = { 0 };
    struct lz_error err = { 0 };
    struct counter c1 = { 0 }, c2 = { 0 };
    int r = lz_image_prepare(data_root, ref, count_progress, &c1, &p1, &err);
    if (r < 0)
        fail_msg("prepare: %s", err.msg);
    assert_string_equal(p1.manifest_digest, mdigest);
    assert_true(c1.prepare > 0);
    assert_true(c1.import > 0);
    char id[65];
    /* Root with a subordinate range stores owners shifted (image.c), and
     * that mapping is part of the ID. */
    struct lz_idmap_ranges rg;
    char owners[96];
    bool shift = geteuid() == 0 && lz_idmap_ranges(&rg);
    if (shift)
        snprintf(owners, sizeof owners, "shift:%lu+%lu/%lu+%lu", rg.us, rg.un, rg.gs, rg.gn);
    assert_int_equal(lz_prepared_artifact_id_owned(mdigest, shift ? owners : NULL, id), 0);
    assert_string_equal(p1.artifact_id, id);
    char *tool = lz_xasprintf("%s/bin/tool", p1.rootfs);
    struct stat st;
    assert_int_equal(stat(tool, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0755);
    ino_t ino = st.st_ino;

    r = lz_image_prepare(data_root, ref, count_progress, &c2, &p2, &err);
    if (r < 0)
        fail_msg("prepare again: %s", err.msg);
    assert_string_equal(p1.artifact_id, p2.artifact_id);
    assert_string_equal(p1.rootfs, p2.rootfs);
    assert_int_equal(c2.prepare, 0); /* not extracted again */
    assert_int_equal(c2.import, 0);  /* blobs already in the store */
    assert_int_equal(stat(tool, &st), 0);
    assert_int_equal(st.st_ino, ino);

    /* No leftover scratch. */
    char *pdir = lz_xasprintf("%s/prepared", data_root);
    DIR *d = opendir(pdir);
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d)))
        if (de->d_name[0] != '.')
            n++;
        else
            assert_true(!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."));
    closedir(d);
    assert_int_equal(n, 1);

    struct lz_image_list l;
    assert_int_equal(lz_image_list(data_root, &l, &err), 0);
    assert_int_equal(l.n_images, 1);
    assert_string_equal(l.images[0].manifest_digest, mdigest);
    assert_int_equal(l.n_prepared, 1);
    assert_string_equal(l.prepared[0].artifact_id, id);
    assert_true(l.prepared[0].size > 0);
    lz_image_list_clear(&l);

    lz_prepared_clear(&p1);
    lz_prepared_clear(&p2);
    free(pdir);
    free(tool);
    free(ref);
    free(layout);
    free(data_root);
}

static void test_digest_mismatch_refused(void **state) {
    struct fixture *f = *state;
    char *layout = lz_xasprintf("%s/layout", f->outside);
    char *data_root = lz_xasprintf("%s/data", f->outside);
    assert_int_equal(lz_mkdir_p(data_root, 0755), 0);
    char mdigest[80], ldigest[80];
    make_layout(layout, false, mdigest, ldigest);
    /* Flip one byte of the layer, same size. */
    char *blob = lz_xasprintf("%s/blobs/sha256/%s", layout, ldigest + 7);
    int fd = open(blob, O_RDWR | O_CLOEXEC);
    assert_true(fd >= 0);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, 20), 1);
    b ^= 0xff;
    assert_int_equal(pwrite(fd, &b, 1, 20), 1);
    close(fd);
    char *ref = lz_xasprintf("oci:%s", layout);
    struct lz_prepared p = { 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_image_prepare(data_root, ref, NULL, NULL, &p, &err), -EBADMSG);
    assert_non_null(strstr(err.msg, "digest mismatch"));
    assert_null(p.rootfs);
    /* Nothing named in the store, nothing prepared, no stray blob. */
    struct lz_image_list l;
    assert_int_equal(lz_image_list(data_root, &l, &err), 0);
    assert_int_equal(l.n_images, 0);
    assert_int_equal(l.n_prepared, 0);
    lz_image_list_clear(&l);
    char *stored = lz_xasprintf("%s/images/blobs/sha256/%s", data_root, ldigest + 7);
    struct stat st;
    assert_int_equal(stat(stored, &st), -1);
    free(stored);
    free(ref);
    free(blob);
    free(layout);
    free(data_root);
}

static void test_multiarch_index(void **state) {
    struct fixture *f = *state;
    char *layout = lz_xasprintf("%s/layout", f->outside);
    char *data_root = lz_xasprintf("%s/data", f->outside);
    assert_int_equal(lz_mkdir_p(data_root, 0755), 0);
    char mdigest[80], ldigest[80];
    make_layout(layout, true, mdigest, ldigest);
    char *ref = lz_xasprintf("oci:%s:v1", layout);
    struct lz_prepared p = { 0 };
    struct lz_error err = { 0 };
    int r = lz_image_prepare(data_root, ref, NULL, NULL, &p, &err);
    if (r < 0)
        fail_msg("prepare: %s", err.msg);
    assert_string_equal(p.manifest_digest, mdigest);
    lz_prepared_clear(&p);
    /* A tag that is not there. */
    free(ref);
    ref = lz_xasprintf("oci:%s:v2", layout);
    assert_int_equal(lz_image_prepare(data_root, ref, NULL, NULL, &p, &err), -ENOENT);
    free(ref);
    free(layout);
    free(data_root);
}

/* docker save format: manifest.json, <hex>.json, <id>/layer.tar. */
static void test_docker_archive(void **state) {
    struct fixture *f = *state;
    char *data_root = lz_xasprintf("%s/data", f->outside);
    assert_int_equal(lz_mkdir_p(data_root, 0755), 0);
    size_t tlen;
    void *layer = build_tar(test_layer, LZ_ARRAY_SIZE(test_layer), F_NONE, &tlen);
    uint8_t md[32];
    char diff[80] = "sha256:";
    crypto_hash_sha256(md, layer, tlen);
    lz_hex(md, 32, diff + 7);
    char *cfg = lz_xasprintf("{\"architecture\":\"amd64\",\"os\":\"linux\",\"config\":{\"Cmd\":[\"/bin/sh\"]},"
                             "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"%s\"]}}",
                             diff);
    char chex[65];
    crypto_hash_sha256(md, (const uint8_t *)cfg, strlen(cfg));
    lz_hex(md, 32, chex);
    char *cfgname = lz_xasprintf("%s.json", chex);
    char *man =
        lz_xasprintf("[{\"Config\":\"%s\",\"RepoTags\":[\"example:1\"],\"Layers\":[\"0123/layer.tar\"]}]", cfgname);
    /* Hand-build the outer tar with the writer. */
    size_t cap = 8 << 20, used = 0;
    void *buf = lz_xmalloc(cap);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_open_memory(a, buf, cap, &used);
    const struct {
        const char *name;
        const void *data;
        size_t len;
    } files[] = {
        { "manifest.json", man, strlen(man) },
        { cfgname, cfg, strlen(cfg) },
        { "0123/layer.tar", layer, tlen },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(files); i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, files[i].name);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, (la_int64_t)files[i].len);
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        assert_int_equal(archive_write_data(a, files[i].data, files[i].len), (la_ssize_t)files[i].len);
        archive_entry_free(e);
    }
    archive_write_close(a);
    archive_write_free(a);
    char *path = lz_xasprintf("%s/saved.tar", f->outside);
    write_file(path, buf, used);
    char *ref = lz_xasprintf("docker-archive:%s", path);
    struct lz_prepared p = { 0 };
    struct lz_error err = { 0 };
    int r = lz_image_prepare(data_root, ref, NULL, NULL, &p, &err);
    if (r < 0)
        fail_msg("prepare: %s", err.msg);
    char *tool = lz_xasprintf("%s/bin/tool", p.rootfs);
    struct stat st;
    assert_int_equal(stat(tool, &st), 0);
    char *expected_name = lz_xasprintf("docker-archive:%s", path);
    assert_string_equal(p.source_ref, expected_name);
    lz_prepared_clear(&p);
    /* With a tag, and a wrong tag. */
    free(ref);
    ref = lz_xasprintf("docker-archive:%s:1", path);
    assert_int_equal(lz_image_prepare(data_root, ref, NULL, NULL, &p, &err), 0);
    lz_prepared_clear(&p);
    free(ref);
    ref = lz_xasprintf("docker-archive:%s:2", path);
    assert_int_equal(lz_image_prepare(data_root, ref, NULL, NULL, &p, &err), -ENOENT);
    free(expected_name);
    free(tool);
    free(ref);
    free(path);
    free(buf);
    free(man);
    free(cfgname);
    free(cfg);
    free(layer);
    free(data_root);
}

static int run_argv(char *const argv[]) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, 1);
        execvp(argv[0], argv);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static void test_busybox_fixture_and_oci_archive(void **state) {
    struct fixture *f = *state;
    const char *src = getenv("LZ_TEST_SRCDIR");
    if (!src || access("/bin/busybox", X_OK) < 0)
        skip();
    char *script = lz_xasprintf("%s/tests/fixtures/make-busybox-oci.sh", src);
    char *layout = lz_xasprintf("%s/bb", f->outside);
    char *data_root = lz_xasprintf("%s/data", f->outside);
    assert_int_equal(lz_mkdir_p(data_root, 0755), 0);
    char *argv[] = { (char *)"sh", script, layout, (char *)"t1", NULL };
    assert_int_equal(run_argv(argv), 0);
    char *ref = lz_xasprintf("oci:%s:t1", layout);
    struct lz_prepared p = { 0 };
    struct lz_error err = { 0 };
    int r = lz_image_prepare(data_root, ref, NULL, NULL, &p, &err);
    if (r < 0)
        fail_msg("prepare: %s", err.msg);
    int rfd = open(p.rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(rfd >= 0);
    char buf[32];
    ssize_t n = readlinkat(rfd, "bin/sh", buf, sizeof buf);
    assert_int_equal(n, 7);
    assert_memory_equal(buf, "busybox", 7);
    struct stat st;
    assert_int_equal(fstatat(rfd, "tmp", &st, 0), 0);
    assert_int_equal(st.st_mode & 07777, 01777);
    assert_int_equal(fstatat(rfd, "workspace", &st, 0), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(fstatat(rfd, "bin/busybox", &st, 0), 0);
    assert_int_equal(st.st_mode & 0111, 0111);
    close(rfd);
    char *id = lz_xstrdup(p.artifact_id);
    lz_prepared_clear(&p);

    /* The same layout as an oci-archive gives the same artifact. */
    char *tarpath = lz_xasprintf("%s/bb.tar", f->outside);
    char *targv[] = { (char *)"tar", (char *)"-C", layout, (char *)"-cf", tarpath, (char *)".", NULL };
    assert_int_equal(run_argv(targv), 0);
    free(ref);
    ref = lz_xasprintf("oci-archive:%s:t1", tarpath);
    r = lz_image_prepare(data_root, ref, NULL, NULL, &p, &err);
    if (r < 0)
        fail_msg("prepare oci-archive: %s", err.msg);
    assert_string_equal(p.artifact_id, id);
    lz_prepared_clear(&p);
    free(tarpath);
    free(id);
    free(ref);
    free(script);
    free(layout);
    free(data_root);
}

/* The agent images' build, with a stand-in mmdebstrap on PATH that records
 * its arguments and writes a one-directory tar: the first use of
 * builtin:agent-claude builds it (and it prepares), the bootstrap command
 * keeps a stored image unless refresh, and the recipe names the agent. */
static void test_agent_bootstrap(void **state) {
    struct fixture *f = *state;
    char *data_root = lz_xasprintf("%s/data", f->outside);
    char *bin = lz_xasprintf("%s/fakebin", f->outside);
    char *log = lz_xasprintf("%s/mmdebstrap.log", f->outside);
    char *tool = lz_xasprintf("%s/mmdebstrap", bin);
    char *empty = lz_xasprintf("%s/empty-root", f->outside);
    assert_int_equal(lz_mkdir_p(bin, 0700), 0);
    assert_int_equal(lz_mkdir_p(empty, 0700), 0);
    char *script = lz_xasprintf("#!/bin/sh\n"
                                "for a; do printf '%%s\\n' \"$a\"; done >> '%s'\n"
                                "echo --- >> '%s'\n"
                                "for last; do :; done\n"
                                "exec tar -cf \"$last\" -C '%s' .\n",
                                log, log, empty);
    write_file(tool, script, strlen(script));
    assert_int_equal(chmod(tool, 0755), 0);
    char *old = lz_xstrdup(getenv("PATH") ?: "/usr/bin:/bin");
    char *path = lz_xasprintf("%s:/usr/bin:/bin", bin);
    setenv("PATH", path, 1);

    struct lz_prepared p = { 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_image_prepare(data_root, "builtin:agent-nope", NULL, NULL, &p, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "unknown builtin image \"builtin:agent-nope\""));
    assert_int_equal(lz_image_bootstrap_agent(data_root, "nope", false, NULL, NULL, &err), -EINVAL);

    /* first use builds it */
    memset(&err, 0, sizeof err);
    int r = lz_image_prepare(data_root, "builtin:agent-claude", NULL, NULL, &p, &err);
    if (r < 0)
        fail_msg("prepare builtin:agent-claude: %s", err.msg);
    assert_string_equal(p.source_ref, "builtin:agent-claude");
    lz_prepared_clear(&p);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(lz_read_file_at(AT_FDCWD, log, 1 << 20, &text, &len), 0);
    assert_non_null(strstr(text, "--include=" LZ_BOOTSTRAP_PACKAGES ",nodejs,npm\n"));
    assert_non_null(strstr(text,
                           "npm install --global --no-fund --no-audit --no-update-notifier "
                           "@anthropic-ai/claude-code && claude --version"));
    assert_non_null(strstr(text, "NODE_EXTRA_CA_CERTS=/tmp/lazaret-ca.crt"));
    /* This test's PATH (no /usr/local/bin, where npm links the agent) is
     * not what the chroot gets. */
    assert_non_null(strstr(text, "chroot \"$1\" env HOME=/root PATH=" LZ_CHROOT_PATH " "));
    assert_non_null(strstr(text, "\nbookworm\n"));
    free(text);

    /* stored: kept without refresh (the tool does not run), rebuilt with it */
    assert_int_equal(lz_image_bootstrap_agent(data_root, "claude", false, NULL, NULL, &err), 1);
    assert_int_equal(lz_read_file_at(AT_FDCWD, log, 1 << 20, &text, &len), 0);
    size_t runs = 0;
    for (const char *q = text; (q = strstr(q, "---\n")); q += 4)
        runs++;
    assert_int_equal(runs, 1);
    free(text);
    assert_int_equal(lz_image_bootstrap_agent(data_root, "claude", true, NULL, NULL, &err), 0);
    assert_int_equal(lz_read_file_at(AT_FDCWD, log, 1 << 20, &text, &len), 0);
    runs = 0;
    for (const char *q = text; (q = strstr(q, "---\n")); q += 4)
        runs++;
    assert_int_equal(runs, 2);
    free(text);
    /* another agent: its own package; the base recipe has no hook */
    assert_int_equal(lz_image_bootstrap_agent(data_root, "opencode", false, NULL, NULL, &err), 0);
    assert_int_equal(lz_image_bootstrap(data_root, "bookworm", NULL, NULL, &err), 0);
    assert_int_equal(lz_read_file_at(AT_FDCWD, log, 1 << 20, &text, &len), 0);
    /* after the second run's separator: the third run, then the fourth */
    const char *third = strstr(strstr(text, "---\n") + 4, "---\n") + 4;
    const char *fourth = strstr(third, "---\n") + 4;
    const char *hit = strstr(third, "opencode-ai && opencode --version");
    assert_true(hit && hit < fourth);
    assert_null(strstr(fourth, "customize-hook"));
    assert_null(strstr(fourth, "nodejs"));
    free(text);

    setenv("PATH", old, 1);
    free(old);
    free(path);
    free(script);
    free(empty);
    free(tool);
    free(log);
    free(bin);
    free(data_root);
}

static void test_reference_errors(void **state) {
    struct fixture *f = *state;
    char *data_root = lz_xasprintf("%s/data", f->outside);
    struct lz_prepared p = { 0 };
    struct lz_error err = { 0 };
    assert_int_equal(lz_image_prepare(data_root, "builtin:alpine", NULL, NULL, &p, &err), -EINVAL);
    assert_int_equal(lz_image_prepare(data_root, "builtin:debian-../x", NULL, NULL, &p, &err), -EINVAL);
    assert_int_equal(lz_image_prepare(data_root, "-rf", NULL, NULL, &p, &err), -EINVAL);
    assert_int_equal(lz_image_prepare(data_root, "oci:/nonexistent/dir", NULL, NULL, &p, &err), -ENOENT);
    assert_int_equal(lz_image_prepare("relative", "oci:/x", NULL, NULL, &p, &err), -ENOENT);
    assert_int_equal(lz_image_bootstrap(data_root, "bad suite", NULL, NULL, &err), -EINVAL);
    /* skopeo missing: a clear message. */
    char *old = lz_xstrdup(getenv("PATH") ?: "/usr/bin:/bin");
    setenv("PATH", "/nonexistent", 1);
    memset(&err, 0, sizeof err);
    assert_int_equal(lz_image_prepare(data_root, "example.com/some/image:1", NULL, NULL, &p, &err), -ENOENT);
    assert_non_null(strstr(err.msg, "skopeo is not installed"));
    /* Registry names are normalised like docker does. */
    static const char *const norm[][2] = {
        { "debian", "docker.io/library/debian:latest" },
        { "debian:bookworm", "docker.io/library/debian:bookworm" },
        { "docker.io/debian:12", "docker.io/library/debian:12" },
        { "docker://user/app:1", "docker.io/user/app:1" },
        { "localhost:5000/x", "localhost:5000/x:latest" },
        { "quay.io/a/b@sha256:0000000000000000000000000000000000000000000000000000000000000000",
          "quay.io/a/b@sha256:0000000000000000000000000000000000000000000000000000000000000000" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(norm); i++) {
        memset(&err, 0, sizeof err);
        assert_int_equal(lz_image_prepare(data_root, norm[i][0], NULL, NULL, &p, &err), -ENOENT);
        char *want = lz_xasprintf("pull %s from", norm[i][1]);
        if (!strstr(err.msg, want))
            fail_msg("%s: %s", norm[i][0], err.msg);
        free(want);
    }
    static const char *const bad[] = { "Debian", "a//b", "x:y:z", "a b", "debian:", "x@sha256:12" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++)
        assert_int_equal(lz_image_prepare(data_root, bad[i], NULL, NULL, &p, &err), -EINVAL);
    setenv("PATH", old, 1);
    free(old);
    /* Unreachable registry (.invalid never resolves). */
    if (access("/usr/bin/skopeo", X_OK) == 0) {
        memset(&err, 0, sizeof err);
        int r = lz_image_prepare(data_root, "registry.invalid/x/y:z", NULL, NULL, &p, &err);
        assert_true(r < 0);
        assert_true(r == -EHOSTUNREACH || r == -EIO);
        if (r == -EHOSTUNREACH)
            assert_non_null(strstr(err.msg, "registry unreachable"));
    }
    assert_null(p.rootfs);
    free(data_root);
}

static void test_artifact_id(void **state) {
    (void)state;
    char a[65], b[65];
    assert_int_equal(
        lz_prepared_artifact_id("sha256:0000000000000000000000000000000000000000000000000000000000000000", a), 0);
    assert_int_equal(
        lz_prepared_artifact_id("sha256:0000000000000000000000000000000000000000000000000000000000000001", b), 0);
    assert_string_not_equal(a, b);
    assert_int_equal(strlen(a), 64);
    assert_int_equal(lz_prepared_artifact_id("md5:00", a), -EINVAL);
}

/* Image tools run through the spawn broker with a bounded wait: output
 * lines reach the progress callback and the tail, a missing program is
 * -ENOENT, and one that outlives the bound is stopped with -ETIMEDOUT. */
static void count_line(void *ud, const char *phase, uint64_t done, uint64_t total) {
    (void)done;
    (void)total;
    if (strncmp(phase, "t: ", 3) == 0)
        (*(int *)ud)++;
}

static void test_tool_run(void **state) {
    (void)state;
    int lines = 0, status = -1;
    struct lz_tool_out o = { .progress = count_line, .ud = &lines, .prefix = "t" };
    char *ok[] = { (char *)"sh", (char *)"-c", (char *)"echo one; echo two >&2; exit 3", NULL };
    assert_int_equal(lz_tool_run(ok, "/", 10000, &o, &status), 0);
    assert_int_equal(status, 3);
    assert_int_equal(lines, 2);
    char tail[800];
    lz_tool_tail(&o, tail, sizeof tail);
    assert_string_equal(tail, "one | two");

    struct lz_tool_out o2 = { 0 };
    char *missing[] = { (char *)"lazaret-no-such-tool", NULL };
    assert_int_equal(lz_tool_run(missing, NULL, 10000, &o2, &status), -ENOENT);

    /* The bound: the same sleeper finishes inside a large bound (the
     * control) and is stopped, well before it would end, under a small one;
     * "exec" so that the stop signal reaches the sleeper itself. */
    char *sleeper[] = { (char *)"sh", (char *)"-c", (char *)"echo started; exec sleep 1", NULL };
    struct lz_tool_out o3 = { 0 };
    assert_int_equal(lz_tool_run(sleeper, NULL, 10000, &o3, &status), 0);
    assert_int_equal(status, 0);
    char *long_sleeper[] = { (char *)"sh", (char *)"-c", (char *)"echo started; exec sleep 30", NULL };
    struct lz_tool_out o4 = { 0 };
    long t0 = lz_now_ms();
    assert_int_equal(lz_tool_run(long_sleeper, NULL, 300, &o4, &status), -ETIMEDOUT);
    assert_true(lz_now_ms() - t0 < 10000);
    lz_tool_tail(&o4, tail, sizeof tail);
    assert_string_equal(tail, "started");
    /* A tool that closes its output and then hangs is bounded as well. */
    char *quiet[] = { (char *)"sh", (char *)"-c", (char *)"exec sleep 30 >/dev/null 2>&1", NULL };
    struct lz_tool_out o5 = { 0 };
    t0 = lz_now_ms();
    assert_int_equal(lz_tool_run(quiet, NULL, 300, &o5, &status), -ETIMEDOUT);
    assert_true(lz_now_ms() - t0 < 10000);
}

int main(void) {
    if (sodium_init() < 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_whiteout_removes_lower, setup, teardown),
        cmocka_unit_test_setup_teardown(test_whiteout_keeps_same_layer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_opaque_after, setup, teardown),
        cmocka_unit_test_setup_teardown(test_opaque_before, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hardlink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hardlink_outside_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dotdot_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_absolute_stripped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_parent_escape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_write_through_symlink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replace_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices_and_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gzip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_zstd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_modes_and_setid, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_names_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_non_ascii_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_absurd_sizes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_tree, setup, teardown),
        cmocka_unit_test_setup_teardown(test_digest_check_in_preparer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_and_reuse, setup, teardown),
        cmocka_unit_test_setup_teardown(test_digest_mismatch_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_multiarch_index, setup, teardown),
        cmocka_unit_test_setup_teardown(test_docker_archive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_busybox_fixture_and_oci_archive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reference_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_agent_bootstrap, setup, teardown),
        cmocka_unit_test(test_artifact_id),
        cmocka_unit_test(test_tool_run),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
