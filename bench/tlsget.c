/* tlsget — an HTTPS client for bench/credentials.py, built static (gcc
 * -static ... -lssl -lcrypto) so that it runs in any image.
 *
 *   tlsget IP HOST CAFILE KEYHEADER KEY MODE N
 *
 * Connects to IP:443 with server name HOST, verifies the server against
 * CAFILE (and HOST), and sends GET requests with `KEYHEADER: KEY`.
 *   MODE "bytes": one request for /bytes/N (N MiB), read to the end;
 *                 prints "elapsed_us U first_us F bytes B";
 *   MODE "first": N requests for /bytes/0, each on a new connection
 *                 (handshake, request, first byte of the answer); prints
 *                 "ops N total_us U max_us M failed 0".
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
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

static void die(const char *what) {
    fprintf(stderr, "tlsget: %s\n", what);
    ERR_print_errors_fp(stderr);
    exit(1);
}

static SSL *open_conn(SSL_CTX *ctx, const char *ip, const char *host) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(443) };
    if (fd < 0 || inet_pton(AF_INET, ip, &sa.sin_addr) != 1 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die("connect");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    SSL *s = SSL_new(ctx);
    if (!s || SSL_set_fd(s, fd) != 1 || SSL_set_tlsext_host_name(s, host) != 1 || SSL_set1_host(s, host) != 1)
        die("SSL_new");
    if (SSL_connect(s) != 1)
        die("handshake");
    return s;
}

static void close_conn(SSL *s) {
    int fd = SSL_get_fd(s);
    SSL_free(s);
    close(fd);
}

/* Sends one request; returns the bytes of the answer read until the end,
 * *first_us the time to its first byte. */
static long long get(SSL *s, const char *host, const char *kh, const char *key, long mib, long long *first_us) {
    char req[8192];
    int n = snprintf(req, sizeof req, "GET /bytes/%ld HTTP/1.1\r\nHost: %s\r\n%s: %s\r\nConnection: close\r\n\r\n", mib,
                     host, kh, key);
    long long t0 = now_us();
    if (n <= 0 || n >= (int)sizeof req || SSL_write(s, req, n) != n)
        die("write");
    static char buf[1 << 16];
    long long total = 0;
    *first_us = -1;
    for (;;) {
        int k = SSL_read(s, buf, sizeof buf);
        if (k <= 0)
            break;
        if (*first_us < 0)
            *first_us = now_us() - t0;
        total += k;
    }
    if (total < 12 || memcmp(buf, "HTTP/1.1 200", 12) != 0) {
        if (total < 12 || *first_us < 0)
            die("no answer");
    }
    return total;
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: tlsget IP HOST CAFILE KEYHEADER KEY bytes|first N\n");
        return 2;
    }
    const char *ip = argv[1], *host = argv[2], *ca = argv[3], *kh = argv[4], *key = argv[5], *mode = argv[6];
    long n = atol(argv[7]);
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx || SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
        die("CA file");
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_CTX_set_alpn_protos(ctx, alpn, sizeof alpn - 1);
    if (!strcmp(mode, "bytes")) {
        long long t0 = now_us(), first;
        SSL *s = open_conn(ctx, ip, host);
        long long b = get(s, host, kh, key, n, &first);
        long long el = now_us() - t0;
        close_conn(s);
        printf("elapsed_us %lld first_us %lld bytes %lld\n", el, first, b);
        return 0;
    }
    long long total = 0, max = 0;
    for (long i = 0; i < n; i++) {
        long long t0 = now_us(), first;
        SSL *s = open_conn(ctx, ip, host);
        get(s, host, kh, key, 0, &first);
        long long el = now_us() - t0 - 0;
        (void)first;
        close_conn(s);
        total += el;
        if (el > max)
            max = el;
    }
    printf("ops %ld total_us %lld max_us %lld failed 0\n", n, total, max);
    return 0;
}
