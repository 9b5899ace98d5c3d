/* archive_dl.h — libarchive, loaded at its first use (dlopen).
 *
 * Only image preparation (prepare.c) reads archives. Linked normally,
 * libarchive and what it pulls in (libxml2, ICU, libstdc++, five
 * compression libraries) cost every start of lazaret-core 10-14 ms of CPU
 * in the dynamic loader, and three lazaret-core processes start on every
 * cold start of a Domain (the client's, the Host Coordinator, the Runtime
 * Supervisor) that never read an archive. So prepare.c calls libarchive
 * through these pointers, filled once by lz_archive_load from the soname
 * the headers were built for.
 *
 * Include after <archive.h> and <archive_entry.h>, in prepare.c only: the
 * macros at the end turn its archive_* calls into calls through the table.
 */
#pragma once

#include "util.h"

#include <archive.h>
#include <archive_entry.h>

#define LZ_ARCHIVE_SONAME "libarchive.so.13"

#define LZ_ARCHIVE_FUNCS(X)                                                                                            \
    X(archive_read_new)                                                                                                \
    X(archive_read_free)                                                                                               \
    X(archive_read_support_filter_gzip)                                                                                \
    X(archive_read_support_filter_zstd)                                                                                \
    X(archive_read_support_format_tar)                                                                                 \
    X(archive_read_support_format_empty)                                                                               \
    X(archive_read_open2)                                                                                              \
    X(archive_read_next_header)                                                                                        \
    X(archive_read_data_block)                                                                                         \
    X(archive_filter_bytes)                                                                                            \
    X(archive_error_string)                                                                                            \
    X(archive_set_error)                                                                                               \
    X(archive_entry_size)                                                                                              \
    X(archive_entry_size_is_set)                                                                                       \
    X(archive_entry_uid)                                                                                               \
    X(archive_entry_gid)                                                                                               \
    X(archive_entry_perm)                                                                                              \
    X(archive_entry_filetype)                                                                                          \
    X(archive_entry_mtime)                                                                                             \
    X(archive_entry_mtime_nsec)                                                                                        \
    X(archive_entry_mtime_is_set)                                                                                      \
    X(archive_entry_pathname)                                                                                          \
    X(archive_entry_pathname_utf8)                                                                                     \
    X(archive_entry_symlink)                                                                                           \
    X(archive_entry_symlink_utf8)                                                                                      \
    X(archive_entry_hardlink)                                                                                          \
    X(archive_entry_hardlink_utf8)

struct lz_archive_api {
#define LZ_ARCHIVE_PTR(f) __typeof__(f) *p_##f;
    LZ_ARCHIVE_FUNCS(LZ_ARCHIVE_PTR)
#undef LZ_ARCHIVE_PTR
};
extern struct lz_archive_api lz_archive_api;

/* Loads libarchive and every function above, once (thread-safe); 0, or
 * -ENOENT / -ENOSYS with err saying what is missing. */
int lz_archive_load(struct lz_error *err);

#ifndef LZ_ARCHIVE_DL_IMPL
#define archive_read_new (*lz_archive_api.p_archive_read_new)
#define archive_read_free (*lz_archive_api.p_archive_read_free)
#define archive_read_support_filter_gzip (*lz_archive_api.p_archive_read_support_filter_gzip)
#define archive_read_support_filter_zstd (*lz_archive_api.p_archive_read_support_filter_zstd)
#define archive_read_support_format_tar (*lz_archive_api.p_archive_read_support_format_tar)
#define archive_read_support_format_empty (*lz_archive_api.p_archive_read_support_format_empty)
#define archive_read_open2 (*lz_archive_api.p_archive_read_open2)
#define archive_read_next_header (*lz_archive_api.p_archive_read_next_header)
#define archive_read_data_block (*lz_archive_api.p_archive_read_data_block)
#define archive_filter_bytes (*lz_archive_api.p_archive_filter_bytes)
#define archive_error_string (*lz_archive_api.p_archive_error_string)
#define archive_set_error (*lz_archive_api.p_archive_set_error)
#define archive_entry_size (*lz_archive_api.p_archive_entry_size)
#define archive_entry_size_is_set (*lz_archive_api.p_archive_entry_size_is_set)
#define archive_entry_uid (*lz_archive_api.p_archive_entry_uid)
#define archive_entry_gid (*lz_archive_api.p_archive_entry_gid)
#define archive_entry_perm (*lz_archive_api.p_archive_entry_perm)
#define archive_entry_filetype (*lz_archive_api.p_archive_entry_filetype)
#define archive_entry_mtime (*lz_archive_api.p_archive_entry_mtime)
#define archive_entry_mtime_nsec (*lz_archive_api.p_archive_entry_mtime_nsec)
#define archive_entry_mtime_is_set (*lz_archive_api.p_archive_entry_mtime_is_set)
#define archive_entry_pathname (*lz_archive_api.p_archive_entry_pathname)
#define archive_entry_pathname_utf8 (*lz_archive_api.p_archive_entry_pathname_utf8)
#define archive_entry_symlink (*lz_archive_api.p_archive_entry_symlink)
#define archive_entry_symlink_utf8 (*lz_archive_api.p_archive_entry_symlink_utf8)
#define archive_entry_hardlink (*lz_archive_api.p_archive_entry_hardlink)
#define archive_entry_hardlink_utf8 (*lz_archive_api.p_archive_entry_hardlink_utf8)
#endif
