/* cli.h — the thin command layer. Each command parses its own arguments
 * (getopt_long), calls the library, prints, and returns the process exit
 * status. Only this layer and the process entry points print. */
#pragma once

/* Exit statuses of the CLI itself (a sandboxed command's status passes
 * through unchanged from `lazaret run`). */
#define LZ_EXIT_OK 0
#define LZ_EXIT_FAILURE 1
#define LZ_EXIT_USAGE 2
/* `lazaret run` could not start/attach the sandbox (like ssh's 255). */
#define LZ_EXIT_LAUNCH 125

int lz_cmd_run(int argc, char **argv);
int lz_cmd_config(int argc, char **argv);   /* lazaret config check ... */
int lz_cmd_image(int argc, char **argv);    /* lazaret image bootstrap|ls ... */
int lz_cmd_doctor(int argc, char **argv);
int lz_cmd_state(int argc, char **argv);    /* lazaret state ls|inspect|verify|reset ... */
int lz_cmd_ps(int argc, char **argv);       /* lazaret ps */
int lz_cmd_stop(int argc, char **argv);     /* lazaret stop */
int lz_cmd_internal(int argc, char **argv); /* __coordinator / __supervisor */

/* The process's argv as main() received it. */
extern char **lz_cli_argv;

/* Replaces this process with lazaret-core (the full implementation, in
 * libexec) running the same command line. Returns only on failure. */
int lz_cli_exec_core(void);

/* Prints "lazaret: <msg>\n" to stderr. */
void lz_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
