/* shellwords.c — see shellwords.h. */
#include "shellwords.h"

#include "escape.h"

void lz_shellwords_free(char **argv) {
    if (!argv)
        return;
    /* The words live in one block that argv[0] points to (split) — see
     * below; argv itself is a separate allocation. */
    free(argv[0]);
    free(argv);
}

/* Why an unquoted character is refused; NULL when it is an ordinary word
 * character. '#' and '=' depend on position and are handled by the caller. */
static const char *refusal(char c) {
    switch (c) {
    case '$': return "parameter expansion and command substitution are not supported";
    case '`': return "command substitution is not supported";
    case ';':
    case '&':
    case '|':
    case '\n': return "command lists, pipelines and background jobs are not supported";
    case '<':
    case '>': return "redirections are not supported";
    case '(':
    case ')': return "subshells are not supported";
    case '*':
    case '?':
    case '[': return "glob patterns are not expanded";
    case '{':
    case '}': return "brace expansion is not supported";
    case '~': return "tilde expansion is not supported";
    case '!': return "history expansion and negation are not supported";
    default: return NULL;
    }
}

static int refuse(struct lz_error *err, char c, size_t col, const char *why) {
    if (c == '\n')
        return lz_error_set(err, -EINVAL,
                            "unquoted newline at column %zu: %s; the command runs without a shell, "
                            "put the newline inside quotes to pass it literally",
                            col, why);
    return lz_error_set(err, -EINVAL,
                        "unquoted '%c' at column %zu: %s; the command runs without a shell, "
                        "quote it ('%c' or \\%c) to pass it literally",
                        c, col, why, c, c);
}

static bool is_name_char(char c, bool first) {
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (!first && c >= '0' && c <= '9');
}

/* Refuses control, invisible and bidi characters and invalid UTF-8 before
 * any splitting, so every later step sees only visible UTF-8 plus tab and
 * newline. */
static int check_chars(const char *line, size_t len, struct lz_error *err) {
    const uint8_t *p = (const uint8_t *)line;
    for (size_t i = 0; i < len;) {
        uint32_t cp;
        size_t n = lz_utf8_decode(p + i, len - i, &cp);
        if (n == 0)
            return lz_error_set(err, -EINVAL,
                                "byte \\x%02x at column %zu is not valid UTF-8; retype that part of the command", p[i],
                                i + 1);
        if (cp != '\t' && cp != '\n' && lz_escape_needs(cp))
            return lz_error_set(err, -EINVAL,
                                "control or invisible character U+%04X at column %zu; remove it "
                                "(arguments cannot carry it through the editor)",
                                cp, i + 1);
        i += n;
    }
    return 0;
}

int lz_shellwords_split(const char *line, size_t len, char ***ret_argv, size_t *ret_argc, struct lz_error *err) {
    int r;
    if (len > LZ_SHELLWORDS_LINE_MAX)
        return lz_error_set(err, -E2BIG, "the command line is %zu bytes, more than %d; shorten it", len,
                            LZ_SHELLWORDS_LINE_MAX);
    if ((r = check_chars(line, len, err)) < 0)
        return r;

    /* Every word of k bytes consumes at least k input bytes, and words are
     * separated by at least one byte, so len + 1 holds all words and NULs. */
    _cleanup_free_ char *buf = lz_xmalloc(len + 1);
    size_t starts[LZ_SHELLWORDS_WORDS_MAX];
    size_t nwords = 0, o = 0, total = 0, word_start = 0;
    bool in_word = false;
    /* Whether the current word so far is an unquoted shell name, which an
     * unquoted '=' would turn into an assignment in the first word. */
    bool plain_name = false;

#define START_WORD()                                                                                                   \
    do {                                                                                                               \
        if (!in_word) {                                                                                                \
            if (nwords == LZ_SHELLWORDS_WORDS_MAX)                                                                     \
                return lz_error_set(err, -E2BIG, "more than %d words at column %zu; split the command",                \
                                    LZ_SHELLWORDS_WORDS_MAX, i + 1);                                                   \
            in_word = true;                                                                                            \
            word_start = i;                                                                                            \
            plain_name = true;                                                                                         \
            starts[nwords++] = o;                                                                                      \
        }                                                                                                              \
    } while (0)
#define APPEND(ch)                                                                                                     \
    do {                                                                                                               \
        if (++total > LZ_SHELLWORDS_BYTES_MAX)                                                                         \
            return lz_error_set(err, -E2BIG, "the words exceed %d bytes at column %zu; shorten the command",           \
                                LZ_SHELLWORDS_BYTES_MAX, i + 1);                                                       \
        buf[o++] = (ch);                                                                                               \
    } while (0)

    size_t i = 0;
    while (i < len) {
        char c = line[i];
        if (c == ' ' || c == '\t') {
            if (in_word) {
                buf[o++] = '\0';
                in_word = false;
            }
            i++;
            continue;
        }
        if (c == '\\') {
            if (i + 1 >= len)
                return lz_error_set(err, -EINVAL, "backslash at column %zu ends the line; remove it or quote it ('\\')",
                                    i + 1);
            if (line[i + 1] == '\n') {
                /* Line continuation: removed, and it neither starts nor ends a word. */
                i += 2;
                continue;
            }
            START_WORD();
            plain_name = false;
            i++;
            APPEND(line[i]);
            i++;
            continue;
        }
        if (c == '\'') {
            size_t open = i;
            START_WORD();
            plain_name = false;
            i++;
            while (i < len && line[i] != '\'') {
                APPEND(line[i]);
                i++;
            }
            if (i >= len)
                return lz_error_set(err, -EINVAL, "single quote opened at column %zu is not closed; add the closing '",
                                    open + 1);
            i++;
            continue;
        }
        if (c == '"') {
            size_t open = i;
            START_WORD();
            plain_name = false;
            i++;
            while (i < len && line[i] != '"') {
                char d = line[i];
                if (d == '\\' && i + 1 < len &&
                    (line[i + 1] == '$' || line[i + 1] == '`' || line[i + 1] == '"' || line[i + 1] == '\\' ||
                     line[i + 1] == '\n')) {
                    if (line[i + 1] != '\n')
                        APPEND(line[i + 1]);
                    i += 2;
                    continue;
                }
                if (d == '$' || d == '`')
                    return lz_error_set(err, -EINVAL,
                                        "'%c' inside double quotes at column %zu: %s; the command runs without "
                                        "a shell, write \\%c or use single quotes to pass it literally",
                                        d, i + 1, refusal(d), d);
                APPEND(d);
                i++;
            }
            if (i >= len)
                return lz_error_set(err, -EINVAL, "double quote opened at column %zu is not closed; add the closing \"",
                                    open + 1);
            i++;
            continue;
        }
        const char *why = refusal(c);
        if (why)
            return refuse(err, c, i + 1, why);
        if (c == '#' && !in_word)
            return refuse(err, c, i + 1, "a # starting a word begins a comment in a shell");
        if (c == '=' && nwords == 1 && in_word && plain_name)
            return refuse(err, c, i + 1,
                          "NAME=value before the command is an environment assignment in a shell, "
                          "which is not supported");
        START_WORD();
        plain_name = plain_name && is_name_char(c, i == word_start);
        APPEND(c);
        i++;
    }
#undef START_WORD
#undef APPEND
    if (in_word)
        buf[o++] = '\0';
    if (nwords == 0)
        return lz_error_set(err, -EINVAL, "the command is empty; type a command or deny the request");

    char **argv = lz_xcalloc(nwords + 1, sizeof *argv);
    char *words = TAKE_PTR(buf);
    for (size_t k = 0; k < nwords; k++)
        argv[k] = words + starts[k];
    /* argv[0] == words: lz_shellwords_free frees the block through it. */
    *ret_argv = argv;
    *ret_argc = nwords;
    return 0;
}

/* Characters a word may hold without quotes: none of them is special to a
 * shell anywhere in a word ('=' is handled for the first word). */
static bool bare_safe(uint8_t c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '@' ||
        c == '%' || c == '+' || c == '=' || c == ':' || c == ',' || c == '.' || c == '/' || c == '-' || c >= 0x80;
}

static bool word_bare(const char *w, size_t l, bool first) {
    if (l == 0)
        return false;
    for (size_t i = 0; i < l; i++)
        if (!bare_safe((uint8_t)w[i]) || (first && w[i] == '='))
            return false;
    return true;
}

int lz_shellwords_quote(const char *const *argv, size_t argc, char **ret_line, struct lz_error *err) {
    if (argc == 0 || argc > LZ_SHELLWORDS_WORDS_MAX)
        return lz_error_set(err, -E2BIG, "%zu arguments: an editable command has 1 to %d", argc,
                            LZ_SHELLWORDS_WORDS_MAX);
    /* Exact length first, so the line is refused here rather than by the
     * splitter after the developer has edited it. */
    size_t total = 0, need = 0;
    for (size_t k = 0; k < argc; k++) {
        size_t l = strlen(argv[k]);
        const uint8_t *p = (const uint8_t *)argv[k];
        total += l;
        if (total > LZ_SHELLWORDS_BYTES_MAX)
            return lz_error_set(err, -E2BIG, "the arguments exceed %d bytes; too long to edit",
                                LZ_SHELLWORDS_BYTES_MAX);
        for (size_t i = 0; i < l;) {
            uint32_t cp;
            size_t n = lz_utf8_decode(p + i, l - i, &cp);
            if (n == 0 || lz_escape_needs(cp))
                return lz_error_set(err, -EINVAL,
                                    "argv[%zu] holds a control, invisible or non-UTF-8 character at byte %zu; "
                                    "it cannot be edited, approve or deny it as shown",
                                    k, i);
            i += n;
        }
        need += k > 0;
        if (word_bare(argv[k], l, k == 0)) {
            need += l;
        } else {
            need += l + 2;
            for (size_t i = 0; i < l; i++)
                need += argv[k][i] == '\'' ? 3 : 0;
        }
    }
    if (need > LZ_SHELLWORDS_LINE_MAX)
        return lz_error_set(err, -E2BIG, "the quoted command is %zu bytes, more than %d; too long to edit", need,
                            LZ_SHELLWORDS_LINE_MAX);
    char *out = lz_xmalloc(need + 1);
    size_t o = 0;
    for (size_t k = 0; k < argc; k++) {
        const char *w = argv[k];
        size_t l = strlen(w);
        if (k > 0)
            out[o++] = ' ';
        if (word_bare(w, l, k == 0)) {
            memcpy(out + o, w, l);
            o += l;
            continue;
        }
        out[o++] = '\'';
        for (size_t i = 0; i < l; i++) {
            if (w[i] == '\'') {
                /* Close the quote, an escaped quote, reopen. */
                memcpy(out + o, "'\\''", 4);
                o += 4;
            } else {
                out[o++] = w[i];
            }
        }
        out[o++] = '\'';
    }
    out[o] = '\0';
    *ret_line = out;
    return 0;
}
