/* doctor.h — host prerequisite checks for `lazaret doctor`.
 * Each check fills a result with a status, what was seen, and what to do.
 * What a check reads of the host's /proc it reads under a root directory
 * ("/" on the host; a fake tree in the unit tests), so that its judgement
 * is tested without the host it is about. */
#pragma once

#include "util.h"

enum lz_check_status { LZ_CHECK_OK, LZ_CHECK_WARN, LZ_CHECK_FAIL };

struct lz_check {
    const char *name;
    enum lz_check_status status;
    char detail[512]; /* what was observed */
    char fix[512];    /* what to do, when not OK */
};

/* Runs every check; *ret is an array of *ret_n results (free()). data_root
 * may be NULL (free-space check then uses $HOME). */
int lz_doctor_run(const char *data_root, struct lz_check **ret, size_t *ret_n);

/* `runsc --version` output names a release of 2024 or later
 * ("version 0.0~20240729.0", "version release-20250101.0"). */
bool lz_doctor_runsc_recent(const char *out);

/* What the sysctls under root say stops unprivileged user namespaces, the
 * first found in this order. */
enum lz_userns_block {
    LZ_USERNS_NO_BLOCK,
    LZ_USERNS_CLONE_OFF, /* kernel.unprivileged_userns_clone = 0 (Debian's switch) */
    LZ_USERNS_MAX_ZERO,  /* user.max_user_namespaces = 0 */
    LZ_USERNS_APPARMOR,  /* kernel.apparmor_restrict_unprivileged_userns = 1 (Ubuntu 23.10+) */
};
enum lz_userns_block lz_doctor_userns_block(const char *root);

/* Fills c, the FUSE-over-io_uring check, from root's
 * sys/module/fuse/parameters/enable_uring and proc/sys/kernel/io_uring_*:
 * "enabled", "available but off" (with, in fix, the root commands to switch
 * it on and keep it on), "not in this kernel" or "io_uring disabled"; all
 * OK: informative, the routers use /dev/fuse, which always works, and
 * io_uring is an opt-in. */
void lz_doctor_judge_fuse_uring(struct lz_check *c, const char *root);

/* Fills c, the user-namespace check, from whether the probe created the
 * namespaces and what root's /proc says: which switch to turn when it
 * did not and, under AppArmor's restriction, whether Lazaret's profile
 * (packaging/apparmor/lazaret) confines this process, as runsc needs it
 * to be loaded too. */
void lz_doctor_judge_userns(struct lz_check *c, bool created, const char *root);
