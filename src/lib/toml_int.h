/* toml_int.h — shared by toml.c (the parser: values, tables, the
 * value tree) and toml_lex.c (the scanner: errors, UTF-8, whitespace,
 * comments, newlines, strings, keys). The scanner is the layer below:
 * toml.c calls it, it never calls toml.c. Not part of the library's
 * interface: see toml.h. */
#pragma once

#include "toml.h"

struct parser {
    const char *p, *end;
    int line;
    const char *file;
    struct lz_error *err;
    struct lz_toml_value *root;
    struct lz_toml_value *cur; /* table receiving key/value lines */
    int cur_depth;             /* key segments from the root to cur */
    char cur_name[256];        /* cur's header path for messages, "" for the root */
};

struct keyvec {
    char *k[LZ_TOML_MAX_DEPTH];
    size_t n;
};

static inline void keyvec_done(struct keyvec *kv) {
    for (size_t i = 0; i < kv->n; i++)
        free(kv->k[i]);
    kv->n = 0;
}

static inline void sb_done(struct lz_buf *b) {
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static inline int peek(const struct parser *ps, size_t off) {
    return (size_t)(ps->end - ps->p) > off ? (unsigned char)ps->p[off] : -1;
}

static inline void skip_ws(struct parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t'))
        ps->p++;
}

/* ---- toml_lex.c (toml.c calls it; it never calls toml.c) ---- */

/* Sets ps->err to "FILE:LINE: fmt..." and returns -EINVAL. */
int tl_perr(struct parser *ps, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A character of a bare key: [A-Za-z0-9_-]. */
bool tl_is_bare(int c);
/* A character for a message. */
const char *tl_char_disp(int c, char *buf, size_t size);

/* Length of the valid UTF-8 sequence at s (n bytes left), 0 when invalid. */
size_t tl_utf8_seq(const unsigned char *s, size_t n);
/* 1 when a newline was consumed, 0 when none is here, <0 on a bare CR. */
int tl_eat_newline(struct parser *ps);
int tl_skip_comment(struct parser *ps);
int tl_skip_ws_nl_comments(struct parser *ps);
/* A basic, literal or multi-line string at the cursor, into b. */
int tl_parse_string(struct parser *ps, struct lz_buf *b);
/* A dotted key at the cursor, into kv. */
int tl_parse_key(struct parser *ps, struct keyvec *kv);
