/* dnsconn — name lookups and first connections, timed inside the sandbox,
 * for bench/egress.py.
 *
 *   dnsconn connect FMT FIRST COUNT PORT   for i in FIRST..FIRST+COUNT-1: look up
 *                                          FMT with %d = i (one A query to
 *                                          the resolver of /etc/resolv.conf's
 *                                          10.0.2.3), then connect to the
 *                                          first address on PORT and close
 *   dnsconn lookup FMT FIRST COUNT         the lookups only
 *
 * Prints "ops N total_us T max_us M failed F". Static, with its own minimal
 * DNS client (a static glibc's getaddrinfo would need NSS modules the
 * busybox image does not have); it is a load generator, not a parser of
 * record: it takes the first A record of a well-formed answer. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* One A query; 0 and *addr (network order), or -1. */
static int lookup(int s, const char *name, uint16_t id, uint32_t *addr) {
    unsigned char q[300], r[1500];
    size_t o = 12;
    memset(q, 0, 12);
    q[0] = (unsigned char)(id >> 8);
    q[1] = (unsigned char)id;
    q[2] = 0x01; /* RD */
    q[5] = 1;    /* QDCOUNT */
    const char *p = name;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);
        if (l == 0 || l > 63 || o + l + 6 > sizeof q)
            return -1;
        q[o++] = (unsigned char)l;
        memcpy(q + o, p, l);
        o += l;
        p += l + (dot ? 1 : 0);
    }
    q[o++] = 0;
    q[o++] = 0;
    q[o++] = 1; /* A */
    q[o++] = 0;
    q[o++] = 1; /* IN */
    if (send(s, q, o, 0) != (ssize_t)o)
        return -1;
    struct pollfd pf = { .fd = s, .events = POLLIN };
    if (poll(&pf, 1, 5000) != 1)
        return -1;
    ssize_t n = recv(s, r, sizeof r, 0);
    if (n < 12 || r[0] != q[0] || r[1] != q[1] || (r[3] & 0x0f) != 0)
        return -1;
    unsigned an = (unsigned)r[6] << 8 | r[7];
    size_t i = 12;
    /* skip the question */
    while (i < (size_t)n && r[i] && (r[i] & 0xc0) == 0)
        i += r[i] + 1u;
    i += (i < (size_t)n && (r[i] & 0xc0)) ? 2 : 1;
    i += 4;
    for (unsigned k = 0; k < an && i + 12 <= (size_t)n; k++) {
        while (i < (size_t)n && r[i] && (r[i] & 0xc0) == 0)
            i += r[i] + 1u;
        i += (i < (size_t)n && (r[i] & 0xc0)) ? 2 : 1;
        if (i + 10 > (size_t)n)
            return -1;
        unsigned type = (unsigned)r[i] << 8 | r[i + 1];
        unsigned rdlen = (unsigned)r[i + 8] << 8 | r[i + 9];
        i += 10;
        if (i + rdlen > (size_t)n)
            return -1;
        if (type == 1 && rdlen == 4) {
            memcpy(addr, r + i, 4);
            return 0;
        }
        i += rdlen;
    }
    return -1;
}

int main(int argc, char **argv) {
    if (argc < 5 || (strcmp(argv[1], "connect") && strcmp(argv[1], "lookup")) ||
        (!strcmp(argv[1], "connect") && argc != 6)) {
        fprintf(stderr, "usage: dnsconn connect FMT FIRST COUNT PORT | dnsconn lookup FMT FIRST COUNT\n");
        return 2;
    }
    int do_connect = !strcmp(argv[1], "connect");
    long first = strtol(argv[3], NULL, 10), count = strtol(argv[4], NULL, 10);
    unsigned short port = do_connect ? (unsigned short)atoi(argv[5]) : 0;
    struct sockaddr_in ns = { .sin_family = AF_INET, .sin_port = htons(53) };
    inet_pton(AF_INET, "10.0.2.3", &ns.sin_addr);
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&ns, sizeof ns) < 0) {
        fprintf(stderr, "dnsconn: resolver socket: %s\n", strerror(errno));
        return 1;
    }
    long long total = 0, max = 0;
    long failed = 0;
    for (long i = first; i < first + count; i++) {
        char name[256];
        snprintf(name, sizeof name, argv[2], i);
        long long t0 = now_us();
        uint32_t a = 0;
        int ok = lookup(s, name, (uint16_t)(i * 7919 + 1), &a) == 0;
        if (ok && do_connect) {
            struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
            memcpy(&sa.sin_addr, &a, 4);
            int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            ok = c >= 0 && connect(c, (struct sockaddr *)&sa, sizeof sa) == 0;
            if (c >= 0)
                close(c);
        }
        long long dt = now_us() - t0;
        if (!ok) {
            failed++;
            continue;
        }
        total += dt;
        if (dt > max)
            max = dt;
    }
    printf("ops %ld total_us %lld max_us %lld failed %ld\n", count - failed, total, max, failed);
    return failed ? 1 : 0;
}
