/* coordargs.c — see coordargs.h. */
#include "coordargs.h"
#include "argcodec.h"

#define S(f) offsetof(struct lz_coordinator_args, f)
#define STR(n, f, req)                                                                                                 \
    { n, LZ_ARG_STR, S(f), 0, 0, req, NULL, 0 }
#define FD(n, f)                                                                                                       \
    { n, LZ_ARG_FD, S(f), 0, 0, false, NULL, 0 }

/* first_session: its value is the index of its name. */
static const char *const session_kinds[] = { "pipes", "tty" };

/* The one description of the coordinator's arguments, in the order they
 * are written. */
static const struct lz_arg_spec spec[] = {
    FD("ready-fd", ready_fd),
    STR("workspace", workspace, true),
    STR("domain", expect_domain, true),
    STR("fingerprint", expect_fingerprint, true),
    STR("artifact", artifact_id, true),
    FD("env-fd", env_fd),
    STR("config", config_path, false),
    STR("profile", profile, false),
    STR("publish", publish, false),
    { "first-session", LZ_ARG_ENUM, S(first_session), 0, 0, false, session_kinds, LZ_ARRAY_SIZE(session_kinds) },
};

int lz_coordargs_encode(const struct lz_coordinator_args *a, const char *self, char ***ret_argv, struct lz_error *err) {
    const char *head[] = { self, "__coordinator" };
    return lz_argv_encode(spec, LZ_ARRAY_SIZE(spec), a, head, 2, ret_argv, err);
}

int lz_coordargs_decode(int argc, char *const *argv, struct lz_coordinator_args *ret, struct lz_error *err) {
    struct lz_coordinator_args a;
    int r = lz_argv_decode(spec, LZ_ARRAY_SIZE(spec), argc, argv, &a, err);
    *ret = a; /* on failure: every field absent (lz_argv_decode) */
    return r;
}
