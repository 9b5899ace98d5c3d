/* audit_cmd.c — `lazaret audit [DOMAIN] [--json] [--net | --escalations]`:
 * the audit of one Domain (escalation requests and network decisions,
 * interleaved in seq order), listed and its hash chain verified (see
 * audit.h). Reads the Domain Store read-only, so a running Domain is read
 * as it is. A filter chooses the rows listed, never the rows verified. */
#include <arpa/inet.h>
#include <inttypes.h>
#include <jansson.h>
#include <time.h>

#include "audit.h"
#include "cli.h"
#include "config.h"
#include "domains.h"
#include "escape.h"

#ifdef LZ_TEST_HOOKS
#include <fcntl.h>
#include <sys/file.h>
#endif

static void usage(FILE *out) {
    fputs("Usage: lazaret audit [DOMAIN] [--json] [--net | --escalations] [-p PROFILE] [--workspace DIR]\n"
          "                     [--config FILE]\n"
          "\n"
          "List the escalation requests of a Domain, each with its end state, who\n"
          "decided (an auto-approval rule or the developer), the original and the\n"
          "edited argv, the executable and its SHA-256, the exit status and the output\n"
          "size, and its network decisions by name (\"net learned\", \"refused\",\n"
          "\"denied\", \"filtered\", \"limited\", \"allowed\", \"suppressed\": the name or\n"
          "rule, the addresses, the ports, why), in one list in the order they were\n"
          "recorded, and verify the audit's hash chain (both kinds of rows, whatever\n"
          "is listed). Works while the Domain runs.\n"
          "\n"
          "DOMAIN is a Domain ID or a unique prefix of at least 4 hex characters of\n"
          "one (see `lazaret state ls`); default: the Domain of this directory (or of\n"
          "--workspace DIR) with the profile given by -p.\n"
          "\n"
          "Text from the sandbox (argv) and host paths are shown escaped: control\n"
          "characters, escapes, bidi and invisible characters as \\xNN or \\u{XXXX},\n"
          "a backslash as \\\\ (the same rendering in --json).\n"
          "\n"
          "Exit status: 0 the chain is intact; 1 it is broken (\"audit chain broken at\n"
          "row N: ...\" on standard error) or the audit could not be read; 2 usage.\n"
          "\n"
          "Options:\n"
          "  --json                one JSON document on standard output\n"
          "  --net                 list only the network decisions\n"
          "  --escalations         list only the escalation requests\n"
          "  -p, --profile NAME    profile (default: \"default\")\n"
          "  --workspace DIR       the Domain of that workspace\n"
          "  --config FILE         read FILE instead of the default configuration\n"
          "  -h, --help            show this help\n",
          out);
}

/* The escaped rendering of s (never NULL). */
static char *esc(const char *s) { return lz_cli_esc(s, ""); }

static void hexs(const uint8_t *b, size_t n, char *out) { lz_hex(b, n, out); }

/* ---- text ---- */

/* Prints lz_escape_argv's lines, indented and prefixed. */
static void print_argv(const char *prefix, const char *const *argv, size_t argc) {
    _cleanup_free_ char *lines = NULL;
    if (lz_escape_argv(argv, argc, &lines) < 0) {
        printf("    %s(too long to render)\n", prefix);
        return;
    }
    for (char *l = lines, *nl; l && *l; l = nl ? nl + 1 : NULL) {
        nl = strchr(l, '\n');
        printf("    %s%.*s\n", prefix, nl ? (int)(nl - l) : (int)strlen(l), l);
    }
}

static void print_row(const struct lz_audit_row *w) {
    const struct lz_audit_entry *e = &w->e;
    char req[33], ses[33], rcv[32], end[32];
    hexs(e->request_id, sizeof e->request_id, req);
    hexs(e->session_id, sizeof e->session_id, ses);
    lz_cli_iso_time(e->received_ms, rcv, sizeof rcv);
    lz_cli_iso_time(e->ended_ms, end, sizeof end);
    printf("#%" PRId64 "  generation %" PRId64 "  request %s  session %s\n", w->seq, e->gen, req, ses);
    if (w->problem) {
        /* Undecodable: the stored text as it is, escaped once more. */
        _cleanup_free_ char *p = esc(w->problem), *a = esc(w->argv_text), *x = esc(w->executable_text);
        printf("    UNREADABLE: %s\n    stored argv: %s\n    stored executable: %s\n", p, a, x);
        return;
    }
    printf("    received %s  ended %s\n", rcv[0] ? rcv : "-", end[0] ? end : "-");
    if (e->decided_by == LZ_AUDIT_BY_NONE)
        printf("    no decision");
    else if (e->decided_by == LZ_AUDIT_BY_RULE)
        printf("    decided by rule %" PRId64, e->decided_ref);
    else
        printf("    decided by the developer");
    if (e->decision != LZ_AUDIT_DECISION_NONE)
        printf(": %s", lz_audit_decision_name(e->decision));
    if (e->decision == LZ_AUDIT_SESSION_APPROVED)
        printf(" (by the session approval of #%" PRId64 ")", e->decided_ref);
    printf("; end state %s", lz_audit_end_name(e->end_state));
    if (e->exit_status >= 0)
        printf(", exit status %d", e->exit_status);
    if (e->signal > 0)
        printf(", signal %d", e->signal);
    printf(", %" PRId64 " output bytes\n", e->output_bytes);
    _cleanup_free_ char *exe = esc(e->executable), *cwd = esc(e->cwd);
    char sha[65] = "-";
    if (e->has_sha256)
        hexs(e->executable_sha256, sizeof e->executable_sha256, sha);
    printf("    executable \"%s\"  sha256 %s\n", exe, sha);
    printf("    cwd \"%s\"\n", cwd);
    print_argv("", e->argv, e->argc);
    if (e->edited_argv) {
        printf("    edited to:\n");
        print_argv("edited ", e->edited_argv, e->edited_argc);
    }
}

/* The addresses of a network row, joined by ","; "-" when none. */
static char *addrs_joined(const struct lz_audit_net_entry *n) {
    if (!n->n_addrs)
        return lz_xstrdup("-");
    char *out = lz_xcalloc(n->n_addrs * INET_ADDRSTRLEN + 1, 1);
    size_t len = 0;
    for (size_t i = 0; i < n->n_addrs; i++) {
        struct in_addr in = { .s_addr = htonl(n->addrs[i]) };
        char a[INET_ADDRSTRLEN] = "?";
        (void)inet_ntop(AF_INET, &in, a, sizeof a);
        len += (size_t)snprintf(out + len, INET_ADDRSTRLEN + 1, "%s%s", i ? "," : "", a);
    }
    return out;
}

/* One line: "#12  2026-12-04T10:31:02Z  net learned  NAME  ADDRS  PORTS  DETAIL
 * (generation G)", "-" for an empty field. Stored text is printable ASCII
 * when the row is readable; escaped all the same. */
static void print_net_row(const struct lz_audit_row *w) {
    const struct lz_audit_net_entry *n = &w->net;
    char at[32];
    lz_cli_iso_time(n->at_ms, at, sizeof at);
    if (w->problem) {
        _cleanup_free_ char *p = esc(w->problem), *nm = esc(n->name), *a = esc(w->addrs_text), *pt = esc(n->ports),
                            *d = esc(n->detail);
        printf("#%" PRId64 "  %s  net  generation %" PRId64 "\n    UNREADABLE: %s\n    stored name: %s  addrs: %s  "
               "ports: %s  detail: %s\n",
               w->seq, at[0] ? at : "-", n->gen, p, nm, a, pt, d);
        return;
    }
    const char *ev = lz_audit_net_event_name(n->event);
    _cleanup_free_ char *nm = esc(n->name), *pt = esc(n->ports), *d = esc(n->detail), *a = addrs_joined(n);
    printf("#%" PRId64 "  %s  net %s  %s  %s  %s  %s  (generation %" PRId64 ")\n", w->seq, at[0] ? at : "-",
           ev ? ev : "?", nm[0] ? nm : "-", a, pt[0] ? pt : "-", d[0] ? d : "-", n->gen);
}

/* ---- JSON ---- */

static json_t *jtime(int64_t ms) {
    char b[32];
    lz_cli_iso_time(ms, b, sizeof b);
    return b[0] ? json_string(b) : json_null();
}

static json_t *jesc(const char *s) {
    _cleanup_free_ char *e = esc(s);
    json_t *j = json_string(e);
    return j ? j : json_null();
}

static json_t *jargv(const char *const *argv, size_t argc) {
    json_t *a = json_array();
    for (size_t i = 0; i < argc; i++)
        json_array_append_new(a, jesc(argv[i]));
    return a;
}

static json_t *row_json(const struct lz_audit_row *w) {
    const struct lz_audit_entry *e = &w->e;
    char req[33], ses[33], prev[65], hash[65], sha[65];
    hexs(e->request_id, sizeof e->request_id, req);
    hexs(e->session_id, sizeof e->session_id, ses);
    hexs(w->prev_hash, sizeof w->prev_hash, prev);
    hexs(w->row_hash, sizeof w->row_hash, hash);
    hexs(e->executable_sha256, sizeof e->executable_sha256, sha);
    json_t *o = json_pack("{s:I, s:s, s:I, s:s, s:s, s:o, s:I, s:s, s:I, s:s, s:s}", "seq", (json_int_t)w->seq, "kind",
                          "escalation", "generation", (json_int_t)e->gen, "request_id", req, "session_id", ses,
                          "received", jtime(e->received_ms), "received_ms", (json_int_t)e->received_ms, "decided_by",
                          lz_audit_decider_name(e->decided_by), "decided_ref", (json_int_t)e->decided_ref, "decision",
                          lz_audit_decision_name(e->decision), "end_state", lz_audit_end_name(e->end_state));
    if (!o)
        return json_null();
    if (w->problem) {
        json_object_set_new(o, "argv", json_null());
        json_object_set_new(o, "edited_argv", json_null());
        json_object_set_new(o, "stored_argv", jesc(w->argv_text));
    } else {
        json_object_set_new(o, "argv", jargv(e->argv, e->argc));
        json_object_set_new(o, "edited_argv", e->edited_argv ? jargv(e->edited_argv, e->edited_argc) : json_null());
    }
    json_object_set_new(o, "executable", w->problem ? jesc(w->executable_text) : jesc(e->executable));
    json_object_set_new(o, "executable_sha256", e->has_sha256 ? json_string(sha) : json_null());
    json_object_set_new(o, "cwd", w->problem ? jesc(w->cwd_text) : jesc(e->cwd));
    json_object_set_new(o, "exit_status", e->exit_status >= 0 ? json_integer(e->exit_status) : json_null());
    json_object_set_new(o, "signal", e->signal > 0 ? json_integer(e->signal) : json_null());
    json_object_set_new(o, "output_bytes", json_integer(e->output_bytes));
    json_object_set_new(o, "ended", jtime(e->ended_ms));
    json_object_set_new(o, "ended_ms", json_integer(e->ended_ms));
    json_object_set_new(o, "prev_hash", json_string(prev));
    json_object_set_new(o, "row_hash", json_string(hash));
    json_object_set_new(o, "problem", w->problem ? jesc(w->problem) : json_null());
    return o;
}

static json_t *net_row_json(const struct lz_audit_row *w) {
    const struct lz_audit_net_entry *n = &w->net;
    char prev[65], hash[65];
    hexs(w->prev_hash, sizeof w->prev_hash, prev);
    hexs(w->row_hash, sizeof w->row_hash, hash);
    const char *ev = lz_audit_net_event_name(n->event);
    json_t *o = json_pack("{s:I, s:s, s:I, s:o, s:I, s:o, s:o, s:o, s:o}", "seq", (json_int_t)w->seq, "kind", "net",
                          "generation", (json_int_t)n->gen, "at", jtime(n->at_ms), "at_ms", (json_int_t)n->at_ms,
                          "event", ev ? json_string(ev) : json_null(), "name", jesc(n->name), "ports", jesc(n->ports),
                          "detail", jesc(n->detail));
    if (!o)
        return json_null();
    json_t *a = json_array();
    for (size_t i = 0; i < n->n_addrs; i++) {
        struct in_addr in = { .s_addr = htonl(n->addrs[i]) };
        char t[INET_ADDRSTRLEN] = "?";
        (void)inet_ntop(AF_INET, &in, t, sizeof t);
        json_array_append_new(a, json_string(t));
    }
    json_object_set_new(o, "addrs", w->problem ? json_null() : a);
    if (w->problem) {
        json_decref(a);
        json_object_set_new(o, "stored_addrs", jesc(w->addrs_text));
    }
    json_object_set_new(o, "prev_hash", json_string(prev));
    json_object_set_new(o, "row_hash", json_string(hash));
    json_object_set_new(o, "problem", w->problem ? jesc(w->problem) : json_null());
    return o;
}

/* Which rows are listed (all are verified). */
enum listed { LIST_ALL, LIST_NET, LIST_ESCALATIONS };

static bool listed(const struct lz_audit_row *w, enum listed which) {
    return which == LIST_ALL || (which == LIST_NET) == (w->kind == LZ_AUDIT_NET);
}

static int print_json(const struct lz_audit_log *log, enum listed which, int verdict, int64_t bad, const char *msg) {
    json_t *rows = json_array();
    for (size_t i = 0; i < log->n; i++)
        if (listed(&log->rows[i], which))
            json_array_append_new(
                rows, log->rows[i].kind == LZ_AUDIT_NET ? net_row_json(&log->rows[i]) : row_json(&log->rows[i]));
    json_t *root = json_pack("{s:s, s:i, s:o, s:b, s:o, s:o}", "domain", log->domain_id, "store_version",
                             log->store_version, "rows", rows, "intact", verdict == 0, "broken_at",
                             verdict ? json_integer(bad) : json_null(), "problem", verdict ? jesc(msg) : json_null());
    return lz_cli_print_json(root);
}

/* ---- the test-only writer ---- */

#ifdef LZ_TEST_HOOKS
/* The bytes of a JSON string holding an lz_escape rendering. */
static char *jbytes(json_t *j, bool *ok) {
    const char *t = json_string_value(j);
    uint8_t *b = NULL;
    ssize_t n = t ? lz_unescape(t, strlen(t), 0, &b) : -1;
    if (n < 0 || memchr(b, '\0', (size_t)n)) {
        free(b);
        *ok = false;
        return NULL;
    }
    char *s = lz_xrealloc(b, (size_t)n + 1);
    s[n] = '\0';
    return s;
}

static char **jvec(json_t *a, size_t *n, bool *ok) {
    *n = json_array_size(a);
    char **v = lz_xcalloc(*n + 1, sizeof *v);
    for (size_t i = 0; i < *n; i++)
        v[i] = jbytes(json_array_get(a, i), ok);
    return v;
}

static int enum_of(const char *(*name)(int), const char *s) {
    for (int i = 0; s && name(i); i++)
        if (!strcmp(name(i), s))
            return i;
    return -1;
}
static const char *by_name(int i) { return lz_audit_decider_name((enum lz_audit_decider)i); }
static const char *dec_name(int i) { return lz_audit_decision_name((enum lz_audit_decision)i); }
static const char *end_name(int i) { return lz_audit_end_name((enum lz_outcome)i); }

static bool hex_field(json_t *o, const char *key, uint8_t *out, size_t n) {
    const char *s = json_string_value(json_object_get(o, key));
    if (!s || strlen(s) != 2 * n)
        return false;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(s + 2 * i, "%2x", &v) != 1)
            return false;
        out[i] = (uint8_t)v;
    }
    return true;
}

static const char *net_name(int i) { return lz_audit_net_event_name((enum lz_audit_net_event)(i + 1)); }

/* A line with "kind": "net": gen, at_ms, event, name, addrs (dotted
 * quads), ports, detail, passed as they are (lz_audit_append_net checks
 * them). 1 appended, 0 malformed, -1 refused (err). */
static int test_append_net(struct lz_store *st, json_t *o, int64_t *ret_seq, struct lz_error *err) {
    int ev = enum_of(net_name, json_string_value(json_object_get(o, "event")));
    json_t *ja = json_object_get(o, "addrs");
    if (ev < 0 || !json_is_array(ja) || json_array_size(ja) > 2 * LZ_AUDIT_NET_ADDRS_MAX)
        return 0;
    uint32_t addrs[2 * LZ_AUDIT_NET_ADDRS_MAX];
    for (size_t i = 0; i < json_array_size(ja); i++) {
        struct in_addr in;
        const char *t = json_string_value(json_array_get(ja, i));
        if (!t || inet_pton(AF_INET, t, &in) != 1)
            return 0;
        addrs[i] = ntohl(in.s_addr);
    }
    struct lz_audit_net_entry e = {
        .gen = json_integer_value(json_object_get(o, "gen")),
        .at_ms = json_integer_value(json_object_get(o, "at_ms")),
        .event = (enum lz_audit_net_event)(ev + 1),
        .name = json_string_value(json_object_get(o, "name")),
        .addrs = addrs,
        .n_addrs = json_array_size(ja),
        .ports = json_string_value(json_object_get(o, "ports")),
        .detail = json_string_value(json_object_get(o, "detail")),
    };
    return lz_audit_append_net(st, &e, ret_seq, err) < 0 ? -1 : 1;
}

/* `lazaret audit __append DOMAIN_DIR` (test builds only): appends one row
 * per JSON line of standard input through lz_audit_append (or, for a line
 * with "kind": "net", lz_audit_append_net), holding the Domain flock as
 * every writer of the store does. Strings of argv, edited_argv, executable
 * and cwd are lz_escape renderings (any bytes). */
static int test_append(int argc, char **argv) {
    if (argc != 3) {
        lz_cli_error("audit __append: expects DOMAIN_DIR");
        return LZ_EXIT_USAGE;
    }
    _cleanup_free_ char *lockp = lz_xasprintf("%s/lock", argv[2]);
    _cleanup_close_ int lock = open(lockp, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX | LOCK_NB) < 0) {
        lz_cli_error("audit __append: cannot lock %s (is the Domain running?): %m", lockp);
        return LZ_EXIT_FAILURE;
    }
    struct lz_store *st = NULL;
    struct lz_error err = { 0 };
    if (lz_store_open(argv[2], NULL, false, &st, &err) < 0) {
        lz_cli_error("audit __append: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    int ret = LZ_EXIT_OK;
    char line[1 << 16];
    while (ret == LZ_EXIT_OK && fgets(line, sizeof line, stdin)) {
        json_error_t je;
        json_t *o = json_loads(line, 0, &je);
        if (o && !strcmp(json_string_value(json_object_get(o, "kind")) ?: "", "net")) {
            int64_t seq = 0;
            int a = test_append_net(st, o, &seq, &err);
            if (a > 0)
                printf("%" PRId64 "\n", seq);
            else if (a < 0)
                lz_cli_error("audit __append: %s", err.msg);
            else
                lz_cli_error("audit __append: malformed entry line");
            ret = a > 0 ? LZ_EXIT_OK : a < 0 ? LZ_EXIT_FAILURE : LZ_EXIT_USAGE;
            json_decref(o);
            continue;
        }
        struct lz_audit_entry e = { 0 };
        bool ok = o && json_is_object(o);
        size_t n_argv = 0, n_ed = 0;
        char **av = ok ? jvec(json_object_get(o, "argv"), &n_argv, &ok) : NULL;
        json_t *ed = json_object_get(o, "edited_argv");
        char **edv = ok && json_is_array(ed) ? jvec(ed, &n_ed, &ok) : NULL;
        char *exe = ok ? jbytes(json_object_get(o, "executable"), &ok) : NULL;
        char *cwd = ok ? jbytes(json_object_get(o, "cwd"), &ok) : NULL;
        int by = enum_of(by_name, json_string_value(json_object_get(o, "decided_by")));
        int dec = enum_of(dec_name, json_string_value(json_object_get(o, "decision")));
        int end = enum_of(end_name, json_string_value(json_object_get(o, "end_state")));
        ok = ok && by >= 0 && dec >= 0 && end >= 0 && hex_field(o, "request_id", e.request_id, 16) &&
            hex_field(o, "session_id", e.session_id, 16);
        if (ok) {
            e.gen = json_integer_value(json_object_get(o, "gen"));
            e.received_ms = json_integer_value(json_object_get(o, "received_ms"));
            e.decided_by = (enum lz_audit_decider)by;
            e.decided_ref = json_integer_value(json_object_get(o, "decided_ref"));
            e.decision = (enum lz_audit_decision)dec;
            e.end_state = (enum lz_outcome)end;
            e.argv = (const char *const *)av;
            e.argc = n_argv;
            e.edited_argv = (const char *const *)edv;
            e.edited_argc = n_ed;
            e.executable = exe;
            e.cwd = cwd;
            e.has_sha256 = hex_field(o, "executable_sha256", e.executable_sha256, 32);
            e.exit_status = (int)json_integer_value(json_object_get(o, "exit_status"));
            e.signal = (int)json_integer_value(json_object_get(o, "signal"));
            e.output_bytes = json_integer_value(json_object_get(o, "output_bytes"));
            e.ended_ms = json_integer_value(json_object_get(o, "ended_ms"));
            int64_t seq = 0;
            if (lz_audit_append(st, &e, &seq, &err) < 0) {
                lz_cli_error("audit __append: %s", err.msg);
                ret = LZ_EXIT_FAILURE;
            } else {
                printf("%" PRId64 "\n", seq);
            }
        } else {
            lz_cli_error("audit __append: malformed entry line");
            ret = LZ_EXIT_USAGE;
        }
        for (size_t i = 0; av && i < n_argv; i++)
            free(av[i]);
        for (size_t i = 0; edv && i < n_ed; i++)
            free(edv[i]);
        free(av);
        free(edv);
        free(exe);
        free(cwd);
        json_decref(o);
    }
    lz_store_close(st);
    return ret;
}
#endif

/* ---- the command ---- */

int lz_cmd_audit(int argc, char **argv) {
#ifdef LZ_TEST_HOOKS
    if (argc >= 2 && !strcmp(argv[1], "__append"))
        return test_append(argc, argv);
#endif
    const char *config_path = NULL, *profile = NULL, *workspace = NULL;
    bool json = false, only_net = false, only_esc = false;
    const struct lz_cli_option opts[] = {
        { "config", 0, &config_path, NULL },
        { "profile", 'p', &profile, NULL },
        { "workspace", 0, &workspace, NULL },
        { "json", 0, NULL, &json },
        { "net", 0, NULL, &only_net },
        { "escalations", 0, NULL, &only_esc },
        { NULL, 0, NULL, NULL },
    };
    int first;
    /* Options may follow DOMAIN (`lazaret audit 3f2a --json`). */
    if (!lz_cli_getopt(argc, argv, "audit", opts, false, usage, &first))
        return first;
    size_t n_args = (size_t)(argc - first);
    if (n_args > 1 || (n_args && workspace)) {
        lz_cli_error("audit: expects at most one Domain (an ID, a prefix, or --workspace DIR)");
        return LZ_EXIT_USAGE;
    }
    if (only_net && only_esc) {
        lz_cli_error("audit: --net and --escalations exclude each other (without either, both are listed)");
        return LZ_EXIT_USAGE;
    }
    enum listed which = only_net ? LIST_NET : only_esc ? LIST_ESCALATIONS : LIST_ALL;
    const char *arg = n_args ? argv[first] : NULL;

    _cleanup_config_ struct lz_config *cfg = NULL;
    struct lz_error err = { 0 };
    struct lz_config_opts o = { .config_path = config_path, .profile = profile, .workspace = workspace };
    int r = lz_config_load(&o, &cfg, &err);
    if (r < 0 && arg) {
        /* A named Domain needs only the Storage Root; the current directory
         * may not be a usable workspace ($HOME, the Storage Root). */
        o.workspace = "/proc";
        if (lz_config_load(&o, &cfg, NULL) >= 0)
            r = 0;
    }
    if (r < 0) {
        lz_cli_error("audit: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    char id[LZ_DOMAIN_ID_HEX + 1];
    err = (struct lz_error){ 0 };
    r = lz_domains_resolve(cfg->data_root, arg ? arg : cfg->domain_id_hex, id, &err);
    if (r < 0) {
        if (!arg && r == -ENOENT) {
            _cleanup_free_ char *ws = esc(cfg->workspace);
            lz_cli_error("audit: profile %s has no Domain for workspace %s (Domain ID %.12s): it never ran there",
                         cfg->profile.name, ws, cfg->domain_id_hex);
        } else {
            lz_cli_error("audit: %s", err.msg);
        }
        return LZ_EXIT_FAILURE;
    }
    _cleanup_audit_log_ struct lz_audit_log log = { 0 };
    if ((r = lz_audit_load(cfg->data_root, id, &log, &err)) < 0) {
        lz_cli_error("audit: %s", err.msg);
        return LZ_EXIT_FAILURE;
    }
    int64_t bad = 0;
    struct lz_error verr = { 0 };
    int verdict = lz_audit_verify(&log, &bad, &verr);
    int ret = verdict == 0 ? LZ_EXIT_OK : LZ_EXIT_FAILURE;
    if (json) {
        if (print_json(&log, which, verdict, bad, verr.msg) != LZ_EXIT_OK)
            ret = LZ_EXIT_FAILURE;
    } else {
        printf("Audit of Domain %s\n", id);
        size_t shown = 0;
        for (size_t i = 0; i < log.n; i++)
            shown += listed(&log.rows[i], which);
        if (log.store_version < LZ_AUDIT_STORE_VERSION)
            printf("no requests recorded (its Domain Store is version %d, from before the audit; it is upgraded "
                   "when the Domain next starts)\n",
                   log.store_version);
        else if (!log.n)
            printf(which == LIST_NET ? "no network decisions recorded\n" : "no requests recorded\n");
        bool before_net = log.store_version == LZ_AUDIT_STORE_VERSION && which != LIST_ESCALATIONS;
        if (log.n && !shown && !(which == LIST_NET && before_net))
            printf(which == LIST_NET ? "no network decisions recorded\n" : "no requests recorded\n");
        if (before_net)
            printf("no network decisions recorded (its Domain Store is version %d, from before they were audited; "
                   "it is upgraded when the Domain next starts)\n",
                   log.store_version);
        for (size_t i = 0; i < log.n; i++) {
            if (!listed(&log.rows[i], which))
                continue;
            if (log.rows[i].kind == LZ_AUDIT_NET)
                print_net_row(&log.rows[i]);
            else
                print_row(&log.rows[i]);
        }
        if (verdict == 0)
            printf("audit chain intact: %zu row%s\n", log.n, log.n == 1 ? "" : "s");
    }
    if (verdict != 0) {
        _cleanup_free_ char *m = esc(verr.msg);
        lz_cli_error("%s", m);
    }
    return ret;
}
