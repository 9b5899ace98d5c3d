/* prompt.h — the escalation prompt on a Client Session's terminal.
 *
 * A sandboxed process asked for one command to run on the host; this module
 * is the screen the developer decides on (docs/escalation.md, "The prompt").
 * It is a state machine with no I/O of its own, so the Host Coordinator's
 * single-threaded event loop keeps serving every other session while a
 * prompt is up: the coordinator feeds it the bytes the developer types
 * (lz_prompt_feed), calls lz_prompt_tick when lz_prompt_deadline says so,
 * and writes whatever lz_prompt_output hands out to the session's terminal.
 * Nothing here blocks, sleeps, reads a clock other than opts->clock, or
 * touches a file descriptor.
 *
 * Life of a prompt (the protocol model's action names, docs/model/README.md,
 * are reported through opts->on_action as they happen):
 *
 *   lz_prompt_new            QueuePrompt
 *   first lz_prompt_output   BeginPrompt: enter the alternate screen, draw
 *   settle_ms later          PromptDrawn: keys are decisions from now on;
 *                            keys that arrived before (typed ahead, or
 *                            during the settle delay) were discarded and
 *                            counted (DiscardTypeahead), and the screen
 *                            says how many
 *   [a]                      DeveloperApprove        -> LZ_PROMPT_APPROVED
 *                            (not offered for a network request)
 *   [s]                      DeveloperApproveSession -> LZ_PROMPT_APPROVED_SESSION
 *   [d], Enter, Escape, ^C   DeveloperDeny           -> LZ_PROMPT_DENIED
 *   [q]                      DeveloperQuit           -> LZ_PROMPT_QUIT
 *   [e], edit, Enter         DeveloperEdit, then the edited argv is drawn
 *                            and settles again (PromptDrawn) and needs a
 *                            new [a]; [s] is not offered for it
 *   timeout_ms after new     PromptTimeout           -> LZ_PROMPT_TIMED_OUT
 *                            (absolute: an edit does not extend it)
 *
 * When the prompt ends, the last output leaves the alternate screen, which
 * gives the session's own screen back as it was. The coordinator must keep
 * calling lz_prompt_output after every feed, tick, resize and cancel until it
 * returns 0.
 *
 * Bytes on the terminal. Everything the request carries (argv, cwd,
 * environment, justification, and for symmetry profile and session names) is
 * rendered with lz_escape (escape.h): printable ASCII and visible UTF-8 only.
 * The prompt's own output adds only CR, LF and the control sequences listed
 * at LZ_PROMPT_SEQUENCES; tests/unit/test_prompt.c and fuzz_prompt assert
 * that no other control byte, ESC, C1 or invisible character ever leaves
 * this module. Lines longer than the terminal are wrapped, and a wrapped
 * continuation starts with "  + " (a request can never start a line, so it
 * cannot fake an "argv[N]" line); content taller than the screen is paged
 * with "more below" / "more above" shown, never clipped.
 *
 * Keys. Input is parsed into keys: UTF-8 characters, CSI and SS3 sequences
 * (arrows, Home/End, PgUp/PgDn, Delete; any other sequence, e.g. a mouse or
 * focus report the session's program had enabled, is ignored, never read as
 * letters), legacy X10 mouse reports (three raw bytes that are skipped), and
 * bracketed paste (ignored on the decision screen: a paste never answers a
 * prompt; inserted in the editor). A lone ESC is told from the start of a
 * sequence by opts.escape_ms (default 100 ms) of silence; ESC followed by a
 * byte that starts no sequence (Alt+key) counts as Escape.
 *
 * The line editor ([e]). It is written here rather than driven through
 * libedit, which DESIGN.md names for [E]dit, because libedit's el_wgets
 * cannot be driven from a byte-fed state machine without blocking the
 * event loop or giving up most of what it would bring:
 *   - el_wgets resolves a key inside one call: it reads a multi-byte
 *     character or an escape sequence (ESC [ D) by calling its read
 *     function again until the sequence is complete. An EL_GETCFN reading
 *     from our queue must then either block (stalling every session) or
 *     return end-of-file in the middle of a sequence, after which el_wgets
 *     reports EOF and the partial sequence is lost. With EL_UNBUFFERED it
 *     returns after one character, but the same holds within that character.
 *     Feeding it only whole keys means parsing keys ourselves first.
 *   - libedit edits only on a terminal: with an input that is not a tty it
 *     falls back to plain reading (NO_TTY). Driving it would take a pty pair
 *     per prompt inside the coordinator, whose output we would then relay.
 *   - its output is produced from the termcap entry of the coordinator's
 *     own $TERM (cursor motion, clear-to-end, padding), not of the session's
 *     terminal; the set of control sequences sent to the developer would no
 *     longer be ours to state and test byte for byte, which is the point of
 *     this screen.
 * The editor here does what [e] needs: insert, Backspace, Delete,
 * Left/Right, Home/End, Ctrl-A/E/B/F/U/K/W, UTF-8 aware, a pasted text is
 * inserted, characters that lz_escape_needs are refused (they could not be
 * shown and lz_shellwords_split refuses them anyway), Enter splits the line
 * with lz_shellwords_split (an error is shown with its column and the editor
 * stays open), Escape or Ctrl-C returns to the prompt unchanged. No history,
 * no completion. Long lines scroll horizontally.
 */
#pragma once

#include <sys/types.h>

#include "util.h"

/* The control sequences the prompt itself writes, besides CR and LF.
 * Nothing else with a C0 control (other than SI, which selects the G0
 * character set), ESC, DEL or C1 ever leaves the module:
 *   ESC [ ? 1049 h / l   enter / leave the alternate screen (saves and
 *                        restores the session's cursor and attributes)
 *   ESC [ H, ESC [ 2 J   home, clear the screen
 *   ESC [ r              reset the scrolling region (a session's program
 *                        may have narrowed it: the prompt must not scroll)
 *   ESC ( B, SI          ASCII in G0, G0 selected (no line-drawing set)
 *   ESC [ 4 l            insert mode off
 *   ESC [ 0 m, 1 m, 7 m  attributes: reset, bold, reverse
 *   ESC [ ROW ; COL H    cursor position (the editor's cursor) */
#define LZ_PROMPT_SEQUENCES                                                                                            \
    {                                                                                                                  \
        "\x1b[?1049h", "\x1b[?1049l", "\x1b[H", "\x1b[2J", "\x1b[r", "\x1b(B", "\x0f", "\x1b[4l", "\x1b[0m",           \
            "\x1b[1m", "\x1b[7m"                                                                                       \
    }

/* Bounds on what a prompt accepts (the record's bounds, record.h, are
 * smaller; these only keep the module's allocations bounded). */
#define LZ_PROMPT_ARGC_MAX 4096
#define LZ_PROMPT_ENVC_MAX 1024
#define LZ_PROMPT_TEXT_MAX (1024 * 1024) /* each string */

/* The resolved executable: its canonical absolute path, and the owner and
 * mode of that file when it was resolved (stat_known). */
struct lz_prompt_exe {
    const char *path;
    bool stat_known;
    uid_t uid;
    gid_t gid;
    mode_t mode;
    const char *owner; /* user name of uid, or NULL */
    const char *group; /* group name of gid, or NULL */
};

/* What the developer is asked about. All strings NUL-terminated except the
 * justification (bytes). Nothing is taken over: lz_prompt_new copies. */
struct lz_prompt_req {
    const char *profile;    /* configuration profile name */
    const char *session;    /* Client Session, as the developer knows it */
    const char *request_id; /* Escalation Request ID, hex */
    struct lz_prompt_exe exe;
    const char *const *argv;
    size_t argc;            /* 1..LZ_PROMPT_ARGC_MAX */
    const char *cwd;        /* host working directory */
    const char *const *env; /* "NAME=value", the command's whole environment */
    size_t envc;
    const void *justification; /* from the sandbox, untrusted */
    size_t justification_len;
    /* A network request (lazaret-escalate --allow-host) instead of a
     * command: what the sandbox asks to reach, in the caller's words
     * ("example.com on TCP port 443"); NULL for a command. The screen then
     * shows it and the justification, not the executable, directory or
     * environment (the caller passes "" for exe.path and cwd, and the
     * request as the sandbox wrote it as argv). Offered: [s] allow (for as
     * long as the caller says: the text `network_scope`), [d], [q]; [a]
     * and [e] are not (a name allowed stays allowed, and a rule is not
     * edited on the prompt). */
    const char *network;
    const char *network_scope; /* "until this Domain stops"; required with network */
};

enum lz_prompt_state {
    LZ_PROMPT_QUEUED,   /* created; not drawn yet (output not taken) */
    LZ_PROMPT_SETTLING, /* drawn; keys are discarded until the settle delay passed */
    LZ_PROMPT_ASKING,   /* keys are decisions */
    LZ_PROMPT_EDITING,  /* the line editor is open */
    LZ_PROMPT_DONE,     /* decided (lz_prompt_result); drain the output */
};

enum lz_prompt_decision {
    LZ_PROMPT_PENDING = 0,
    LZ_PROMPT_APPROVED,         /* [a]: run result.argv once */
    LZ_PROMPT_APPROVED_SESSION, /* [s]: this exact request, for the rest of the Client Session */
    LZ_PROMPT_DENIED,           /* [d], Enter, Escape */
    LZ_PROMPT_TIMED_OUT,        /* no decision within timeout_ms: a denial */
    LZ_PROMPT_QUIT,             /* [q]: denied, and the Client Session ends */
    LZ_PROMPT_CANCELLED,        /* lz_prompt_cancel (the request was cancelled) */
    LZ_PROMPT_INTERRUPTED,      /* Ctrl-C: the developer cancels the request */
};

struct lz_prompt_result {
    enum lz_prompt_decision decision;
    /* Approved only: the argv to run, NULL-terminated; the request's own,
     * or the developer's edit (edited = true; never with APPROVED_SESSION). */
    char **argv;
    size_t argc;
    bool edited;
    char *exe_path;          /* approved only: the executable shown (edited: as resolve gave it) */
    unsigned discarded_keys; /* keys typed ahead and thrown away */
};

struct lz_prompt_opts {
    long now_ms;         /* creation time on opts->clock: the timeout counts from here */
    long settle_ms;      /* after each draw; 0 = default 500, < 0 = none */
    long timeout_ms;     /* 0 = default 5 minutes */
    long escape_ms;      /* lone-ESC delay; 0 = default 100 */
    unsigned rows, cols; /* terminal size; 0 = 24 x 80 */
    /* The clock feed/tick's now_ms come from, read when the output is taken
     * (the draw time starts the settle delay). NULL = lz_now_ms. */
    long (*clock)(void *ctx);
    /* The model's action names as transitions happen, with a short detail
     * ("keys=2", "argc=3"); for hc_model_action. May be NULL. */
    void (*on_action)(void *ctx, const char *action, const char *detail);
    /* Resolves an edited argv[0] into the executable that would run, so the
     * prompt shows it before [a]. Fills *ret (strings valid until the next
     * call on p); returns 0, or negative with err (shown in the editor, which
     * stays open). NULL: an edit may not change argv[0] (the editor says
     * so), since nothing would show which file it names. */
    int (*resolve)(void *ctx, const char *argv0, struct lz_prompt_exe *ret, struct lz_error *err);
    /* The warning lines for what the prompt shows (argv and the resolved
     * executable's path), each drawn on its own highlighted line above the
     * command line: asked when the prompt is created and after each
     * accepted edit. Returns a NULL-terminated vector of malloc'd strings
     * that the prompt takes over (NULL: none); the lines are the caller's
     * own text and are drawn through lz_escape like request text. May be
     * NULL. */
    char **(*warnings)(void *ctx, const char *const *argv, size_t argc, const char *exe_path);
    void *ctx;
};

struct lz_prompt;

/* Copies req; -EINVAL (with err) for a request outside the bounds above.
 * Reports QueuePrompt. */
int lz_prompt_new(const struct lz_prompt_req *req, const struct lz_prompt_opts *o, struct lz_prompt **ret,
                  struct lz_error *err);
void lz_prompt_free(struct lz_prompt *p);

/* What to write to the session's terminal now: returns 1 and the bytes
 * (valid until the next call on p), or 0 when there is nothing. Taking the
 * first output is the draw (BeginPrompt; the settle delay starts). */
int lz_prompt_output(struct lz_prompt *p, const void **ret_bytes, size_t *ret_len);

/* Keys from the session's terminal, received at now_ms. */
void lz_prompt_feed(struct lz_prompt *p, const void *bytes, size_t n, long now_ms);
/* Timers: the settle delay, a lone ESC, the prompt timeout. */
void lz_prompt_tick(struct lz_prompt *p, long now_ms);
/* The next time lz_prompt_tick must be called, or -1 (no timer: done, or
 * not drawn yet — the timeout still counts from creation, so call tick at
 * least at lz_prompt_deadline after the first output). */
long lz_prompt_deadline(const struct lz_prompt *p);
/* The terminal was resized: redraw. */
void lz_prompt_resize(struct lz_prompt *p, unsigned rows, unsigned cols);
/* The request went away (cancelled, session gone): leave the screen.
 * Reports nothing (the coordinator logs CancelRequest itself). */
void lz_prompt_cancel(struct lz_prompt *p);

enum lz_prompt_state lz_prompt_state(const struct lz_prompt *p);
/* The argv the prompt shows now (the request's, or the accepted edit);
 * owned by p. */
void lz_prompt_shown_argv(const struct lz_prompt *p, const char *const **ret_argv, size_t *ret_argc, bool *ret_edited);
/* The decision: 0 and *ret filled (argv copied: lz_prompt_result_clear), or
 * -EAGAIN while the prompt is still up. */
int lz_prompt_result(const struct lz_prompt *p, struct lz_prompt_result *ret);
void lz_prompt_result_clear(struct lz_prompt_result *r);
