/* shellwords.h — the developer's edited command line, split into an argv.
 *
 * The prompt's [E]dit action shows the requested argv as one line
 * (lz_shellwords_quote) and splits the developer's edited line back into
 * an argv (lz_shellwords_split). The result is passed to execve directly;
 * it is never given to a shell. The splitter therefore implements only
 * the quoting part of POSIX shell word rules (XCU 2.2):
 *
 *   - words are separated by unquoted spaces and tabs;
 *   - '...' keeps everything literally up to the next ';
 *   - "..." keeps everything literally except that a backslash escapes
 *     $ ` " \ and newline (backslash-newline is removed); any other
 *     backslash stays a backslash;
 *   - outside quotes a backslash makes the next character literal and
 *     backslash-newline is removed;
 *   - '' and "" make an empty word.
 *
 * Everything a shell would expand or interpret is REFUSED with an error
 * naming the character and its column, never silently kept literal (the
 * developer would think it does what it does in a shell) and never
 * executed: unquoted $ ` ; & | < > ( ) * ? [ { } ~ ! and newline, an
 * unquoted # at the start of a word (a comment), an unquoted '=' after a
 * name at the start of the first word (an environment assignment prefix),
 * and $ or ` inside double quotes. Quoting them ('a|b', \|, "a|b") passes
 * them literally. Control characters other than tab and newline, and bytes
 * that are not well-formed UTF-8, are refused anywhere (argv elements are
 * UTF-8 and NUL-free, as the escalation record requires).
 *
 * Sizes are bounded: at most LZ_SHELLWORDS_LINE_MAX bytes of input,
 * LZ_SHELLWORDS_WORDS_MAX words and LZ_SHELLWORDS_BYTES_MAX bytes of words
 * (the escalation record's argv bounds, record.h).
 */
#pragma once

#include "util.h"

#define LZ_SHELLWORDS_LINE_MAX (64 * 1024)
#define LZ_SHELLWORDS_WORDS_MAX 256
#define LZ_SHELLWORDS_BYTES_MAX (32 * 1024)

/* Splits line (len bytes) into a NULL-terminated argv of NUL-terminated
 * words (*ret_argv, free with lz_shellwords_free) and its count. An empty
 * line (no words) is an error. Errors: -EINVAL with err saying what and
 * at which column (1-based byte offset), -E2BIG for the size bounds. */
int lz_shellwords_split(const char *line, size_t len, char ***ret_argv, size_t *ret_argc, struct lz_error *err);

/* Quotes argv as one line that lz_shellwords_split turns back into exactly
 * argv: a word made only of safe characters stays bare, every other word
 * is single-quoted (a ' becomes '\''), an empty word is ''. Refuses
 * (-EINVAL) a word the line editor must not hold raw (control, bidi,
 * invisible characters or invalid UTF-8: lz_escape_needs), so such a
 * request can be approved or denied as shown but not edited. */
int lz_shellwords_quote(const char *const *argv, size_t argc, char **ret_line, struct lz_error *err);

void lz_shellwords_free(char **argv);
