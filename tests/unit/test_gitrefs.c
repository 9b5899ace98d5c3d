/* Unit tests for gitrefs.c: packed-refs written by the host's git pass;
 * replace refs and notes in them are refused, and so is what Git would not
 * read. test_control_replace_line proves that the host's git acts on a
 * crafted `refs/replace/` line of packed-refs (git log shows the other
 * commit), so the refusal is of something Git really does. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "gitrefs.h"
#include "util.h"

static char tmp[256];

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

static void write_file(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(lz_write_full(fd, text, strlen(text)), 0);
    close(fd);
}

static int check_str(const char *s) {
    struct lz_error err = { 0 };
    int r = lz_packedrefs_check(s, strlen(s), NULL, &err);
    if (r != 0) {
        assert_int_equal(err.code, r);
        assert_true(err.msg[0] != '\0');
        assert_null(strchr(err.msg, '\n'));
    }
    return r;
}

#define O1 "0123456789abcdef0123456789abcdef01234567"
#define O2 "89abcdef0123456789abcdef0123456789abcdef"

/* A repository with two commits on main, a tag, notes and a replace ref,
 * all packed by git itself. */
static char *repo_with_refs(const char *name) {
    char *dir = lz_xasprintf("%s/%s", tmp, name);
    assert_int_equal(mkdir(dir, 0755), 0);
    GIT(dir, "init", "-q");
    _cleanup_free_ char *f = lz_xasprintf("%s/a", dir);
    write_file(f, "one\n");
    GIT(dir, "add", "a");
    GIT(dir, "commit", "-qm", "one");
    write_file(f, "two\n");
    GIT(dir, "commit", "-qam", "two");
    GIT(dir, "tag", "-a", "-m", "v", "v1");
    GIT(dir, "branch", "topic");
    return dir;
}

static void test_real_files(void **state) {
    (void)state;
    _cleanup_free_ char *dir = repo_with_refs("real");
    GIT(dir, "pack-refs", "--all");
    _cleanup_free_ char *p = lz_xasprintf("%s/.git/packed-refs", dir);
    _cleanup_close_ int fd = open(p, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(lz_packedrefs_verify_fd(fd, -1, NULL), 0); /* heads, a peeled tag, the header */

    /* The same repository with a replace ref and a note, packed by git:
     * refused, each counted. */
    GIT(dir, "replace", "HEAD", "HEAD~1");
    GIT(dir, "notes", "add", "-m", "looks fine", "HEAD");
    GIT(dir, "pack-refs", "--all");
    _cleanup_free_ char *buf = NULL;
    size_t len = 0, n = 0;
    assert_int_equal(lz_read_file_at(AT_FDCWD, p, 1 << 20, &buf, &len), 0);
    struct lz_error err = { 0 };
    assert_int_equal(lz_packedrefs_check(buf, len, &n, &err), -EPERM);
    assert_int_equal(n, 2);
    assert_non_null(strstr(err.msg, "refs/"));
    _cleanup_close_ int fd2 = open(p, O_RDONLY | O_CLOEXEC);
    assert_int_equal(lz_packedrefs_verify_fd(fd2, -1, &err), -EPERM);

    /* With the Git directory: the developer's replace ref and note, already
     * in packed-refs, may stay in a rewrite (git branch -d, pack-refs). */
    _cleanup_free_ char *gd = lz_xasprintf("%s/.git", dir);
    _cleanup_close_ int gfd = open(gd, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_true(gfd >= 0);
    _cleanup_free_ char *np = lz_xasprintf("%s/new-packed", dir);
    _cleanup_free_ char *with_branch = lz_xasprintf("%s" O1 " refs/heads/zz\n", buf);
    write_file(np, with_branch);
    _cleanup_close_ int fd3 = open(np, O_RDONLY | O_CLOEXEC);
    assert_int_equal(lz_packedrefs_verify_fd(fd3, gfd, &err), 0);
    /* A loose replace ref of the developer's, being packed: accepted. */
    _cleanup_free_ char *main_oid = GIT_OUT(dir, "commit-tree", "-m", "x", "HEAD^{tree}");
    _cleanup_free_ char *topic_oid = GIT_OUT(dir, "--no-replace-objects", "rev-parse", "topic");
    GIT(dir, "replace", main_oid, topic_oid);
    _cleanup_free_ char *loose = lz_xasprintf("%s/refs/replace/%s", gd, main_oid);
    assert_int_equal(access(loose, F_OK), 0);
    _cleanup_free_ char *packed_loose = lz_xasprintf("%s%s refs/replace/%s\n", buf, topic_oid, main_oid);
    write_file(np, packed_loose);
    _cleanup_close_ int fd4 = open(np, O_RDONLY | O_CLOEXEC);
    assert_int_equal(lz_packedrefs_verify_fd(fd4, gfd, &err), 0);
    /* A new one, or an existing name pointing elsewhere: refused. */
    _cleanup_free_ char *added = lz_xasprintf("%s" O1 " refs/replace/" O2 "\n", buf);
    write_file(np, added);
    _cleanup_close_ int fd5 = open(np, O_RDONLY | O_CLOEXEC);
    assert_int_equal(lz_packedrefs_verify_fd(fd5, gfd, &err), -EPERM);
    assert_non_null(strstr(err.msg, "refs/replace/" O2));
    _cleanup_free_ char *moved = lz_xasprintf("%s refs/replace/%s\n", O1, main_oid);
    write_file(np, moved);
    _cleanup_close_ int fd6 = open(np, O_RDONLY | O_CLOEXEC);
    assert_int_equal(lz_packedrefs_verify_fd(fd6, gfd, &err), -EPERM);
}

/* The control: git itself reads a `refs/replace/` line of packed-refs and
 * shows the replacement in git log, while the branch names the other. */
static void test_control_replace_line(void **state) {
    (void)state;
    _cleanup_free_ char *dir = repo_with_refs("control");
    _cleanup_free_ char *head = GIT_OUT(dir, "rev-parse", "HEAD");
    _cleanup_free_ char *prev = GIT_OUT(dir, "rev-parse", "HEAD~1");
    _cleanup_free_ char *text = lz_xasprintf("%s refs/replace/%s\n", prev, head);
    _cleanup_free_ char *p = lz_xasprintf("%s/.git/packed-refs", dir);
    write_file(p, text);
    _cleanup_free_ char *subj = GIT_OUT(dir, "log", "-1", "--format=%s", "main");
    assert_string_equal(subj, "one"); /* git displays the replacement */
    _cleanup_free_ char *subj2 = GIT_OUT(dir, "--no-replace-objects", "log", "-1", "--format=%s", "main");
    assert_string_equal(subj2, "two");
    assert_int_equal(check_str(text), -EPERM);
}

static void test_crafted(void **state) {
    (void)state;
    assert_int_equal(check_str(""), 0);
    assert_int_equal(check_str("# pack-refs with: peeled fully-peeled sorted \n"), 0);
    assert_int_equal(check_str(O1 " refs/heads/main\n"), 0);
    assert_int_equal(check_str(O1 " refs/tags/v1\n^" O2 "\n"), 0);
    assert_int_equal(check_str(O1 " refs/heads/replace/x\n"), 0);
    assert_int_equal(check_str(O1 " refs/heads/notes\n"), 0);
    assert_int_equal(check_str(O1 " refs/replacement\n"), 0);
    assert_int_equal(check_str(O1 O1 O1 "abcdefghijklmnopqrstuvwx"
                                        " refs/heads/x\n"),
                     -EINVAL);
    assert_int_equal(check_str(O1 "0123456789abcdef01234567 refs/heads/x\n"), 0); /* 64: SHA-256 */
    /* Refused: what changes the display. */
    assert_int_equal(check_str(O1 " refs/replace/" O2 "\n"), -EPERM);
    assert_int_equal(check_str(O1 " refs/heads/a\n" O2 " refs/replace/" O1 "\n"), -EPERM);
    assert_int_equal(check_str(O1 " refs/notes/commits\n"), -EPERM);
    assert_int_equal(check_str(O1 " REFS/Replace/" O2 "\n"), -EPERM);
    assert_int_equal(check_str(O1 " refs/namespaces/x/refs/replace/" O2 "\n"), -EPERM);
    assert_int_equal(check_str(O1 " worktrees/w/refs/notes/commits\n"), -EPERM);
    /* Refused: what Git would not read, or never writes. */
    assert_int_equal(check_str(O1 " refs/heads/main"), -EINVAL); /* no newline */
    assert_int_equal(check_str(O1 "  refs/heads/main\n"), -EINVAL);
    assert_int_equal(check_str(O1 " refs/heads/../replace/x\n"), -EINVAL);
    assert_int_equal(check_str(O1 " refs//replace/x\n"), -EINVAL);
    assert_int_equal(check_str(O1 " refs/heads/a\r\n"), -EINVAL);
    assert_int_equal(check_str(O1 " refs/.replace/x\n"), -EINVAL);
    assert_int_equal(check_str(O1 " /refs/replace/x\n"), -EINVAL);
    assert_int_equal(check_str(O1 " \n"), -EINVAL);
    assert_int_equal(check_str("^" O2 "\n"), -EINVAL); /* peeled without a ref */
    assert_int_equal(check_str(O1 " refs/tags/v\n^" O2 "\n^" O2 "\n"), -EINVAL);
    assert_int_equal(check_str("# a comment\n"), -EINVAL);
    assert_int_equal(check_str(O1 " refs/heads/a\n# pack-refs with: x\n"), -EINVAL);
    assert_int_equal(check_str("\n"), -EINVAL);
    assert_int_equal(check_str("0123 refs/heads/a\n"), -EINVAL);
    assert_int_equal(check_str("g123456789abcdef0123456789abcdef01234567 refs/heads/a\n"), -EINVAL);
    /* Embedded NUL: not a ref name Git writes. */
    const char nul[] = O1 " refs/heads/a\0b\n";
    assert_int_equal(lz_packedrefs_check(nul, sizeof nul - 1, NULL, NULL), -EINVAL);
    /* A long name is bounded. */
    size_t big = LZ_PACKEDREFS_NAME_MAX + 100;
    _cleanup_free_ char *longl = lz_xmalloc(41 + big + 2);
    memcpy(longl, O1 " ", 41);
    memset(longl + 41, 'a', big);
    memcpy(longl + 41 + big, "\n", 2);
    assert_int_equal(check_str(longl), -EINVAL);
}

static int setup_all(void **state) {
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/lz-gitrefs-XXXXXX");
    if (!mkdtemp(tmp))
        return -1;
    setenv("HOME", tmp, 1);
    setenv("GIT_CONFIG_NOSYSTEM", "1", 1);
    unsetenv("GIT_DIR");
    setenv("GIT_AUTHOR_NAME", "t", 1);
    setenv("GIT_AUTHOR_EMAIL", "t@example.invalid", 1);
    setenv("GIT_COMMITTER_NAME", "t", 1);
    setenv("GIT_COMMITTER_EMAIL", "t@example.invalid", 1);
    _cleanup_free_ char *cfg = lz_xasprintf("%s/.gitconfig", tmp);
    write_file(cfg, "[init]\n\tdefaultBranch = main\n");
    return 0;
}

static int teardown_all(void **state) {
    (void)state;
    lz_rm_rf_at(AT_FDCWD, tmp);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crafted),
        cmocka_unit_test(test_real_files),
        cmocka_unit_test(test_control_replace_line),
    };
    return cmocka_run_group_tests(tests, setup_all, teardown_all);
}
