/* fuzz_prepare.c — libFuzzer harness for the preparer (SR-15): applies the
 * input as one layer into a fresh directory, then checks that nothing
 * appeared beside it, and removes it.
 *
 * Build: clang -g -O1 -fsanitize=fuzzer,address,undefined -D_GNU_SOURCE
 *        -Isrc/lib src/lib/util.c src/lib/prepare.c tests/fuzz/fuzz_prepare.c
 *        -larchive -lsodium
 * Run as an unprivileged user (an escape bug must not be able to write
 * where the fuzzer's user cannot), e.g.
 *   setpriv --reuid=65534 --regid=65534 --clear-groups \
 *       ./fuzz_prepare -max_len=1048576 tests/fuzz/corpus/prepare
 * LZ_FUZZ_DIR sets the scratch parent (default /dev/shm, else /tmp).
 *
 * Two input modes. Raw: the input is the layer stream (tar, gzip, zstd).
 * Structured (input starts with "S\n"): lines build valid tars with
 * libarchive's writer, so that mutations reach the preparer's rules instead
 * of dying on tar checksums. Each line is TYPE MODE PATH[=ARG]:
 *   TYPE f file (ARG = content), d dir, l symlink (ARG = target, "@C" is
 *        replaced by the absolute canary path), h hard link (ARG = target),
 *        c char device, p fifo; a line "---" starts the next layer.
 *   MODE one digit selecting a mode from a table (0644 ... 04755, 0000).
 * Oracle: after every input nothing may exist beside the rootfs, the canary
 * directory stays empty, and every failure carries a message.
 */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "prepare.h"

#define FUZZ_MAX_INPUT (1u << 20)
#define FUZZ_MAX_WRITE (16u << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int base_fd = -EBADF;
static char canary_path[256];
static char base_path[256];

static void remove_base(void) { lz_prepare_remove_tree(AT_FDCWD, base_path); }

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    const char *parent = getenv("LZ_FUZZ_DIR");
    if (!parent)
        parent = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    char *tmpl = lz_xasprintf("%s/lz-fuzz-prepare-XXXXXX", parent);
    if (!mkdtemp(tmpl))
        abort();
    base_fd = open(tmpl, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (base_fd < 0 || mkdirat(base_fd, "canary", 0755) < 0)
        abort();
    if (lz_snprintf(canary_path, sizeof canary_path, "%s/canary", tmpl) < 0 ||
        lz_snprintf(base_path, sizeof base_path, "%s", tmpl) < 0)
        abort();
    atexit(remove_base);
    free(tmpl);
    return 0;
}

/* Nothing but rootfs/ and an empty canary/ may exist in the base. */
static void check_confined(void) {
    int fd = openat(base_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fdopendir(fd);
    if (!d)
        abort();
    struct dirent *de;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") && strcmp(de->d_name, "rootfs") &&
            strcmp(de->d_name, "canary"))
            abort();
    closedir(d);
    fd = openat(base_fd, "canary", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    d = fdopendir(fd);
    if (!d)
        abort();
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            abort();
    closedir(d);
}

static const mode_t modes[10] = { 0644, 0755, 0700, 0555, 0000, 01777, 04755, 02755, 0600, 0444 };

struct growbuf {
    char *p;
    size_t len, cap;
};

static la_ssize_t grow_write(struct archive *a, void *ud, const void *buf, size_t n) {
    struct growbuf *g = ud;
    (void)a;
    if (g->len + n > g->cap) {
        while (g->len + n > g->cap)
            g->cap = g->cap ? g->cap * 2 : 16384;
        g->p = lz_xrealloc(g->p, g->cap);
    }
    memcpy(g->p + g->len, buf, n);
    g->len += n;
    return (la_ssize_t)n;
}

/* Builds one layer from lines [p, end) into *ret (malloc'd). */
static int build_layer(const char *p, const char *end, void **ret, size_t *ret_len) {
    struct growbuf g = { 0 };
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_set_bytes_per_block(a, 0); /* no 10 KiB padding */
    if (archive_write_open2(a, &g, NULL, grow_write, NULL, NULL) != ARCHIVE_OK)
        abort();
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        size_t len = (size_t)(le - p);
        if (len >= 3) {
            char type = p[0];
            mode_t mode = (p[1] >= '0' && p[1] <= '9') ? modes[p[1] - '0'] : 0644;
            char *line = lz_xstrndup(p + 2, len - 2);
            char *arg = strchr(line, '=');
            if (arg)
                *arg++ = '\0';
            char *target = NULL;
            if (arg && type == 'l' && strncmp(arg, "@C", 2) == 0)
                target = lz_xasprintf("%s%s", canary_path, arg + 2);
            else if (arg)
                target = lz_xstrdup(arg);
            struct archive_entry *e = archive_entry_new();
            archive_entry_set_pathname(e, line);
            archive_entry_set_perm(e, mode);
            archive_entry_set_mtime(e, 1700000000, 0);
            archive_entry_set_uid(e, (la_int64_t)(p[1] & 3) * 1000);
            archive_entry_set_gid(e, 0);
            size_t dlen = 0;
            bool ok = true;
            switch (type) {
            case 'f':
                archive_entry_set_filetype(e, AE_IFREG);
                dlen = target ? strlen(target) : 0;
                archive_entry_set_size(e, (la_int64_t)dlen);
                break;
            case 'd': archive_entry_set_filetype(e, AE_IFDIR); break;
            case 'l':
                archive_entry_set_filetype(e, AE_IFLNK);
                archive_entry_set_symlink(e, target ? target : "");
                break;
            case 'h':
                archive_entry_set_filetype(e, AE_IFREG);
                archive_entry_set_hardlink(e, target ? target : "");
                break;
            case 'c':
                archive_entry_set_filetype(e, AE_IFCHR);
                archive_entry_set_rdev(e, 0x103);
                break;
            case 'p': archive_entry_set_filetype(e, AE_IFIFO); break;
            default: ok = false;
            }
            if (ok && archive_write_header(a, e) >= ARCHIVE_WARN && dlen)
                archive_write_data(a, target, dlen);
            archive_entry_free(e);
            free(target);
            free(line);
        }
        p = nl ? nl + 1 : end;
    }
    archive_write_close(a);
    archive_write_free(a);
    *ret = g.p;
    *ret_len = g.len;
    return 0;
}

static void apply_one(int root, const void *buf, size_t len) {
    struct lz_error err = { 0 };
    struct lz_prepare_stats st = { 0 };
    struct lz_layer_opts o = { .max_bytes = FUZZ_MAX_WRITE, .stats = &st };
    int r = lz_prepare_apply_layer_mem_opts(root, buf, len, &o, &err);
    if (r > 0 || (r < 0 && err.msg[0] == '\0'))
        abort(); /* the error contract: a failure always says why */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT)
        return 0;
    if (mkdirat(base_fd, "rootfs", 0755) < 0)
        abort();
    int root = openat(base_fd, "rootfs", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        abort();
    if (size >= 2 && data[0] == 'S' && data[1] == '\n') {
        /* Structured: layers separated by "---" lines. */
        const char *p = (const char *)data + 2, *end = (const char *)data + size;
        int layers = 0;
        while (p <= end && layers < 8) {
            const char *sep = memmem(p, (size_t)(end - p), "\n---\n", 5);
            const char *le = sep ? sep : end;
            void *buf;
            size_t len;
            build_layer(p, le, &buf, &len);
            apply_one(root, buf, len);
            free(buf);
            layers++;
            if (!sep)
                break;
            p = sep + 5;
        }
    } else {
        apply_one(root, data, size);
    }
    close(root);
    check_confined();
    if (lz_prepare_remove_tree(base_fd, "rootfs") < 0)
        abort(); /* would poison the next run */
    return 0;
}
