/* libFuzzer target: the escalation prompt (prompt.h). The input is split
 * into a request (argv elements, cwd, justification: arbitrary bytes, NUL
 * ends a string) and a script of key bytes, ticks and resizes. Properties:
 *   - no crash, no leak, every output passes lz_prompt_output_safe (only the
 *     prompt's own control sequences; no raw ESC, C1, bidi, invisible);
 *   - an approved result is the argv that was on the screen: the request's
 *     own (edited = false), or an edit the editor accepted (edited = true:
 *     one of the argvs the prompt showed after a DeveloperEdit, and a
 *     shell-words split, so quoting and splitting it again gives it back);
 *     [s] never with an edited argv;
 *   - nothing is approved before PromptDrawn was reported. */
#include "../unit/prompt_check.h"
#include "shellwords.h"

struct run {
    long now;
    bool drawn;            /* PromptDrawn seen and not undone by an edit */
    bool approved_undrawn; /* an approval reported while not drawn */
    char **seen[64];       /* argvs shown after each DeveloperEdit */
    size_t seen_c[64];
    size_t nseen;
    bool pending_edit;
};

static long clk(void *ctx) { return ((struct run *)ctx)->now; }
static void on_action(void *ctx, const char *a, const char *d) {
    struct run *r = ctx;
    if (!strcmp(a, "PromptDrawn"))
        r->drawn = true;
    else if (!strcmp(a, "DeveloperEdit"))
        r->drawn = false, r->pending_edit = true;
    else if ((!strcmp(a, "DeveloperApprove") || !strcmp(a, "DeveloperApproveSession")) && !r->drawn)
        r->approved_undrawn = true;
}

static char **copy_argv(const char *const *v, size_t n) {
    char **c = lz_xcalloc(n + 1, sizeof *c);
    for (size_t i = 0; i < n; i++)
        c[i] = lz_xstrdup(v[i]);
    return c;
}
static void free_argv(char **v) {
    for (char **i = v; i && *i; i++)
        free(*i);
    free(v);
}
static bool same(char *const *a, size_t an, char *const *b, size_t bn) {
    if (an != bn)
        return false;
    for (size_t i = 0; i < an; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

static void drain(struct lz_prompt *p) {
    const void *b;
    size_t n;
    const char *why = NULL;
    while (lz_prompt_output(p, &b, &n))
        if (!lz_prompt_output_safe(b, n, &why))
            __builtin_trap();
}

/* Takes the next NUL-terminated string (at most max bytes) off the input. */
static char *take(const uint8_t **d, size_t *n, size_t max) {
    size_t l = 0;
    while (l < *n && l < max && (*d)[l])
        l++;
    char *s = lz_xstrndup((const char *)*d, l);
    size_t skip = l < *n ? l + 1 : l;
    *d += skip;
    *n -= skip;
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > 8192)
        return 0;
    size_t argc = 1 + data[0] % 6;
    unsigned flags = data[1];
    data += 2;
    size += -2;
    char *argv[8] = { 0 };
    for (size_t i = 0; i < argc; i++)
        argv[i] = take(&data, &size, 200);
    /* Mostly editable requests, so the editor path is reached. */
    if (!(flags & 1))
        for (size_t i = 0; i < argc; i++)
            for (char *c = argv[i]; *c; c++)
                if ((uint8_t)*c < 0x20 || (uint8_t)*c >= 0x7f)
                    *c = 'x';
    char *cwd = take(&data, &size, 200);
    char *just = take(&data, &size, 400);
    const char *env[] = { "PATH=/usr/bin:/bin", "HOME=/home/dev" };
    struct lz_prompt_req req = { .profile = "p",
                                 .session = "s",
                                 .request_id = "00",
                                 .exe = { .path = "/usr/bin/x", .stat_known = true, .mode = 0100755 },
                                 .argv = (const char *const *)argv,
                                 .argc = argc,
                                 .cwd = cwd,
                                 .env = env,
                                 .envc = 2,
                                 .justification = just,
                                 .justification_len = strlen(just) };
    struct run r = { .now = 0 };
    struct lz_prompt_opts o = { .now_ms = 0,
                                .settle_ms = (flags & 2) ? 10 : -1,
                                .timeout_ms = 100000,
                                .rows = (flags & 4) ? 8 : 24,
                                .cols = (flags & 8) ? 40 : 80,
                                .clock = clk,
                                .on_action = on_action,
                                .ctx = &r };
    struct lz_prompt *p = NULL;
    if (lz_prompt_new(&req, &o, &p, NULL) < 0)
        __builtin_trap();
    if (flags & 16)
        drain(p); /* drawn before any key */
    /* The script: 0xfe N = advance the clock by N*8 ms and tick; 0xfd = resize;
     * anything else is a key byte, fed in runs of up to 7. */
    while (size > 0 && lz_prompt_state(p) != LZ_PROMPT_DONE) {
        if (data[0] == 0xfe && size >= 2) {
            r.now += (long)data[1] * 8;
            lz_prompt_tick(p, r.now);
            data += 2, size -= 2;
        } else if (data[0] == 0xfd && size >= 3) {
            lz_prompt_resize(p, data[1] % 60, data[2]);
            data += 3, size -= 3;
        } else {
            size_t n = 1 + (data[0] & 7);
            if (n > size)
                n = size;
            lz_prompt_feed(p, data, n, r.now);
            data += n, size -= n;
        }
        drain(p);
        if (r.pending_edit) {
            r.pending_edit = false;
            const char *const *sv;
            size_t sc;
            bool edited;
            lz_prompt_shown_argv(p, &sv, &sc, &edited);
            if (!edited)
                __builtin_trap();
            if (r.nseen < 64) {
                r.seen[r.nseen] = copy_argv(sv, sc);
                r.seen_c[r.nseen++] = sc;
            }
        }
        r.now += 1;
    }
    lz_prompt_tick(p, 200000); /* the timeout ends every prompt */
    drain(p);
    struct lz_prompt_result res;
    if (lz_prompt_state(p) != LZ_PROMPT_DONE || lz_prompt_result(p, &res) != 0)
        __builtin_trap();
    if (r.approved_undrawn)
        __builtin_trap();
    if (res.decision == LZ_PROMPT_APPROVED || res.decision == LZ_PROMPT_APPROVED_SESSION) {
        if (!res.argv || res.argv[res.argc])
            __builtin_trap();
        if (!res.edited) {
            if (!same(res.argv, res.argc, argv, argc))
                __builtin_trap();
        } else {
            if (res.decision == LZ_PROMPT_APPROVED_SESSION)
                __builtin_trap();
            bool found = false;
            for (size_t i = 0; i < r.nseen && !found; i++)
                found = same(res.argv, res.argc, r.seen[i], r.seen_c[i]);
            if (!found && r.nseen < 64)
                __builtin_trap();
            /* What the editor produced is a split: it round-trips. */
            char *line = NULL;
            char **back = NULL;
            size_t backc = 0;
            if (lz_shellwords_quote((const char *const *)res.argv, res.argc, &line, NULL) < 0 ||
                lz_shellwords_split(line, strlen(line), &back, &backc, NULL) < 0 ||
                !same(res.argv, res.argc, back, backc))
                __builtin_trap();
            free(line);
            lz_shellwords_free(back);
        }
    } else if (res.argv) {
        __builtin_trap();
    }
    lz_prompt_result_clear(&res);
    lz_prompt_free(p);
    for (size_t i = 0; i < r.nseen; i++)
        free_argv(r.seen[i]);
    for (size_t i = 0; i < argc; i++)
        free(argv[i]);
    free(cwd);
    free(just);
    return 0;
}
