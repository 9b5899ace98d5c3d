/* agents.h — the built-in agent profiles (claude, codex, opencode) and
 * the recipes of their images.
 *
 * Contract
 * --------
 * Each agent has a built-in profile, written as the TOML body of a
 * [profiles.NAME] table and loaded through the same parser and checks as
 * a profile of the configuration file (config.c), so that a built-in can
 * never be something a user could not have written. It is used only when
 * the configuration does not define a profile of that name.
 *
 * Its image, "builtin:agent-NAME", is the default Debian base
 * (LZ_BOOTSTRAP_PACKAGES, suite LZ_AGENT_SUITE) plus Node.js and npm from
 * Debian plus the agent's npm package, installed globally by mmdebstrap's
 * customize hook (bootstrap.c); one layer, stored in the Storage Root.
 *
 * The agent's own state lives in volumes beneath {profile_dir}, never in
 * the workspace. env: references of a built-in profile are optional: an
 * unset host variable is not passed (lz_profile.env[i].value stays NULL),
 * where a user profile refuses to start. */
#pragma once

#include "util.h"

#define LZ_AGENT_SUITE "bookworm"
#define LZ_AGENT_IMAGE_PREFIX "builtin:agent-"
/* Debian packages added to the base for every agent. */
#define LZ_AGENT_PACKAGES "nodejs,npm"

struct lz_agent {
    const char *name;        /* profile name and image suffix */
    const char *npm_package; /* installed with npm install -g */
    const char *profile;     /* TOML body of [profiles.NAME] */
};

/* The agent of that name, or NULL. */
const struct lz_agent *lz_agent_find(const char *name);
/* The agents, in a fixed order, NULL-terminated by name. */
extern const struct lz_agent lz_agents[];
