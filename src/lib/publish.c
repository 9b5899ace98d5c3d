/* publish.c — see publish.h. */
#include "publish.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>

/* A decimal number without sign or leading zero, at most max: its value,
 * or -1. */
static long number(const char *s, size_t len, long max) {
    if (len == 0 || len > 5 || (len > 1 && s[0] == '0'))
        return -1;
    long v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v <= max ? v : -1;
}

/* A dotted quad of decimals as inet_pton reads it (four parts, each
 * 0..255, no leading zero: the resolver's own reading of addresses). */
static bool ipv4(const char *s, size_t len, uint32_t *ret) {
    char t[INET_ADDRSTRLEN];
    struct in_addr a;
    if (len >= sizeof t)
        return false;
    memcpy(t, s, len);
    t[len] = '\0';
    if (inet_pton(AF_INET, t, &a) != 1)
        return false;
    *ret = ntohl(a.s_addr);
    return true;
}

int lz_publish_parse(const char *text, struct lz_publish *ret, struct lz_error *err) {
    static const char how[] = "write HOSTPORT, HOSTPORT:SANDBOXPORT, ADDR:HOSTPORT or ADDR:HOSTPORT:SANDBOXPORT "
                              "(ports 1 to 65535, ADDR an IPv4 address such as 127.0.0.1)";
    size_t len = strlen(text);
    const char *part[4];
    size_t plen[4];
    int n = 0;
    size_t start = 0;
    for (size_t i = 0; i <= len && n < 4; i++) {
        if (i < len && text[i] != ':')
            continue;
        part[n] = text + start;
        plen[n++] = i - start;
        start = i + 1;
    }
    if (len == 0 || len >= LZ_PUBLISH_TEXT_MAX || start <= len || n > 3)
        return lz_error_set(err, -EINVAL, "published port \"%.40s%s\" is not valid: %s", text, len > 40 ? "..." : "",
                            how);
    struct lz_publish p = { .host_addr = 0x7f000001u };
    int k = 0;
    bool has_addr = memchr(part[0], '.', plen[0]) != NULL;
    if (has_addr) {
        if (n < 2 || !ipv4(part[0], plen[0], &p.host_addr))
            return lz_error_set(err, -EINVAL, "published port \"%s\": \"%.*s\" is not an IPv4 address: %s", text,
                                (int)plen[0], part[0], how);
        k = 1;
    } else if (n == 3) {
        return lz_error_set(err, -EINVAL, "published port \"%s\": three parts need an address first: %s", text, how);
    }
    long hp = number(part[k], plen[k], 65535);
    long sp = k + 1 < n ? number(part[k + 1], plen[k + 1], 65535) : hp;
    if (hp < 1 || sp < 1)
        return lz_error_set(err, -EINVAL, "published port \"%s\": a port must be a number from 1 to 65535: %s", text,
                            how);
    p.host_port = (uint16_t)hp;
    p.port = (uint16_t)sp;
    *ret = p;
    return 0;
}

void lz_publish_format(const struct lz_publish *p, char *buf, size_t cap) {
    uint32_t a = p->host_addr;
    snprintf(buf, cap, "%u.%u.%u.%u:%u:%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255, p->host_port, p->port);
}

int lz_publish_check(const struct lz_publish *p, size_t n, struct lz_error *err) {
    if (n > LZ_PUBLISH_MAX)
        return lz_error_set(err, -EINVAL, "%zu published ports: at most %d", n, LZ_PUBLISH_MAX);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < i; j++) {
            char a[LZ_PUBLISH_TEXT_MAX], b[LZ_PUBLISH_TEXT_MAX];
            lz_publish_format(&p[i], a, sizeof a);
            lz_publish_format(&p[j], b, sizeof b);
            bool same_host = p[i].host_port == p[j].host_port &&
                (p[i].host_addr == p[j].host_addr || p[i].host_addr == 0 || p[j].host_addr == 0);
            if (same_host)
                return lz_error_set(err, -EINVAL, "published ports %s and %s take the same host port", b, a);
            if (p[i].port == p[j].port)
                return lz_error_set(
                    err, -EINVAL, "published ports %s and %s forward to the same sandbox port; publish it once", b, a);
        }
    return 0;
}
