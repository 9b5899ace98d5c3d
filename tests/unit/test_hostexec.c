/* Unit tests for the host executor's identity checks (hostexec.c): the
 * executable recorded at resolution is exactly what runs, or nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "hostexec.h"
#include "procenv.h"

#include <fcntl.h>
#include <signal.h>
#include <sodium.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

static char dir[64];
static char script[128];

static int setup(void **state) {
    (void)state;
    if (sodium_init() < 0)
        return -1;
    snprintf(dir, sizeof dir, "/tmp/lzhostexec-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(script, sizeof script, "%s/tool", dir);
    return 0;
}

static void write_script(const char *body) {
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s.new", script);
    FILE *f = fopen(tmp, "w");
    assert_non_null(f);
    fputs(body, f);
    fclose(f);
    chmod(tmp, 0755);
    assert_int_equal(rename(tmp, script), 0);
}

/* Runs an identity to completion; returns its exit status and the first
 * output bytes in out. */
static int run(const struct lz_hostexec_ident *id, char *out, size_t cap, struct lz_error *err) {
    char *argv[] = { id->path, NULL };
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    int ws = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int cwd = -1;
    assert_int_equal(lz_hostexec_cwd(ws, "/workspace", "/workspace", &cwd, err), 0);
    char **envp = lz_hostexec_env(NULL);
    struct lz_hostexec_spec s = {
        .id = id, .argv = argv, .envp = envp, .cwd_fd = cwd, .stdin_fd = -1, .stdout_fd = p[1], .stderr_fd = -1
    };
    struct lz_child c;
    int r = lz_hostexec_start(&s, &c, err);
    close(p[1]);
    lz_env_free(envp);
    close(cwd);
    close(ws);
    if (r < 0) {
        close(p[0]);
        return r;
    }
    assert_int_equal(lz_child_release(&c), 0);
    ssize_t n = lz_read_full(p[0], out, cap - 1);
    out[n > 0 ? n : 0] = '\0';
    close(p[0]);
    int st = -1;
    assert_int_equal(lz_child_wait(&c, 10000, &st), 0);
    return st;
}

static void test_runs_the_resolved_file(void **state) {
    (void)state;
    write_script("#!/bin/sh\necho original; pwd\nexit 3\n");
    struct lz_hostexec_ident id;
    struct lz_error err = { 0 };
    assert_int_equal(lz_hostexec_resolve(script, &id, &err), 0);
    char out[256];
    assert_int_equal(run(&id, out, sizeof out, &err), 3); /* positive control: it runs */
    assert_non_null(strstr(out, "original"));
    assert_non_null(strstr(out, dir));
    lz_hostexec_ident_clear(&id);
}

static void test_replaced_is_refused(void **state) {
    (void)state;
    write_script("#!/bin/sh\necho original\n");
    struct lz_hostexec_ident id;
    struct lz_error err = { 0 };
    assert_int_equal(lz_hostexec_resolve(script, &id, &err), 0);
    write_script("#!/bin/sh\necho EVIL\n"); /* a new inode at the same path */
    char out[256] = "";
    assert_int_equal(run(&id, out, sizeof out, &err), -ESTALE);
    assert_non_null(strstr(err.msg, "changed since it was approved"));
    assert_null(strstr(out, "EVIL"));
    lz_hostexec_ident_clear(&id);
}

static void test_modified_in_place_is_refused(void **state) {
    (void)state;
    write_script("#!/bin/sh\necho original\n");
    struct lz_hostexec_ident id;
    struct lz_error err = { 0 };
    assert_int_equal(lz_hostexec_resolve(script, &id, &err), 0);
    /* Same inode, same size, mtime put back: only the hash can tell. */
    struct stat st;
    assert_int_equal(stat(script, &st), 0);
    int fd = open(script, O_WRONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "EVIL", 4, 15), 4);
    close(fd);
    struct timespec ts[2] = { st.st_atim, st.st_mtim };
    assert_int_equal(utimensat(AT_FDCWD, script, ts, 0), 0);
    char out[256] = "";
    assert_int_equal(run(&id, out, sizeof out, &err), -ESTALE);
    assert_non_null(strstr(err.msg, "SHA-256"));
    lz_hostexec_ident_clear(&id);
}

static void test_symlink_swapped_is_refused(void **state) {
    (void)state;
    write_script("#!/bin/sh\necho original\n");
    struct lz_hostexec_ident id;
    struct lz_error err = { 0 };
    assert_int_equal(lz_hostexec_resolve(script, &id, &err), 0);
    unlink(script);
    assert_int_equal(symlink("/bin/true", script), 0);
    char out[64];
    assert_int_equal(run(&id, out, sizeof out, &err), -ESTALE);
    unlink(script);
    lz_hostexec_ident_clear(&id);
}

static void test_resolve_refuses(void **state) {
    (void)state;
    struct lz_hostexec_ident id;
    struct lz_error err = { 0 };
    assert_int_equal(lz_hostexec_resolve("true", &id, &err), -EINVAL);        /* no PATH lookup */
    assert_int_equal(lz_hostexec_resolve("/etc/passwd", &id, &err), -EACCES); /* not executable */
    assert_int_equal(lz_hostexec_resolve("/etc", &id, &err), -EACCES);        /* not a regular file */
    assert_int_equal(lz_hostexec_resolve("/nonexistent/x", &id, &err), -ENOENT);
    assert_int_equal(lz_hostexec_resolve("/bin/true", &id, &err), 0);
    char *canon = realpath("/bin/true", NULL);
    assert_string_equal(id.path, canon); /* canonical */
    free(canon);
    lz_hostexec_ident_clear(&id);
}

static void test_cwd(void **state) {
    (void)state;
    int ws = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    char sub[160];
    snprintf(sub, sizeof sub, "%s/sub", dir);
    mkdir(sub, 0700);
    char esc[160];
    snprintf(esc, sizeof esc, "%s/out", dir);
    unlink(esc);
    assert_int_equal(symlink("/etc", esc), 0);
    struct lz_error err = { 0 };
    int fd = -1;
    assert_int_equal(lz_hostexec_cwd(ws, "/workspace", "/workspace/sub", &fd, &err), 0);
    close(fd);
    assert_int_equal(lz_hostexec_cwd(ws, "/workspace", "/workspace/", &fd, &err), 0);
    close(fd);
    assert_int_equal(lz_hostexec_cwd(ws, "/workspace", "/workspace/sub/..", &fd, &err), -EPERM);
    assert_int_equal(lz_hostexec_cwd(ws, "/workspace", "/workspace/./sub", &fd, &err), -EPERM);
    assert_int_equal(lz_hostexec_cwd(ws, "/workspace", "/workspacex", &fd, &err), -EPERM);
    assert_int_equal(lz_hostexec_cwd(ws, "/workspace", "/etc", &fd, &err), -EPERM);
    assert_true(lz_hostexec_cwd(ws, "/workspace", "/workspace/out", &fd, &err) < 0); /* symlink leaves */
    unlink(esc);
    rmdir(sub);
    close(ws);
}

static void test_kill_group(void **state) {
    (void)state;
    write_script("#!/bin/sh\nsleep 100 &\necho $!\nwait\n");
    struct lz_hostexec_ident id;
    struct lz_error err = { 0 };
    assert_int_equal(lz_hostexec_resolve(script, &id, &err), 0);
    char *argv[] = { id.path, NULL };
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    char **envp = lz_hostexec_env(NULL);
    struct lz_hostexec_spec s = {
        .id = &id, .argv = argv, .envp = envp, .cwd_fd = -1, .stdin_fd = -1, .stdout_fd = p[1], .stderr_fd = -1
    };
    struct lz_child c;
    assert_int_equal(lz_hostexec_start(&s, &c, &err), 0);
    close(p[1]);
    lz_env_free(envp);
    assert_int_equal(lz_child_release(&c), 0);
    char line[32] = "";
    ssize_t n = read(p[0], line, sizeof line - 1);
    assert_true(n > 0);
    line[n] = '\0';
    pid_t bg = (pid_t)strtol(line, NULL, 10);
    assert_true(bg > 0);
    assert_int_equal(kill(bg, 0), 0); /* positive control: the grandchild runs */
    int st;
    assert_int_equal(lz_hostexec_kill(&c, 5000, &st), 0);
    /* The background sleep was in the group: gone (reaped by init or a zombie briefly). */
    bool gone = false;
    for (int i = 0; i < 200 && !gone; i++) {
        char path[64], buf[256] = "";
        snprintf(path, sizeof path, "/proc/%d/stat", (int)bg);
        FILE *f = fopen(path, "r");
        if (!f)
            gone = true;
        else {
            if (fgets(buf, sizeof buf, f) && strstr(buf, ") Z "))
                gone = true;
            fclose(f);
        }
        if (!gone) {
            struct timespec ts = { 0, 10000000 };
            nanosleep(&ts, NULL);
        }
    }
    assert_true(gone);
    close(p[0]);
    lz_hostexec_ident_clear(&id);
}

/* Starts id with argv, stdin from a pipe whose write end is *ret_in, stdout
 * into a pipe whose read end is *ret_out. */
static void start_piped(const struct lz_hostexec_ident *id, char **argv, struct lz_child *c, int *ret_in,
                        int *ret_out) {
    int pi[2], po[2];
    assert_int_equal(pipe2(pi, O_CLOEXEC), 0);
    assert_int_equal(pipe2(po, O_CLOEXEC), 0);
    char **envp = lz_hostexec_env(NULL);
    struct lz_hostexec_spec s = {
        .id = id, .argv = argv, .envp = envp, .cwd_fd = -1, .stdin_fd = pi[0], .stdout_fd = po[1], .stderr_fd = -1
    };
    struct lz_error err = { 0 };
    assert_int_equal(lz_hostexec_start(&s, c, &err), 0);
    lz_env_free(envp);
    close(pi[0]);
    close(po[1]);
    assert_int_equal(lz_child_release(c), 0);
    *ret_in = pi[1];
    *ret_out = po[0];
}

/* Reads until "step-one\n" has arrived (bounded by the child's pipe). */
static void await_line(int fd, const char *want) {
    char buf[256] = "";
    size_t n = 0;
    while (!strstr(buf, want) && n < sizeof buf - 1) {
        ssize_t k = read(fd, buf + n, sizeof buf - 1 - n);
        assert_true(k > 0);
        n += (size_t)k;
        buf[n] = '\0';
    }
}

static void append(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* The attack: a line appended to an approved #! script while it
 * runs. The shell reads the sealed copy, so the line never runs; the
 * positive control runs the same script by its path (the shell reading the
 * file itself) and the appended line does run. */
static void test_append_while_running(void **state) {
    (void)state;
    static const char body[] = "#!/bin/sh\necho step-one\nread x\necho step-two\n";
    for (int control = 0; control < 2; control++) {
        write_script(body);
        struct lz_hostexec_ident id, sh;
        struct lz_error err = { 0 };
        assert_int_equal(lz_hostexec_resolve(script, &id, &err), 0);
        assert_int_equal(lz_hostexec_resolve("/bin/sh", &sh, &err), 0);
        char *argv_script[] = { script, NULL };
        char *argv_sh[] = { (char *)"sh", script, NULL };
        struct lz_child c;
        int in, out;
        if (control)
            start_piped(&sh, argv_sh, &c, &in, &out); /* /bin/sh is sealed; it reads the file itself */
        else
            start_piped(&id, argv_script, &c, &in, &out);
        await_line(out, "step-one\n");
        append(script, "echo APPENDED\n");
        assert_int_equal(write(in, "\n", 1), 1); /* the script goes on */
        close(in);
        char rest[256] = "";
        ssize_t n = lz_read_full(out, rest, sizeof rest - 1);
        rest[n > 0 ? n : 0] = '\0';
        close(out);
        int st = -1;
        assert_int_equal(lz_child_wait(&c, 10000, &st), 0);
        assert_int_equal(st, 0);
        assert_non_null(strstr(rest, "step-two"));
        if (control)
            assert_non_null(strstr(rest, "APPENDED")); /* the harm, where the defence does not apply */
        else
            assert_null(strstr(rest, "APPENDED"));
        lz_hostexec_ident_clear(&id);
        lz_hostexec_ident_clear(&sh);
    }
}

static void test_seal(void **state) {
    (void)state;
    write_script("#!/bin/sh\necho sealed\n");
    struct lz_hostexec_ident id;
    struct lz_error err = { 0 };
    assert_int_equal(lz_hostexec_resolve(script, &id, &err), 0);
    int fd = -1;
    uint8_t h[32];
    assert_int_equal(lz_hostexec_seal(&id, &fd, h, &err), 0);
    assert_memory_equal(h, id.sha256, sizeof h);
    int seals = fcntl(fd, F_GET_SEALS);
    assert_int_equal(seals & (F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL),
                     F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL);
    assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal((uint64_t)st.st_size, id.size);
    /* Not writable, not even through a new open of the same memfd. */
    char pp[64];
    snprintf(pp, sizeof pp, "/proc/self/fd/%d", fd);
    int w = open(pp, O_WRONLY | O_CLOEXEC);
    if (w >= 0) {
        assert_int_equal(write(w, "x", 1), -1);
        assert_int_equal(errno, EPERM);
        close(w);
    }
    close(fd);
    /* Bounded: a file above the cap is refused with a message, not copied. */
    struct lz_hostexec_ident big = id;
    big.size = LZ_HOSTEXEC_SEAL_MAX + 1;
    fd = -1;
    assert_int_equal(lz_hostexec_seal(&big, &fd, h, &err), -EFBIG);
    assert_non_null(strstr(err.msg, "more than"));
    assert_int_equal(fd, -1);
    lz_hostexec_ident_clear(&id);
}

/* A file still open for writing (the agent just wrote it) runs from its
 * copy; the control: executing the file itself fails with ETXTBSY. */
static void test_busy_file_runs(void **state) {
    (void)state;
    char tool[160];
    snprintf(tool, sizeof tool, "%s/busy", dir);
    int src = open("/bin/true", O_RDONLY | O_CLOEXEC);
    int dst = open(tool, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    assert_true(src >= 0 && dst >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(src, buf, sizeof buf)) > 0)
        assert_int_equal(write(dst, buf, (size_t)n), n);
    close(src);
    /* dst stays open for writing */
    struct lz_hostexec_ident id;
    struct lz_error err = { 0 };
    assert_int_equal(lz_hostexec_resolve(tool, &id, &err), 0);
    pid_t pid = fork();
    if (pid == 0) {
        char *av[] = { tool, NULL };
        execve(tool, av, av + 1);
        _exit(errno == ETXTBSY ? 42 : 1);
    }
    int wst;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    assert_int_equal(WEXITSTATUS(wst), 42); /* positive control: the file itself is busy */
    char out[16];
    assert_int_equal(run(&id, out, sizeof out, &err), 0);
    close(dst);
    unlink(tool);
    lz_hostexec_ident_clear(&id);
}

static int teardown(void **state) {
    (void)state;
    unlink(script);
    rmdir(dir);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs_the_resolved_file),
        cmocka_unit_test(test_replaced_is_refused),
        cmocka_unit_test(test_modified_in_place_is_refused),
        cmocka_unit_test(test_symlink_swapped_is_refused),
        cmocka_unit_test(test_resolve_refuses),
        cmocka_unit_test(test_cwd),
        cmocka_unit_test(test_kill_group),
        cmocka_unit_test(test_append_while_running),
        cmocka_unit_test(test_seal),
        cmocka_unit_test(test_busy_file_runs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
