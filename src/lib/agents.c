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
                   "env = { CLAUDE_CONFIG_DIR = \"/root/.claude\", IS_SANDBOX = \"1\", "
                   "ANTHROPIC_API_KEY = \"env:ANTHROPIC_API_KEY\" }\n",
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
                   "env = { OPENAI_API_KEY = \"env:OPENAI_API_KEY\" }\n",
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
                   "env = { ANTHROPIC_API_KEY = \"env:ANTHROPIC_API_KEY\", OPENAI_API_KEY = \"env:OPENAI_API_KEY\" }\n",
    },
    { 0 },
};

const struct lz_agent *lz_agent_find(const char *name) {
    for (const struct lz_agent *a = lz_agents; name && a->name; a++)
        if (strcmp(a->name, name) == 0)
            return a;
    return NULL;
}
