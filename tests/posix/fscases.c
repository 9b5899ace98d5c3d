/* fscases — POSIX filesystem-semantics cases, run in a directory.
 *
 *   fscases [-k SUBSTR] DIR       run the cases (those of the caller's
 *                                 credentials: root or not) in DIR
 *   fscases --prepare DIR         as root: make DIR 0777 and the fixtures
 *                                 (root-owned 0755 and sticky directories)
 *                                 that the non-root cases need
 *   fscases --list                print the group names
 *
 * One line per check: `name PASS|FAIL expected=X got=Y`, where X is what a
 * local ext4 on Linux gives for the same credentials (tests/posix/README.md
 * says how that was confirmed). Values are errno names ("0" for success),
 * octal modes, "uid:gid" pairs or short strings; never contain spaces.
 *
 * Each group runs in a child process (its own cwd and umask 022, bounded by
 * an alarm) in a fresh directory DIR/c<euid>-<group>, removed afterwards. A
 * group that dies prints `<group>.run FAIL expected=exit0 got=<signal>`.
 *
 * Written for Lazaret's tests in the manner of pjdfstest (no code of it).
 * Static, so it runs in any image. Exit status: 0 when every check passed,
 * 1 when one failed, 2 on bad usage.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define GROUP_TIMEOUT_S 60
#define FIXTURE "fx"

static bool as_root;
static const char *top; /* DIR, absolute */

/* ---- reporting ---------------------------------------------------------- */

static const char *en(int e) {
    if (e == 0)
        return "0";
    const char *n = strerrorname_np(e);
    return n ? n : "E?";
}

static int n_fail;

static void report(const char *name, const char *exp, const char *got) {
    n_fail += strcmp(exp, got) != 0;
    printf("%s %s expected=%s got=%s\n", name, strcmp(exp, got) ? "FAIL" : "PASS", exp, got);
}

/* Errno of the call just made: 0 when it returned >= 0. */
#define E(expr)                                                                                                        \
    ({                                                                                                                 \
        errno = 0;                                                                                                     \
        (long)(expr) < 0 ? errno : 0;                                                                                  \
    })

static void ck_err(const char *name, int exp, int got) { report(name, en(exp), en(got)); }

static void ck_str(const char *name, const char *exp, const char *got) { report(name, exp, got ? got : "null"); }

static void ck_long(const char *name, long exp, long got) {
    char a[32], b[32];
    snprintf(a, sizeof a, "%ld", exp);
    snprintf(b, sizeof b, "%ld", got);
    report(name, a, b);
}

static void ck_mode(const char *name, unsigned exp, const char *path) {
    struct stat st;
    char a[16], b[16];
    snprintf(a, sizeof a, "%04o", exp);
    if (lstat(path, &st) < 0)
        snprintf(b, sizeof b, "%s", en(errno));
    else
        snprintf(b, sizeof b, "%04o", (unsigned)(st.st_mode & 07777));
    report(name, a, b);
}

static void ck_owner(const char *name, uid_t u, gid_t g, const char *path) {
    struct stat st;
    char a[40], b[40];
    snprintf(a, sizeof a, "%u:%u", (unsigned)u, (unsigned)g);
    if (lstat(path, &st) < 0)
        snprintf(b, sizeof b, "%s", en(errno));
    else
        snprintf(b, sizeof b, "%u:%u", (unsigned)st.st_uid, (unsigned)st.st_gid);
    report(name, a, b);
}

/* The type and size of `path` as "reg:5", "dir", "lnk:3", "fifo" or errno. */
static const char *kind(const char *path, char *buf, size_t n) {
    struct stat st;
    if (lstat(path, &st) < 0)
        snprintf(buf, n, "%s", en(errno));
    else if (S_ISREG(st.st_mode))
        snprintf(buf, n, "reg:%lld", (long long)st.st_size);
    else if (S_ISDIR(st.st_mode))
        snprintf(buf, n, "dir");
    else if (S_ISLNK(st.st_mode))
        snprintf(buf, n, "lnk:%lld", (long long)st.st_size);
    else if (S_ISFIFO(st.st_mode))
        snprintf(buf, n, "fifo");
    else
        snprintf(buf, n, "other");
    return buf;
}

static void ck_kind(const char *name, const char *exp, const char *path) {
    char b[48];
    report(name, exp, kind(path, b, sizeof b));
}

/* ---- helpers ------------------------------------------------------------ */

static int put(const char *path, const char *data, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        return -errno;
    size_t n = strlen(data);
    ssize_t w = write(fd, data, n);
    int e = w == (ssize_t)n ? 0 : (w < 0 ? -errno : -EIO);
    close(fd);
    return e;
}

/* The content of `path` (at most 63 bytes), "" when empty, or the errno. */
static const char *get(const char *path, char *buf, size_t n) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(buf, n, "%s", en(errno));
        return buf;
    }
    ssize_t r = read(fd, buf, n - 1);
    if (r < 0)
        snprintf(buf, n, "%s", en(errno));
    else
        buf[r] = '\0';
    close(fd);
    return buf;
}

static void ck_content(const char *name, const char *exp, const char *path) {
    char b[64];
    report(name, exp, get(path, b, sizeof b));
}

static const char *owner_str(uid_t u, gid_t g, char *buf, size_t n) {
    snprintf(buf, n, "%u:%u", (unsigned)u, (unsigned)g);
    return buf;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *f) {
    (void)st;
    (void)f;
    if (flag == FTW_DP)
        return rmdir(p) < 0 ? 0 : 0;
    return unlink(p) < 0 ? 0 : 0;
}

static void rm_tree(const char *path) { nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static int fixture(const char *rel, char *buf, size_t n) {
    snprintf(buf, n, "%s/%s/%s", top, FIXTURE, rel);
    return access(buf, F_OK) == 0 ? 0 : -ENOENT;
}

/* ---- open and creat ----------------------------------------------------- */

static void g_open(void) {
    char b[64];
    int fd = open("f", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    ck_err("open.creat", 0, fd < 0 ? errno : 0);
    if (fd >= 0)
        close(fd);
    ck_mode("open.creat.mode", 0644, "f");
    ck_owner("open.creat.owner", geteuid(), getegid(), "f");
    ck_err("open.creat.existing", 0, E(fd = open("f", O_CREAT | O_WRONLY | O_CLOEXEC, 0600)));
    if (fd >= 0)
        close(fd);
    ck_mode("open.creat.existing.mode_kept", 0644, "f");
    ck_err("open.excl.exists", EEXIST, E(open("f", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644)));
    (void)symlink("nowhere", "dangling");
    ck_err("open.excl.dangling_symlink", EEXIST, E(open("dangling", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644)));
    ck_err("open.creat.dangling_symlink", 0, E(fd = open("dangling", O_CREAT | O_WRONLY | O_CLOEXEC, 0644)));
    if (fd >= 0)
        close(fd);
    ck_kind("open.creat.dangling_symlink.target", "reg:0", "nowhere");

    put("t", "hello", 0644);
    ck_err("open.trunc", 0, E(fd = open("t", O_WRONLY | O_TRUNC | O_CLOEXEC)));
    if (fd >= 0)
        close(fd);
    ck_kind("open.trunc.size", "reg:0", "t");

    put("a", "ab", 0644);
    fd = open("a", O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0) {
        lseek(fd, 0, SEEK_SET);
        ck_long("open.append.write", 2, write(fd, "cd", 2));
        close(fd);
    }
    ck_content("open.append.content", "abcd", "a");

    mkdir("d", 0755);
    ck_err("open.directory.on_file", ENOTDIR, E(open("f", O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
    ck_err("open.directory.on_dir", 0, E(fd = open("d", O_RDONLY | O_DIRECTORY | O_CLOEXEC)));
    if (fd >= 0)
        close(fd);
    ck_err("open.dir.wronly", EISDIR, E(open("d", O_WRONLY | O_CLOEXEC)));
    ck_err("open.dir.creat", EISDIR, E(open("d", O_RDONLY | O_CREAT | O_CLOEXEC, 0644)));
    (void)symlink("f", "lf");
    ck_err("open.nofollow.symlink", ELOOP, E(open("lf", O_RDONLY | O_NOFOLLOW | O_CLOEXEC)));
    ck_err("open.nofollow.path", 0, E(fd = open("lf", O_PATH | O_NOFOLLOW | O_CLOEXEC)));
    if (fd >= 0)
        close(fd);
    ck_err("open.noent", ENOENT, E(open("missing", O_RDONLY | O_CLOEXEC)));
    ck_err("open.notdir_component", ENOTDIR, E(open("f/x", O_RDONLY | O_CLOEXEC)));
    ck_err("open.creat.noent_parent", ENOENT, E(open("missing/x", O_CREAT | O_WRONLY | O_CLOEXEC, 0644)));

    put("z", "secret", 0000);
    ck_mode("open.mode0000", 0000, "z");
    ck_err("open.mode0000.read", as_root ? 0 : EACCES, E(fd = open("z", O_RDONLY | O_CLOEXEC)));
    if (fd >= 0)
        close(fd);

    fd = open(".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    ck_err("open.tmpfile", 0, fd < 0 ? errno : 0);
    if (fd >= 0) {
        ck_long("open.tmpfile.write", 3, write(fd, "tmp", 3));
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        ck_err("open.tmpfile.linkat", 0, E(linkat(AT_FDCWD, proc, AT_FDCWD, "linked", AT_SYMLINK_FOLLOW)));
        close(fd);
        ck_content("open.tmpfile.linked_content", "tmp", "linked");
        ck_mode("open.tmpfile.linked_mode", 0600, "linked");
    }
    fd = open(".", O_TMPFILE | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
    ck_err("open.tmpfile.excl", 0, fd < 0 ? errno : 0);
    if (fd >= 0) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        ck_err("open.tmpfile.excl.linkat", ENOENT, E(linkat(AT_FDCWD, proc, AT_FDCWD, "linked2", AT_SYMLINK_FOLLOW)));
        close(fd);
    }
    (void)b;
}

/* ---- rename ------------------------------------------------------------- */

static void g_rename(void) {
    char b[64];
    put("a", "A", 0644);
    ck_err("rename.file", 0, E(rename("a", "b")));
    ck_kind("rename.file.old_gone", en(ENOENT), "a");
    ck_content("rename.file.new", "A", "b");
    put("c", "C", 0644);
    ck_err("rename.file.over_file", 0, E(rename("c", "b")));
    ck_content("rename.file.over_file.content", "C", "b");
    ck_kind("rename.file.over_file.old_gone", en(ENOENT), "c");
    ck_err("rename.noent", ENOENT, E(rename("missing", "x")));
    put("h1", "H", 0644);
    link("h1", "h2");
    /* Two names of one inode: rename does nothing and both stay. */
    ck_err("rename.same_inode", 0, E(rename("h1", "h2")));
    ck_kind("rename.same_inode.both_stay", "reg:1", "h1");

    mkdir("d1", 0755);
    put("d1/f", "F", 0644);
    ck_err("rename.dir", 0, E(rename("d1", "d2")));
    ck_content("rename.dir.child", "F", "d2/f");
    mkdir("e", 0755);
    ck_err("rename.dir.over_empty_dir", 0, E(rename("e", "d3")));
    mkdir("e", 0755);
    ck_err("rename.dir.over_empty_dir.existing", 0, E(rename("e", "d3")));
    ck_err("rename.dir.over_nonempty", ENOTEMPTY, E(rename("d3", "d2")));
    put("bf", "", 0644);
    ck_err("rename.dir.over_file", ENOTDIR, E(rename("d3", "bf")));
    ck_err("rename.file.over_dir", EISDIR, E(rename("bf", "d3")));
    ck_err("rename.dir.into_own_subdir", EINVAL, E(rename("d2", "d2/sub")));
    mkdir("d2/in", 0755);
    ck_err("rename.dir.onto_own_subdir", EINVAL, E(rename("d2", "d2/in")));
    ck_err("rename.dir.to_parent_dir_of_self", ENOTEMPTY, E(rename("d2/in", "d2")));

    /* ".." of a moved directory is its new parent. */
    mkdir("p", 0755);
    mkdir("m", 0755);
    ck_err("rename.dir.reparent", 0, E(rename("m", "p/m")));
    struct stat s1, s2;
    bool same = stat("p/m/..", &s1) == 0 && stat("p", &s2) == 0 && s1.st_ino == s2.st_ino && s1.st_dev == s2.st_dev;
    ck_str("rename.dir.reparent.dotdot", "p", same ? "p" : "other");

    (void)symlink("target-text", "sl");
    ck_err("rename.symlink", 0, E(rename("sl", "sl2")));
    ssize_t n = readlink("sl2", b, sizeof b - 1);
    b[n < 0 ? 0 : n] = '\0';
    ck_str("rename.symlink.target_kept", "target-text", n < 0 ? en(errno) : b);

    put("x", "X", 0644);
    put("y", "Y", 0644);
    ck_err("rename.noreplace.exists", EEXIST, E(renameat2(AT_FDCWD, "x", AT_FDCWD, "y", RENAME_NOREPLACE)));
    ck_err("rename.noreplace.free", 0, E(renameat2(AT_FDCWD, "x", AT_FDCWD, "x2", RENAME_NOREPLACE)));
    put("ex1", "1", 0644);
    put("ex2", "2", 0644);
    mkdir("exd", 0755);
    ck_err("rename.exchange", 0, E(renameat2(AT_FDCWD, "ex1", AT_FDCWD, "ex2", RENAME_EXCHANGE)));
    ck_content("rename.exchange.a", "2", "ex1");
    ck_content("rename.exchange.b", "1", "ex2");
    ck_err("rename.exchange.file_dir", 0, E(renameat2(AT_FDCWD, "ex1", AT_FDCWD, "exd", RENAME_EXCHANGE)));
    ck_kind("rename.exchange.file_dir.types", "dir", "ex1");
    ck_err("rename.exchange.noent", ENOENT, E(renameat2(AT_FDCWD, "ex2", AT_FDCWD, "none", RENAME_EXCHANGE)));
}

/* ---- link, unlink, rmdir, mkdir ----------------------------------------- */

static void g_link(void) {
    struct stat st;
    char b[64];
    put("f", "data", 0644);
    ck_err("link.file", 0, E(link("f", "g")));
    ck_long("link.file.nlink", 2, stat("f", &st) == 0 ? (long)st.st_nlink : -errno);
    ck_content("link.file.content", "data", "g");
    ck_err("link.exists", EEXIST, E(link("f", "g")));
    mkdir("d", 0755);
    ck_err("link.dir", EPERM, E(link("d", "d2")));
    ck_err("link.noent", ENOENT, E(link("missing", "h")));
    (void)symlink("f", "s");
    ck_err("link.symlink_itself", 0, E(linkat(AT_FDCWD, "s", AT_FDCWD, "s2", 0)));
    ck_kind("link.symlink_itself.kind", "lnk:1", "s2");
    ck_err("unlink.file", 0, E(unlink("g")));
    ck_long("unlink.file.nlink", 1, stat("f", &st) == 0 ? (long)st.st_nlink : -errno);
    ck_err("unlink.dir", EISDIR, E(unlink("d")));
    ck_err("unlink.noent", ENOENT, E(unlink("g")));
    int fd = open("f", O_RDONLY | O_CLOEXEC);
    ck_err("unlink.open_file", 0, E(unlink("f")));
    if (fd >= 0) {
        ssize_t n = pread(fd, b, sizeof b - 1, 0);
        b[n < 0 ? 0 : n] = '\0';
        ck_str("unlink.open_file.still_readable", "data", n < 0 ? en(errno) : b);
        ck_long("unlink.open_file.nlink0", 0, fstat(fd, &st) == 0 ? (long)st.st_nlink : -errno);
        close(fd);
    }
}

static void g_dirs(void) {
    struct stat st;
    ck_err("mkdir.ok", 0, E(mkdir("d", 0777)));
    ck_mode("mkdir.mode_umask", 0755, "d");
    ck_owner("mkdir.owner", geteuid(), getegid(), "d");
    ck_long("mkdir.nlink", 2, stat("d", &st) == 0 ? (long)st.st_nlink : -errno);
    mkdir("d/sub", 0755);
    ck_long("mkdir.parent_nlink", 3, stat("d", &st) == 0 ? (long)st.st_nlink : -errno);
    ck_err("mkdir.exists", EEXIST, E(mkdir("d", 0755)));
    put("f", "", 0644);
    ck_err("mkdir.over_file", EEXIST, E(mkdir("f", 0755)));
    ck_err("mkdir.noent_parent", ENOENT, E(mkdir("no/d", 0755)));
    ck_err("mkdir.notdir_parent", ENOTDIR, E(mkdir("f/d", 0755)));
    ck_err("mkdir.sticky_mode", 0, E(mkdir("st", 01777)));
    ck_mode("mkdir.sticky_mode.kept", 01755, "st");
    ck_err("rmdir.nonempty", ENOTEMPTY, E(rmdir("d")));
    ck_err("rmdir.empty", 0, E(rmdir("d/sub")));
    ck_long("rmdir.parent_nlink", 2, stat("d", &st) == 0 ? (long)st.st_nlink : -errno);
    ck_err("rmdir.file", ENOTDIR, E(rmdir("f")));
    ck_err("rmdir.dot", EINVAL, E(rmdir("d/.")));
    ck_err("rmdir.noent", ENOENT, E(rmdir("none")));
    (void)symlink("d", "ld");
    ck_err("rmdir.symlink", ENOTDIR, E(rmdir("ld")));
    ck_err("rmdir.ok", 0, E(rmdir("d")));
}

/* ---- mkfifo, symlink ---------------------------------------------------- */

static void g_fifo(void) {
    char b[16] = "";
    ck_err("mkfifo.ok", 0, E(mkfifo("p", 0644)));
    ck_kind("mkfifo.kind", "fifo", "p");
    ck_mode("mkfifo.mode", 0644, "p");
    ck_err("mkfifo.exists", EEXIST, E(mkfifo("p", 0644)));
    /* O_RDWR on a FIFO never blocks on Linux. */
    int fd = open("p", O_RDWR | O_CLOEXEC);
    ck_err("mkfifo.open_rdwr", 0, fd < 0 ? errno : 0);
    if (fd >= 0) {
        ssize_t w = write(fd, "pipe", 4), r = w == 4 ? read(fd, b, 4) : -1;
        b[r == 4 ? 4 : 0] = '\0';
        ck_str("mkfifo.roundtrip", "pipe", b);
        close(fd);
    }
    ck_err("mkfifo.unlink", 0, E(unlink("p")));
}

static void g_symlink(void) {
    char b[64];
    ck_err("symlink.ok", 0, E(symlink("some/target", "l")));
    ssize_t n = readlink("l", b, sizeof b - 1);
    b[n < 0 ? 0 : n] = '\0';
    ck_str("symlink.readlink", "some/target", n < 0 ? en(errno) : b);
    ck_kind("symlink.lstat_size", "lnk:11", "l");
    ck_err("symlink.exists", EEXIST, E(symlink("x", "l")));
    ck_err("symlink.dangling_stat", ENOENT, E(access("l", F_OK)));
    put("f", "F", 0644);
    ck_err("readlink.not_symlink", EINVAL, E(readlink("f", b, sizeof b)));
    ck_err("readlink.noent", ENOENT, E(readlink("none", b, sizeof b)));
    (void)symlink("loop2", "loop1");
    (void)symlink("loop1", "loop2");
    ck_err("symlink.loop", ELOOP, E(open("loop1", O_RDONLY | O_CLOEXEC)));
    (void)symlink("f", "lf");
    ck_content("symlink.follow", "F", "lf");
    ck_err("symlink.trailing_slash_file", ENOTDIR, E(open("lf/", O_RDONLY | O_CLOEXEC)));
    mkdir("d", 0755);
    (void)symlink("d", "ldir");
    ck_err("symlink.to_dir.chdir_through", 0, E(access("ldir/.", F_OK)));
    char longt[1200];
    memset(longt, 'x', sizeof longt - 1);
    longt[sizeof longt - 1] = '\0';
    ck_err("symlink.long_target", 0, E(symlink(longt, "long")));
    ck_kind("symlink.long_target.size", "lnk:1199", "long");
}

/* ---- chmod, chown ------------------------------------------------------- */

static void g_chmod(void) {
    put("f", "", 0644);
    ck_err("chmod.file", 0, E(chmod("f", 0600)));
    ck_mode("chmod.file.mode", 0600, "f");
    int fd = open("f", O_RDONLY | O_CLOEXEC);
    ck_err("fchmod.file", 0, E(fchmod(fd, 0640)));
    close(fd);
    ck_mode("fchmod.file.mode", 0640, "f");
    mkdir("d", 0755);
    ck_err("chmod.dir", 0, E(chmod("d", 0700)));
    ck_mode("chmod.dir.mode", 0700, "d");
    ck_err("chmod.setuid_own", 0, E(chmod("f", 04755)));
    ck_mode("chmod.setuid_own.mode", 04755, "f");
    ck_err("chmod.setgid_own", 0, E(chmod("f", 02755)));
    ck_mode("chmod.setgid_own.mode", 02755, "f");
    ck_err("chmod.sticky_dir", 0, E(chmod("d", 01777)));
    ck_mode("chmod.sticky_dir.mode", 01777, "d");
    /* A write clears the set-id bits unless the writer has CAP_FSETID
     * (file_remove_privs): root keeps them, anyone else loses them. */
    chmod("f", 06755);
    fd = open("f", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!write(fd, "x", 1);
        close(fd);
    }
    ck_mode("chmod.write_clears_setid", as_root ? 06755 : 0755, "f");
    (void)symlink("f", "l");
    ck_err("chmod.symlink_nofollow", EOPNOTSUPP, E(fchmodat(AT_FDCWD, "l", 0600, AT_SYMLINK_NOFOLLOW)));
    ck_err("chmod.noent", ENOENT, E(chmod("none", 0600)));
}

static void g_chown(void) {
    char b[40];
    uid_t u = geteuid();
    gid_t g = getegid();
    put("f", "", 0755);
    ck_err("chown.self", 0, E(chown("f", u, g)));
    ck_owner("chown.self.owner", u, g, "f");
    ck_err("chown.noop", 0, E(chown("f", (uid_t)-1, (gid_t)-1)));
    ck_err("chown.to_other_uid", as_root ? 0 : EPERM, E(chown("f", 1234, (gid_t)-1)));
    ck_err("chown.to_other_gid", as_root ? 0 : EPERM, E(chown("f", (uid_t)-1, 5678)));
    ck_owner("chown.result", as_root ? 1234 : u, as_root ? 5678 : g, "f");
    int fd = open("f", O_RDONLY | O_CLOEXEC);
    ck_err("fchown.to_other", as_root ? 0 : EPERM, E(fchown(fd, 2345, 6789)));
    close(fd);
    ck_owner("fchown.result", as_root ? 2345 : u, as_root ? 6789 : g, "f");
    (void)symlink("f", "l");
    ck_err("lchown.symlink", as_root ? 0 : EPERM, E(lchown("l", 3456, 3456)));
    ck_owner("lchown.symlink.owner", as_root ? 3456 : u, as_root ? 3456 : g, "l");
    ck_owner("lchown.symlink.target_kept", as_root ? 2345 : u, as_root ? 6789 : g, "f");
    if (as_root) {
        put("s", "", 0644);
        chmod("s", 06755);
        ck_err("chown.clears_setid", 0, E(chown("s", 1000, 1000)));
        ck_mode("chown.clears_setid.mode", 0755, "s");
        /* setgid directories pass their group on. */
        mkdir("sg", 0755);
        chown("sg", 0, 4321);
        chmod("sg", 02775);
        put("sg/f", "", 0644);
        mkdir("sg/d", 0755);
        ck_owner("chown.setgid_dir.file_group", 0, 4321, "sg/f");
        ck_owner("chown.setgid_dir.dir_group", 0, 4321, "sg/d");
        ck_mode("chown.setgid_dir.dir_mode", 02755, "sg/d");
    }
    (void)b;
    (void)owner_str;
}

/* ---- truncate, utimensat, fallocate ------------------------------------- */

static void g_truncate(void) {
    struct stat st;
    char b[64];
    put("f", "hello world", 0644);
    ck_err("truncate.shrink", 0, E(truncate("f", 5)));
    ck_content("truncate.shrink.content", "hello", "f");
    ck_err("truncate.grow", 0, E(truncate("f", 100)));
    ck_kind("truncate.grow.size", "reg:100", "f");
    int fd = open("f", O_RDONLY | O_CLOEXEC);
    ssize_t n = pread(fd, b, 10, 90);
    bool zero = n == 10;
    for (ssize_t i = 0; zero && i < n; i++)
        zero = b[i] == 0;
    ck_str("truncate.grow.zeros", "zeros", zero ? "zeros" : "data");
    ck_err("ftruncate.rdonly", EINVAL, E(ftruncate(fd, 0)));
    close(fd);
    fd = open("f", O_WRONLY | O_CLOEXEC);
    ck_err("ftruncate.ok", 0, E(ftruncate(fd, 3)));
    ck_long("ftruncate.size", 3, fstat(fd, &st) == 0 ? (long)st.st_size : -errno);
    ck_err("ftruncate.negative", EINVAL, E(ftruncate(fd, -1)));
    close(fd);
    mkdir("d", 0755);
    ck_err("truncate.dir", EISDIR, E(truncate("d", 0)));
    ck_err("truncate.noent", ENOENT, E(truncate("none", 0)));
    put("ro", "x", 0444);
    ck_err("truncate.readonly_file", as_root ? 0 : EACCES, E(truncate("ro", 0)));
}

static void g_utimens(void) {
    struct stat st;
    char b[64];
    put("f", "", 0644);
    struct timespec ts[2] = { { 1000000000, 500000000 }, { 1234567890, 123456789 } };
    ck_err("utimensat.set", 0, E(utimensat(AT_FDCWD, "f", ts, 0)));
    stat("f", &st);
    snprintf(b, sizeof b, "%lld.%09ld", (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    ck_str("utimensat.set.mtime_ns", "1234567890.123456789", b);
    snprintf(b, sizeof b, "%lld.%09ld", (long long)st.st_atim.tv_sec, st.st_atim.tv_nsec);
    ck_str("utimensat.set.atime_ns", "1000000000.500000000", b);
    struct timespec om[2] = { { 0, UTIME_OMIT }, { 1500000000, 0 } };
    ck_err("utimensat.omit", 0, E(utimensat(AT_FDCWD, "f", om, 0)));
    stat("f", &st);
    snprintf(b, sizeof b, "%lld/%lld", (long long)st.st_atim.tv_sec, (long long)st.st_mtim.tv_sec);
    ck_str("utimensat.omit.values", "1000000000/1500000000", b);
    ck_err("utimensat.now", 0, E(utimensat(AT_FDCWD, "f", NULL, 0)));
    stat("f", &st);
    ck_str("utimensat.now.recent", "recent",
           llabs((long long)(st.st_mtim.tv_sec - time(NULL))) < 60 ? "recent" : "old");
    (void)symlink("f", "l");
    ck_err("utimensat.symlink_nofollow", 0, E(utimensat(AT_FDCWD, "l", ts, AT_SYMLINK_NOFOLLOW)));
    lstat("l", &st);
    ck_long("utimensat.symlink_nofollow.mtime", 1234567890, (long)st.st_mtim.tv_sec);
    int fd = open("f", O_RDONLY | O_CLOEXEC);
    ck_err("futimens", 0, E(futimens(fd, ts)));
    close(fd);
    ck_err("utimensat.noent", ENOENT, E(utimensat(AT_FDCWD, "none", ts, 0)));
}

static void g_fallocate(void) {
    struct stat st;
    char b[16];
    int fd = open("f", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ck_err("fallocate.extend", 0, E(fallocate(fd, 0, 0, 8192)));
    ck_long("fallocate.extend.size", 8192, fstat(fd, &st) == 0 ? (long)st.st_size : -errno);
    ck_err("fallocate.keep_size", 0, E(fallocate(fd, FALLOC_FL_KEEP_SIZE, 8192, 8192)));
    ck_long("fallocate.keep_size.size", 8192, fstat(fd, &st) == 0 ? (long)st.st_size : -errno);
    (void)!pwrite(fd, "abcdefgh", 8, 4096);
    ck_err("fallocate.punch_hole", 0, E(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4096, 4096)));
    ssize_t n = pread(fd, b, 8, 4096);
    ck_str("fallocate.punch_hole.zeros", "zeros", n == 8 && !memcmp(b, "\0\0\0\0\0\0\0\0", 8) ? "zeros" : "data");
    ck_err("fallocate.punch_needs_keep_size", EOPNOTSUPP, E(fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096)));
    ck_err("fallocate.bad_len", EINVAL, E(fallocate(fd, 0, 0, 0)));
    close(fd);
    fd = open("f", O_RDONLY | O_CLOEXEC);
    ck_err("fallocate.rdonly", EBADF, E(fallocate(fd, 0, 0, 4096)));
    close(fd);
}

/* ---- mmap --------------------------------------------------------------- */

static void g_mmap(void) {
    char b[16] = "";
    int fd = open("f", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ftruncate(fd, 4096);
    char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_err("mmap.shared", 0, m == MAP_FAILED ? errno : 0);
    if (m == MAP_FAILED) {
        close(fd);
        return;
    }
    memcpy(m, "mmapdata", 8);
    /* Another open file sees the store before any msync (one page cache). */
    int fd2 = open("f", O_RDONLY | O_CLOEXEC);
    ssize_t n = pread(fd2, b, 8, 0);
    b[n == 8 ? 8 : 0] = '\0';
    ck_str("mmap.shared.store_seen_by_read", "mmapdata", b);
    ck_err("mmap.msync", 0, E(msync(m, 4096, MS_SYNC)));
    munmap(m, 4096);
    close(fd);
    close(fd2);
    char c[64];
    get("f", c, sizeof c);
    c[8] = '\0';
    ck_str("mmap.shared.after_close", "mmapdata", c);
    /* And a write() is seen by an existing shared mapping. */
    fd = open("f", O_RDWR | O_CLOEXEC);
    m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    if (m != MAP_FAILED) {
        (void)!pwrite(fd, "WRITTEN!", 8, 0);
        memcpy(b, m, 8);
        b[8] = '\0';
        ck_str("mmap.shared.sees_write", "WRITTEN!", b);
        munmap(m, 4096);
    }
    close(fd);
    fd = open("f", O_RDONLY | O_CLOEXEC);
    m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_err("mmap.shared_write_on_rdonly", EACCES, m == MAP_FAILED ? errno : 0);
    if (m != MAP_FAILED)
        munmap(m, 4096);
    close(fd);
}

/* ---- locks -------------------------------------------------------------- */

static bool wait_byte(int fd) {
    struct pollfd p = { .fd = fd, .events = POLLIN };
    char c;
    return poll(&p, 1, 10000) == 1 && read(fd, &c, 1) == 1;
}

static void g_locks(void) {
    put("f", "lockme", 0644);
    int a = open("f", O_RDWR | O_CLOEXEC), b = open("f", O_RDWR | O_CLOEXEC);
    ck_err("flock.ex", 0, E(flock(a, LOCK_EX | LOCK_NB)));
    ck_err("flock.ex.conflict", EWOULDBLOCK, E(flock(b, LOCK_EX | LOCK_NB)));
    ck_err("flock.sh.conflict", EWOULDBLOCK, E(flock(b, LOCK_SH | LOCK_NB)));
    ck_err("flock.unlock", 0, E(flock(a, LOCK_UN)));
    ck_err("flock.sh.a", 0, E(flock(a, LOCK_SH | LOCK_NB)));
    ck_err("flock.sh.b", 0, E(flock(b, LOCK_SH | LOCK_NB)));
    flock(a, LOCK_UN);
    flock(b, LOCK_UN);

    struct flock wl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 0 };
    ck_err("fcntl.ofd_setlk", 0, E(fcntl(a, F_OFD_SETLK, &wl)));
    ck_err("fcntl.ofd_setlk.conflict", EAGAIN, E(fcntl(b, F_OFD_SETLK, &wl)));
    wl.l_type = F_UNLCK;
    fcntl(a, F_OFD_SETLK, &wl);

    /* POSIX record locks between processes. */
    int up[2], down[2];
    if (pipe2(up, O_CLOEXEC) < 0 || pipe2(down, O_CLOEXEC) < 0)
        return;
    pid_t pid = fork();
    if (pid == 0) {
        struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 3 };
        int fd = open("f", O_RDWR | O_CLOEXEC);
        char c = fcntl(fd, F_SETLK, &l) == 0 ? 'y' : 'n';
        (void)!write(up[1], &c, 1);
        wait_byte(down[0]);
        _exit(0);
    }
    bool ready = wait_byte(up[0]);
    ck_str("fcntl.setlk.child", "ready", ready ? "ready" : "timeout");
    struct flock l = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 3 };
    ck_err("fcntl.setlk.conflict", EAGAIN, E(fcntl(a, F_SETLK, &l)));
    struct flock q = { .l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = 1, .l_len = 1 };
    fcntl(a, F_GETLK, &q);
    ck_str("fcntl.getlk.type", "wrlck", q.l_type == F_WRLCK ? "wrlck" : q.l_type == F_UNLCK ? "unlck" : "rdlck");
    ck_str("fcntl.getlk.pid", "child", q.l_pid == pid ? "child" : "other");
    struct flock far = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 3, .l_len = 3 };
    ck_err("fcntl.setlk.disjoint", 0, E(fcntl(a, F_SETLK, &far)));
    (void)!write(down[1], "x", 1);
    int st;
    waitpid(pid, &st, 0);
    ck_err("fcntl.setlk.after_exit", 0, E(fcntl(a, F_SETLK, &l)));
    close(up[0]), close(up[1]), close(down[0]), close(down[1]);
    close(a);
    close(b);
}

/* ---- xattrs, statfs ----------------------------------------------------- */

static void g_xattr(void) {
    char b[64];
    put("f", "", 0644);
    ck_err("xattr.user.set", 0, E(setxattr("f", "user.lz", "val", 3, 0)));
    ssize_t n = getxattr("f", "user.lz", b, sizeof b - 1);
    b[n < 0 ? 0 : n] = '\0';
    ck_str("xattr.user.get", "val", n < 0 ? en(errno) : b);
    n = listxattr("f", b, sizeof b);
    bool found = false;
    for (ssize_t i = 0; n > 0 && i < n; i += (ssize_t)strlen(b + i) + 1)
        found = found || !strcmp(b + i, "user.lz");
    ck_str("xattr.user.list", "listed", n < 0 ? en(errno) : found ? "listed" : "absent");
    ck_err("xattr.user.create_exists", EEXIST, E(setxattr("f", "user.lz", "x", 1, XATTR_CREATE)));
    ck_err("xattr.user.replace_missing", ENODATA, E(setxattr("f", "user.none", "x", 1, XATTR_REPLACE)));
    ck_err("xattr.user.get_missing", ENODATA, E(getxattr("f", "user.none", b, sizeof b)));
    ck_err("xattr.user.small_buffer", ERANGE, E(getxattr("f", "user.lz", b, 1)));
    ck_long("xattr.user.size_query", 3, getxattr("f", "user.lz", NULL, 0));
    ck_err("xattr.user.remove", 0, E(removexattr("f", "user.lz")));
    ck_err("xattr.user.remove_missing", ENODATA, E(removexattr("f", "user.lz")));
    mkdir("d", 0755);
    ck_err("xattr.user.dir", 0, E(setxattr("d", "user.lz", "d", 1, 0)));
    (void)symlink("f", "l");
    ck_err("xattr.user.symlink", EPERM, E(lsetxattr("l", "user.lz", "x", 1, 0)));
    int fd = open("f", O_RDONLY | O_CLOEXEC);
    ck_err("xattr.user.fset", 0, E(fsetxattr(fd, "user.f", "1", 1, 0)));
    close(fd);
    ck_err("xattr.bad_namespace", EOPNOTSUPP, E(setxattr("f", "bogus.lz", "x", 1, 0)));
}

static void g_statfs(void) {
    struct statfs s;
    ck_err("statfs.ok", 0, E(statfs(".", &s)));
    ck_long("statfs.namelen", 255, (long)s.f_namelen);
    ck_str("statfs.blocks", "nonzero", s.f_blocks > 0 && s.f_bsize > 0 ? "nonzero" : "zero");
    int fd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ck_err("fstatfs.ok", 0, E(fstatfs(fd, &s)));
    close(fd);
}

/* ---- readdir, names ----------------------------------------------------- */

#define MANY 1500

static void g_readdir(void) {
    char name[32];
    mkdir("d", 0755);
    int made = 0;
    for (int i = 0; i < MANY; i++) {
        snprintf(name, sizeof name, "d/entry-%04d", i);
        made += put(name, "", 0644) == 0;
    }
    ck_long("readdir.many.created", MANY, made);
    DIR *dp = opendir("d");
    long seen = 0, dots = 0, regs = 0;
    static bool hit[MANY];
    memset(hit, 0, sizeof hit);
    for (struct dirent *e; dp && (e = readdir(dp));) {
        int k;
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            dots++;
        else if (sscanf(e->d_name, "entry-%d", &k) == 1 && k >= 0 && k < MANY && !hit[k])
            hit[k] = true, seen++;
        if (e->d_type == DT_REG)
            regs++;
    }
    ck_long("readdir.many.entries", MANY, seen);
    ck_long("readdir.many.dots", 2, dots);
    ck_long("readdir.many.d_type", MANY, regs);
    /* rm -r's pattern: unlink while reading, then the directory is empty. */
    if (dp) {
        rewinddir(dp);
        long gone = 0;
        for (struct dirent *e; (e = readdir(dp));) {
            if (e->d_name[0] == '.')
                continue;
            snprintf(name, sizeof name, "d/%s", e->d_name);
            gone += unlink(name) == 0;
        }
        closedir(dp);
        ck_long("readdir.unlink_while_reading", MANY, gone);
    }
    ck_err("readdir.emptied_rmdir", 0, E(rmdir("d")));
}

static void g_names(void) {
    char n255[256], n256[257], path[PATH_MAX + 16];
    memset(n255, 'n', 255);
    n255[255] = '\0';
    memset(n256, 'n', 256);
    n256[256] = '\0';
    int fd;
    ck_err("name.255.create", 0, E(fd = open(n255, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)));
    if (fd >= 0)
        close(fd);
    ck_kind("name.255.stat", "reg:0", n255);
    ck_err("name.256.create", ENAMETOOLONG, E(open(n256, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)));
    ck_err("name.256.mkdir", ENAMETOOLONG, E(mkdir(n256, 0755)));
    ck_err("name.256.stat", ENAMETOOLONG, E(access(n256, F_OK)));
    ck_err("name.256.rename_to", ENAMETOOLONG, E(rename(n255, n256)));
    ck_err("name.256.symlink", ENAMETOOLONG, E(symlink("x", n256)));
    ck_err("name.255.mkdir", 0, E(mkdir("d", 0755)));
    snprintf(path, sizeof path, "d/%s", n255);
    ck_err("name.255.rename_into_dir", 0, E(rename(n255, path)));
    for (size_t i = 0; i < PATH_MAX + 8; i++)
        path[i] = i % 2 ? '/' : 'a';
    path[PATH_MAX + 8] = '\0';
    ck_err("name.path_max", ENAMETOOLONG, E(access(path, F_OK)));
    ck_err("name.empty", ENOENT, E(open("", O_RDONLY | O_CLOEXEC)));
    ck_err("name.utf8", 0, E(put("h\xc3\xa9llo-\xe2\x9c\x93", "", 0644)));
    ck_err("name.newline", 0, E(put("a\nb", "", 0644)));
}

/* ---- as a non-root user, with root's fixtures ---------------------------- */

static void g_user(void) {
    char p[PATH_MAX], q[PATH_MAX];
    uid_t u = geteuid();
    gid_t g = getegid();
    if (fixture("d0777", p, sizeof p) < 0) {
        report("user.fixture", "present", "absent");
        return;
    }
    snprintf(p, sizeof p, "%s/%s/d0777/u%u", top, FIXTURE, (unsigned)u);
    int fd;
    ck_err("user.0777dir.create", 0, E(fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)));
    if (fd >= 0)
        close(fd);
    ck_owner("user.0777dir.create.owner", u, g, p);
    snprintf(q, sizeof q, "%s/%s/d0777/ud%u", top, FIXTURE, (unsigned)u);
    ck_err("user.0777dir.mkdir", 0, E(mkdir(q, 0755)));
    ck_owner("user.0777dir.mkdir.owner", u, g, q);
    ck_err("user.0777dir.unlink_own", 0, E(unlink(p)));
    ck_err("user.0777dir.rmdir_own", 0, E(rmdir(q)));

    fixture("d0755", p, sizeof p);
    snprintf(q, sizeof q, "%s/new", p);
    ck_err("user.root0755dir.create", EACCES, E(open(q, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)));
    ck_err("user.root0755dir.mkdir", EACCES, E(mkdir(q, 0755)));
    snprintf(q, sizeof q, "%s/f", p);
    ck_err("user.root0755dir.unlink", EACCES, E(unlink(q)));
    ck_err("user.root0755dir.access_w", EACCES, E(access(p, W_OK)));
    ck_err("user.root0644.read", 0, E(fd = open(q, O_RDONLY | O_CLOEXEC)));
    if (fd >= 0)
        close(fd);
    ck_err("user.root0644.write", EACCES, E(open(q, O_WRONLY | O_CLOEXEC)));
    ck_err("user.root0644.chmod", EPERM, E(chmod(q, 0666)));
    ck_err("user.root0644.chown", EPERM, E(chown(q, u, g)));
    struct timespec ts[2] = { { 1, 0 }, { 1, 0 } };
    ck_err("user.root0644.utimes_explicit", EPERM, E(utimensat(AT_FDCWD, q, ts, 0)));
    ck_err("user.root0644.utimes_now", EACCES, E(utimensat(AT_FDCWD, q, NULL, 0)));
    ck_err("user.root0644.setxattr", EACCES, E(setxattr(q, "user.x", "1", 1, 0)));
    ck_err("user.root0644.truncate", EACCES, E(truncate(q, 0)));
    fixture("f0600", p, sizeof p);
    ck_err("user.root0600.read", EACCES, E(open(p, O_RDONLY | O_CLOEXEC)));
    /* fs.protected_hardlinks=1 (Debian's default, also on the host that
     * confirmed these): no link to a file one could not write. */
    ck_err("user.root0600.link", EPERM, E(link(p, "hl")));

    put("own", "", 0644);
    ck_err("user.own.chown_to_root", EPERM, E(chown("own", 0, (gid_t)-1)));
    ck_err("user.own.chgrp_nonmember", EPERM, E(chown("own", (uid_t)-1, 4242)));
    ck_err("user.own.chown_self", 0, E(chown("own", u, g)));
    ck_err("user.own.chmod", 0, E(chmod("own", 0600)));
    ck_mode("user.own.chmod.mode", 0600, "own");
    ck_owner("user.own.owner", u, g, "own");

    fixture("sticky", p, sizeof p);
    snprintf(q, sizeof q, "%s/rootf", p);
    ck_err("user.sticky.unlink_other", EPERM, E(unlink(q)));
    char r[PATH_MAX];
    snprintf(r, sizeof r, "%s/moved%u", p, (unsigned)u);
    ck_err("user.sticky.rename_other", EPERM, E(rename(q, r)));
    ck_err("user.sticky.write_other_0666", 0, E(fd = open(q, O_WRONLY | O_CLOEXEC)));
    if (fd >= 0)
        close(fd);
    snprintf(q, sizeof q, "%s/mine%u", p, (unsigned)u);
    ck_err("user.sticky.create", 0, E(put(q, "m", 0644)));
    ck_err("user.sticky.rename_own", 0, E(rename(q, r)));
    ck_err("user.sticky.unlink_own", 0, E(unlink(r)));
}

/* ---- as root: what DAC override gives ----------------------------------- */

static void g_root(void) {
    int fd;
    put("z", "zz", 0000);
    ck_err("root.dac.read_0000", 0, E(fd = open("z", O_RDONLY | O_CLOEXEC)));
    if (fd >= 0)
        close(fd);
    ck_err("root.dac.write_0000", 0, E(fd = open("z", O_WRONLY | O_CLOEXEC)));
    if (fd >= 0)
        close(fd);
    mkdir("d", 0555);
    ck_err("root.dac.create_in_0555", 0, E(put("d/f", "", 0644)));
    ck_err("root.dac.access_w", 0, E(access("d", W_OK)));
    put("nox", "", 0644);
    ck_err("root.dac.access_x_noexec_file", EACCES, E(access("nox", X_OK)));
    put("u", "", 0644);
    chown("u", 1000, 1000);
    ck_err("root.chmod_other_owner", 0, E(chmod("u", 0600)));
    ck_owner("root.create_as_root.owner", 0, 0, "nox");
}

/* ---- driver ------------------------------------------------------------- */

enum need { ANY, ROOT, USER };
static const struct group {
    const char *name;
    void (*fn)(void);
    enum need need;
} groups[] = {
    { "open", g_open, ANY },       { "rename", g_rename, ANY },       { "link", g_link, ANY },
    { "dirs", g_dirs, ANY },       { "fifo", g_fifo, ANY },           { "symlink", g_symlink, ANY },
    { "chmod", g_chmod, ANY },     { "chown", g_chown, ANY },         { "truncate", g_truncate, ANY },
    { "utimens", g_utimens, ANY }, { "fallocate", g_fallocate, ANY }, { "mmap", g_mmap, ANY },
    { "locks", g_locks, ANY },     { "xattr", g_xattr, ANY },         { "statfs", g_statfs, ANY },
    { "readdir", g_readdir, ANY }, { "names", g_names, ANY },         { "user", g_user, USER },
    { "root", g_root, ROOT },
};

static int run_group(const struct group *gr) {
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/c%u-%s", top, (unsigned)geteuid(), gr->name);
    rm_tree(dir);
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        alarm(GROUP_TIMEOUT_S);
        umask(022);
        if (mkdir(dir, 0755) < 0 || chdir(dir) < 0) {
            char got[64];
            snprintf(got, sizeof got, "setup:%s", en(errno));
            char name[96];
            snprintf(name, sizeof name, "%s.setup", gr->name);
            report(name, "0", got);
            fflush(stdout);
            _exit(1);
        }
        gr->fn();
        fflush(stdout);
        _exit(n_fail ? 1 : 0);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(st)) {
        char name[96];
        const char *sig = sigabbrev_np(WTERMSIG(st));
        snprintf(name, sizeof name, "%s.run", gr->name);
        report(name, "exit0", sig ? sig : "signal");
    } else if (WEXITSTATUS(st) != 0) {
        n_fail++;
    }
    /* Fixtures of the user group are root's: leave what chmod 0000 made
     * readable for the removal. */
    chmod(dir, 0755);
    rm_tree(dir);
    return 0;
}

static int prepare(void) {
    char p[PATH_MAX];
    if (geteuid() != 0) {
        fprintf(stderr, "fscases: --prepare needs root (it makes root-owned fixtures)\n");
        return 2;
    }
    umask(0);
    if (chmod(top, 0777) < 0) {
        fprintf(stderr, "fscases: chmod %s: %s\n", top, strerror(errno));
        return 1;
    }
    snprintf(p, sizeof p, "%s/%s", top, FIXTURE);
    rm_tree(p);
    int bad = 0;
    bad |= mkdir(p, 0755);
    static const struct {
        const char *rel;
        mode_t mode;
        bool dir;
    } fx[] = {
        { "d0777", 0777, true },  { "d0755", 0755, true },   { "d0755/f", 0644, false },
        { "f0600", 0600, false }, { "sticky", 01777, true }, { "sticky/rootf", 0666, false },
    };
    for (size_t i = 0; i < sizeof fx / sizeof fx[0]; i++) {
        snprintf(p, sizeof p, "%s/%s/%s", top, FIXTURE, fx[i].rel);
        int r = fx[i].dir ? mkdir(p, fx[i].mode) : put(p, "root", fx[i].mode);
        if (r == 0)
            r = chmod(p, fx[i].mode); /* mkdir drops the sticky bit on some filesystems */
        if (r < 0) {
            fprintf(stderr, "fscases: fixture %s: %s\n", fx[i].rel, strerror(errno));
            bad = 1;
        }
    }
    return bad ? 1 : 0;
}

static void usage(FILE *f) { fprintf(f, "usage: fscases [-k SUBSTR] DIR | fscases --prepare DIR | fscases --list\n"); }

int main(int argc, char **argv) {
    const char *filter = NULL;
    bool prep = false;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int i = 1;
    for (; i < argc && argv[i][0] == '-'; i++) {
        if (!strcmp(argv[i], "--list")) {
            for (size_t k = 0; k < sizeof groups / sizeof groups[0]; k++)
                printf("%s\n", groups[k].name);
            return 0;
        } else if (!strcmp(argv[i], "--prepare")) {
            prep = true;
        } else if (!strcmp(argv[i], "-k") && i + 1 < argc) {
            filter = argv[++i];
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (i + 1 != argc) {
        usage(stderr);
        return 2;
    }
    static char abs_top[PATH_MAX];
    if (!realpath(argv[i], abs_top)) {
        fprintf(stderr, "fscases: %s: %s (give an existing directory)\n", argv[i], strerror(errno));
        return 2;
    }
    top = abs_top;
    if (prep)
        return prepare();
    as_root = geteuid() == 0;
    signal(SIGPIPE, SIG_IGN);
    int fails = 0;
    for (size_t k = 0; k < sizeof groups / sizeof groups[0]; k++) {
        const struct group *gr = &groups[k];
        if (filter && !strstr(gr->name, filter))
            continue;
        if ((gr->need == ROOT && !as_root) || (gr->need == USER && as_root))
            continue;
        if (run_group(gr) < 0) {
            fprintf(stderr, "fscases: cannot run %s: %s\n", gr->name, strerror(errno));
            fails++;
        }
    }
    return fails || n_fail ? 1 : 0;
}
