/* doctor.h — host prerequisite checks for `lazaret doctor`.
 * Each check fills a result with a status, what was seen, and what to do. */
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
