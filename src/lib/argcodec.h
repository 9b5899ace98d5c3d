/* argcodec.h — the argument vector of a process Lazaret starts itself.
 *
 * A parent (the client, the coordinator) starts one of Lazaret's own
 * processes (`__coordinator`, `__supervisor`) with a struct's fields as
 * "--name value" arguments; the child turns them back into that struct.
 * Each such boundary describes its struct once, as a table of
 * `struct lz_arg_spec` beside the struct (coordargs.h, supargs.h), and
 * both sides go through the two functions here, so the encoder and the
 * decoder cannot drift apart.
 *
 * Encoding: the fields in table order; a list's values one "--name value"
 * each, in order; a flag "--name" when true; an absent field (a NULL
 * string, a descriptor or enum < 0, a false flag, an empty list) is left
 * out. Values are copied: the argv is the caller's to free
 * (lz_argv_free).
 *
 * Decoding is strict: only "--name" tokens of the table, each followed
 * by its value (the next element, whatever it holds); a non-list option
 * twice, an unknown option, a positional argument, a missing value, a
 * descriptor that is not a decimal 0..65535, an enum value not in its
 * names, more list values than the table's bound, or a required field
 * missing is refused with a message naming the argument. Strings point
 * into argv (not copied); lists are allocated (lz_arg_clear frees them).
 */
#pragma once

#include "util.h"

enum lz_arg_kind {
    LZ_ARG_STR,  /* const char *; NULL when absent */
    LZ_ARG_FD,   /* int; -1 when absent */
    LZ_ARG_FLAG, /* bool, no value */
    LZ_ARG_LIST, /* char ** with a size_t count at n_off, at most max */
    LZ_ARG_ENUM, /* int: names[value]; -1 when absent */
};

struct lz_arg_spec {
    const char *name; /* without the leading "--" */
    enum lz_arg_kind kind;
    size_t off;   /* of the field in the struct */
    size_t n_off; /* LZ_ARG_LIST: of its count */
    size_t max;   /* LZ_ARG_LIST: most values */
    bool required;
    const char *const *names; /* LZ_ARG_ENUM */
    size_t n_names;
};

/* "--name value ..." of s, after the n_head leading elements of head (the
 * program and the role), NULL-terminated, in *ret_argv (free with
 * lz_argv_free). -EINVAL (what the decoder would refuse: a required
 * string or descriptor absent, a descriptor above 65535, an enum value
 * out of its names), -E2BIG (a list over its
 * bound), with err set. */
int lz_argv_encode(const struct lz_arg_spec *spec, size_t n_spec, const void *s, const char *const *head, size_t n_head,
                   char ***ret_argv, struct lz_error *err);
void lz_argv_free(char **argv);

/* Fills s (zeroed first: absent descriptors and enums -1) from argv[0..
 * argc-1] (no program or role element). 0, or -EINVAL with err set; on
 * failure the lists of s are freed and s is zeroed. */
int lz_argv_decode(const struct lz_arg_spec *spec, size_t n_spec, int argc, char *const *argv, void *s,
                   struct lz_error *err);
/* Frees the lists of a decoded s and zeroes their counts. */
void lz_arg_clear(const struct lz_arg_spec *spec, size_t n_spec, void *s);
