/* cli.h — the thin command layer. Each command parses its own arguments
 * (getopt_long), calls the library, prints, and returns the process exit
 * status. Only this layer and the process entry points print. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "progress.h"

#include <jansson.h>

/* Exit statuses of the CLI itself (a sandboxed command's status passes
 * through unchanged from `lazaret run`). */
#define LZ_EXIT_OK 0
#define LZ_EXIT_FAILURE 1
#define LZ_EXIT_USAGE 2
/* `lazaret run` could not start/attach the sandbox (like ssh's 255). */
#define LZ_EXIT_LAUNCH 125

struct lz_config;
struct lz_error;

/* How `lazaret run` gets the lower layer of a Domain it has to start
 * (lz_client_opts.prepare, asked only when no Domain runs): lazaret-core
 * prepares the image (lz_run_core, run_prepare.c); the front end links no
 * image code and hands the whole command to lazaret-core (thin.c). */
struct lz_run_starter {
    /* The prepared-artifact ID in *ret (valid until clear). *state is the
     * starter's own (NULL on the first call). */
    int (*prepare)(const struct lz_config *cfg, void **state, const char **ret, struct lz_error *err);
    void (*clear)(void *state); /* NULL: nothing to free */
    /* Say so when the built-in profile is used (once per command: the
     * front end leaves it to the lazaret-core it may exec). */
    bool builtin_notice;
};
extern const struct lz_run_starter lz_run_core;

int lz_cmd_run(int argc, char **argv, const struct lz_run_starter *starter);
int lz_cmd_config(int argc, char **argv); /* lazaret config check ... */
int lz_cmd_image(int argc, char **argv);  /* lazaret image bootstrap|ls ... */
int lz_cmd_doctor(int argc, char **argv);
int lz_cmd_state(int argc, char **argv);  /* lazaret state ls|inspect|verify|reset ... */
int lz_cmd_audit(int argc, char **argv);  /* lazaret audit */
int lz_cmd_ps(int argc, char **argv);     /* lazaret ps */
int lz_cmd_stop(int argc, char **argv);   /* lazaret stop */
int lz_cmd_net(int argc, char **argv);    /* lazaret net */
int lz_cmd_events(int argc, char **argv); /* lazaret events */
/* The running Domain `want` names (an ID or a unique prefix), or, when
 * want is NULL, the one of the current directory and profile: 0 with the
 * control list (json_decref it) and the entry in it; < 0 after printing
 * why. lz_cli_domain_arg_ok: is want an ID or prefix at all. */
bool lz_cli_domain_arg_ok(const char *want);
int lz_cli_find_running(const char *want, const char *profile, const char *config_path, json_t **ret_list,
                        json_t **ret_hit);
/* For commands on one running Domain (stop, net, events): the one optional
 * operand after the options (argv[first]) through lz_cli_find_running; 0
 * with *ret_list and *ret_hit as above, else the exit status (usage for
 * more operands or an operand that is no ID, failure otherwise). */
int lz_cli_running_operand(int argc, char **argv, int first, const char *profile, const char *config_path,
                           void (*usage)(FILE *), json_t **ret_list, json_t **ret_hit);
int lz_cmd_internal(int argc, char **argv); /* __coordinator / __supervisor */

/* The process's argv as main() received it. */
extern char **lz_cli_argv;

/* Replaces this process with lazaret-core (the full implementation, in
 * libexec) running the same command line. Returns only on failure. */
int lz_cli_exec_core(void);

/* Prints "lazaret: <msg>\n" to stderr. */
void lz_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* One option of a subcommand, for lz_cli_getopt: --name, and -short_name
 * when that is not 0. With arg non-NULL it takes an argument (stored in
 * *arg), else it sets *flag. -h/--help is always there. */
/* An option that may be given more than once (--publish A --publish B). */
#define LZ_CLI_LIST_MAX 32
struct lz_cli_list {
    const char *v[LZ_CLI_LIST_MAX];
    size_t n;
};

struct lz_cli_option {
    const char *name;
    char short_name;
    const char **arg;
    bool *flag;
    struct lz_cli_list *list; /* instead of arg: every value, in order */
};
#define LZ_CLI_MAX_OPTIONS 16

/* Parses the options of a subcommand: argv[0] is the subcommand, what
 * ("state ls") names it in messages. opts ends with an entry whose name is
 * NULL. in_order: options end at the first operand (else they may follow
 * operands, which then come first in argv). Returns true with *ret the
 * index in argv of the first operand; false with *ret the exit status when
 * the command is done (--help printed usage to stdout, or a usage error
 * was printed). */
bool lz_cli_getopt(int argc, char **argv, const char *what, const struct lz_cli_option *opts, bool in_order,
                   void (*usage)(FILE *out), int *ret);

/* lz_cli_getopt for `COMMAND SUB [OPTIONS] [ARGS]`, argv being COMMAND's
 * (argv[1] is SUB):
 * messages name "COMMAND SUB"; on true, the operands are ret_args[0..
 * *ret_n_args-1]; on false, *ret is the exit status. */
bool lz_cli_getopt_sub(int argc, char **argv, const char *command, const struct lz_cli_option *opts, bool in_order,
                       void (*usage)(FILE *out), char ***ret_args, size_t *ret_n_args, int *ret);

/* The start of a command with subcommands: true with *ret the exit status
 * when there is nothing more to do, i.e. no argv[1] (usage on stderr) or
 * argv[1] is -h, --help or help (usage on stdout). */
bool lz_cli_help_first(int argc, char **argv, void (*usage)(FILE *out), int *ret);

/* A command of a dispatch table, called with argv[0] the command's name. */
struct lz_cli_command {
    const char *name;
    int (*fn)(int argc, char **argv);
};
/* Runs the command of cmds (ended by a NULL name) that argv[1] names: true
 * with *ret its exit status; false when argv[1] names none. */
bool lz_cli_dispatch(const struct lz_cli_command *cmds, int argc, char **argv, int *ret);

/* n bytes for people: "512 B", "1.5 KiB", "3.0 GiB". */
void lz_cli_human_bytes(uint64_t n, char *out, size_t size);

/* Image progress on standard error (progress_ui.c, lazaret-core only):
 * lz_cli_progress is an lz_progress_fn whose ud is the view. */
void lz_cli_progress_init(struct lz_progress_view *v, const char *prefix);
void lz_cli_progress(void *ud, const char *phase, uint64_t done, uint64_t total);
void lz_cli_progress_done(struct lz_progress_view *v);

/* ISO 8601 UTC of a Unix time in milliseconds; "" for 0 (unknown). */
void lz_cli_iso_time(int64_t ms, char *out, size_t size);

/* Recorded strings (workspace paths, argv elements) may hold any byte:
 * their escaped rendering (escape.h: control, bidi and invisible
 * characters made visible) before they reach a terminal; `if_null` for
 * NULL. Never NULL; free it. */
char *lz_cli_esc(const char *s, const char *if_null);

/* Prints root (then released; NULL: an allocation failed) indented on
 * stdout; LZ_EXIT_OK, or LZ_EXIT_FAILURE with a message. */
struct json_t;
int lz_cli_print_json(struct json_t *root);
/* state_hosttools.c: `lazaret state diff` and `state apply PATH`. */
struct lz_config;
int lz_state_diff(const struct lz_config *cfg);
int lz_state_apply(const struct lz_config *cfg, const char *rel);
