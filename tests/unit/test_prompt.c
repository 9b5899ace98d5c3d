/* Unit tests for the escalation prompt (prompt.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "escape.h"
#include "prompt.h"
#include "prompt_check.h"

/* ---- a harness: fake clock, recorded actions, the screen so far ---- */

struct h {
    long now;
    char actions[2048];
    struct lz_prompt *p;
    char *last; /* the last output */
    size_t last_len;
    char *all; /* every output, concatenated */
    size_t all_len;
};

static long clk(void *ctx) { return ((struct h *)ctx)->now; }
static void on_action(void *ctx, const char *a, const char *d) {
    struct h *h = ctx;
    size_t l = strlen(h->actions);
    snprintf(h->actions + l, sizeof h->actions - l, "%s(%s) ", a, d);
}

static const char *const ARGV[] = { "/usr/bin/git", "log", "--oneline" };
static const char *const ENV[] = { "PATH=/usr/bin:/bin", "HOME=/home/dev" };

static struct lz_prompt_req base_req(void) {
    return (struct lz_prompt_req){ .profile = "default",
                                   .session = "main",
                                   .request_id = "0123456789abcdef0123456789abcdef",
                                   .exe = { .path = "/usr/bin/git",
                                            .stat_known = true,
                                            .uid = 0,
                                            .gid = 0,
                                            .mode = 0100755,
                                            .owner = "root",
                                            .group = "root" },
                                   .argv = ARGV,
                                   .argc = 3,
                                   .cwd = "/home/dev/project",
                                   .env = ENV,
                                   .envc = 2,
                                   .justification = "to read the history",
                                   .justification_len = 19 };
}

static void h_start(struct h *h, const struct lz_prompt_req *req, unsigned rows) {
    memset(h, 0, sizeof *h);
    h->now = 1000;
    struct lz_prompt_opts o = {
        .now_ms = h->now, .rows = rows, .cols = 80, .clock = clk, .on_action = on_action, .ctx = h
    };
    struct lz_error err = { 0 };
    assert_int_equal(lz_prompt_new(req, &o, &h->p, &err), 0);
}

/* Takes the pending output (if any): checks it and keeps it. */
static bool h_out(struct h *h) {
    const void *b;
    size_t n;
    if (lz_prompt_output(h->p, &b, &n) == 0)
        return false;
    const char *why = NULL;
    if (!lz_prompt_output_safe(b, n, &why))
        fail_msg("unsafe output: %s", why);
    if (getenv("LZ_TEST_SHOW_SCREEN")) /* debugging: the raw screens */
        fprintf(stderr, "---- screen (%zu bytes) ----\n%.*s\n", n, (int)n, (const char *)b);
    free(h->last);
    h->last = lz_xstrndup(b, n);
    h->last_len = n;
    h->all = lz_xrealloc(h->all, h->all_len + n + 1);
    memcpy(h->all + h->all_len, b, n);
    h->all_len += n;
    h->all[h->all_len] = '\0';
    return true;
}

static void h_feed(struct h *h, const char *s) {
    lz_prompt_feed(h->p, s, strlen(s), h->now);
    h_out(h);
}
static void h_at(struct h *h, long t) {
    h->now = t;
    lz_prompt_tick(h->p, t);
    h_out(h);
}

/* Drawn and settled: keys count from here. */
static void h_ready(struct h *h) {
    assert_true(h_out(h));
    assert_int_equal(lz_prompt_state(h->p), LZ_PROMPT_SETTLING);
    h_at(h, h->now + 500);
    assert_int_equal(lz_prompt_state(h->p), LZ_PROMPT_ASKING);
}

static void h_end(struct h *h) {
    lz_prompt_free(h->p);
    free(h->last);
    free(h->all);
}

static enum lz_prompt_decision decision(struct h *h, struct lz_prompt_result *r) {
    assert_int_equal(lz_prompt_result(h->p, r), 0);
    return r->decision;
}

/* The screen's last draw left the alternate screen. */
static void assert_left(struct h *h) {
    assert_int_equal(lz_prompt_state(h->p), LZ_PROMPT_DONE);
    assert_string_equal(h->last, "\x1b[0m\x1b[?1049l");
    assert_false(h_out(h));
}

/* ---- the checker itself: it must reject what a pass-through would show ---- */

static void test_checker_fires(void **state) {
    const char *bad[] = { "\x1b[2K!",
                          "x\x1b]0;title\x07",
                          "\xe2\x80\xae",
                          "\xc2\x9b"
                          "31m",
                          "\xe2\x80\x8b",
                          "\x07",
                          "\x1b[?1049hx\x1b[6n",
                          "\xff",
                          "\x1b[31m",
                          "\x1b",
                          "\x1b[12;5Hx\x1b[",
                          "\x9b" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        const char *why = NULL;
        assert_false(lz_prompt_output_safe(bad[i], strlen(bad[i]), &why));
        assert_non_null(why);
    }
    const char *good = "\x1b[?1049h\x1b[0m\x1b(B\x0f\x1b[4l\x1b[r\x1b[H\x1b[2J\x1b[1mhi\x1b[0m\r\n\x1b[7m x\x1b[0m"
                       "\x1b[7;12H\\u{202E} caf\xc3\xa9\x1b[?1049l";
    const char *why = NULL;
    assert_true(lz_prompt_output_safe(good, strlen(good), &why));
}

/* ---- exact screen bytes with hostile argv and justification ---- */

static const char *const EVIL_ARGV[] = { "/usr/bin/printf",
                                         "a\x1b[2Jb",
                                         "\xe2\x80\xae"
                                         "gnp.exe",
                                         "zero\xe2\x80\x8bwidth",
                                         "c1\xc2\x9b"
                                         "31m",
                                         "tab\there" };
static const char EVIL_JUST[] = "please\x1b]0;owned\x07 run\nit \xe2\x80\xae"
                                "now\xe2\x81\xa6 \xc2\x85!";

static const char EXPECTED_SCREEN[] =
    "\x1b[?1049h\x1b[0m\x1b(B\x0f\x1b[4l\x1b[r\x1b[H\x1b[2J"
    "\x1b[1mLazaret: the sandbox asks to run a command on this host, as you\x1b[0m\r\n"
    "\r\n"
    "  profile      default\r\n"
    "  session      main\r\n"
    "  request      0123456789abcdef0123456789abcdef\r\n"
    "  executable   \"/usr/bin/printf\"\r\n"
    "               owner root:root (uid 0, gid 0), mode 0755 -rwxr-xr-x\r\n"
    "  directory    \"/home/dev/project\" (host working directory)\r\n"
    "\r\n"
    "\x1b[1mCommand line (6 arguments, one per line, between quotes):\x1b[0m\r\n"
    "  argv[0] = \"/usr/bin/printf\"\r\n"
    "  argv[1] = \"a\\x1b[2Jb\"\r\n"
    "  argv[2] = \"\\u{202E}gnp.exe\"\r\n"
    "  argv[3] = \"zero\\u{200B}width\"\r\n"
    "  argv[4] = \"c1\\u{009B}31m\"\r\n"
    "  argv[5] = \"tab\\there\"\r\n"
    "\r\n"
    "\x1b[1mEnvironment of the command (2 variables, all of it):\x1b[0m\r\n"
    "  \"PATH=/usr/bin:/bin\"\r\n"
    "  \"HOME=/home/dev\"\r\n"
    "\r\n"
    "\x1b[1mJustification: text supplied by the sandbox, not checked by Lazaret\x1b[0m\r\n"
    "  .---\r\n"
    "  | please\\x1b]0;owned\\x07 run\\n\r\n"
    "  | it \\u{202E}now\\u{2066} \\u{0085}!\r\n"
    "  '---\r\n"
    "\r\n"
    "\r\n"
    "\x1b[7m all 26 lines shown \x1b[0m\r\n"
    "Read the request. Keys are accepted in a moment; keys typed now are ignored.";

static void test_screen_bytes(void **state) {
    struct lz_prompt_req req = base_req();
    req.exe.path = "/usr/bin/printf";
    req.argv = EVIL_ARGV;
    req.argc = LZ_ARRAY_SIZE(EVIL_ARGV);
    req.justification = EVIL_JUST;
    req.justification_len = sizeof EVIL_JUST - 1;
    struct h h;
    h_start(&h, &req, 30);
    assert_true(h_out(&h));
    assert_string_equal(h.last, EXPECTED_SCREEN);
    /* No raw ESC other than the prompt's own, no U+202E, no C1 (the checker
     * ran in h_out; spelled out here for the three the request carried). */
    assert_null(memmem(h.last, h.last_len, "\x1b[2Jb", 5));
    assert_null(memmem(h.last, h.last_len, "\xe2\x80\xae", 3));
    assert_null(memmem(h.last, h.last_len, "\xc2\x9b", 2));
    assert_null(memmem(h.last, h.last_len, "\xc2\x85", 2));
    assert_null(memmem(h.last, h.last_len, "\x1b]", 2));
    /* Settled: the footer offers the actions, [s] with its scope in words. */
    h_at(&h, h.now + 500);
    assert_non_null(strstr(h.last, "[a] approve once  [d] deny  [e] edit  [q] deny, end session  Enter/Esc: deny"));
    assert_non_null(strstr(h.last,
                           "[s] approve, and run this exact request (same executable, arguments,\r\n"
                           "  + directory, environment) again without asking until this Client Session ends"));
    h_end(&h);
}

/* A long element wraps: the continuation row starts with "  + ", so text
 * from the request can never begin a row (and fake an "argv[N]" line). */
static void test_wrap_marks_continuation(void **state) {
    char fake[200];
    memset(fake, 'x', sizeof fake);
    memcpy(fake + 80 - 15, "argv[9] = \"rm -rf ~\"", 20);
    fake[sizeof fake - 1] = '\0';
    const char *argv[] = { "/bin/echo", fake };
    struct lz_prompt_req req = base_req();
    req.argv = argv;
    req.argc = 2;
    struct h h;
    h_start(&h, &req, 40);
    assert_true(h_out(&h));
    assert_null(strstr(h.last, "\r\nargv[9]"));
    assert_null(strstr(h.last, "\r\n  argv[9]"));
    assert_non_null(strstr(h.last, "\r\n  + "));
    h_end(&h);
}

/* ---- typed-ahead keys ---- */

static void test_typeahead_before_draw(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    lz_prompt_feed(h.p, "a", 1, h.now); /* before the first output */
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_QUEUED);
    h_ready(&h);
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    assert_non_null(strstr(h.last, "1 key typed before the prompt was ignored"));
    h_feed(&h, "a");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_APPROVED);
    assert_int_equal(r.discarded_keys, 1);
    lz_prompt_result_clear(&r);
    assert_string_equal(h.actions,
                        "QueuePrompt(argc=3) BeginPrompt(argc=3) DiscardTypeahead(keys=1) "
                        "PromptDrawn(edited=0) DeveloperApprove(argc=3 edited=0) ");
    h_end(&h);
}

static void test_typeahead_during_settle(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    assert_true(h_out(&h));
    h.now += 499;
    h_feed(&h, "a");
    h_feed(&h, "s");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_SETTLING);
    assert_non_null(strstr(h.last, "2 keys typed before the prompt were ignored"));
    assert_int_equal(lz_prompt_result(h.p, &(struct lz_prompt_result){ 0 }), -EAGAIN);
    /* Positive control: the same key just after the settle delay counts. */
    h.now += 1;
    h_feed(&h, "a");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_APPROVED);
    assert_int_equal(r.argc, 3);
    for (size_t i = 0; i < 3; i++)
        assert_string_equal(r.argv[i], ARGV[i]);
    assert_null(r.argv[3]);
    assert_false(r.edited);
    assert_string_equal(r.exe_path, "/usr/bin/git");
    assert_int_equal(r.discarded_keys, 2);
    lz_prompt_result_clear(&r);
    assert_left(&h);
    h_end(&h);
}

/* ---- deny by Enter, Escape, timeout; quit; [s] ---- */

static void test_enter_denies(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    h_feed(&h, "\r");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_DENIED);
    assert_null(r.argv);
    assert_left(&h);
    assert_non_null(strstr(h.actions, "DeveloperDeny(key=enter)"));
    h_end(&h);
}

static void test_escape_denies(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 20);
    h_ready(&h);
    /* An arrow key starts with ESC: it scrolls, it does not deny, even when
     * its bytes arrive in two reads. */
    h_feed(&h, "\x1b[B");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    h_feed(&h, "\x1b");
    assert_int_equal(lz_prompt_deadline(h.p), h.now + 100);
    h.now += 50;
    h_feed(&h, "[A");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    h_feed(&h, "\x1bOB"); /* SS3 arrow (application cursor keys) */
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    /* ESC alone: a deny once nothing followed for escape_ms. */
    h_feed(&h, "\x1b");
    h_at(&h, h.now + 99);
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    h_at(&h, h.now + 1);
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_DENIED);
    assert_left(&h);
    assert_non_null(strstr(h.actions, "DeveloperDeny(key=escape)"));
    h_end(&h);
}

static void test_ctrl_c_interrupts(void **state) {
    /* Ctrl-C at the prompt cancels the request, as Ctrl-C in the sandbox
     * would: neither an approval nor a denial. */
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    h_feed(&h, "\x03");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_INTERRUPTED);
    assert_null(r.argv);
    assert_left(&h);
    assert_non_null(strstr(h.actions, "CancelRequest(key=ctrl-c)"));
    assert_null(strstr(h.actions, "DeveloperDeny"));
    h_end(&h);
}

static void test_escape_then_key_denies(void **state) {
    /* ESC and a letter in one read (Alt+a, or Escape then a typed fast):
     * the Escape denies; the 'a' never approves. */
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    h_feed(&h,
           "\x1b"
           "a");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_DENIED);
    h_end(&h);
}

static void test_timeout_denies(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    long deadline = 1000 + 5 * 60 * 1000;
    assert_int_equal(lz_prompt_deadline(h.p), deadline);
    h_at(&h, deadline - 1);
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    h_at(&h, deadline);
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_TIMED_OUT);
    assert_left(&h);
    assert_non_null(strstr(h.actions, "PromptTimeout("));
    /* A key after the deadline changes nothing. */
    h_feed(&h, "a");
    assert_int_equal(decision(&h, &r), LZ_PROMPT_TIMED_OUT);
    h_end(&h);
}

static void test_timeout_in_editor_and_key_past_deadline(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    h_feed(&h, "e");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_EDITING);
    /* No tick came: a key that arrives after the deadline is not read. */
    h.now = 1000 + 5 * 60 * 1000 + 7;
    h_feed(&h, "\r");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_TIMED_OUT);
    assert_left(&h);
    h_end(&h);
}

static void test_quit(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    h_feed(&h, "q");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_QUIT);
    assert_null(r.argv);
    assert_left(&h);
    assert_non_null(strstr(h.actions, "DeveloperQuit("));
    h_end(&h);
}

static void test_session_approve(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    h_feed(&h, "s");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_APPROVED_SESSION);
    assert_int_equal(r.argc, 3);
    assert_string_equal(r.argv[2], "--oneline");
    assert_false(r.edited);
    lz_prompt_result_clear(&r);
    assert_non_null(strstr(h.actions, "DeveloperApproveSession(argc=3)"));
    h_end(&h);
}

/* A network request (lazaret-escalate --allow-host): the host and the
 * justification shown (escaped), no executable, directory or environment;
 * [a] and [e] are not answers, [s] allows, [d] denies; the output passes
 * the same checker. */
static const char NET_JUST[] = "docs\x1b]0;owned\x07 please";
static struct lz_prompt_req net_req(void) {
    static const char *const NET_ARGV[] = { "--allow-host", "example.com:443" };
    return (struct lz_prompt_req){ .profile = "default",
                                   .session = "main",
                                   .request_id = "0123456789abcdef0123456789abcdef",
                                   .exe = { .path = "" },
                                   .argv = NET_ARGV,
                                   .argc = 2,
                                   .cwd = "",
                                   .justification = NET_JUST,
                                   .justification_len = sizeof NET_JUST - 1,
                                   .network = "example.com on TCP port 443",
                                   .network_scope = "until the test ends" };
}

static void test_network_request(void **state) {
    struct h h;
    struct lz_prompt_req req = net_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    assert_non_null(strstr(h.all, "NETWORK ACCESS"));
    assert_non_null(strstr(h.all, "The sandbox asks to reach example.com on TCP port 443"));
    assert_non_null(strstr(h.all, "[s] allow, until the test ends  [d] deny"));
    assert_non_null(strstr(h.all, "docs\\x1b]0;owned\\x07 please"));
    assert_null(strstr(h.all, "executable"));
    assert_null(strstr(h.all, "Environment"));
    assert_null(strstr(h.all, "[a] approve"));
    assert_null(strstr(h.all, "[e] edit"));
    /* [a] and [e] do not answer it: the prompt stays, and says so. */
    h_feed(&h, "a");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    assert_non_null(strstr(h.last, "[a] is not offered for a network request"));
    h_feed(&h, "e");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    assert_non_null(strstr(h.last, "[e] is not offered for a network request"));
    h_feed(&h, "s");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_APPROVED_SESSION);
    lz_prompt_result_clear(&r);
    assert_left(&h);
    assert_null(strstr(h.actions, "DeveloperApprove("));
    assert_non_null(strstr(h.actions, "DeveloperApproveSession("));
    h_end(&h);
    /* [d] denies */
    h_start(&h, &req, 30);
    h_ready(&h);
    h_feed(&h, "d");
    assert_int_equal(decision(&h, &r), LZ_PROMPT_DENIED);
    assert_left(&h);
    h_end(&h);
    /* a network request without its scope is refused */
    req.network_scope = NULL;
    struct lz_prompt *p = NULL;
    struct lz_prompt_opts o = { 0 };
    assert_int_equal(lz_prompt_new(&req, &o, &p, NULL), -EINVAL);
    assert_null(p);
}

/* Key-like bytes inside terminal reports and pastes never answer. */
static void test_reports_and_paste_ignored(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    h_feed(&h, "\x1b[200~a\x1b[201~"); /* bracketed paste of "a" */
    h_feed(&h, "\x1b[Maaa");           /* X10 mouse report: three raw bytes */
    h_feed(&h,
           "\x1b]l"
           "a"
           "\x1b\\");                     /* a title report (OSC ... ST) */
    h_feed(&h, "\x1b]11;rgb:a/a/a\x07");  /* a colour report (OSC ... BEL) */
    h_feed(&h, "\x1bP1$ra\x1b\\");        /* DECRQSS reply (DCS) */
    h_feed(&h, "\x1b[<0;1;1M\x1b[12;5R"); /* SGR mouse, cursor position report */
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    /* Positive control: a plain 'a' approves. */
    h_feed(&h, "a");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_APPROVED);
    lz_prompt_result_clear(&r);
    h_end(&h);
}

/* ---- edit ---- */

static void test_edit_argv1(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 40);
    h_ready(&h);
    h_feed(&h, "e");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_EDITING);
    assert_non_null(strstr(h.last, "> /usr/bin/git log --oneline"));
    /* Replace argv[1]: to the start of "log", delete it, type "show". */
    h_feed(&h, "\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D\x1b[D"); /* before " --oneline" */
    h_feed(&h, "\x17");                                                         /* Ctrl-W: "log" */
    h_feed(&h, "sh\xc3\xb6w");                                                  /* UTF-8 typed */
    h_feed(&h,
           "\x7f\x7f"
           "ow"); /* backspace x2 */
    assert_non_null(strstr(h.last, "> /usr/bin/git show --oneline"));
    /* The cursor is shown after "show": column 2 + 17, 1-based. */
    assert_non_null(strstr(h.last, ";20H"));
    h_feed(&h, "\r");
    /* Shown again, settling again; keys are ignored until it settled. */
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_SETTLING);
    assert_non_null(strstr(h.last, "AS YOU EDITED IT"));
    assert_non_null(strstr(h.last, "  argv[1] = \"show\"\r\n"));
    assert_non_null(strstr(h.last, "The request asked for (3 arguments):"));
    h_feed(&h, "a");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_SETTLING);
    h_at(&h, h.now + 500);
    assert_non_null(strstr(h.last, "[s] is not offered"));
    /* [s] is refused for an edit. */
    h_feed(&h, "s");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    h_feed(&h, "a");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_APPROVED);
    assert_true(r.edited);
    assert_int_equal(r.argc, 3);
    assert_string_equal(r.argv[0], "/usr/bin/git");
    assert_string_equal(r.argv[1], "show");
    assert_string_equal(r.argv[2], "--oneline");
    assert_int_equal(r.discarded_keys, 1);
    lz_prompt_result_clear(&r);
    assert_left(&h);
    assert_non_null(strstr(h.actions,
                           "DeveloperEdit(argc=3) DiscardTypeahead(keys=1) PromptDrawn(edited=1) "
                           "DeveloperApprove(argc=3 edited=1) "));
    h_end(&h);
}

/* o.warnings: each line on its own reverse-video row, asked again after an
 * edit (the edited argv); a hostile line is escaped like request text. */
static int warn_calls;
static char **warn_cb(void *ctx, const char *const *argv, size_t argc, const char *exe_path) {
    (void)ctx;
    warn_calls++;
    assert_string_equal(exe_path, "/usr/bin/git");
    char **v = lz_xcalloc(3, sizeof *v);
    if (argc >= 2 && !strcmp(argv[1], "log")) {
        v[0] = lz_xstrdup("WRITABLE BY THE SANDBOX: argv[1] names a file in the workspace");
        v[1] = lz_xstrdup("evil\x1b[2Jline");
    }
    return v;
}

static void test_warnings(void **state) {
    (void)state;
    struct h h;
    struct lz_prompt_req req = base_req();
    memset(&h, 0, sizeof h);
    h.now = 1000;
    warn_calls = 0;
    struct lz_prompt_opts o = {
        .now_ms = h.now, .rows = 40, .cols = 80, .clock = clk, .on_action = on_action, .warnings = warn_cb, .ctx = &h
    };
    struct lz_error err = { 0 };
    assert_int_equal(lz_prompt_new(&req, &o, &h.p, &err), 0);
    assert_int_equal(warn_calls, 1);
    h_ready(&h); /* h_out checks the bytes: the ESC of the hostile line is escaped */
    assert_non_null(strstr(h.all, "\x1b[7mWRITABLE BY THE SANDBOX: argv[1] names a file in the workspace"));
    assert_non_null(strstr(h.all, "evil\\x1b[2Jline"));
    /* An edit asks again: argv[1] is no longer "log", the lines go. */
    h_feed(&h, "e");
    h_feed(&h, "\x15/usr/bin/git status\r");
    assert_int_equal(warn_calls, 2);
    assert_non_null(strstr(h.last, "AS YOU EDITED IT"));
    assert_null(strstr(h.last, "WRITABLE BY THE SANDBOX"));
    h_feed(&h, "d");
    h_end(&h);
}

static void test_edit_unterminated_quote(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    h_feed(&h, "e");
    h_feed(&h, " 'abc\r");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_EDITING);
    assert_non_null(strstr(h.last, "Not accepted: single quote opened at column 28 is not closed"));
    assert_non_null(strstr(h.last, "> /usr/bin/git log --oneline 'abc"));
    /* Fixed, it is accepted. */
    h_feed(&h, "'\r");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_SETTLING);
    assert_non_null(strstr(h.last, "  argv[3] = \"abc\"\r\n"));
    h_end(&h);
}

static void test_edit_refusals(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    h_feed(&h, "e");
    /* A bidi override cannot be typed or pasted into the line. */
    h_feed(&h, "\xe2\x80\xae");
    assert_non_null(strstr(h.last, "U+202E cannot be typed here"));
    assert_non_null(strstr(h.last, "> /usr/bin/git log --oneline"));
    /* argv[0] cannot change without a resolver. */
    h_feed(&h,
           "\x01\x0b"
           "/bin/sh -c id\r");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_EDITING);
    assert_non_null(strstr(h.last, "Not accepted: the first word must stay"));
    /* Escape leaves the editor, unchanged; the prompt asks again. */
    h_feed(&h, "\x1b");
    h_at(&h, h.now + 100);
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    const char *const *argv;
    size_t argc;
    bool edited;
    lz_prompt_shown_argv(h.p, &argv, &argc, &edited);
    assert_false(edited);
    assert_int_equal(argc, 3);
    h_end(&h);
}

static void test_edit_not_offered_for_controls(void **state) {
    struct lz_prompt_req req = base_req();
    req.argv = EVIL_ARGV;
    req.argc = LZ_ARRAY_SIZE(EVIL_ARGV);
    struct h h;
    h_start(&h, &req, 40);
    h_ready(&h);
    h_feed(&h, "e");
    assert_int_equal(lz_prompt_state(h.p), LZ_PROMPT_ASKING);
    assert_non_null(strstr(h.last, "This command cannot be edited"));
    h_end(&h);
}

/* ---- paging ---- */

static void test_paging_500(void **state) {
    enum { N = 500 };
    char *argv[N];
    argv[0] = lz_xstrdup("/bin/echo");
    for (int i = 1; i < N; i++)
        argv[i] = lz_xasprintf("element-%03d", i);
    struct lz_prompt_req req = base_req();
    req.argv = (const char *const *)argv;
    req.argc = N;
    struct h h;
    h_start(&h, &req, 24);
    h_ready(&h);
    assert_non_null(strstr(h.last, "MORE BELOW"));
    assert_null(strstr(h.last, "element-499"));
    /* Every element is on some page; paging forward reaches the end. */
    bool seen[N] = { false };
    int pages = 0;
    for (;;) {
        for (int i = 1; i < N; i++) {
            char want[64];
            snprintf(want, sizeof want, "  argv[%d] = \"element-%03d\"\r\n", i, i);
            if (strstr(h.last, want))
                seen[i] = true;
        }
        if (!strstr(h.last, "MORE BELOW"))
            break;
        assert_true(++pages < 100);
        h_feed(&h, " ");
    }
    for (int i = 1; i < N; i++)
        if (!seen[i])
            fail_msg("argv[%d] was never on screen", i);
    assert_non_null(strstr(h.last, "more above"));
    /* Back up a line, then to the top. */
    h_feed(&h, "k");
    assert_non_null(strstr(h.last, "MORE BELOW"));
    h_feed(&h, "\x1b[H"); /* Home */
    assert_null(strstr(h.last, "more above"));
    assert_non_null(strstr(h.last, " lines 1-"));
    h_feed(&h, "a");
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_APPROVED);
    assert_int_equal(r.argc, N);
    assert_string_equal(r.argv[N - 1], "element-499");
    lz_prompt_result_clear(&r);
    h_end(&h);
    for (int i = 0; i < N; i++)
        free(argv[i]);
}

static void test_cancel_and_undrawn(void **state) {
    struct h h;
    struct lz_prompt_req req = base_req();
    h_start(&h, &req, 30);
    h_ready(&h);
    lz_prompt_cancel(h.p);
    assert_true(h_out(&h));
    struct lz_prompt_result r;
    assert_int_equal(decision(&h, &r), LZ_PROMPT_CANCELLED);
    assert_left(&h);
    h_end(&h);
    /* Never drawn: nothing to leave. */
    h_start(&h, &req, 30);
    h_at(&h, 1000 + 5 * 60 * 1000);
    assert_int_equal(decision(&h, &r), LZ_PROMPT_TIMED_OUT);
    assert_false(h_out(&h));
    h_end(&h);
}

static void test_bad_request(void **state) {
    struct lz_prompt_req req = base_req();
    req.argc = 0;
    struct lz_prompt_opts o = { 0 };
    struct lz_prompt *p = NULL;
    struct lz_error err = { 0 };
    assert_int_equal(lz_prompt_new(&req, &o, &p, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "prompt"));
    req = base_req();
    req.exe.path = NULL;
    assert_int_equal(lz_prompt_new(&req, &o, &p, &err), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_fires),
        cmocka_unit_test(test_screen_bytes),
        cmocka_unit_test(test_wrap_marks_continuation),
        cmocka_unit_test(test_typeahead_before_draw),
        cmocka_unit_test(test_typeahead_during_settle),
        cmocka_unit_test(test_enter_denies),
        cmocka_unit_test(test_escape_denies),
        cmocka_unit_test(test_escape_then_key_denies),
        cmocka_unit_test(test_ctrl_c_interrupts),
        cmocka_unit_test(test_timeout_denies),
        cmocka_unit_test(test_timeout_in_editor_and_key_past_deadline),
        cmocka_unit_test(test_quit),
        cmocka_unit_test(test_session_approve),
        cmocka_unit_test(test_network_request),
        cmocka_unit_test(test_reports_and_paste_ignored),
        cmocka_unit_test(test_edit_argv1),
        cmocka_unit_test(test_warnings),
        cmocka_unit_test(test_edit_unterminated_quote),
        cmocka_unit_test(test_edit_refusals),
        cmocka_unit_test(test_edit_not_offered_for_controls),
        cmocka_unit_test(test_paging_500),
        cmocka_unit_test(test_cancel_and_undrawn),
        cmocka_unit_test(test_bad_request),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
