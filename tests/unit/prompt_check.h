/* prompt_check.h — the property every byte the escalation prompt writes
 * must have (prompt.h, LZ_PROMPT_SEQUENCES): printable ASCII, CR, LF, SI,
 * well-formed UTF-8 of characters that need no escape (escape.h), and ESC
 * only as the start of one of the prompt's own sequences or a cursor
 * position ESC [ ROW ; COL H. Shared by test_prompt.c and fuzz_prompt.c. */
#pragma once

#include "escape.h"
#include "prompt.h"

static inline size_t lz_prompt_cup_len(const uint8_t *s, size_t n) {
    /* ESC [ 1-4 digits ; 1-4 digits H */
    size_t i = 2, d;
    if (n < 6 || s[1] != '[')
        return 0;
    for (d = 0; i < n && s[i] >= '0' && s[i] <= '9' && d < 4; i++, d++)
        ;
    if (d == 0 || i >= n || s[i++] != ';')
        return 0;
    for (d = 0; i < n && s[i] >= '0' && s[i] <= '9' && d < 4; i++, d++)
        ;
    if (d == 0 || i >= n || s[i] != 'H')
        return 0;
    return i + 1;
}

static inline bool lz_prompt_output_safe(const void *buf, size_t len, const char **why) {
    static const char *const seqs[] = LZ_PROMPT_SEQUENCES;
    const uint8_t *s = buf;
    for (size_t i = 0; i < len;) {
        uint8_t b = s[i];
        if (b == 0x1b) {
            size_t m = 0;
            for (size_t k = 0; k < sizeof seqs / sizeof seqs[0] && !m; k++) {
                size_t l = strlen(seqs[k]);
                if (seqs[k][0] == 0x1b && l <= len - i && memcmp(s + i, seqs[k], l) == 0)
                    m = l;
            }
            if (!m)
                m = lz_prompt_cup_len(s + i, len - i);
            if (!m) {
                *why = "an ESC that starts none of the prompt's own sequences";
                return false;
            }
            i += m;
        } else if (b == '\r' || b == '\n' || b == 0x0f || (b >= 0x20 && b < 0x7f)) {
            i++;
        } else if (b < 0x80) {
            *why = "a C0 control or DEL";
            return false;
        } else {
            uint32_t cp;
            size_t n = lz_utf8_decode(s + i, len - i, &cp);
            if (n == 0) {
                *why = "a byte that is not well-formed UTF-8 (or a raw C1 byte)";
                return false;
            }
            if (lz_escape_needs(cp)) {
                *why = "a C1, bidi, invisible or other character that must be escaped";
                return false;
            }
            i += n;
        }
    }
    return true;
}
