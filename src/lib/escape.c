/* escape.c — see escape.h. */
#include "escape.h"

#include <limits.h>

size_t lz_utf8_decode(const uint8_t *s, size_t len, uint32_t *ret_cp) {
    uint8_t b = s[0];
    size_t n;
    uint32_t cp;
    /* The second byte's range is what excludes overlong forms (E0, F0),
     * UTF-16 surrogates (ED) and code points above U+10FFFF (F4); C0, C1
     * and F5..FF never start a well-formed sequence (RFC 3629 §4). */
    uint8_t lo = 0x80, hi = 0xbf;
    if (b < 0x80) {
        *ret_cp = b;
        return 1;
    } else if (b >= 0xc2 && b <= 0xdf) {
        n = 2;
        cp = b & 0x1f;
    } else if (b >= 0xe0 && b <= 0xef) {
        n = 3;
        cp = b & 0x0f;
        if (b == 0xe0)
            lo = 0xa0;
        else if (b == 0xed)
            hi = 0x9f;
    } else if (b >= 0xf0 && b <= 0xf4) {
        n = 4;
        cp = b & 0x07;
        if (b == 0xf0)
            lo = 0x90;
        else if (b == 0xf4)
            hi = 0x8f;
    } else {
        return 0;
    }
    if (len < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        uint8_t c = s[i];
        if (i == 1 ? (c < lo || c > hi) : (c & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (c & 0x3f);
    }
    *ret_cp = cp;
    return n;
}

bool lz_utf8_wellformed(const void *s, size_t len) {
    const uint8_t *p = s;
    size_t i = 0;
    uint32_t cp;
    while (i < len) {
        size_t n = lz_utf8_decode(p + i, len - i, &cp);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}

/* Code points that draw nothing, draw like something else, move text, or
 * act on the terminal. Sorted; inclusive ranges. */
static const struct {
    uint32_t lo, hi;
} escaped_ranges[] = {
    { 0x0000, 0x001f }, /* C0 controls, ESC */
    { 0x007f, 0x009f }, /* DEL, C1 controls (CSI is U+009B) */
    { 0x00a0, 0x00a0 }, /* no-break space: looks like an argument separator */
    { 0x00ad, 0x00ad }, /* soft hyphen */
    { 0x034f, 0x034f }, /* combining grapheme joiner */
    { 0x0600, 0x0605 }, /* Arabic number signs (format) */
    { 0x061c, 0x061c }, /* Arabic letter mark (bidi) */
    { 0x06dd, 0x06dd },    { 0x070f, 0x070f },   { 0x08e2, 0x08e2 },
    { 0x115f, 0x1160 }, /* Hangul choseong/jungseong fillers */
    { 0x1680, 0x1680 }, /* Ogham space mark */
    { 0x17b4, 0x17b5 }, /* Khmer invisible vowels */
    { 0x180b, 0x180f }, /* Mongolian variation selectors, vowel separator */
    { 0x2000, 0x200f }, /* spaces, ZWSP, ZWNJ, ZWJ, LRM, RLM */
    { 0x2028, 0x202f }, /* line/paragraph separators, LRE..RLO, narrow NBSP */
    { 0x205f, 0x206f }, /* medium space, word joiner, invisible operators,
                         * LRI..PDI isolates, deprecated format controls */
    { 0x2800, 0x2800 }, /* braille blank */
    { 0x3000, 0x3000 }, /* ideographic space */
    { 0x3164, 0x3164 }, /* Hangul filler */
    { 0xd800, 0xdfff }, /* surrogates (never decoded; kept for completeness) */
    { 0xe000, 0xf8ff }, /* private use */
    { 0xfdd0, 0xfdef }, /* noncharacters */
    { 0xfe00, 0xfe0f }, /* variation selectors */
    { 0xfeff, 0xfeff }, /* BOM / zero-width no-break space */
    { 0xffa0, 0xffa0 }, /* halfwidth Hangul filler */
    { 0xfff0, 0xfffb }, /* specials, interlinear annotation */
    { 0x110bd, 0x110bd },  { 0x110cd, 0x110cd }, { 0x13430, 0x1343f }, /* Egyptian hieroglyph format controls */
    { 0x1bca0, 0x1bca3 },                                              /* shorthand format controls */
    { 0x1d173, 0x1d17a },                                              /* musical symbol format controls */
    { 0xe0000, 0xe007f },                                              /* tag characters */
    { 0xe0100, 0xe01ef },                                              /* variation selectors supplement */
    { 0xf0000, 0x10ffff },                                             /* supplementary private use planes */
};

bool lz_escape_needs(uint32_t cp) {
    if (cp > 0x10ffff)
        return true;
    /* U+nFFFE and U+nFFFF are noncharacters in every plane. */
    if ((cp & 0xfffe) == 0xfffe)
        return true;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(escaped_ranges); i++) {
        if (cp < escaped_ranges[i].lo)
            return false;
        if (cp <= escaped_ranges[i].hi)
            return true;
    }
    return false;
}

/* Worst case per input byte: "\xNN" (4) per byte, or "\u{10FFFF}" (10) per
 * 4-byte sequence; 4 per byte bounds both. */
#define ESC_PER_BYTE 4

static size_t put(char *out, size_t o, const char *s, size_t n) {
    memcpy(out + o, s, n);
    return o + n;
}

static size_t put_hex_byte(char *out, size_t o, uint8_t b) {
    static const char hex[] = "0123456789abcdef";
    out[o++] = '\\';
    out[o++] = 'x';
    out[o++] = hex[b >> 4];
    out[o++] = hex[b & 15];
    return o;
}

static size_t put_cp(char *out, size_t o, uint32_t cp) {
    static const char hex[] = "0123456789ABCDEF";
    char digits[8];
    size_t nd = 0;
    do {
        digits[nd++] = hex[cp & 15];
        cp >>= 4;
    } while (cp);
    while (nd < 4)
        digits[nd++] = '0';
    o = put(out, o, "\\u{", 3);
    while (nd)
        out[o++] = digits[--nd];
    out[o++] = '}';
    return o;
}

/* Renders into out (capacity checked by the caller: ESC_PER_BYTE * len). */
static size_t render(const uint8_t *p, size_t len, unsigned flags, char *out) {
    size_t o = 0;
    size_t i = 0;
    while (i < len) {
        uint8_t b = p[i];
        if (b >= 0x20 && b < 0x7f) {
            if (b == '\\' || (b == '"' && (flags & LZ_ESCAPE_QUOTED))) {
                out[o++] = '\\';
                out[o++] = (char)b;
            } else {
                out[o++] = (char)b;
            }
            i++;
            continue;
        }
        if (b == '\t' || b == '\n' || b == '\r') {
            out[o++] = '\\';
            out[o++] = b == '\t' ? 't' : b == '\n' ? 'n' : 'r';
            i++;
            continue;
        }
        if (b < 0x80) {
            o = put_hex_byte(out, o, b);
            i++;
            continue;
        }
        uint32_t cp;
        size_t n = lz_utf8_decode(p + i, len - i, &cp);
        if (n == 0) {
            /* One byte at a time: the next byte may start a good sequence. */
            o = put_hex_byte(out, o, b);
            i++;
        } else if (lz_escape_needs(cp)) {
            o = put_cp(out, o, cp);
            i += n;
        } else {
            o = put(out, o, (const char *)p + i, n);
            i += n;
        }
    }
    out[o] = '\0';
    return o;
}

ssize_t lz_escape(const void *data, size_t len, unsigned flags, char **ret) {
    if (len > (SSIZE_MAX - 1) / ESC_PER_BYTE)
        return -EOVERFLOW;
    char *out = lz_xmalloc(len * ESC_PER_BYTE + 1);
    size_t n = render(data, len, flags, out);
    *ret = out;
    return (ssize_t)n;
}

ssize_t lz_escape_argv(const char *const *argv, size_t argc, char **ret) {
    /* "argv[" + 20 digits + "] = \"" + element + "\"\n" */
    size_t cap = 1;
    for (size_t i = 0; i < argc; i++) {
        size_t l = strlen(argv[i]);
        if (l > (SSIZE_MAX / 2 - 64) / ESC_PER_BYTE || cap > SSIZE_MAX / 2)
            return -EOVERFLOW;
        cap += 40 + l * ESC_PER_BYTE;
    }
    char *out = lz_xmalloc(cap);
    size_t o = 0;
    for (size_t i = 0; i < argc; i++) {
        int w = snprintf(out + o, cap - o, "argv[%zu] = \"", i);
        if (w < 0 || (size_t)w >= cap - o) {
            free(out);
            return -EOVERFLOW;
        }
        o += (size_t)w;
        o += render((const uint8_t *)argv[i], strlen(argv[i]), LZ_ESCAPE_QUOTED, out + o);
        o = put(out, o, "\"\n", 2);
    }
    out[o] = '\0';
    *ret = out;
    return (ssize_t)o;
}

ssize_t lz_unescape(const char *text, size_t len, unsigned flags, uint8_t **ret) {
    /* Decoded output is never longer than the text. */
    _cleanup_free_ uint8_t *out = lz_xmalloc(len + 1);
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        if (text[i] != '\\') {
            out[o++] = (uint8_t)text[i++];
            continue;
        }
        if (++i >= len)
            return -EINVAL;
        char c = text[i++];
        switch (c) {
        case '\\':
        case '"': out[o++] = (uint8_t)c; break;
        case 't': out[o++] = '\t'; break;
        case 'n': out[o++] = '\n'; break;
        case 'r': out[o++] = '\r'; break;
        case 'x': {
            if (len - i < 2 || lz_hex_value(text[i]) < 0 || lz_hex_value(text[i + 1]) < 0)
                return -EINVAL;
            out[o++] = (uint8_t)(lz_hex_value(text[i]) << 4 | lz_hex_value(text[i + 1]));
            i += 2;
            break;
        }
        case 'u': {
            if (i >= len || text[i] != '{')
                return -EINVAL;
            i++;
            uint32_t cp = 0;
            size_t nd = 0;
            while (i < len && text[i] != '}') {
                int v = lz_hex_value(text[i++]);
                if (v < 0 || ++nd > 6)
                    return -EINVAL;
                cp = cp << 4 | (uint32_t)v;
            }
            if (i >= len || nd == 0 || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return -EINVAL;
            i++;
            if (cp < 0x80) {
                out[o++] = (uint8_t)cp;
            } else if (cp < 0x800) {
                out[o++] = (uint8_t)(0xc0 | cp >> 6);
                out[o++] = (uint8_t)(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000) {
                out[o++] = (uint8_t)(0xe0 | cp >> 12);
                out[o++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
                out[o++] = (uint8_t)(0x80 | (cp & 0x3f));
            } else {
                out[o++] = (uint8_t)(0xf0 | cp >> 18);
                out[o++] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
                out[o++] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
                out[o++] = (uint8_t)(0x80 | (cp & 0x3f));
            }
            break;
        }
        default: return -EINVAL;
        }
    }
    /* Accept only the one rendering lz_escape produces for these bytes
     * (no "\x41" for "A", no raw ESC, no lower-case "\u{202e}"): the
     * display and the bytes correspond one to one in both directions. */
    _cleanup_free_ char *again = NULL;
    ssize_t n = lz_escape(out, o, flags, &again);
    if (n < 0 || (size_t)n != len || memcmp(again, text, len) != 0)
        return -EINVAL;
    out[o] = 0;
    *ret = TAKE_PTR(out);
    return (ssize_t)o;
}
