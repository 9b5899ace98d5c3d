/* Host-tool configuration paths in the router (src/lib/hosttools.h,
 * docs/host-tools.md): copy-on-first-sight into the Domain's store.
 *
 * An entry named in the set (at any depth) is served from the store, like
 * a git-ignored path, so that no write of the sandbox reaches the host's
 * file. So that the sandbox still reads the host's file, the router copies
 * the host's entry into the store the first time it routes it in a run
 * ("seeding"; a directory with what is below it, bounded):
 *  - a store file is replaced by the host's only while it is "pristine":
 *    its content is still what the last seeding wrote (`user.lazaret.seed`
 *    holds that content's SHA-256). Once the sandbox changed it, the
 *    Domain's copy is kept, whatever the host does, until the developer
 *    applies or resets it;
 *  - what the sandbox made that the host does not have stays;
 *  - a name only the store has is never looked for on the host.
 * Decisions hold for the run: a host change during the run is seen at the
 * next start. The roots seeded or made are listed in `<state>/hosttools`
 * (one hex-encoded workspace-relative path a line) for `lazaret state
 * diff`. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#define RT_HT_SEED_XATTR "user.lazaret.seed"

struct rt_ht;

/* names: the set (copied); state_fd: the Ignored Workspace State
 * directory (the list of roots is kept there; borrowed). */
struct rt_ht *rt_ht_new(char *const *names, size_t n, int state_fd);
void rt_ht_free(struct rt_ht *h);

/* The length of rel's prefix that ends with a host-tool name, 0 if none. */
size_t rt_ht_match(const struct rt_ht *h, const char *rel);

/* Seeds entry `name` of host directory hfd (workspace-relative directory
 * drel, entry rel) into the store (store_fd: the store's root), once per
 * run. Errors are logged, never returned: the sandbox then sees what the
 * store has, never the host's file through a write path. */
void rt_ht_seed(struct rt_ht *h, int hfd, int store_fd, const char *drel, const char *name, const char *rel);

/* The SHA-256 (hex) of the content of regular file fd from offset 0, or
 * -errno. */
int rt_ht_hash_fd(int fd, char out[65]);
