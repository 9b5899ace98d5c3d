/* agents.c — see agents.h. */
#include "agents.h"

/* Every agent persists what a package manager writes (like the built-in
 * default), so that `apt-get install` and `npm install -g` inside
 * survive a Domain restart; its login and settings are volumes beneath
 * {profile_dir}, shared by every workspace of the profile.
 *
 * Claude Code keeps ~/.claude and a file ~/.claude.json; volumes are
 * directories, so CLAUDE_CONFIG_DIR moves both into one directory
 * (Claude Code then keeps .claude.json inside it). The sandbox runs it as
 * root, and Claude Code refuses its unattended mode
 * (--dangerously-skip-permissions) as root unless IS_SANDBOX=1 says it is
 * contained: which it is, here.
 *
 * Codex's and opencode's unattended modes need nothing of the profile
 * (docs/agents.md): Codex's own sandbox (bubblewrap) cannot start inside
 * gVisor, so its bypass flag is the way to run it here; opencode's --auto
 * approves what its configuration asks about. */
/* The names the images' tools fetch from: apt (mmdebstrap's sources:
 * deb.debian.org, plain HTTP as Debian signs the indices, and the
 * security archive), npm, pip, cargo, the Go module proxy and checksum
 * database, and GitHub (git over SSH and HTTPS, its API and codeload,
 * raw files and release assets on githubusercontent.com). */
const char *const lz_dev_hosts[] = {
    "deb.debian.org:80,443",       "security.debian.org:80,443",
    "registry.npmjs.org:443",      "pypi.org:443",
    "files.pythonhosted.org:443",  "crates.io:443",
    "static.crates.io:443",        "index.crates.io:443",
    "proxy.golang.org:443",        "sum.golang.org:443",
    "github.com:22,443",           "*.github.com:443",
    "*.githubusercontent.com:443", NULL,
};

/* What each agent needs to work (docs/agents.md "What the agents
 * contact"): its model API and its login. Left out on purpose: telemetry
 * and error reports (Claude Code's datadoghq.com and sentry.io; it works
 * without them), self-updates outside npm (downloads.claude.ai,
 * storage.googleapis.com: `lazaret image bootstrap --refresh` updates the
 * image), and opencode's session sharing (opncd.ai: it publishes the
 * session). A profile adds any of them with allow_hosts. */
static const char *const claude_hosts[] = {
    "api.anthropic.com:443",
    "claude.ai:443",
    "platform.claude.com:443",
    NULL,
};
static const char *const codex_hosts[] = {
    "api.openai.com:443",
    "chatgpt.com:443",
    "auth.openai.com:443",
    NULL,
};
static const char *const opencode_hosts[] = {
    "api.anthropic.com:443",
    "api.openai.com:443",
    "auth.openai.com:443",
    "opencode.ai:443",
    "models.opencode.ai:443",
    "models.dev:443",
    NULL,
};

/* The API keys: held on the host, added by the Domain's TLS gate
 * (docs/credentials.md); the sandbox sees a placeholder. */
#define ANTHROPIC_CREDENTIAL                                                                                           \
    "ANTHROPIC_API_KEY = { host = \"api.anthropic.com\", header = \"x-api-key\", format = \"{}\", "                    \
    "from_env = \"ANTHROPIC_API_KEY\" }"
/* A subscription's long-lived token (`claude setup-token` on the host),
 * sent as a bearer token to the same host. */
#define CLAUDE_OAUTH_CREDENTIAL                                                                                        \
    "CLAUDE_CODE_OAUTH_TOKEN = { host = \"api.anthropic.com\", header = \"authorization\", format = \"Bearer {}\", "   \
    "from_env = \"CLAUDE_CODE_OAUTH_TOKEN\" }"
#define OPENAI_CREDENTIAL                                                                                              \
    "OPENAI_API_KEY = { host = \"api.openai.com\", header = \"authorization\", format = \"Bearer {}\", "               \
    "from_env = \"OPENAI_API_KEY\" }"

const struct lz_agent lz_agents[] = {
    {
        .name = "claude",
        .npm_package = "@anthropic-ai/claude-code",
        .profile = "image = \"" LZ_AGENT_IMAGE_PREFIX "claude\"\n"
                   "command = [\"claude\"]\n"
                   "persistent_dirs = [\"/etc\", \"/opt\", \"/root\", \"/usr\", \"/var\"]\n"
                   "volumes = [\n"
                   "  { host = \"{profile_dir}/claude\", container = \"/root/.claude\", mode = \"rw\" },\n"
                   "]\n"
                   "env = { CLAUDE_CONFIG_DIR = \"/root/.claude\", IS_SANDBOX = \"1\" }\n"
                   "credentials = { " ANTHROPIC_CREDENTIAL ", " CLAUDE_OAUTH_CREDENTIAL " }\n",
        .hosts = claude_hosts,
    },
    {
        .name = "codex",
        .npm_package = "@openai/codex",
        .profile = "image = \"" LZ_AGENT_IMAGE_PREFIX "codex\"\n"
                   "command = [\"codex\"]\n"
                   "persistent_dirs = [\"/etc\", \"/opt\", \"/root\", \"/usr\", \"/var\"]\n"
                   "volumes = [\n"
                   "  { host = \"{profile_dir}/codex\", container = \"/root/.codex\", mode = \"rw\" },\n"
                   "]\n"
                   "credentials = { " OPENAI_CREDENTIAL " }\n",
        .hosts = codex_hosts,
    },
    {
        .name = "opencode",
        .npm_package = "opencode-ai",
        .profile = "image = \"" LZ_AGENT_IMAGE_PREFIX "opencode\"\n"
                   "command = [\"opencode\"]\n"
                   "persistent_dirs = [\"/etc\", \"/opt\", \"/root\", \"/usr\", \"/var\"]\n"
                   "volumes = [\n"
                   "  { host = \"{profile_dir}/config\", container = \"/root/.config/opencode\", mode = \"rw\" },\n"
                   "  { host = \"{profile_dir}/share\", container = \"/root/.local/share/opencode\", mode = \"rw\" },\n"
                   "]\n"
                   "credentials = { " ANTHROPIC_CREDENTIAL ", " OPENAI_CREDENTIAL " }\n",
        .hosts = opencode_hosts,
    },
    { 0 },
};

const struct lz_agent *lz_agent_find(const char *name) {
    for (const struct lz_agent *a = lz_agents; name && a->name; a++)
        if (strcmp(a->name, name) == 0)
            return a;
    return NULL;
}

const struct lz_agent *lz_agent_of_image(const char *image) {
    size_t n = strlen(LZ_AGENT_IMAGE_PREFIX);
    if (!image || strncmp(image, LZ_AGENT_IMAGE_PREFIX, n) != 0)
        return NULL;
    return lz_agent_find(image + n);
}
