/* prompt_demo — the escalation prompt on a real terminal, for the PTY test
 * (tests/unit/test_prompt_pty.py). Built only with -Dtests=true.
 *
 *   prompt_demo [--settle MS] [--timeout MS] -- ARGV...
 *
 * Puts its terminal in raw mode, runs the prompt with a poll loop the way
 * the Host Coordinator's event loop would (input, lz_prompt_deadline as the
 * poll timeout), restores the terminal, and prints one line:
 *   RESULT <decision> edited=<0|1> argc=<n> argv=<lz_escape_argv, one line>
 * The model actions go to stderr as "ACTION Name(detail)". */
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>

#include "escape.h"
#include "prompt.h"

static void on_action(void *ctx, const char *a, const char *d) { fprintf(stderr, "ACTION %s(%s)\n", a, d); }

static const char *decision_name(enum lz_prompt_decision d) {
    switch (d) {
    case LZ_PROMPT_PENDING: return "pending";
    case LZ_PROMPT_APPROVED: return "approved";
    case LZ_PROMPT_APPROVED_SESSION: return "approved-session";
    case LZ_PROMPT_DENIED: return "denied";
    case LZ_PROMPT_TIMED_OUT: return "timed-out";
    case LZ_PROMPT_QUIT: return "quit";
    case LZ_PROMPT_CANCELLED: return "cancelled";
    case LZ_PROMPT_INTERRUPTED: return "interrupted";
    }
    return "?";
}

static int write_out(struct lz_prompt *p) {
    const void *b;
    size_t n;
    while (lz_prompt_output(p, &b, &n))
        if (lz_write_full(STDOUT_FILENO, b, n) < 0)
            return -1;
    return 0;
}

int main(int argc, char **argv) {
    long settle = 0, timeout = 0;
    int i = 1;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "--settle") && i + 1 < argc)
            settle = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
            timeout = strtol(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--")) {
            i++;
            break;
        } else {
            fprintf(stderr, "usage: prompt_demo [--settle MS] [--timeout MS] -- ARGV...\n");
            return 2;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "usage: prompt_demo [--settle MS] [--timeout MS] -- ARGV...\n");
        return 2;
    }
    static const char just[] = "I need this.\x1b[2J Really \xe2\x80\xae"
                               "desrever\xe2\x80\x8b.";
    const char *env[] = { "PATH=/usr/bin:/bin", "HOME=/home/dev", "LANG=C.UTF-8" };
    struct lz_prompt_req req = {
        .profile = "default",
        .session = "demo",
        .request_id = "00112233445566778899aabbccddeeff",
        .exe = { .path = argv[i], .stat_known = true, .mode = 0100755, .owner = "root", .group = "root" },
        .argv = (const char *const *)argv + i,
        .argc = (size_t)(argc - i),
        .cwd = "/home/dev/project",
        .env = env,
        .envc = 3,
        .justification = just,
        .justification_len = sizeof just - 1
    };
    struct winsize ws = { 0 };
    ioctl(STDIN_FILENO, TIOCGWINSZ, &ws);
    struct lz_prompt_opts o = { .now_ms = lz_now_ms(),
                                .settle_ms = settle,
                                .timeout_ms = timeout,
                                .rows = ws.ws_row,
                                .cols = ws.ws_col,
                                .on_action = on_action };
    struct lz_prompt *p = NULL;
    struct lz_error err = { 0 };
    if (lz_prompt_new(&req, &o, &p, &err) < 0) {
        fprintf(stderr, "prompt_demo: %s\n", err.msg);
        return 1;
    }
    struct termios saved, raw;
    bool tty = tcgetattr(STDIN_FILENO, &saved) == 0;
    if (tty) {
        raw = saved;
        cfmakeraw(&raw);
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    }
    int rc = 0;
    if (write_out(p) < 0)
        rc = 1;
    while (rc == 0 && lz_prompt_state(p) != LZ_PROMPT_DONE) {
        long d = lz_prompt_deadline(p), now = lz_now_ms();
        int to = d < 0 ? -1 : d <= now ? 0 : (int)(d - now);
        struct pollfd pfd = { .fd = STDIN_FILENO, .events = POLLIN };
        int r = poll(&pfd, 1, to);
        if (r < 0 && errno != EINTR)
            rc = 1;
        if (r > 0) {
            char buf[256];
            ssize_t n = read(STDIN_FILENO, buf, sizeof buf);
            if (n <= 0) {
                lz_prompt_cancel(p);
            } else {
                lz_prompt_feed(p, buf, (size_t)n, lz_now_ms());
            }
        }
        lz_prompt_tick(p, lz_now_ms());
        if (write_out(p) < 0)
            rc = 1;
    }
    /* PROMPT_DEMO_BROKEN=1: the positive control of the PTY test's
     * "terminal restored" check (the raw mode is left behind). */
    if (tty && !getenv("PROMPT_DEMO_BROKEN"))
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    struct lz_prompt_result res;
    if (lz_prompt_result(p, &res) == 0) {
        char *line = NULL;
        if (res.argv && lz_escape_argv((const char *const *)res.argv, res.argc, &line) >= 0)
            for (char *c = line; *c; c++)
                if (*c == '\n')
                    *c = ' ';
        printf("RESULT %s edited=%d argc=%zu argv=%s discarded=%u\n", decision_name(res.decision), res.edited, res.argc,
               line ? line : "", res.discarded_keys);
        free(line);
        lz_prompt_result_clear(&res);
    }
    lz_prompt_free(p);
    return rc;
}
