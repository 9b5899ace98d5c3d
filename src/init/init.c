/* lazaret-init — PID 1 of the Agent Sandbox.
 *
 * Statically linked so it runs in any image. It announces readiness on
 * stdout (the Runtime Supervisor waits for this line before it accepts the
 * sandbox as running), reaps orphans, and exits on SIGTERM/SIGINT/SIGHUP so
 * that the sandbox stops when the supervisor asks. Sessions are separate
 * `runsc exec` processes; init never runs agent code.
 *
 * Before it announces readiness it puts the Domain CA of credentials
 * (docs/credentials.md) into the image's trust store, or takes an earlier
 * one out: the Host Coordinator binds the certificate read-only at
 * TRUST_SRC when the profile has a credential the TLS gate serves. The
 * bundle gets it between two marker lines (replaced at every start, so
 * one start's CA never piles up on another's), and LOCAL_CRT holds it so
 * that an update-ca-certificates inside (a package's trigger) keeps it.
 * Whatever fails here is said on stderr and the sandbox boots anyway:
 * tools then fail to verify the credential hosts, which says why.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define TRUST_SRC "/run/lazaret/trust/domain-ca.crt"
#define BUNDLE "/etc/ssl/certs/ca-certificates.crt"
#define BUNDLE_TMP "/etc/ssl/certs/.ca-certificates.crt.lazaret"
#define LOCAL_DIR "/usr/local/share/ca-certificates"
#define LOCAL_CRT LOCAL_DIR "/lazaret-domain-ca.crt"
#define MARK_BEGIN "# lazaret: the Domain CA of credentials, replaced at every start\n"
#define MARK_END "# lazaret: end of the Domain CA\n"
#define CA_MAX (64 * 1024)
#define BUNDLE_MAX (16 * 1024 * 1024)

/* The whole regular file at path (NUL-terminated), at most max bytes;
 * NULL if absent, not regular, or larger. */
static char *slurp(const char *path, size_t max, size_t *len) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *b = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size <= max &&
        (b = malloc((size_t)st.st_size + 1))) {
        size_t n = 0;
        while (n < (size_t)st.st_size) {
            ssize_t k = read(fd, b + n, (size_t)st.st_size - n);
            if (k <= 0)
                break;
            n += (size_t)k;
        }
        b[n] = '\0';
        *len = n;
    }
    close(fd);
    return b;
}

static int write_all(int fd, const char *b, size_t n) {
    while (n) {
        ssize_t k = write(fd, b, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Writes parts to path through tmp and a rename, mode 0644. */
static int replace(const char *path, const char *tmp, const char *const *parts, const size_t *lens, int n) {
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0)
        return -1;
    int r = 0;
    for (int i = 0; i < n && r == 0; i++)
        r = write_all(fd, parts[i], lens[i]);
    if (close(fd) < 0)
        r = -1;
    if (r == 0 && rename(tmp, path) < 0)
        r = -1;
    if (r < 0)
        unlink(tmp);
    return r;
}

static void trust_domain_ca(void) {
    size_t ca_len = 0, bl = 0;
    char *ca = slurp(TRUST_SRC, CA_MAX, &ca_len);
    char *b = slurp(BUNDLE, BUNDLE_MAX, &bl);
    if (b) {
        /* The bundle without an earlier start's block. */
        size_t keep_a = bl, keep_b = bl;
        char *s = strstr(b, MARK_BEGIN);
        if (s) {
            char *e = strstr(s, MARK_END);
            keep_a = (size_t)(s - b);
            keep_b = e ? (size_t)(e - b) + strlen(MARK_END) : bl;
        }
        if (ca || s) {
            bool nl = keep_a > 0 && b[keep_a - 1] != '\n';
            const char *parts[] = { b,         nl ? "\n" : "", ca ? MARK_BEGIN : "", ca ? ca : "", ca ? MARK_END : "",
                                    b + keep_b };
            size_t lens[] = { keep_a,     nl ? 1 : 0, ca ? strlen(MARK_BEGIN) : 0, ca_len, ca ? strlen(MARK_END) : 0,
                              bl - keep_b };
            if (replace(BUNDLE, BUNDLE_TMP, parts, lens, 6) < 0)
                fprintf(stderr, "lazaret-init: cannot update %s: %s\n", BUNDLE, strerror(errno));
        }
    } else if (ca) {
        fprintf(stderr, "lazaret-init: this image has no %s; the Domain CA is only in %s\n", BUNDLE, TRUST_SRC);
    }
    struct stat st;
    if (ca && stat(LOCAL_DIR, &st) == 0 && S_ISDIR(st.st_mode)) {
        const char *parts[] = { ca };
        size_t lens[] = { ca_len };
        if (replace(LOCAL_CRT, LOCAL_CRT ".tmp", parts, lens, 1) < 0)
            fprintf(stderr, "lazaret-init: cannot write %s: %s\n", LOCAL_CRT, strerror(errno));
    } else if (!ca) {
        unlink(LOCAL_CRT);
    }
    free(ca);
    free(b);
}

int main(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    sigprocmask(SIG_BLOCK, &set, NULL);
    trust_domain_ca();
    static const char ready[] = "lazaret-init: ready\n";
    if (write(1, ready, sizeof ready - 1) < 0)
        return 1;
    for (;;) {
        int sig = 0;
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGCHLD) {
            while (waitpid(-1, NULL, WNOHANG) > 0)
                ;
            continue;
        }
        return 0;
    }
}
