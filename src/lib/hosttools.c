/* hosttools.c — the set of host-tool configuration paths (hosttools.h). */
#include "hosttools.h"

#include <string.h>

/* docs/host-tools.md lists the same, with what each tool runs. */
const struct lz_hosttool_default lz_hosttools_defaults[] = {
    { ".claude", "Claude Code: settings.json hooks, commands, agents" },
    { ".mcp.json", "Claude Code and others: MCP servers (commands)" },
    { ".codex", "Codex CLI: config.toml" },
    { ".opencode", "opencode: plugins, commands" },
    { "opencode.json", "opencode: configuration (MCP, commands)" },
    { "opencode.jsonc", "opencode: configuration" },
    { ".cursor", "Cursor: rules, mcp.json" },
    { ".gemini", "Gemini CLI: settings.json (MCP, tools)" },
    { ".vscode", "VS Code: tasks.json (runOn folderOpen), settings.json interpreter paths, launch.json" },
    { ".idea", "JetBrains IDEs: run configurations, startup tasks" },
    { ".devcontainer", "Dev Containers: devcontainer.json (initializeCommand runs on the host)" },
    { ".envrc", "direnv: a shell script run on cd" },
    { ".tool-versions", "asdf and mise: plugins installed and run" },
    { ".mise.toml", "mise: tasks, hooks, env" },
    { "mise.toml", "mise: tasks, hooks, env" },
    { ".mise", "mise: configuration directory" },
    { ".aider.conf.yml", "aider: lint-cmd, test-cmd" },
    { ".zed", "Zed: tasks.json, settings.json" },
    { NULL, NULL },
};

static char lower(char c) { return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

bool lz_hosttools_name_eq(const char *a, size_t alen, const char *b, size_t blen) {
    if (alen != blen)
        return false;
    for (size_t i = 0; i < alen; i++)
        if (lower(a[i]) != lower(b[i]))
            return false;
    return true;
}

const char *lz_hosttools_name_invalid(const char *name) {
    size_t n = strlen(name);
    if (n == 0)
        return "it is empty";
    if (n > LZ_HOSTTOOLS_NAME_MAX)
        return "it is longer than 255 bytes";
    if (strchr(name, '/'))
        return "it contains '/' (give one name, matched at any depth)";
    if (!strcmp(name, ".") || !strcmp(name, ".."))
        return "it is . or ..";
    if (lz_hosttools_name_eq(name, n, ".git", 4))
        return ".git has its own protections (docs/security-git.md)";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return "it contains a control character";
    return NULL;
}

size_t lz_hosttools_match(char *const *names, size_t n, const char *rel) {
    if (!rel || !n)
        return 0;
    const char *p = rel;
    for (;;) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        for (size_t i = 0; i < n; i++)
            if (lz_hosttools_name_eq(p, len, names[i], strlen(names[i])))
                return (size_t)(p - rel) + len;
        if (!e)
            return 0;
        p = e + 1;
    }
}

bool lz_hosttools_is_default(const char *name) {
    for (const struct lz_hosttool_default *d = lz_hosttools_defaults; d->name; d++)
        if (lz_hosttools_name_eq(name, strlen(name), d->name, strlen(d->name)))
            return true;
    return false;
}
