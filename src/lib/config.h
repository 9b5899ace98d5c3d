/* config.h — trusted host configuration: load, validate, resolve.
 *
 * Contract
 * --------
 * lz_config_load() picks the configuration file (opts->config_path, else
 * $XDG_CONFIG_HOME/lazaret/config.toml when XDG_CONFIG_HOME is set to an
 * absolute path, else $HOME/.config/lazaret/config.toml), parses it with the
 * strict TOML parser (toml.h), validates the closed v1 schema, resolves the
 * selected profile against the filesystem and the host environment, and
 * computes the Domain ID and the Configuration Fingerprint (domain_id.h).
 *
 *  - No file at the XDG location (and no --config): the built-in default
 *    applies (one profile "default", see docs/lazaret.toml.5) and
 *    builtin_default is set; printing the notice is the caller's job. A
 *    --config path that does not exist is an error.
 *  - A file that exists but does not define the selected profile is refused,
 *    naming the defined profiles; the fallbacks are the built-in profiles,
 *    "default" (the built-in image) and the agents (agents.h: claude,
 *    codex, opencode), used when the file does not define that name
 *    (profile.builtin set); the file's [storage], [network] and
 *    [escalation] still apply.
 *  - Every profile is structurally validated (types, names, tokens, '..'
 *    segments, container paths, prefixes, allow/deny conflicts); filesystem
 *    checks (canonical host paths, SR-2) and environment resolution apply to
 *    the selected profile only.
 *  - Every refusal is -EINVAL (or the errno of a failing system call) with a
 *    message "FILE:LINE: KEY: what was wrong", e.g.
 *    "/home/u/.config/lazaret/config.toml:12: profiles.claude.persistent_dirs[1]:
 *    \"/usr/../etc\" has a '..' segment". Messages never contain resolved
 *    environment values.
 *  - [[escalation.auto_approve]] rules: argv[0] is resolved once, here, to
 *    a canonical executable (an absolute path; "~/" expanded; a bare name
 *    through PATH: this process's own, or, with lookup_env, the "PATH" the
 *    client handed over) that is a regular executable file outside the
 *    workspace, every profile's volumes, the Storage Root, Lazaret's
 *    runtime directory, escalation.socket_dir and the configuration
 *    file's directory; no other argument may name a path in (or a
 *    directory holding) one of those trees, or have a ".." component
 *    (lz_autoapprove_arg_reaches); cwd = "workspace" needs
 *    runs_workspace_code = true in the same rule; rules that could run
 *    code the sandbox chooses are refused (autoapprove.h). Messages name
 *    the rule: "escalation.auto_approve[2].argv[0]: ...".
 *  - Egress by name (enum lz_egress below): every profile's egress,
 *    allow_hosts (lz_hostrule_parse, flags 0) and deny_hosts
 *    (LZ_HOSTRULE_NO_PORTS) are checked: at most LZ_CONFIG_MAX_HOSTRULES
 *    rules a list, no host both allowed and denied by the same profile,
 *    the effective allow set within lz_hostrule_check. [network] egress
 *    and resolver likewise. The selected profile's egress is resolved
 *    (never 0) and its allow_hosts is the effective set.
 *  - The result is one owned value (free with lz_config_free); resolved env
 *    values live only in profile.env[i].value, are never printed and never
 *    enter the fingerprint. lz_config_free wipes them.
 *
 * All strings are NUL-terminated UTF-8 without interior NUL. Host paths in
 * the result are canonical and absolute. IPv4 prefixes are canonical
 * "a.b.c.d/len" (no host bits), deduplicated, in file order.
 */
#pragma once

#include <netinet/in.h>

#include "hostrule.h"
#include "publish.h"
#include "util.h"

#define LZ_CONFIG_MAX_FILE (1024 * 1024)
#define LZ_CONFIG_MAX_LIST 256               /* elements of any array, entries of env */
#define LZ_CONFIG_MAX_STRING 4096            /* bytes of any configured string */
#define LZ_CONFIG_MAX_ENV_VALUE (128 * 1024) /* bytes of a resolved env: value */
#define LZ_PROFILE_NAME_MAX 32
#define LZ_CONFIG_MAX_HOSTRULES 256 /* rules of one allow_hosts or deny_hosts list */

/* Image of the built-in default profile: a locally bootstrapped Debian. */
#define LZ_BUILTIN_IMAGE "builtin:debian-bookworm"
#define LZ_DEFAULT_PROFILE "default"

/* [storage] product GC policy of prepared lowers (see catalog.h). */
#define LZ_PREPARED_KEEP_DAYS_DEFAULT 14
#define LZ_PREPARED_KEEP_DAYS_MAX 1000000
/* [storage] linger_seconds: a Domain keeps running this long after its
 * last session left, so the next command joins it warm (0: stop at once). */
#define LZ_LINGER_SECONDS_DEFAULT 5
#define LZ_LINGER_SECONDS_MAX 86400
#define LZ_PREPARED_MAX_BYTES_DEFAULT 0 /* no budget */

/* Protected sandbox destinations (the closed layout): no persistent dir or
 * volume destination may equal, contain or lie beneath one of these. */
/* [escalation] prompt_timeout_seconds: an unanswered prompt is a denial. */
#define LZ_ESC_PROMPT_TIMEOUT_DEFAULT 300
#define LZ_ESC_PROMPT_TIMEOUT_MIN 5
#define LZ_ESC_PROMPT_TIMEOUT_MAX 86400

#define LZ_SANDBOX_WORKSPACE "/workspace"
#define LZ_SANDBOX_CONTROL "/run/lazaret"

struct lz_volume {
    char *host;      /* canonical absolute host path (may not exist yet if under profile_dir) */
    char *container; /* absolute normalized destination */
    bool read_only;  /* mode "ro" */
    char *mode;      /* as written: "rw", "ro" or "z" ("z" means rw) */
    bool create;     /* host does not exist and lies strictly beneath profile_dir */
    int line;        /* line of the volume in the file (0 for built-in) */
};

struct lz_env_entry {
    char *name;
    char *reference; /* "env:VAR" or NULL for a literal */
    char *value;     /* resolved (literal or host value); never printed; NULL when optional and unset */
    bool optional;   /* a built-in profile's reference (agents.h): unset on the host means not passed */
};

/* One [[escalation.auto_approve]] rule, resolved (see autoapprove.h; the
 * Host Coordinator matches through lz_autoapprove_rules/_match). The first
 * three members have the layout of struct lz_esc_rule. */
struct lz_auto_approve {
    char **argv; /* argv[0]: the canonical executable; the rest as written; NULL-terminated */
    size_t argc;
    bool allow_extra_args;
    char *written;      /* argv[0] as written in the file */
    bool found_in_path; /* written was a bare name, found through PATH at load */
    char *warning;      /* NULL, or why this permitted rule is risky (config check shows it) */
    int line;           /* line of argv[0] in the file */
    /* cwd = "workspace": it runs in the request's directory of the
     * workspace, which the config accepts only with runs_workspace_code =
     * true in the same rule; otherwise (cwd = "empty", the default) in a
     * fresh empty host directory per run (docs/escalation.md). */
    bool cwd_workspace;
};

/* Egress by name (docs/network.md "Names"): the preset a profile's
 * `egress` names, or [network] egress for a profile without one.
 *  - OPEN: [network] default_allow applies (0.0.0.0/0 built in) and every
 *    name that deny_hosts does not deny resolves: the prefix policy alone.
 *  - BALANCED (the built-in default): default_allow does not apply, only
 *    the profile's allow_egress; the names are a built-in list (agents.h,
 *    lz_egress_preset) and the profile's allow_hosts.
 *  - LOCKED: no default_allow, no built-in names: only the profile's own
 *    allow_egress and allow_hosts.
 * deny_hosts and every deny prefix win over any allow, in every preset. */
enum lz_egress {
    LZ_EGRESS_OPEN = 1,
    LZ_EGRESS_BALANCED,
    LZ_EGRESS_LOCKED,
};

/* "open", "balanced", "locked"; "?" for anything else. */
const char *lz_egress_name(enum lz_egress e);

/* A profile's `tls_gate` (issue 24 §1, docs/network.md "The TLS gate"):
 * under "balanced" and "locked", TCP/443 to a learned address goes through
 * the gate, which reads the ClientHello and lets the connection through
 * only if its server name (SNI) is allowed and the address was learned
 * for that name.
 *  - STRICT (the default): a hello without a server name, or with an
 *    encrypted one (ECH), is refused;
 *  - LENIENT: such a hello passes to any learned address (a named one is
 *    still checked);
 *  - OFF: no gate; TCP/443 is routed like any other allowed port.
 * Under "open" there is no gate (no learned addresses). */
enum lz_tls_gate {
    LZ_TLS_GATE_STRICT = 0,
    LZ_TLS_GATE_LENIENT,
    LZ_TLS_GATE_OFF,
};
const char *lz_tls_gate_name(enum lz_tls_gate g);

/* Credentials bound to endpoints (issue 24 §2; docs/credentials.md): a
 * profile's [profiles.NAME.credentials.VAR]. Inside the sandbox VAR holds
 * a placeholder (credential.h); the Domain's TLS gate ends the sandbox's
 * TLS for host only and puts the real value in place of the placeholder
 * in the one declared header. */
enum lz_cred_source {
    LZ_CRED_FROM_ENV = 1, /* a host environment variable, resolved with the env: references */
    LZ_CRED_FROM_FILE,    /* the first line of a file only the developer can read */
    LZ_CRED_FROM_COMMAND, /* the first line a host command prints, run when the Domain starts */
};
#define LZ_CONFIG_MAX_CREDENTIALS 16
/* As credstream.h has them (the same definitions). */
#define LZ_CRED_VALUE_MIN 8 /* bytes of a credential's value */
#define LZ_CRED_VALUE_MAX 4096
#define LZ_CRED_PUSH_REFS_MAX 64

struct lz_credential {
    char *var;                      /* the sandbox's variable, holding the placeholder */
    char host[LZ_HOSTNAME_MAX + 1]; /* canonical; TCP port 443 */
    char *header;                   /* the request header, lower case */
    bool basic;                     /* format = "basic": HTTP Basic with username */
    char *prefix, *suffix;          /* otherwise: the format's text around {} */
    char *username;                 /* basic only */
    enum lz_cred_source from;
    char *from_env;      /* LZ_CRED_FROM_ENV: the host variable */
    char *from_file;     /* LZ_CRED_FROM_FILE: absolute, ~ expanded */
    char **from_command; /* LZ_CRED_FROM_COMMAND: NULL-terminated, argv[0] as written */
    size_t n_from_command;
    char **push_refs; /* Git pushes may update these refs only (globs); none: pushes not inspected */
    size_t n_push_refs;
    bool push_delete;
    /* A built-in agent profile's: an unset host variable means the
     * credential is not used (nothing is set inside). */
    bool optional;
    /* Where the gate cannot work (egress = "open", tls_gate = "off"), a
     * built-in agent profile's credential is passed into the sandbox as
     * its plain value, as an env: reference would be. */
    bool passed_plain;
    /* A built-in agent profile's credential for a host the profile does
     * not allow on 443 (egress = "locked" without it): not used. */
    bool unreachable;
    char *value; /* the real value, never printed: LZ_CRED_FROM_ENV at load,
                  * the others when the Domain starts (lz_credential_fetch);
                  * NULL when optional and unset */
    int line;
};

struct lz_profile {
    char *name;
    char *image;
    char **persistent_dirs; /* container paths */
    size_t n_persistent_dirs;
    char **allow_egress; /* canonical "a.b.c.d/len" */
    size_t n_allow_egress;
    char **deny_egress;
    size_t n_deny_egress;
    struct lz_env_entry *env; /* sorted by name */
    size_t n_env;
    struct lz_volume *volumes; /* file order */
    size_t n_volumes;
    bool ignored_state;
    /* Host-tool configuration paths (hosttools.h, docs/host-tools.md):
     * the set in effect, and the names the profile added to and removed
     * from the default set (host_tool_paths_add / _remove). */
    char **host_tools;
    size_t n_host_tools;
    char **host_tools_added;
    size_t n_host_tools_added;
    char **host_tools_removed;
    size_t n_host_tools_removed;
    /* private_dirs (privdirs.h, docs/ignored-state.md): workspace-relative
     * git-ignored directories bound from the Domain's store straight
     * into the sandbox, without the router. Profile order. */
    char **private_dirs;
    size_t n_private_dirs;
    bool host_ca_certificates; /* the host's /usr/local/share/ca-certificates trusted inside (hostca.h) */
    /* `command`: the session's argv when `lazaret run` has none (NULL:
     * a login shell). A session default, not a Domain property: it
     * enters neither the Domain ID nor the fingerprint. NULL-terminated. */
    char **command;
    size_t n_command;
    bool builtin; /* a built-in agent profile (agents.h), not the file's */
    /* Egress by name. egress is resolved (the profile's `egress`, else
     * [network] egress, else LZ_EGRESS_BALANCED): never 0 after load;
     * egress_inherited says it came from [network] or the built-in default.
     * allow_hosts is the EFFECTIVE allow set: under BALANCED the preset's
     * rules first (the first n_allow_hosts_preset, lz_egress_preset), then
     * the profile's own allow_hosts that are not already there; under OPEN
     * and LOCKED the profile's own only (under OPEN they narrow nothing: every
     * name not denied resolves; they are kept for `config check` and the
     * fingerprint). deny_hosts: the profile's own, no ports. */
    enum lz_egress egress;
    bool egress_inherited;
    enum lz_tls_gate tls_gate;
    /* Published ports (publish.h): the profile's `publish`, then those of
     * `lazaret run --publish` (lz_config_opts.publish); checked as a set. */
    struct lz_publish *publish;
    size_t n_publish;
    struct lz_hostrule *allow_hosts;
    size_t n_allow_hosts;
    size_t n_allow_hosts_preset;
    struct lz_hostrule *deny_hosts;
    size_t n_deny_hosts;
    struct lz_credential *credentials; /* sorted by var */
    size_t n_credentials;
};

struct lz_config {
    char *source_path;    /* canonical config file path, NULL for the built-in default */
    bool builtin_default; /* no config file existed */
    char *data_root;      /* canonical absolute Storage Root */
    /* gc policy: neither enters the Domain ID nor the fingerprint */
    int64_t prepared_keep_days;  /* unleased and unused for more than N days is reclaimed; 0 = any unleased */
    uint64_t prepared_max_bytes; /* 0 = no budget */
    int64_t linger_seconds;      /* not in the fingerprint: the coordinator's own timer */
    char **default_allow;
    size_t n_default_allow;
    char **default_deny;
    size_t n_default_deny;
    /* [network] egress: the preset of every profile without its own
     * (built-in: LZ_EGRESS_BALANCED). */
    enum lz_egress default_egress;
    /* [network] resolver = "A.B.C.D[:PORT]" (port 53 by default): the
     * upstream resolver of the Domain's DNS resolver. Unset: the first IPv4
     * nameserver of the host's /etc/resolv.conf, read when the Domain
     * starts (not configuration: it does not enter the fingerprint). */
    bool resolver_set;
    struct sockaddr_in resolver;
    bool escalation_enabled;
    char *escalation_socket_dir;         /* canonical absolute, or NULL (runtime default) */
    int64_t escalation_prompt_timeout_s; /* seconds; host policy, not in the fingerprint */
    struct lz_auto_approve *auto_approve;
    size_t n_auto_approve;
    /* The PATH that resolved bare auto_approve names (NULL when no rule
     * had one): the client hands it to the coordinator with the env:
     * values (procenv.h) so that both resolve the same executable. */
    char *auto_approve_path;
    struct lz_profile profile; /* the selected profile, resolved */
    char *workspace;           /* canonical workspace */
    /* Where sessions start, relative to the workspace: "" for its top, or
     * the current directory's path below it when the workspace is the
     * top level of the Git repository holding that directory
     * (lz_config_opts.workspace). Not part of the Domain ID or the
     * Configuration Fingerprint: every directory of a repository is one
     * Domain. */
    char *start_dir;
    char *profile_dir; /* {data_root}/{profile} */
    char *domain_dir;  /* {data_root}/domains/{domain_id_hex} */
    uint8_t domain_id[32];
    char domain_id_hex[65];
    uint8_t fingerprint[32];
    char fingerprint_hex[65];
    char **profile_names; /* every profile defined in the file, file order */
    size_t n_profile_names;
};

struct lz_config_opts {
    const char *config_path; /* --config, or NULL for XDG lookup */
    const char *profile;     /* -p, or NULL meaning "default" */
    /* The directory the user works in, need not be canonical yet; NULL =
     * the current directory. Inside a Git repository the workspace is the
     * repository's top level (the nearest directory at or above it holding
     * a `.git` entry, on its filesystem, never $HOME or above it), and the
     * directory is where sessions start (start_dir); outside any, the
     * directory itself. The host's view decides: the sandbox can neither
     * create nor remove a `.git` entry (docs/security-git.md, GITNAME),
     * and nothing above its workspace is within its reach. */
    const char *workspace;
    /* workspace names the workspace itself (the Host Coordinator's own
     * load, a stored Domain's): no repository lookup. */
    bool workspace_exact;
    /* For commands that start no sandbox (image, doctor): the checks of
     * the workspace against the Storage Root, the configuration file and
     * volumes are left out, so that they work in any directory, $HOME
     * included. The Domain ID and directories are still computed (of the
     * current directory) but mean nothing. */
    bool no_workspace;
    /* Where env:VAR references are resolved; NULL: this process's own
     * environment (secure_getenv). The coordinator, which runs with a
     * minimal environment, resolves from the values its client handed over
     * (procenv.h). */
    const char *(*lookup_env)(void *ud, const char *name);
    void *lookup_env_ud;
    /* `lazaret run --publish` texts (publish.h), added to the profile's. */
    const char *const *publish;
    size_t n_publish;
};

int lz_config_load(const struct lz_config_opts *opts, struct lz_config **ret, struct lz_error *err);
void lz_config_free(struct lz_config *c);
static inline void lz_config_freep(struct lz_config **c) { lz_config_free(*c); }
#define _cleanup_config_ _cleanup_(lz_config_freep)

/* Prints the resolved configuration for `lazaret config check` with env
 * values redacted ("<redacted>"), plus Domain ID and fingerprint. */
void lz_config_print(FILE *out, const struct lz_config *c);
/* One line naming the host-tool configuration paths in effect, and one for
 * each change the profile made to the default set (never silently). */
void lz_config_host_tools_note(FILE *out, const struct lz_profile *p);

/* Helpers shared with other modules and tests. */

/* ^[a-z0-9_-]{2,32}$ */
bool lz_profile_name_valid(const char *name);
/* Parses an IPv4 prefix "a.b.c.d/len" strictly (decimal octets without
 * leading zeros, len 0..32, no host bits). On success writes the canonical
 * text to ret (at least 19 bytes). On failure returns -EINVAL and a short
 * reason in *ret_why (a static string; mentions IPv6 for IPv6 input). */
int lz_ipv4_prefix_parse(const char *s, char ret[static 19], uint32_t *ret_addr, unsigned *ret_len,
                         const char **ret_why);
