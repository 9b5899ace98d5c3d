/* escape.h — rendering untrusted bytes for the developer's prompt.
 *
 * Everything an escalation prompt shows (argv, cwd, justification, output
 * a sandbox chose) comes from the Agent Sandbox. A terminal interprets
 * escape sequences, and Unicode has characters that reorder, hide or fake
 * text (bidi controls, zero-width and invisible characters, tag and
 * variation characters, look-alike spaces). A prompt that passed them
 * through would let the sandbox show the developer one command and run
 * another. So the renderer here emits only printable ASCII and well-formed
 * UTF-8 of characters that draw visibly, and writes everything else as a
 * visible escape:
 *
 *     \\          a backslash itself
 *     \"          a double quote (only with LZ_ESCAPE_QUOTED)
 *     \t \n \r    tab, line feed, carriage return
 *     \xNN        any other C0 control byte, DEL, or a byte that is not
 *                 part of well-formed UTF-8 (overlong forms, surrogates,
 *                 code points above U+10FFFF, stray continuation bytes,
 *                 truncated sequences)
 *     \u{XXXX}    a well-formed code point that must not reach a terminal
 *                 (lz_escape_needs)
 *
 * Every escape begins with a backslash and a literal backslash is doubled,
 * so the rendering is injective: the developer can tell any two different
 * inputs apart, and lz_unescape recovers the exact bytes. (A "<U+202E>"
 * form would not be: the sandbox could write those eight characters
 * literally.) Nothing is ever clipped; the caller pages long output.
 */
#pragma once

#include "util.h"

/* Also escape '"' (for text shown between double quotes). */
#define LZ_ESCAPE_QUOTED 1u

/* Decodes one well-formed UTF-8 sequence at s (at most len bytes): stores the
 * code point in *ret_cp and returns its length (1..4), or 0 when the bytes
 * are not well-formed UTF-8 (overlong, surrogate, > U+10FFFF, bad or
 * missing continuation byte). len must be > 0. */
size_t lz_utf8_decode(const uint8_t *s, size_t len, uint32_t *ret_cp);

/* True when the whole buffer is well-formed UTF-8 (the same rule as
 * toml.h's lz_utf8_valid; kept here so this module stands alone). */
bool lz_utf8_wellformed(const void *s, size_t len);

/* True for a code point the prompt must show escaped: C0, DEL, C1, bidi
 * controls, zero-width, invisible and other format characters, tag
 * characters, variation selectors, Hangul fillers, non-ASCII spaces and
 * line/paragraph separators, private-use characters and noncharacters. */
bool lz_escape_needs(uint32_t cp);

/* Renders len bytes as described above into a new NUL-terminated string.
 * Returns the rendered length or -EOVERFLOW (len too large to render). */
ssize_t lz_escape(const void *data, size_t len, unsigned flags, char **ret);

/* One line per element, "argv[0] = \"/usr/bin/make\"\n", each element
 * rendered with LZ_ESCAPE_QUOTED so empty elements and leading or trailing
 * spaces are visible. Returns the length or -EOVERFLOW. */
ssize_t lz_escape_argv(const char *const *argv, size_t argc, char **ret);

/* The inverse of lz_escape (with the same flags): decodes text produced by
 * lz_escape back into bytes. Returns the decoded length, or -EINVAL when
 * text is not a rendering lz_escape can produce. For tests and tools that
 * must recover the exact bytes from a displayed form. */
ssize_t lz_unescape(const char *text, size_t len, unsigned flags, uint8_t **ret);
