/* session.c — Session Terminals of the Host Coordinator (hc.h): each
 * client session's `runsc exec` inside the Supervisor's namespaces (its
 * durable record: intent, staged, running, release intent, clean), and the
 * relay between the client's socket and the exec's PTY master or pipes,
 * with backpressure. */
#include "hc_session.h"
#include "credential.h"
#include "hc_esc.h"
#include "hc_refusal.h"
#include "trust.h"
#include "ocispec.h"
#include "procenv.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sodium.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <time.h>

static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool env_name_allowed(const char *kv) {
    static const char *const allowed[] = { "TERM=",     "LANG=",        "COLORTERM=", "LC_ALL=",
                                           "LC_CTYPE=", "LC_MESSAGES=", "LANGUAGE=",  "TZ=" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(allowed); i++)
        if (!strncmp(kv, allowed[i], strlen(allowed[i])))
            return true;
    return false;
}

static void strv_push(char ***v, size_t *n, char *s) {
    *v = lz_xrealloc(*v, (*n + 2) * sizeof **v);
    (*v)[(*n)++] = s;
    (*v)[*n] = NULL;
}
static void strv_free(char **v) {
    /* Entries may hold resolved profile secrets. */
    for (size_t i = 0; v && v[i]; i++) {
        sodium_memzero(v[i], strlen(v[i]));
        free(v[i]);
    }
    free(v);
}

struct session *hc_session_by_id(struct hc *h, int id) {
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (h->s[i] && h->s[i]->id == id)
            return h->s[i];
    return NULL;
}

struct session *hc_session_by_sid(struct hc *h, const uint8_t sid[16]) {
    for (int i = 0; i < MAX_SESSIONS; i++) {
        struct session *s = h->s[i];
        if (s && s->anchor && s->sock >= 0 && s->state == S_RUNNING &&
            sodium_memcmp(s->anchor->sid, sid, LZ_RECORD_ID_LEN) == 0)
            return s;
    }
    return NULL;
}

void hc_session_send(struct session *s, uint8_t type, uint8_t ch, const void *p, size_t n) {
    if (s->sock < 0)
        return;
    /* Control messages are small and rare; data goes through the pending
     * buffer path in pump_output. A full socket here means the client
     * stopped reading: it will see EOF when we close. */
    int r = lz_msg_send(s->sock, type, ch, p, n);
    if (r == -EAGAIN) {
        int fl = fcntl(s->sock, F_GETFL);
        fcntl(s->sock, F_SETFL, fl & ~O_NONBLOCK);
        struct timeval tv = { .tv_sec = 2 };
        setsockopt(s->sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        lz_msg_send(s->sock, type, ch, p, n);
        fcntl(s->sock, F_SETFL, fl);
    }
}

void hc_session_refuse(struct session *s, uint32_t code, const char *msg) {
    uint8_t b[LZ_ERROR_MAX + 8];
    size_t n = strlen(msg);
    if (n > LZ_ERROR_MAX)
        n = LZ_ERROR_MAX;
    lz_put_u32(b, code);
    memcpy(b + 4, msg, n);
    hc_session_send(s, LZ_MSG_REFUSED, 0, b, n + 4);
}

void hc_session_free(struct hc *h, struct session *s) {
    hc_esc_session_end(h, s, "its session ended");
    if (s->filter)
        s->filter->session_free(s);
    lz_closep(&s->sock);
    lz_closep(&s->master);
    lz_closep(&s->in_w);
    lz_closep(&s->out_r);
    lz_closep(&s->err_r);
    lz_closep(&s->spec_w);
    if (s->recorded && !s->release_recorded) {
        s->release_recorded = true;
        lz_store_session_set(h->st, h->gen, s->id, "release_intent", s->tty, NULL, NULL, NULL, NULL);
    }
    if (s->exec.pidfd >= 0) {
        lz_child_signal(&s->exec, SIGKILL);
        int st;
        lz_child_wait(&s->exec, 5000, &st);
        lz_child_close(&s->exec);
    }
    if (s->recorded) {
        struct lz_error err = { 0 };
        if ((!s->release_recorded &&
             lz_store_session_set(h->st, h->gen, s->id, "release_intent", s->tty, NULL, NULL, NULL, &err) < 0) ||
            lz_store_session_set(h->st, h->gen, s->id, "clean", s->tty, NULL, NULL, NULL, &err) < 0)
            hc_log("session %d: cannot record its release: %s", s->id, err.msg);
    }
    free(s->procfile);
    free(s->command);
    free(s->term);
    free(s->inbuf);
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (h->s[i] == s)
            h->s[i] = NULL;
    free(s);
}

/* Frees a string that may hold resolved profile values, zeroed first. */
static void zero_freep(char **p) {
    if (*p)
        sodium_memzero(*p, strlen(*p));
    free(*p);
}

/* Writes json[*off..len) to the non-blocking pipe w, waiting at most
 * timeout_ms for room (0: only what fits now). 0 once all is written. */
static int spec_feed(int w, const char *json, size_t len, size_t *off, int timeout_ms) {
    long deadline = lz_now_ms() + timeout_ms;
    while (*off < len) {
        ssize_t k = write(w, json + *off, len - *off);
        if (k > 0) {
            *off += (size_t)k;
            continue;
        }
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno != EAGAIN)
            return -errno;
        long left = deadline - lz_now_ms();
        if (left <= 0)
            return timeout_ms ? -ETIMEDOUT : 0;
        struct pollfd p = { .fd = w, .events = POLLOUT };
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
            return -errno;
    }
    return 0;
}

/* LAZARET_SESSION_ID/KEY: the Session Anchor of host escalation
 * (escalation.c), so the Escalation Client can sign this session's
 * requests. */
static int add_escalation_env(struct hc *h, struct session *s, char ***env, size_t *ne) {
    char *id = NULL, *key = NULL;
    int r = hc_esc_session_begin(h, s, &id, &key);
    if (r <= 0)
        return r;
    strv_push(env, ne, id);
    strv_push(env, ne, key); /* zeroed by strv_free */
    return 0;
}

/* Does the profile's env set name itself (which then wins over a value
 * Lazaret would give it)? */
static bool profile_sets(const struct lz_config *c, const char *name) {
    for (size_t i = 0; i < c->profile.n_env; i++)
        if (!strcmp(c->profile.env[i].name, name))
            return true;
    return false;
}

/* The session's OCI process spec (resolved profile values included). */
static int session_spec(struct hc *h, struct session *s, struct lz_hello *hello, char **ret_json,
                        struct lz_error *err) {
    struct lz_config *c = h->cfg;
    char **env = NULL;
    size_t ne = 0;
    strv_push(&env, &ne, lz_xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
    strv_push(&env, &ne, lz_xstrdup("HOME=/root"));
    strv_push(&env, &ne, lz_xstrdup("USER=root"));
    strv_push(&env, &ne, lz_xstrdup("LAZARET=1"));
    /* No Domain ID: with the user name it would spell the Domain's host
     * directory, and no feature inside needs it. */
    strv_push(
        &env, &ne,
        lz_xstrdup("TERMINFO_DIRS=:/run/lazaret/terminfo/etc:/run/lazaret/terminfo/lib:/run/lazaret/terminfo/share"));
    if (add_escalation_env(h, s, &env, &ne) < 0) {
        strv_free(env);
        return lz_error_set(err, -ENOMEM, "cannot create the session's escalation key");
    }
    bool have_term = false;
    for (size_t i = 0; i < hello->envc; i++)
        if (env_name_allowed(hello->envv[i])) {
            if (!strncmp(hello->envv[i], "TERM=", 5)) {
                have_term = true;
                const char *t = hello->envv[i] + 5;
                /* Also a host process's TERM (escalation, route HostProcess):
                 * only a plain terminfo name. */
                if (s->tty && *t && strlen(t) < 64 &&
                    strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.+-_") == strlen(t)) {
                    free(s->term);
                    s->term = lz_xstrdup(t);
                }
            }
            strv_push(&env, &ne, lz_xstrdup(hello->envv[i]));
        }
    if (!have_term && s->tty)
        strv_push(&env, &ne, lz_xstrdup("TERM=xterm-256color"));
    /* Credentials (docs/credentials.md): the sandbox holds placeholders;
     * for their hosts the Domain's TLS gate answers with certificates of
     * the Domain's CA, which lazaret-init put into the image's bundle. */
    bool gated = false, basic = false;
    for (size_t i = 0; i < c->profile.n_credentials; i++) {
        const struct lz_credential *cr = &c->profile.credentials[i];
        if (cr->value && cr->passed_plain)
            strv_push(&env, &ne, lz_xasprintf("%s=%s", cr->var, cr->value));
        if (!lz_credential_gated(cr))
            continue;
        char ph[LZ_CRED_PLACEHOLDER_LEN + 1];
        lz_credential_placeholder(c->domain_id, cr->var, ph);
        strv_push(&env, &ne, lz_xasprintf("%s=%s", cr->var, ph));
        gated = true;
        basic |= cr->basic;
    }
    /* Tools that read their own CA list rather than the system's: point
     * them at the bundle, which also holds the host's CAs
     * (host_ca_certificates) and the Domain's CA (credentials). A
     * variable the profile sets itself wins. */
    bool bundle = false;
    if ((c->profile.host_ca_certificates || gated) && h->rootfs) {
        _cleanup_free_ char *b = lz_xasprintf("%s/etc/ssl/certs/ca-certificates.crt", h->rootfs);
        bundle = access(b, R_OK) == 0;
    }
    static const char *const ca_vars[] = { "NODE_EXTRA_CA_CERTS", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                           "CURL_CA_BUNDLE", "GIT_SSL_CAINFO" };
    /* No bundle in the image: Node.js at least adds the Domain CA to its
     * own list. */
    if (gated && !bundle && h->trust_dir && !profile_sets(c, ca_vars[0]))
        strv_push(&env, &ne, lz_xstrdup("NODE_EXTRA_CA_CERTS=/run/lazaret/trust/domain-ca.crt"));
    for (size_t i = 0; bundle && i < LZ_ARRAY_SIZE(ca_vars); i++) {
        if (i > 0 && !gated)
            break; /* host CAs alone: the system bundle is read by all but Node.js */
        if (!profile_sets(c, ca_vars[i]))
            strv_push(&env, &ne, lz_xasprintf("%s=/etc/ssl/certs/ca-certificates.crt", ca_vars[i]));
    }
    /* Git inside compares a file's stat data with the index by size and
     * whole-second mtime and ctime only (core.checkStat=minimal): gVisor's
     * inode numbers and the namespace's owners never match what the host's
     * git recorded, so with the default check the first `git status` of
     * every session would re-read every tracked file (docs/lazaret.1).
     * For a credential in HTTP Basic form, a credential helper for its
     * host answers with the placeholder (after an empty value, which
     * empties the list of helpers configured before it), so `git push
     * https://HOST/...` needs no token inside. A profile that sets
     * GIT_CONFIG_COUNT itself keeps its own. */
    if (!profile_sets(c, "GIT_CONFIG_COUNT")) {
        unsigned n = 0;
        strv_push(&env, &ne, lz_xasprintf("GIT_CONFIG_KEY_%u=core.checkStat", n));
        strv_push(&env, &ne, lz_xasprintf("GIT_CONFIG_VALUE_%u=minimal", n++));
        for (size_t i = 0; basic && i < c->profile.n_credentials; i++) {
            const struct lz_credential *cr = &c->profile.credentials[i];
            if (!cr->basic || !lz_credential_gated(cr))
                continue;
            strv_push(&env, &ne, lz_xasprintf("GIT_CONFIG_KEY_%u=credential.https://%s.helper", n, cr->host));
            strv_push(&env, &ne, lz_xasprintf("GIT_CONFIG_VALUE_%u=", n++));
            strv_push(&env, &ne, lz_xasprintf("GIT_CONFIG_KEY_%u=credential.https://%s.helper", n, cr->host));
            strv_push(
                &env, &ne,
                lz_xasprintf("GIT_CONFIG_VALUE_%u=!f() { test \"$1\" = get && printf 'username=%%s\\npassword=%%s\\n' "
                             "'%s' \"$%s\"; }; f",
                             n++, cr->username, cr->var));
        }
        strv_push(&env, &ne, lz_xasprintf("GIT_CONFIG_COUNT=%u", n));
    }
    /* Profile environment: resolved values go to the process spec only,
     * never to a log. */
    for (size_t i = 0; i < c->profile.n_env; i++)
        if (c->profile.env[i].value) /* NULL: a built-in's optional key, unset on the host */
            strv_push(&env, &ne, lz_xasprintf("%s=%s", c->profile.env[i].name, c->profile.env[i].value));

    char *shell_argv[] = { h->shell, (char *)"-l", NULL };
    struct lz_exec_spec es = {
        .argv = hello->argc ? hello->argv : shell_argv,
        .envv = env,
        .cwd = hello->cwd && hello->cwd[0] ? hello->cwd : "/workspace",
        .terminal = s->tty,
        .rows = hello->rows,
        .cols = hello->cols,
    };
    int r = lz_oci_process_json(&es, ret_json, err);
    strv_free(env);
    return r;
}

/* The program name of the hello's command, for `lazaret ps`. */
static char *hello_command(const struct hc *h, const struct lz_hello *hello) {
    const char *prog = hello->argc && hello->argv[0] ? hello->argv[0] : h->shell;
    const char *slash = strrchr(prog, '/');
    return lz_xstrdup(slash && slash[1] ? slash + 1 : prog);
}

/* The Session Terminal's exec client, up to where it waits for its
 * process spec: the intent (before the client exists), its PTY or pipes,
 * the spec's pipe, the client spawned inside the Supervisor's namespaces,
 * staged, released. The spec holds resolved profile secrets: it goes to
 * runsc exec through a pipe, never a file, and not a memfd either: the
 * exec client keeps the descriptor for the whole session, and a memfd
 * would stay readable through /proc/PID/fd all that time, while a pipe is
 * empty once runsc has read the spec (--process /proc/self/fd/N). runsc
 * reads that file before it looks at the container, so a released client
 * waits there, its own start-up done, until exec_feed writes the spec;
 * that is what lets the first session's client start while the sandbox
 * still boots (hc_session_prestart). command: NULL when not known yet. */
static int exec_spawn(struct hc *h, struct session *s, const char *command, struct lz_error *err) {
    int pp[2];
    if (pipe2(pp, O_CLOEXEC) < 0)
        return lz_error_set(err, -errno, "cannot pass the process spec: %s", strerror(errno));
    _cleanup_close_ int spec_r = pp[0];
    s->spec_w = pp[1];
    fcntl(s->spec_w, F_SETFL, O_NONBLOCK);
    s->procfile = lz_xasprintf("/proc/self/fd/%d", spec_r);
    char *argv[] = { h->runsc,    (char *)"--root", h->state_dir, (char *)"exec", (char *)"--process",
                     s->procfile, h->container_id,  NULL };
    int keep[] = { spec_r };
    _cleanup_env_ char **envp = lz_env_build(LZ_ENV_HELPER);
    struct lz_spawn_opts o = {
        .path = h->runsc,
        .argv = argv,
        .envp = envp,
        .setns_pidfd = h->rs.pidfd,
        .setns_flags = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET,
        .keep_fds = keep,
        .n_keep_fds = 1,
        .barrier = true,
    };
    /* The Session Terminal: intent before the exec client exists. */
    s->started_wall = wall_ms();
    int r = lz_store_session_set(h->st, h->gen, s->id, "intent", s->tty, command, NULL, NULL, err);
    if (r < 0)
        return r;
    s->recorded = true;
    _cleanup_close_ int slave = -EBADF, in_r = -EBADF, out_w = -EBADF, err_w = -EBADF;
    if (s->tty) {
        s->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (s->master < 0 || grantpt(s->master) < 0 || unlockpt(s->master) < 0)
            return lz_error_set(err, -errno, "cannot allocate a PTY: %s", strerror(errno));
        slave = ioctl(s->master, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (slave < 0)
            return lz_error_set(err, -errno, "cannot open the PTY peer: %s", strerror(errno));
        /* The host PTY keeps its default (cooked) settings: runsc exec
         * adjusts them itself, and ^C/^Z/^\ typed here become signals to
         * the exec client, which forwards them to the guest terminal's
         * foreground process group. */
        o.stdin_fd = o.stdout_fd = o.stderr_fd = slave;
        o.new_session = true;
        o.ctty = true;
    } else {
        int p0[2], p1[2], p2[2];
        if (pipe2(p0, O_CLOEXEC) < 0)
            return lz_error_errno(err, -errno, "cannot create the session's pipes");
        in_r = p0[0];
        s->in_w = p0[1];
        if (pipe2(p1, O_CLOEXEC) < 0)
            return lz_error_errno(err, -errno, "cannot create the session's pipes");
        s->out_r = p1[0];
        out_w = p1[1];
        if (pipe2(p2, O_CLOEXEC) < 0)
            return lz_error_errno(err, -errno, "cannot create the session's pipes");
        s->err_r = p2[0];
        err_w = p2[1];
        fcntl(s->in_w, F_SETFL, O_NONBLOCK);
        fcntl(s->out_r, F_SETFL, O_NONBLOCK);
        fcntl(s->err_r, F_SETFL, O_NONBLOCK);
        o.stdin_fd = in_r;
        o.stdout_fd = out_w;
        o.stderr_fd = err_w;
        o.new_session = true;
    }
    r = lz_spawn(&o, &s->exec);
    if (r < 0)
        return lz_error_set(err, r, "cannot start the session: %s", strerror(-r));
    /* Staged ownership before the exec client may run; committed once it
     * has its spec (exec_feed). */
    if ((r = lz_procid_from_pidfd(s->exec.pidfd, s->exec.pid, &s->exec_id)) < 0) {
        lz_child_signal(&s->exec, SIGKILL);
        return lz_error_errno(err, r, "cannot identify the session's exec client");
    }
    if ((r = lz_store_session_set(h->st, h->gen, s->id, "intent", s->tty, NULL, "staged", &s->exec_id, err)) < 0) {
        lz_child_signal(&s->exec, SIGKILL);
        return r;
    }
    lz_crash_point("session-staged");
    if ((r = lz_child_release(&s->exec)) < 0)
        return lz_error_set(err, r, "cannot start the session: %s", strerror(-r));
    return 0;
}

/* The released exec client gets its process spec (bounded, however
 * large), then the session is running. */
static int exec_feed(struct hc *h, struct session *s, struct lz_hello *hello, struct lz_error *err) {
    _cleanup_(zero_freep) char *json = NULL;
    int r = session_spec(h, s, hello, &json, err);
    if (r < 0)
        return r;
    if (s->tty && hello->rows && hello->cols) {
        /* Before the spec: runsc sizes the guest terminal from its own. */
        struct winsize ws = { .ws_row = hello->rows, .ws_col = hello->cols };
        ioctl(s->master, TIOCSWINSZ, &ws);
    }
    size_t spec_len = strlen(json), spec_off = 0;
    if (spec_len > 65536)
        (void)fcntl(s->spec_w, F_SETPIPE_SZ, spec_len < 1048576 ? (int)spec_len : 1048576);
    r = spec_feed(s->spec_w, json, spec_len, &spec_off, SPEC_FEED_TIMEOUT_MS);
    lz_closep(&s->spec_w);
    if (r < 0) {
        lz_child_signal(&s->exec, SIGKILL);
        return lz_error_set(err, r, "cannot pass the process spec to runsc: %s", strerror(-r));
    }
    if ((r = lz_store_session_set(h->st, h->gen, s->id, "running", s->tty, s->command, "committed", &s->exec_id, err)) <
        0) {
        lz_child_signal(&s->exec, SIGKILL);
        return r;
    }
    return 0;
}

struct session *hc_session_new(struct hc *h) {
    struct session *s = lz_xcalloc(1, sizeof *s);
    s->sock = s->master = s->in_w = s->out_r = s->err_r = s->spec_w = -EBADF;
    s->exec = LZ_CHILD_NULL;
    s->id = ++h->next_id;
    s->state = S_HELLO;
    return s;
}

int hc_session_prestart(struct hc *h, bool tty, struct lz_error *err) {
    struct session *s = hc_session_new(h);
    s->tty = tty;
    int r = exec_spawn(h, s, NULL, err);
    if (r < 0) {
        hc_session_free(h, s);
        return r;
    }
    h->pre = s;
    hc_log("session %d: exec client started ahead (pid %d, %s), waiting for its process", s->id, (int)s->exec.pid,
           tty ? "tty" : "pipes");
    return 0;
}

void hc_session_drop_pre(struct hc *h) {
    struct session *p = TAKE_PTR(h->pre);
    if (p)
        hc_session_free(h, p); /* SIGKILL, release_intent, clean */
}

/* The exec client started ahead, for the session s: taken when it is of
 * s's kind and still alive, else dropped. True when taken; s then has its
 * ID, record, client and descriptors. */
static bool take_pre(struct hc *h, struct session *s) {
    struct session *p = h->pre;
    if (!p)
        return false;
    struct pollfd pp = { .fd = p->exec.pidfd, .events = POLLIN };
    if (p->tty != s->tty || poll(&pp, 1, 0) != 0) {
        hc_log("session %d: the exec client started ahead is not used (%s)", p->id,
               p->tty != s->tty ? "another kind of session" : "it exited");
        hc_session_drop_pre(h);
        return false;
    }
    h->pre = NULL;
    /* The ID given at accept goes back when it was the last one. */
    if (s->id == h->next_id)
        h->next_id--;
    s->id = p->id;
    s->exec = p->exec;
    s->exec_id = p->exec_id;
    s->master = TAKE_FD(p->master);
    s->in_w = TAKE_FD(p->in_w);
    s->out_r = TAKE_FD(p->out_r);
    s->err_r = TAKE_FD(p->err_r);
    s->spec_w = TAKE_FD(p->spec_w);
    s->procfile = TAKE_PTR(p->procfile);
    s->started_wall = p->started_wall;
    s->recorded = true;
    free(p); /* nothing else of it was allocated */
    return true;
}

static int session_start_exec(struct hc *h, struct session *s, struct lz_hello *hello, struct lz_error *err) {
    s->command = hello_command(h, hello);
    s->plain_shell = hc_ref_plain_shell(s->tty, hello->argv, hello->argc);
    int r = 0;
    bool ahead = take_pre(h, s);
    if (!ahead)
        r = exec_spawn(h, s, s->command, err);
    if (r == 0)
        r = exec_feed(h, s, hello, err);
    if (r < 0)
        return r;
    h->session_fed = true;
    hc_log("session %d: exec started (pid %d, %s%s)", s->id, (int)s->exec.pid, s->tty ? "tty" : "pipes",
           ahead ? ", started ahead" : "");
    hc_model_action(HC_REGISTER_SESSION, "s=%d", s->id);
    if (s->tty && !hello->argc && h->esc) {
        /* The login message of an interactive shell: one line. */
        static const char msg[] = "host commands: lazaret-escalate -- /ABSOLUTE/PATH ARGS... asks you here before "
                                  "anything runs on the host (lazaret-escalate --help)";
        hc_session_send(s, LZ_MSG_NOTICE, 0, msg, sizeof msg - 1);
    }
    lz_crash_point("session-running");
    return 0;
}

/* The host-tool configuration paths in effect (docs/host-tools.md), once,
 * on the terminal of the first session: one notice a line. */
static void hc_host_tools_notice(struct hc *h, struct session *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return;
    lz_config_host_tools_note(f, &h->cfg->profile);
    if (fclose(f) != 0) {
        free(buf);
        return;
    }
    for (char *line = buf, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        _cleanup_free_ char *m = lz_xasprintf("NOTICE: %.*s", (int)n, line);
        hc_session_send(s, LZ_MSG_NOTICE, 0, m, strlen(m));
    }
    free(buf);
}

static void session_handle_hello(struct hc *h, struct session *s, const uint8_t *buf, size_t n) {
    struct lz_error err = { 0 };
    struct lz_hello hello;
    if (lz_hello_decode(buf, (size_t)n, &hello, &err) < 0) {
        hc_session_refuse(s, LZ_REFUSE_PROTOCOL, err.msg);
        s->state = S_DONE;
        return;
    }
    if (memcmp(hello.domain_id, h->cfg->domain_id, 32) != 0 ||
        memcmp(hello.fingerprint, h->cfg->fingerprint, 32) != 0) {
        hc_model_action(HC_REJECT_CONFIGURATION_MISMATCH, "s=%d", s->id);
        if (h->lingering) {
            /* No session uses the old configuration any more: this
             * generation stops and the client starts the next one with the
             * new configuration (it retries on a stopping Domain). */
            hc_begin_stop(h, "the Domain lingered with a previous configuration; it restarts with the new one", false);
            /* One line on the user's terminal: the restart costs a cold
             * start, which should not look like a hang. */
            static const char note[] = "NOTICE: the configuration changed and the Domain had no session left: "
                                       "restarting it with the new one";
            hc_session_send(s, LZ_MSG_NOTICE, 0, note, sizeof note - 1);
            hc_session_refuse(s, LZ_REFUSE_STOPPING, "the Domain is restarting with the new configuration");
        } else {
            hc_session_refuse(s, LZ_REFUSE_CONFIG_MISMATCH,
                              "this Domain is running with a different configuration; end its sessions "
                              "(or run `lazaret stop`) and start again to apply the new one");
        }
        lz_hello_clear(&hello);
        s->state = S_DONE;
        return;
    }
    if (h->stopping) {
        hc_session_refuse(s, LZ_REFUSE_STOPPING, "the Domain is stopping");
        lz_hello_clear(&hello);
        s->state = S_DONE;
        return;
    }
    s->tty = hello.flags & LZ_HELLO_TTY;
    int r = session_start_exec(h, s, &hello, &err);
    lz_hello_clear(&hello);
    if (r < 0) {
        hc_session_refuse(s, LZ_REFUSE_LAUNCH, err.msg);
        s->state = S_DONE;
        return;
    }
    /* The host-Git notices, once, on the terminal of the first session. */
    if (!h->had_session)
        for (size_t i = 0; i < h->git.n_notices; i++) {
            _cleanup_free_ char *m = lz_xasprintf("NOTICE: %s", h->git.notices[i]);
            hc_session_send(s, LZ_MSG_NOTICE, 0, m, strlen(m));
        }
    if (!h->had_session)
        hc_host_tools_notice(h, s);
    uint8_t sid[4];
    lz_put_u32(sid, (uint32_t)s->id);
    hc_session_send(s, LZ_MSG_READY, 0, sid, sizeof sid);
    s->state = S_RUNNING;
    h->had_session = true;
}

/* Stops the Domain: every session is told why and released (SIGHUP,
 * grace, SIGTERM, grace, SIGKILL; with force, SIGKILL at once). */
void hc_begin_stop(struct hc *h, const char *why, bool force) {
    if (!h->stopping)
        hc_log("stopping the Domain: %s", why);
    h->stopping = true;
    for (int i = 0; i < MAX_SESSIONS; i++) {
        struct session *s = h->s[i];
        if (!s || s->state == S_DONE)
            continue;
        hc_session_send(s, LZ_MSG_NOTICE, 0, why, strlen(why));
        if (s->state == S_RUNNING || (force && s->state == S_RELEASING)) {
            s->state = S_RELEASING;
            if (force && s->release_step < 2) {
                if (s->recorded && !s->release_recorded) {
                    s->release_recorded = true;
                    lz_store_session_set(h->st, h->gen, s->id, "release_intent", s->tty, NULL, NULL, NULL, NULL);
                }
                lz_closep(&s->master);
                lz_closep(&s->in_w);
                s->release_step = 2;
            }
            s->deadline = lz_now_ms();
        }
    }
}

/* Input from the client to the exec (PTY master or stdin pipe). */
void hc_pump_input(struct session *s) {
    int fd = s->tty ? s->master : s->in_w;
    while (s->inbuf && s->inoff < s->inlen && fd >= 0) {
        ssize_t w = write(fd, s->inbuf + s->inoff, s->inlen - s->inoff);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return;
            s->inoff = s->inlen; /* the reader is gone: drop */
            break;
        }
        s->inoff += (size_t)w;
    }
    if (s->inoff >= s->inlen) {
        free(s->inbuf);
        s->inbuf = NULL;
        s->inlen = s->inoff = 0;
        if (s->in_eof_pending && !s->tty)
            lz_closep(&s->in_w);
    }
}

int hc_session_client_msg(struct hc *h, struct session *s, short revents, const uint8_t **ret_msg, size_t *ret_len) {
    /* One input message at a time: the rest waits in the socket, which is
     * the backpressure towards the client. A hung-up client's leftovers do
     * not matter any more. */
    if (s->inbuf && !(revents & (POLLHUP | POLLERR)))
        return 0;
    static uint8_t buf[LZ_PROTO_MAX];
    ssize_t n = lz_msg_recv(s->sock, buf, sizeof buf);
    if (n == -EAGAIN)
        return 0;
    if (n <= 0) {
        /* Client gone: the session is released, never reattached. */
        lz_closep(&s->sock);
        if (s->state != S_DONE)
            hc_model_action(HC_DISCONNECT_SESSION, "s=%d", s->id);
        hc_esc_session_end(h, s, "its session disconnected");
        if (s->state == S_HELLO) {
            s->state = S_DONE;
        } else if (s->state == S_RUNNING || s->state == S_DRAINING) {
            s->state = S_RELEASING;
            s->release_step = 0;
            s->deadline = lz_now_ms();
        }
        return 0;
    }
    if (s->state == S_HELLO) {
        if (buf[0] == LZ_MSG_STATUS || buf[0] == LZ_MSG_STOP || buf[0] == LZ_MSG_NET || buf[0] == LZ_MSG_EVENTS) {
            /* Not a session's: the caller answers it (coordinator.c). */
            *ret_msg = buf;
            *ret_len = (size_t)n;
            return 1;
        }
        session_handle_hello(h, s, buf, (size_t)n);
        return 0;
    }
    if (s->state != S_RUNNING)
        return 0;
    uint8_t type = buf[0], ch = buf[1];
    const uint8_t *p = buf + LZ_PROTO_HDR;
    size_t len = (size_t)n - LZ_PROTO_HDR;
    switch ((enum lz_msg_type)type) {
    case LZ_MSG_DATA:
        if (ch != 0 || s->inbuf || s->in_eof_pending)
            break;
        if (s->filter && s->filter->input(h, s, p, len))
            break; /* keys for the escalation prompt */
        s->inbuf = lz_xmalloc(len);
        memcpy(s->inbuf, p, len);
        s->inlen = len;
        s->inoff = 0;
        hc_pump_input(s);
        break;
    case LZ_MSG_EOF:
        if (s->tty) {
            /* ^D equivalent is the client's business in tty mode. */
        } else {
            s->in_eof_pending = true;
            if (!s->inbuf)
                lz_closep(&s->in_w);
        }
        break;
    case LZ_MSG_WINSIZE:
        if (len == 4 && s->tty && s->master >= 0) {
            struct winsize ws = { .ws_row = lz_get_u16(p), .ws_col = lz_get_u16(p + 2) };
            ioctl(s->master, TIOCSWINSZ, &ws);
            if (s->filter)
                s->filter->resize(s, ws.ws_row, ws.ws_col);
        }
        break;
    case LZ_MSG_SIGNAL:
        if (len == 4) {
            uint32_t sig = lz_get_u32(p);
            if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT || sig == SIGUSR1 ||
                sig == SIGUSR2 || sig == SIGWINCH)
                lz_child_signal(&s->exec, (int)sig);
        }
        break;
    case LZ_MSG_HELLO:
    case LZ_MSG_READY:
    case LZ_MSG_REFUSED:
    case LZ_MSG_EXIT:
    case LZ_MSG_NOTICE:
    case LZ_MSG_STATUS:
    case LZ_MSG_STATUS_REPLY:
    case LZ_MSG_STOP:
    case LZ_MSG_NET:
    case LZ_MSG_EVENTS:
    case LZ_MSG_EVENTS_REPLY:
    case LZ_MSG_NET_REPLY:
    default:
        hc_log("session %d: unexpected message type %u; closing", s->id, type);
        lz_closep(&s->sock);
        s->state = S_RELEASING;
        s->release_step = 0;
        s->deadline = lz_now_ms();
        break;
    }
    return 0;
}

/* Output from the exec to the client, with backpressure: while a message
 * is pending on a full socket we stop reading its source. */
bool hc_flush_pending(struct session *s) {
    if (!s->pend.len)
        return true;
    if (s->sock < 0) {
        s->pend.len = 0;
        return true;
    }
    ssize_t w = send(s->sock, s->pend.buf, s->pend.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return false;
        lz_closep(&s->sock);
        s->pend.len = 0;
        return true;
    }
    s->pend.len = 0;
    return true;
}

void hc_pump_output(struct session *s, int *fdp, uint8_t ch) {
    if (s->filter && s->filter->hold_output(s, fdp))
        return; /* held while the escalation prompt is up */
    if (!hc_flush_pending(s))
        return;
    s->pend.buf[0] = LZ_MSG_DATA;
    s->pend.buf[1] = ch;
    s->pend.buf[2] = s->pend.buf[3] = 0;
    ssize_t n = read(*fdp, s->pend.buf + LZ_PROTO_HDR, 32768);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        /* EIO on a PTY master: every slave is closed. */
        lz_closep(fdp);
        return;
    }
    if (n == 0) {
        lz_closep(fdp);
        return;
    }
    s->pend.len = (size_t)n + LZ_PROTO_HDR;
    /* Where notices may go (hc_refusal.c): not into a full-screen
     * program's screen. */
    if (s->plain_shell)
        lz_altscreen_feed(&s->alt, s->pend.buf + LZ_PROTO_HDR, (size_t)n);
    hc_flush_pending(s);
}

static bool outputs_open(struct session *s) { return s->tty ? s->master >= 0 : (s->out_r >= 0 || s->err_r >= 0); }

static void session_finish(struct session *s) {
    if (s->pend.len && !hc_flush_pending(s))
        return;
    if (s->sock >= 0) {
        uint8_t st[4];
        lz_put_u32(st, (uint32_t)s->status);
        hc_session_send(s, LZ_MSG_EXIT, 0, st, sizeof st);
    }
    hc_log("session %d: ended with status %d", s->id, s->status);
    s->state = S_DONE;
}

void hc_session_tick(struct hc *h, struct session *s) {
    if (s->exec.pidfd >= 0 && !s->exited) {
        int st;
        if (lz_child_try_reap(&s->exec, &st) == 1) {
            s->exited = true;
            s->status = st;
            if (s->state == S_RUNNING) {
                s->state = S_DRAINING;
                s->deadline = lz_now_ms() + DRAIN_TIMEOUT_MS;
            }
        }
    }
    if (s->state == S_DRAINING) {
        if (!outputs_open(s) || lz_now_ms() >= s->deadline) {
            lz_closep(&s->master);
            lz_closep(&s->out_r);
            lz_closep(&s->err_r);
            session_finish(s);
        }
    }
    if (s->state == S_RELEASING) {
        /* SIGHUP (by closing the PTY and signalling), grace, SIGTERM,
         * grace, SIGKILL; then reaped. */
        if (s->exited) {
            /* A client still connected (the Domain is being stopped) gets
             * the exit status of its command. */
            if (s->sock >= 0)
                session_finish(s);
            else
                s->state = S_DONE;
            return;
        }
        if (lz_now_ms() < s->deadline)
            return;
        switch (s->release_step++) {
        case 0:
            if (s->recorded && !s->release_recorded) {
                s->release_recorded = true;
                lz_store_session_set(h->st, h->gen, s->id, "release_intent", s->tty, NULL, NULL, NULL, NULL);
            }
            lz_closep(&s->master);
            lz_closep(&s->in_w);
            lz_child_signal(&s->exec, SIGHUP);
            break;
        case 1: lz_child_signal(&s->exec, SIGTERM); break;
        default: lz_child_signal(&s->exec, SIGKILL); break;
        }
        s->deadline = lz_now_ms() + RELEASE_GRACE_MS;
    }
}
