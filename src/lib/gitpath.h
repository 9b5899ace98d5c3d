/* gitpath.h — Git's path rules for index entries (gitpath.c), shared by
 * the index check (gitindex.c). The public check is lz_git_path_check()
 * in gitindex.h. */
#pragma once

#include "util.h"

/* NULL if Git's verify_path() rules (strictest platform variants) accept
 * name (len bytes) as an index entry of this mode, else why not (a static
 * string for the error message). */
const char *lz_git_path_problem(const uint8_t *name, size_t len, unsigned mode);
