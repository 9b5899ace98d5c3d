/* credential.c — see credential.h. */
#include "credential.h"
#include "spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sodium.h>
#include <sys/stat.h>

void lz_credential_placeholder(const uint8_t domain_id[32], const char *var, char ret[LZ_CRED_PLACEHOLDER_LEN + 1]) {
    static const char tag[] = "lazaret credential placeholder v1";
    crypto_hash_sha256_state st;
    crypto_hash_sha256_init(&st);
    crypto_hash_sha256_update(&st, (const uint8_t *)tag, sizeof tag); /* with its NUL */
    crypto_hash_sha256_update(&st, domain_id, 32);
    crypto_hash_sha256_update(&st, (const uint8_t *)var, strlen(var));
    uint8_t h[32];
    crypto_hash_sha256_final(&st, h);
    memcpy(ret, "lzph_", 5);
    lz_hex(h, 16, ret + 5);
    ret[LZ_CRED_PLACEHOLDER_LEN] = '\0';
}

const char *lz_credential_value_problem(const char *value, size_t n) {
    if (n == 0)
        return "is empty";
    if (n < LZ_CRED_VALUE_MIN)
        return "is shorter than 8 bytes (no real key or token is)";
    if (n > LZ_CRED_VALUE_MAX)
        return "is longer than 4096 bytes";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)value[i] <= 0x20 || (unsigned char)value[i] > 0x7e)
            return "has a byte that cannot go into an HTTP header (a space, a control character or a non-ASCII "
                   "byte)";
    return NULL;
}

#ifdef LZ_TEST_HOOKS
int lz_credential_fetch_ms = LZ_CRED_FETCH_MS;
#define FETCH_MS lz_credential_fetch_ms
#else
#define FETCH_MS LZ_CRED_FETCH_MS
#endif

/* The first line of buf (n bytes): its length without "\n" or "\r\n". */
static size_t first_line(const char *buf, size_t n) {
    const char *nl = memchr(buf, '\n', n);
    size_t k = nl ? (size_t)(nl - buf) : n;
    if (k && buf[k - 1] == '\r')
        k--;
    return k;
}

static int take(struct lz_credential *cr, char *buf, size_t n, const char *what, struct lz_error *err) {
    size_t k = first_line(buf, n);
    const char *why = lz_credential_value_problem(buf, k);
    if (why) {
        explicit_bzero(buf, n);
        return lz_error_set(err, -EINVAL, "credential %s: the value %s %s", cr->var, what, why);
    }
    cr->value = lz_xstrndup(buf, k);
    explicit_bzero(buf, n);
    return 0;
}

static int fetch_file(struct lz_credential *cr, struct lz_error *err) {
    _cleanup_close_ int fd = open(cr->from_file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return lz_error_set(err, -errno, "credential %s: cannot open %s: %s", cr->var, cr->from_file,
                            errno == ELOOP ? "it is a symbolic link (name the file itself)" : strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0)
        return lz_error_set(err, -errno, "credential %s: %s: %s", cr->var, cr->from_file, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return lz_error_set(err, -EINVAL, "credential %s: %s is not a regular file", cr->var, cr->from_file);
    if (st.st_uid != geteuid())
        return lz_error_set(err, -EPERM,
                            "credential %s: %s is not yours (owner uid %u): a credential's file must be "
                            "owned by you",
                            cr->var, cr->from_file, (unsigned)st.st_uid);
    if (st.st_mode & 077)
        return lz_error_set(err, -EPERM,
                            "credential %s: %s can be read or written by others (mode %04o): run "
                            "chmod 600 %s",
                            cr->var, cr->from_file, (unsigned)(st.st_mode & 07777), cr->from_file);
    char buf[LZ_CRED_VALUE_MAX + 2];
    ssize_t n = lz_read_full(fd, buf, sizeof buf);
    if (n < 0)
        return lz_error_set(err, (int)n, "credential %s: cannot read %s: %s", cr->var, cr->from_file,
                            strerror((int)-n));
    int r = take(cr, buf, (size_t)n, "in that file", err);
    explicit_bzero(buf, sizeof buf);
    return r;
}

static int fetch_command(struct lz_credential *cr, char *const *envp, struct lz_error *err) {
    /* A bare name through the PATH of envp (the coordinator's: the
     * system's bin directories). */
    _cleanup_free_ char *path = NULL;
    if (lz_find_program(cr->from_command[0], envp, &path) < 0 || access(path, X_OK) < 0)
        return lz_error_set(err, -ENOENT,
                            "credential %s: program %s not found (a bare name is looked up in /usr/local/bin, "
                            "/usr/bin and /bin; give the absolute path of another)",
                            cr->var, cr->from_command[0]);
    /* Only our ends are non-blocking: the program's must block as a
     * program's standard output does. */
    int out[2], er[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return lz_error_set(err, -errno, "credential %s: pipe: %s", cr->var, strerror(errno));
    if (pipe2(er, O_CLOEXEC) < 0) {
        int e = errno;
        close(out[0]);
        close(out[1]);
        return lz_error_set(err, -e, "credential %s: pipe: %s", cr->var, strerror(e));
    }
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(er[0], F_SETFL, O_NONBLOCK);
    struct lz_spawn_opts o = { .path = path,
                               .argv = cr->from_command,
                               .envp = envp,
                               .stdin_fd = -1,
                               .stdout_fd = out[1],
                               .stderr_fd = er[1],
                               .setns_pidfd = -1,
                               .new_session = true,
                               .pdeathsig = SIGKILL };
    struct lz_child ch;
    int r = lz_spawn(&o, &ch);
    close(out[1]);
    close(er[1]);
    if (r < 0) {
        close(out[0]);
        close(er[0]);
        return lz_error_set(err, r, "credential %s: cannot run %s: %s", cr->var, path, strerror(-r));
    }
    char buf[LZ_CRED_VALUE_MAX + 2] = { 0 }, ebuf[512];
    size_t n = 0, en = 0;
    bool oe = false, ee = false;
    long deadline = lz_now_ms() + FETCH_MS;
    while (!(oe && ee)) {
        long left = deadline - lz_now_ms();
        if (left <= 0)
            break;
        struct pollfd p[2] = { { .fd = oe ? -1 : out[0], .events = POLLIN },
                               { .fd = ee ? -1 : er[0], .events = POLLIN } };
        if (poll(p, 2, (int)left) < 0 && errno != EINTR)
            break;
        if (!oe && p[0].revents) {
            char sink[4096];
            bool room = n < sizeof buf; /* past the bound: read and dropped */
            ssize_t k = read(out[0], room ? buf + n : sink, room ? sizeof buf - n : sizeof sink);
            if (k > 0 && room)
                n += (size_t)k;
            explicit_bzero(sink, sizeof sink);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
                oe = true;
        }
        if (!ee && p[1].revents) {
            char sink[4096];
            ssize_t k = read(er[0], sink, sizeof sink);
            if (k > 0 && en < sizeof ebuf - 1) {
                size_t c = (size_t)k < sizeof ebuf - 1 - en ? (size_t)k : sizeof ebuf - 1 - en;
                memcpy(ebuf + en, sink, c);
                en += c;
            }
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
                ee = true;
        }
    }
    close(out[0]);
    close(er[0]);
    ebuf[en] = '\0';
    ebuf[first_line(ebuf, en)] = '\0';
    for (char *q = ebuf; *q; q++)
        if ((unsigned char)*q < 0x20 || (unsigned char)*q == 0x7f)
            *q = '?';
    int st = 0;
    long left = deadline - lz_now_ms();
    r = lz_child_wait(&ch, left > 0 ? (int)left : 0, &st);
    if (r < 0) {
        lz_child_signal(&ch, SIGKILL);
        lz_child_wait(&ch, -1, &st);
        lz_child_close(&ch);
        explicit_bzero(buf, sizeof buf);
        return lz_error_set(err, -ETIMEDOUT, "credential %s: %s did not finish within %d ms", cr->var,
                            cr->from_command[0], FETCH_MS);
    }
    lz_child_close(&ch);
    if (st != 0) {
        explicit_bzero(buf, sizeof buf);
        return lz_error_set(err, -EIO, "credential %s: %s exited with status %d%s%s", cr->var, cr->from_command[0], st,
                            ebuf[0] ? ": " : "", ebuf);
    }
    r = take(cr, buf, n, "the program printed", err);
    explicit_bzero(buf, sizeof buf);
    return r;
}

int lz_credential_fetch(struct lz_credential *cr, char *const *envp, struct lz_error *err) {
    if (cr->value || cr->from == LZ_CRED_FROM_ENV)
        return 0;
    return cr->from == LZ_CRED_FROM_FILE ? fetch_file(cr, err) : fetch_command(cr, envp, err);
}
