/* blast — a large-write TCP sender for bench/network.py.
 *
 *   blast ADDR PORT MIB [FIRST]
 *
 * Prints "elapsed_us N": from before the connect to the peer's close, so a
 * caller can compare transfers without the sandbox's start in the figure.
 *
 * With FIRST, the bytes of that file are sent before the data (a TLS
 * ClientHello for the TLS gate's benchmark in bench/egress.py).
 * Connects and writes MIB mebibytes in 1 MiB write() calls, then shuts the
 * connection down and waits for the peer to close it, so the time measured
 * around it is the transfer, not the sender's per-call overhead (busybox nc
 * polls and writes 1 KiB at a time, which caps even the host path).
 * Static, so it runs in any sandbox image. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 4 && argc != 5) {
        fprintf(stderr, "usage: blast ADDR PORT MIB [FIRST]\n");
        return 2;
    }
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((unsigned short)atoi(argv[2])) };
    if (inet_pton(AF_INET, argv[1], &sa.sin_addr) != 1) {
        fprintf(stderr, "blast: bad address %s\n", argv[1]);
        return 2;
    }
    long mib = strtol(argv[3], NULL, 10);
    static char buf[1 << 20];
    memset(buf, 'x', sizeof buf);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 || connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
        fprintf(stderr, "blast: connect: %s\n", strerror(errno));
        return 1;
    }
    if (argc == 5) {
        static char first[16384];
        FILE *f = fopen(argv[4], "rb");
        size_t n = f ? fread(first, 1, sizeof first, f) : 0;
        if (f)
            fclose(f);
        if (n == 0 || write(s, first, n) != (ssize_t)n) {
            fprintf(stderr, "blast: cannot send %s\n", argv[4]);
            return 1;
        }
    }
    for (long i = 0; i < mib; i++) {
        size_t off = 0;
        while (off < sizeof buf) {
            ssize_t n = write(s, buf + off, sizeof buf - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                fprintf(stderr, "blast: write: %s\n", strerror(errno));
                return 1;
            }
            off += (size_t)n;
        }
    }
    shutdown(s, SHUT_WR);
    while (read(s, buf, sizeof buf) > 0)
        ;
    close(s);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("elapsed_us %lld\n", (long long)(t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000);
    return 0;
}
