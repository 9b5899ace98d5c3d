/* config_int.h — shared by config.c (loading, the schema),
 * config_check.c (messages, lexical checks, typed lookups) and
 * config_paths.c (host paths, expansion, volumes, the workspace and the
 * file's location). Not part of the library's interface: see config.h. */
#pragma once

#include "config.h"
#include "domain_id.h"
#include "toml.h"

/* Room for one value in a message (cfg_disp). */
#define DISP_MAX 256

struct loader {
    const char *file; /* name used in messages: canonical config path */
    struct lz_error *err;
    const char *home;                                      /* may be NULL: then "~" cannot be expanded */
    int data_root_line, socket_dir_line;                   /* 0 when not from the file */
    const char *(*lookup_env)(void *ud, const char *name); /* NULL: secure_getenv */
    void *lookup_env_ud;
    /* Every profile's volume host paths (expanded, selected or not) with
     * their keys: no auto_approve executable may lie beneath one. */
    char **vol_hosts, **vol_keys;
    size_t n_vol_hosts;
    bool builtin_profile; /* parsing a built-in agent profile: its env: references are optional */
    bool no_workspace;    /* lz_config_opts.no_workspace: the workspace's own checks are left out */
};

/* One prefix list with the line of every element, for conflict messages. */
struct prefix_list {
    char **v;
    int *lines;
    size_t n;
    const char *key; /* e.g. "network.default_deny" or "profiles.x.deny_egress" */
};

struct expand_ctx {
    const char *profile_name, *profile_dir, *domain_dir, *domain_hash, *workspace;
};

/* One profile table, structurally. Host paths are expanded and checked
 * lexically; the filesystem is not consulted here. */
struct profile_in {
    const char *name;
    const struct lz_toml_value *tbl;
    struct lz_profile p;
    struct prefix_list allow, deny;
    char *profile_dir, *domain_dir, domain_hash[LZ_DOMAIN_HASH_LEN + 1];
    uint8_t domain_id[32];
};

/* ---- messages (config_check.c) ---- */

/* Sets ld->err to "FILE:LINE: KEY: fmt..." (line 0 / key NULL: left out)
 * and returns -EINVAL. */
int cfg_err(struct loader *ld, int line, const char *key, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* A string for a message: quoted, control bytes escaped, cut at ~200 bytes. */
const char *cfg_disp(const char *s, char *buf, size_t size);
/* A key for a message: bare keys as they are, anything else quoted. */
const char *cfg_kdisp(const char *k, char *buf, size_t size);

/* ---- lexical predicates (config_check.c) ---- */

bool cfg_env_name_valid(const char *s);
bool cfg_has_ctrl(const char *s);
bool cfg_has_dotdot(const char *p);
/* NULL when p is an absolute, normalized path; otherwise why not. */
const char *cfg_path_problem(const char *p);
/* p equals anc or lies beneath it (both normalized absolute). */
bool cfg_path_within(const char *p, const char *anc);
bool cfg_path_strictly_within(const char *p, const char *anc);
bool cfg_paths_overlap(const char *a, const char *b);

/* ---- typed lookups (config_check.c) ---- */

/* Refuses keys of t that are not in allowed (NULL-terminated). */
int cfg_check_keys(struct loader *ld, const struct lz_toml_value *t, const char *prefix, const char *const *allowed);
int cfg_want_type(struct loader *ld, const struct lz_toml_value *v, enum lz_toml_type type, const char *key);
int cfg_check_string(struct loader *ld, const struct lz_toml_value *v, const char *key);
int cfg_check_array(struct loader *ld, const struct lz_toml_value *v, const char *key);
/* An integer in [0, max]; def when t has no such key. */
int cfg_get_count(struct loader *ld, const struct lz_toml_value *t, const char *name, const char *key, int64_t max,
                  int64_t def, int64_t *ret);
int cfg_get_bool(struct loader *ld, const struct lz_toml_value *t, const char *name, const char *key, bool def,
                 bool *ret);

/* ---- host paths (config_paths.c) ---- */

int cfg_host_setting(struct loader *ld, const struct lz_toml_value *v, const char *key, char **ret);
/* host_tool_paths_add / _remove (config_hosttools.c); the set in effect. */
int cfg_parse_host_tools(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *t);
void cfg_host_tools_default(struct lz_profile *p);
void cfg_host_tools_free(struct lz_profile *p);
/* Credentials (config_creds.c): structure; the gate and the host's
 * reach once the profile's egress is known; the selected profile's
 * from_env values. */
int cfg_parse_credentials(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *t);
int cfg_check_credentials(struct loader *ld, struct profile_in *pi);
int cfg_resolve_credentials(struct loader *ld, struct lz_config *c);
void cfg_credential_free(struct lz_credential *cr);
/* private_dirs (privdirs.h): after ignored_state and the host-tool set. */
int cfg_parse_private_dirs(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *arr);
int cfg_parse_persistent(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *arr);
int cfg_parse_volumes(struct loader *ld, struct profile_in *pi, const struct lz_toml_value *arr,
                      const struct expand_ctx *x);
/* The selected profile's paths against the filesystem (SR-2, SR-4). */
int cfg_resolve_paths(struct loader *ld, struct lz_config *c);
int cfg_default_data_root(struct loader *ld, char **ret);
/* [[escalation.auto_approve]]: argv[0] to a canonical executable outside
 * every sandbox-writable and control tree, classes (autoapprove.h). After
 * cfg_resolve_paths. */
int cfg_resolve_auto_approve(struct loader *ld, struct lz_config *c);
/* c->workspace and c->start_dir (lz_config_opts.workspace). */
int cfg_resolve_workspace(const struct lz_config_opts *opts, const char *home, struct lz_config *c,
                          struct lz_error *err);
/* Finds the configuration file. *ret_path NULL means "none: built-in". */
int cfg_locate_config(const struct lz_config_opts *opts, const char *home, char **ret_path, struct lz_error *err);
