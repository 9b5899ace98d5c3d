/* git_dl.h — libgit2, loaded when the router first reads a repository
 * (dlopen).
 *
 * Only the Ignored Workspace State (ignore.c) uses libgit2. Linked
 * normally, libgit2 and what it pulls in (krb5, mbedtls, libssh2,
 * libcrypto, pcre2, http-parser) cost every start of lazaret-router about
 * 12 ms of CPU in the dynamic loader before it can mount and report
 * readiness, on the critical path of every Domain start, and volume
 * routers (--plain) never use it. Loaded here, it is loaded on the thread
 * that reads the repository while the mount is made (setup.c,
 * ignored_open_main).
 *
 * Include after <git2.h>, in ignore.c only: the macros at the end turn its
 * git_* calls into calls through the table.
 */
#pragma once

#include "util.h"

#include <git2.h>

/* The soname of the libgit2 whose headers it is built against: 1.5 on
 * Debian 12, 1.9 on Debian 13 (Debian's package is libgit2-<that>). */
#define LZ_GIT2_SONAME "libgit2.so." LIBGIT2_SOVERSION

#define LZ_GIT2_FUNCS(X)                                                                                               \
    X(git_libgit2_init)                                                                                                \
    X(git_libgit2_shutdown)                                                                                            \
    X(git_libgit2_opts)                                                                                                \
    X(git_error_last)                                                                                                  \
    X(git_ignore_path_is_ignored)                                                                                      \
    X(git_index_entrycount)                                                                                            \
    X(git_index_free)                                                                                                  \
    X(git_index_get_byindex)                                                                                           \
    X(git_index_get_bypath)                                                                                            \
    X(git_odb_hash)                                                                                                    \
    X(git_oid_equal)                                                                                                   \
    X(git_repository_free)                                                                                             \
    X(git_repository_index)                                                                                            \
    X(git_repository_open_ext)                                                                                         \
    X(git_repository_set_workdir)                                                                                      \
    X(git_repository_workdir)

struct lz_git2_api {
#define LZ_GIT2_PTR(f) __typeof__(f) *p_##f;
    LZ_GIT2_FUNCS(LZ_GIT2_PTR)
#undef LZ_GIT2_PTR
};
extern struct lz_git2_api lz_git2_api;

/* Loads libgit2 and every function above, once (thread-safe); 0, or
 * -ENOENT / -ENOSYS with err saying what is missing. */
int lz_git2_load(struct lz_error *err);

#ifndef LZ_GIT2_DL_IMPL
#define git_libgit2_init (*lz_git2_api.p_git_libgit2_init)
#define git_libgit2_shutdown (*lz_git2_api.p_git_libgit2_shutdown)
#define git_libgit2_opts (*lz_git2_api.p_git_libgit2_opts)
#define git_error_last (*lz_git2_api.p_git_error_last)
#define git_ignore_path_is_ignored (*lz_git2_api.p_git_ignore_path_is_ignored)
#define git_index_entrycount (*lz_git2_api.p_git_index_entrycount)
#define git_index_free (*lz_git2_api.p_git_index_free)
#define git_index_get_byindex (*lz_git2_api.p_git_index_get_byindex)
#define git_index_get_bypath (*lz_git2_api.p_git_index_get_bypath)
#define git_odb_hash (*lz_git2_api.p_git_odb_hash)
#define git_oid_equal (*lz_git2_api.p_git_oid_equal)
#define git_repository_free (*lz_git2_api.p_git_repository_free)
#define git_repository_index (*lz_git2_api.p_git_repository_index)
#define git_repository_open_ext (*lz_git2_api.p_git_repository_open_ext)
#define git_repository_set_workdir (*lz_git2_api.p_git_repository_set_workdir)
#define git_repository_workdir (*lz_git2_api.p_git_repository_workdir)
#endif
