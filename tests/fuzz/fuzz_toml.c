/* fuzz_toml.c — libFuzzer target for the strict TOML parser (toml.h) and,
 * for inputs that parse, the configuration validator behind it (config.h).
 *
 *   clang -fsanitize=fuzzer,address,undefined -Isrc/lib tests/fuzz/fuzz_toml.c \
 *         src/lib/{util,toml,config,domain_id}.c -lsodium -o fuzz_toml
 *   ./fuzz_toml tests/fuzz/corpus/toml
 *
 * Inputs above 64 KiB are ignored (the parser's own cap is 1 MiB; larger
 * inputs only slow the fuzzer down). Everything allocated is freed, so
 * LeakSanitizer reports any leak on an error path. */
#include <fcntl.h>
#include <sys/stat.h>

#include "config.h"
#include "toml.h"

#define FUZZ_MAX_INPUT (64 * 1024)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char scratch[256], cfg_path[300], ws_path[300];

static void cleanup(void) { lz_rm_rf_at(AT_FDCWD, scratch); }

/* A private HOME with a workspace, so the validator sees a stable tree. */
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    snprintf(scratch, sizeof scratch, "/tmp/lz-fuzz-toml-XXXXXX");
    if (!mkdtemp(scratch))
        abort();
    char *rp = realpath(scratch, NULL);
    if (!rp || strlen(rp) >= 200)
        abort();
    snprintf(scratch, sizeof scratch, "%s", rp);
    free(rp);
    snprintf(cfg_path, sizeof cfg_path, "%s/config.toml", scratch);
    snprintf(ws_path, sizeof ws_path, "%s/ws", scratch);
    if (mkdir(ws_path, 0700) < 0)
        abort();
    setenv("HOME", scratch, 1);
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("XDG_DATA_HOME");
    setenv("LZ_FUZZ_VAR", "value", 1);
    atexit(cleanup);
    return 0;
}

static size_t walk(const struct lz_toml_value *v) {
    size_t n = 1;
    for (size_t i = 0; i < lz_toml_len(v); i++) {
        if (v->type == LZ_TOML_TABLE) {
            const struct lz_toml_entry *e = &v->u.table.entries[i];
            if (lz_toml_table_get(v, e->key) == NULL)
                abort(); /* every key must be found again */
            n += walk(e->value);
        } else {
            n += walk(lz_toml_array_at(v, i));
        }
    }
    if (v->type == LZ_TOML_STRING &&
        (strlen(v->u.string.s) != v->u.string.len || !lz_utf8_valid(v->u.string.s, v->u.string.len)))
        abort(); /* strings are NUL-free UTF-8 */
    if (v->line < 1)
        abort();
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > FUZZ_MAX_INPUT)
        return 0;
    struct lz_toml_value *root = NULL;
    struct lz_error err = { 0 };
    int r = lz_toml_parse((const char *)data, size, "fuzz.toml", &root, &err);
    if (r < 0) {
        if (root || err.code != r || strncmp(err.msg, "fuzz.toml:", 10) != 0)
            abort();
        return 0;
    }
    walk(root);
    lz_toml_free(root);

    /* The validator, through the real file path. */
    int fd = open(cfg_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        abort();
    if (lz_write_full(fd, data, size) < 0)
        abort();
    close(fd);
    struct lz_config_opts opts = { .config_path = cfg_path, .profile = NULL, .workspace = ws_path };
    struct lz_config *c = NULL;
    memset(&err, 0, sizeof err);
    r = lz_config_load(&opts, &c, &err);
    if (r < 0) {
        if (c || err.code != r || err.msg[0] == '\0')
            abort();
        return 0;
    }
    FILE *out = fopen("/dev/null", "we");
    if (out) {
        lz_config_print(out, c);
        fclose(out);
    }
    lz_config_free(c);
    return 0;
}
