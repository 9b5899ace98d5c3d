/* libFuzzer target: host-tool path matching (hosttools.h) on paths the
 * sandbox chooses, and the name check on configuration values.
 * Properties: a match ends at a component boundary and names a component
 * of the set; the name check never accepts '/', ".", ".." or ".git". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hosttools.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 8192)
        return 0;
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';
    char *names[LZ_HOSTTOOLS_MAX];
    size_t n = 0;
    for (const struct lz_hosttool_default *d = lz_hosttools_defaults; d->name; d++)
        names[n++] = (char *)d->name;
    size_t m = lz_hosttools_match(names, n, s);
    size_t len = strlen(s);
    if (m > len || (m && s[m] != '\0' && s[m] != '/'))
        __builtin_trap();
    if (m) {
        size_t start = m;
        while (start > 0 && s[start - 1] != '/')
            start--;
        int found = 0;
        for (size_t i = 0; i < n; i++)
            found |= lz_hosttools_name_eq(s + start, m - start, names[i], strlen(names[i]));
        if (!found)
            __builtin_trap();
    }
    if (!lz_hosttools_name_invalid(s)) {
        if (strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..") || !strcasecmp(s, ".git") || len == 0)
            __builtin_trap();
    }
    free(s);
    return 0;
}
