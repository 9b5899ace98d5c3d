/* domains_int.h — shared by domains.c (directories, listing,
 * inspection), domains_verify.c and domains_reset.c. Not part of the
 * library's interface: see domains.h. */
#pragma once

#include "config.h"
#include "domains.h"

#ifndef _cleanup_store_ /* until store.h has its own */
static inline void dom_store_closep(struct lz_store **st) { lz_store_close(*st); }
#define _cleanup_store_ _cleanup_(dom_store_closep)
#endif

/* "anchor-<N>" with N a positive decimal without leading zeros: 1 and N,
 * else 0. */
int dom_anchor_name_gen(const char *name, int64_t *ret);

/* <data_root>/domains as a directory fd (never a symlink); -ENOENT when it
 * or the Storage Root does not exist. */
int dom_open_domains(const char *data_root, struct lz_error *err);
/* The Domain Root of a validated ID, as a directory fd (never a symlink). */
int dom_open_root(int domfd, const char *data_root, const char *id, struct lz_error *err);
/* The Domain Root of a validated 64-hex ID under <data_root>/domains. */
int dom_open_by_id(const char *data_root, const char *id, struct lz_error *err);
/* The path lz_store_open() needs, checked to still name the directory we
 * hold (a swap for a symlink between the two is refused). */
int dom_root_path(const char *data_root, const char *id, int rootfd, char **ret, struct lz_error *err);
/* Takes the Domain flock without waiting: 1 held by us (*ret_fd), 0 held
 * by someone else (the Domain is running), -errno. */
int dom_lock(int rootfd, int *ret_fd, struct lz_error *err);
/* The same, waiting at most seconds for the holder to let go (0, as
 * dom_lock, when it still holds it then). */
int dom_lock_wait(int rootfd, int seconds, int *ret_fd, struct lz_error *err);

/* From the coordinator's "coordinator for Domain <id> (profile P, workspace
 * W)" line, accepted only when (P, W) derives this very ID. */
void dom_identity_from_log(int rootfd, const char *id, char **ret_profile, char **ret_workspace);
/* Names under domains/ that are Domain Roots (valid ID, a real directory),
 * sorted; the others go to strays when ret_strays is non-NULL. */
int dom_scan(int domfd, const char *data_root, char ***ret_ids, size_t *ret_n, char ***ret_strays, size_t *ret_ns,
             struct lz_error *err);
/* 1 alive (exactly that process), 0 gone, -errno when it cannot be told. */
int dom_proc_alive(const struct lz_procid *id);
/* Loads the Domain's profile for its workspace; NULL when that is not
 * possible (profile gone, workspace gone, configuration changed). */
struct lz_config *dom_config(const char *config_path, const char *id, const char *profile, const char *workspace);
