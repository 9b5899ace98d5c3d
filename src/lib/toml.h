/* toml.h — a strict TOML parser for Lazaret's closed configuration schema.
 *
 * Contract
 * --------
 * lz_toml_parse() turns at most LZ_TOML_MAX_INPUT bytes into a tree of
 * struct lz_toml_value rooted at a table. It is a strict subset-of-TOML-1.0
 * parser written for trusted host configuration, and it treats its input as
 * untrusted bytes anyway (it is fuzzed):
 *
 *   accepted  comments; bare and quoted ("..." and '...') keys; dotted keys in
 *             key/value pairs and in [table] / [[array.of.tables]] headers;
 *             basic strings with the escapes \b \t \n \f \r \" \\ \uXXXX
 *             \UXXXXXXXX; literal strings; multi-line basic and literal
 *             strings; decimal integers (sign, '_' between digits);
 *             booleans; arrays (multi-line, trailing comma, comments
 *             inside; mixed element types are allowed as in TOML 1.0 — the
 *             schema layer checks types); inline tables (one line).
 *   refused   floats, inf/nan, date-times, hex/octal/binary integers (with a
 *             message saying so); leading zeros; integer overflow; any other
 *             escape; control characters in strings and comments (tab
 *             excepted); \u0000; duplicate keys; a table defined twice; a
 *             header that extends an inline table, a static array or a value;
 *             dotted keys that reopen a table defined by a header; invalid
 *             UTF-8 (overlong, surrogates, > U+10FFFF); NUL bytes; a bare CR;
 *             input larger than LZ_TOML_MAX_INPUT; nesting deeper than
 *             LZ_TOML_MAX_DEPTH (key segments from the root plus array and
 *             inline-table levels); more than LZ_TOML_MAX_ITEMS entries in one
 *             table or elements in one array.
 *
 * Every node records the 1-based line where it starts (for a table: its
 * header, or the key that created it). Every string and key is NUL-terminated
 * valid UTF-8 without interior NUL. Table entries keep file order.
 *
 * Errors: returns -EINVAL (-EFBIG for oversized input) and fills err with
 * "FILE:LINE: what was wrong", FILE being the `filename` argument (the input
 * is never opened here). *ret_root is untouched on failure.
 */
#pragma once

#include "util.h"

#define LZ_TOML_MAX_INPUT (1024 * 1024)
#define LZ_TOML_MAX_DEPTH 32
#define LZ_TOML_MAX_ITEMS 4096

enum lz_toml_type {
    LZ_TOML_TABLE,
    LZ_TOML_ARRAY,
    LZ_TOML_STRING,
    LZ_TOML_INTEGER,
    LZ_TOML_BOOL,
};

/* Bookkeeping flags (lz_toml_value.flags). Readers may test LZ_TOML_F_AOT
 * ("this array was built from [[header]]s") and LZ_TOML_F_INLINE. */
#define LZ_TOML_F_IMPLICIT 0x1u /* table created as an intermediate of a header */
#define LZ_TOML_F_DEFINED 0x2u  /* table defined by its own [header] */
#define LZ_TOML_F_DOTTED 0x4u   /* table created by a dotted key */
#define LZ_TOML_F_INLINE 0x8u   /* inline table (or inside one): closed */
#define LZ_TOML_F_AOT 0x10u     /* array of tables from [[header]] */

struct lz_toml_value;

struct lz_toml_entry {
    char *key;
    int line; /* line of the key */
    struct lz_toml_value *value;
};

struct lz_toml_value {
    enum lz_toml_type type;
    int line;
    unsigned flags;
    union {
        struct {
            struct lz_toml_entry *entries;
            size_t n, cap;
        } table;
        struct {
            struct lz_toml_value **items;
            size_t n, cap;
        } array;
        struct {
            char *s; /* NUL-terminated, no interior NUL */
            size_t len;
        } string;
        int64_t integer;
        bool boolean;
    } u;
};

/* Parses buf[0..len). buf need not be NUL-terminated. On success *ret_root
 * is a LZ_TOML_TABLE owned by the caller (free with lz_toml_free). */
int lz_toml_parse(const char *buf, size_t len, const char *filename, struct lz_toml_value **ret_root,
                  struct lz_error *err);

/* Frees a whole tree; NULL is fine. */
void lz_toml_free(struct lz_toml_value *v);
static inline void lz_toml_freep(struct lz_toml_value **v) { lz_toml_free(*v); }
#define _cleanup_toml_ _cleanup_(lz_toml_freep)

/* The entry for key in table, or NULL (also when t is NULL or not a table). */
const struct lz_toml_entry *lz_toml_table_entry(const struct lz_toml_value *t, const char *key);
/* The value for key in table, or NULL. */
const struct lz_toml_value *lz_toml_table_get(const struct lz_toml_value *t, const char *key);
/* Element i of an array, or NULL when out of range or a is not an array. */
const struct lz_toml_value *lz_toml_array_at(const struct lz_toml_value *a, size_t i);
/* Number of entries of a table or elements of an array; 0 otherwise. */
size_t lz_toml_len(const struct lz_toml_value *v);
/* "table", "array", "string", "integer", "boolean". */
const char *lz_toml_type_name(enum lz_toml_type t);

/* True when s[0..len) is well-formed UTF-8 (no overlongs, no surrogates,
 * nothing above U+10FFFF). NUL bytes count as valid here. */
bool lz_utf8_valid(const char *s, size_t len);
