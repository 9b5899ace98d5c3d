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
 * where a user profile refuses to start.
 *
 * Egress by name (config.h, enum lz_egress): under the "balanced" preset a
 * profile may resolve the names of lz_dev_hosts (package registries,
 * GitHub, Debian's archive: what the images' own tools fetch from) and,
 * when its image is an agent's ("builtin:agent-NAME", whatever the
 * profile is called: the image is what runs the agent), that agent's
 * hosts. The lists are host rules as hostrule.h parses them, ports
 * explicit; each is NULL-terminated. lz_egress_preset() gives the list of
 * an image; config.c parses it as it parses a profile's allow_hosts. */
#pragma once

#include "util.h"

#define LZ_AGENT_SUITE "bookworm"
#define LZ_AGENT_IMAGE_PREFIX "builtin:agent-"
/* Debian packages added to the base for every agent. */
#define LZ_AGENT_PACKAGES "nodejs,npm"

struct lz_agent {
    const char *name;         /* profile name and image suffix */
    const char *npm_package;  /* installed with npm install -g */
    const char *profile;      /* TOML body of [profiles.NAME] */
    const char *const *hosts; /* the agent's own names under "balanced" */
};

/* The developer names every profile may resolve under "balanced". */
extern const char *const lz_dev_hosts[];

/* The agent whose image ref is this ("builtin:agent-NAME"), or NULL. */
const struct lz_agent *lz_agent_of_image(const char *image);

/* The agent of that name, or NULL. */
const struct lz_agent *lz_agent_find(const char *name);
/* The agents, in a fixed order, NULL-terminated by name. */
extern const struct lz_agent lz_agents[];
