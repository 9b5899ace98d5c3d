/* test_config.c — loading, validation and resolution of the trusted host
 * configuration: the good fixtures, every bad fixture with its exact message,
 * expansions, environment resolution, canonical-path and SR-2 checks in a
 * temporary tree, and fingerprint behaviour.
 *
 * Layout of the temporary tree (@ below):
 *   @/home            HOME; ~/shared exists, ~/link -> ~/shared
 *   @/ws              the workspace, with .git/hooks and sub/
 * Fixtures live in $LZ_TEST_SRCDIR/tests/unit/data/config/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "autoapprove.h"
#include "config.h"
#include "domain_id.h"
#include "privdirs.h"
#include "procenv.h"
#include "sbwrite.h"

static char root[1024], home[1100], ws[1100], fixtures[4096], orig_path[4096];

static void xmkdir(const char *dir, const char *sub) {
    char p[4096];
    assert_int_equal(lz_snprintf(p, sizeof p, "%s/%s", dir, sub), 0);
    assert_int_equal(lz_mkdir_p(p, 0700), 0);
}

static void write_file(const char *path, const char *content) {
    assert_int_equal(lz_write_file_atomic_at(AT_FDCWD, path, content, strlen(content), 0600), 0);
}

static int setup(void **state) {
    (void)state;
    const char *src = getenv("LZ_TEST_SRCDIR");
    if (!src)
        src = ".";
    if (lz_snprintf(fixtures, sizeof fixtures, "%s/tests/unit/data/config", src) < 0)
        return -1;
    const char *path = getenv("PATH");
    snprintf(orig_path, sizeof orig_path, "%s", path ? path : "/usr/bin:/bin");
    char tmpl[] = "/tmp/lz-test-config-XXXXXX";
    if (!mkdtemp(tmpl))
        return -1;
    /* /tmp may itself be a symlink somewhere: work with the canonical path. */
    char *rp = realpath(tmpl, NULL);
    if (!rp || strlen(rp) > 512)
        return -1;
    snprintf(root, sizeof root, "%s", rp);
    free(rp);
    snprintf(home, sizeof home, "%s/home", root);
    snprintf(ws, sizeof ws, "%s/ws", root);
    xmkdir(home, "shared");
    xmkdir(ws, ".git/hooks");
    xmkdir(ws, "sub");
    xmkdir(root, "plain");
    char link[4096 + 16], target[4096 + 16];
    snprintf(link, sizeof link, "%s/link", home);
    snprintf(target, sizeof target, "%s/shared", home);
    if (symlink(target, link) < 0)
        return -1;
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return lz_rm_rf_at(AT_FDCWD, root) < 0 ? -1 : 0;
}

/* Fresh environment for every test. */
static int env_reset(void **state) {
    (void)state;
    setenv("HOME", home, 1);
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("XDG_DATA_HOME");
    setenv("LZ_TEST_API_KEY", "sk-test-secret-value", 1);
    setenv("LZ_TEST_VEC", "vector-secret", 1);
    unsetenv("LZ_TEST_MISSING_VAR");
    unsetenv("LZ_TEST_UNSET_VAR");
    setenv("PATH", orig_path, 1);
    unsetenv("XDG_RUNTIME_DIR");
    return 0;
}

static int load_path(const char *path, const char *profile, const char *workspace, struct lz_config **c,
                     struct lz_error *err) {
    struct lz_config_opts o = { .config_path = path, .profile = profile, .workspace = workspace ? workspace : ws };
    memset(err, 0, sizeof *err);
    return lz_config_load(&o, c, err);
}

static int load(const char *fixture, const char *profile, struct lz_config **c, struct lz_error *err) {
    char p[8192];
    snprintf(p, sizeof p, "%s/%s", fixtures, fixture);
    return load_path(p, profile, NULL, c, err);
}

static struct lz_config *load_ok(const char *fixture, const char *profile) {
    struct lz_config *c = NULL;
    struct lz_error err;
    int r = load(fixture, profile, &c, &err);
    if (r < 0)
        print_error("%s: unexpected failure: %s\n", fixture, err.msg);
    assert_int_equal(r, 0);
    assert_non_null(c);
    return c;
}

/* Replaces every '@' in in by the temporary root. */
static void subst(const char *in, char *out, size_t size) {
    size_t o = 0;
    for (; *in && o + 1 < size; in++) {
        if (*in == '@') {
            int r = snprintf(out + o, size - o, "%s", root);
            o += r > 0 ? (size_t)r : 0;
        } else {
            out[o++] = *in;
        }
    }
    out[o < size ? o : size - 1] = '\0';
}

/* ---- good files ------------------------------------------------------- */

static void test_good_claude(void **state) {
    (void)state;
    struct lz_config *c = load_ok("good.toml", "claude");
    char exp[8192];

    assert_false(c->builtin_default);
    snprintf(exp, sizeof exp, "%s/good.toml", fixtures);
    char *canon = realpath(exp, NULL);
    assert_non_null(canon);
    assert_string_equal(c->source_path, canon);
    free(canon);
    subst("@/home/data", exp, sizeof exp);
    assert_string_equal(c->data_root, exp);
    assert_string_equal(c->workspace, ws);

    assert_int_equal(c->n_default_allow, 2);
    assert_string_equal(c->default_allow[0], "198.51.100.53/32");
    assert_string_equal(c->default_allow[1], "192.0.2.53/32");
    assert_int_equal(c->n_default_deny, 3); /* the duplicate 10.0.0.0/8 is folded */
    assert_string_equal(c->default_deny[2], "192.168.0.0/16");

    assert_true(c->escalation_enabled);
    subst("@/home/sockets", exp, sizeof exp);
    assert_string_equal(c->escalation_socket_dir, exp);
    assert_int_equal(c->n_auto_approve, 2);
    assert_int_equal(c->auto_approve[0].argc, 3);
    assert_string_equal(c->auto_approve[0].argv[2], "get-caller-identity");
    assert_null(c->auto_approve[0].argv[3]);
    assert_false(c->auto_approve[0].allow_extra_args);
    assert_true(c->auto_approve[1].allow_extra_args);

    const struct lz_profile *p = &c->profile;
    assert_string_equal(p->name, "claude");
    assert_string_equal(p->image, "docker.io/library/debian:trixie");
    assert_int_equal(p->n_persistent_dirs, 5);
    assert_string_equal(p->persistent_dirs[4], "/opt");
    assert_int_equal(p->n_allow_egress, 1);
    assert_string_equal(p->allow_egress[0], "10.222.0.0/16");
    assert_int_equal(p->n_deny_egress, 1);
    assert_string_equal(p->deny_egress[0], "198.18.0.0/15");
    assert_false(p->ignored_state);

    assert_int_equal(p->n_env, 2);
    assert_string_equal(p->env[0].name, "ANTHROPIC_API_KEY");
    assert_string_equal(p->env[0].reference, "env:LZ_TEST_API_KEY");
    assert_string_equal(p->env[0].value, "sk-test-secret-value");
    assert_string_equal(p->env[1].name, "LANG");
    assert_null(p->env[1].reference);
    assert_string_equal(p->env[1].value, "C.UTF-8");

    assert_int_equal(p->n_volumes, 2);
    subst("@/home/data/claude/claude-config", exp, sizeof exp);
    assert_string_equal(p->volumes[0].host, exp);
    assert_string_equal(p->volumes[0].container, "/root/.claude");
    assert_string_equal(p->volumes[0].mode, "z");
    assert_false(p->volumes[0].read_only);
    assert_true(p->volumes[0].create);
    subst("@/home/shared", exp, sizeof exp);
    assert_string_equal(p->volumes[1].host, exp);
    assert_true(p->volumes[1].read_only);
    assert_false(p->volumes[1].create);

    subst("@/home/data/claude", exp, sizeof exp);
    assert_string_equal(c->profile_dir, exp);
    uint8_t id[32];
    char hex[65];
    assert_int_equal(lz_domain_id_v1("claude", ws, id), 0);
    lz_hex(id, 32, hex);
    assert_string_equal(c->domain_id_hex, hex);
    assert_memory_equal(c->domain_id, id, 32);
    snprintf(exp, sizeof exp, "%s/home/data/domains/%s", root, hex);
    assert_string_equal(c->domain_dir, exp);
    assert_int_equal(strlen(c->fingerprint_hex), 64);

    assert_int_equal(c->n_profile_names, 3);
    assert_string_equal(c->profile_names[2], "opencode");
    lz_config_free(c);
}

static void test_good_default_profile(void **state) {
    (void)state;
    /* No -p: "default" is selected; the other profiles' unset env vars and
     * missing volume hosts do not matter. */
    struct lz_config *c = load_ok("good.toml", NULL);
    assert_string_equal(c->profile.name, "default");
    assert_string_equal(c->profile.image, "docker.io/library/debian:bookworm");
    assert_true(c->profile.ignored_state);
    assert_int_equal(c->profile.n_env, 0);
    assert_int_equal(c->profile.n_volumes, 0);
    lz_config_free(c);
}

static void test_tokens(void **state) {
    (void)state;
    char exp[8192], hash[13], dd[4096], msg[16384];
    uint8_t id[32];
    char hex[65];
    assert_int_equal(lz_domain_id_v1("tok", ws, id), 0);
    lz_hex(id, 32, hex);
    lz_domain_hash(id, hash);
    snprintf(dd, sizeof dd, "%s/data/domains/%s", home, hex);

    /* {domain_dir}/cache must exist: only volumes beneath {profile_dir} are
     * created. */
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load("tokens.toml", "tok", &c, &err), -EINVAL);
    char *dir = realpath(fixtures, NULL);
    snprintf(msg, sizeof msg,
             "%s/tokens.toml:9: profiles.tok.volumes[1].host: \"%s/cache\" does not exist (only "
             "volumes strictly beneath {profile_dir} are created)",
             dir, dd);
    free(dir);
    assert_string_equal(err.msg, msg);

    snprintf(exp, sizeof exp, "%s/cache", dd);
    assert_int_equal(lz_mkdir_p(exp, 0700), 0);
    c = load_ok("tokens.toml", "tok");
    assert_string_equal(c->domain_dir, dd);
    assert_string_equal(c->profile.volumes[1].host, exp);
    assert_true(c->profile.volumes[1].read_only);
    assert_false(c->profile.volumes[1].create);
    snprintf(exp, sizeof exp, "%s/data/tok/tok-%s", home, hash);
    assert_string_equal(c->profile.volumes[0].host, exp);
    assert_true(c->profile.volumes[0].create);
    snprintf(exp, sizeof exp, "%s/sub", ws);
    assert_string_equal(c->profile.volumes[2].host, exp);
    assert_false(c->profile.volumes[2].read_only);
    assert_string_equal(c->profile.volumes[2].mode, "z");
    snprintf(exp, sizeof exp, "%s/shared", home);
    assert_string_equal(c->profile.volumes[3].host, exp);
    lz_config_free(c);
}

static void test_tilde_with_trailing_slash_home(void **state) {
    (void)state;
    char h[8192];
    snprintf(h, sizeof h, "%s/", home);
    setenv("HOME", h, 1);
    struct lz_config *c = load_ok("good.toml", "claude");
    char exp[8192];
    snprintf(exp, sizeof exp, "%s/data", home);
    assert_string_equal(c->data_root, exp);
    lz_config_free(c);
}

/* ---- bad files -------------------------------------------------------- */

struct bad {
    const char *file, *profile;
    const char *msg; /* after "<fixtures>/"; '@' is the temporary root */
};

static const struct bad bad_cases[] = {
    { "bad-auto-approve-empty.toml", "claude",
      "bad-auto-approve-empty.toml:2: escalation.auto_approve[0].argv: must not be empty" },
    { "bad-auto-approve-no-argv.toml", "claude",
      "bad-auto-approve-no-argv.toml:1: escalation.auto_approve[0]: missing required key argv" },
    { "bad-auto-approve-string.toml", "claude",
      "bad-auto-approve-string.toml:2: escalation.auto_approve[0]: expected a table, found a string" },
    { "bad-auto-approve-type.toml", "claude",
      "bad-auto-approve-type.toml:2: escalation.auto_approve[0].argv[1]: expected a string, found an integer" },
    { "bad-conflict-builtin.toml", "claude",
      "bad-conflict-builtin.toml:3: profiles.claude.deny_egress[0]: \"0.0.0.0/0\" is also allowed by built-in "
      "network.default_allow[0]; the same prefix cannot be both allowed and denied" },
    { "bad-conflict-defaults.toml", "claude",
      "bad-conflict-defaults.toml:2: network.default_allow[0]: \"192.168.0.0/16\" is also denied by built-in "
      "network.default_deny[2]; the same prefix cannot be both allowed and denied" },
    { "bad-conflict.toml", "claude",
      "bad-conflict.toml:9: profiles.claude.allow_egress[0]: \"10.0.0.0/8\" is also denied by network.default_deny[0] "
      "at line 4; the same prefix cannot be both allowed and denied" },
    { "bad-container-control.toml", "claude",
      "bad-container-control.toml:3: profiles.claude.volumes[0].container: \"/run/lazaret/x\" overlaps the protected "
      "sandbox destination /run/lazaret" },
    { "bad-container-dup.toml", "claude",
      "bad-container-dup.toml:5: profiles.claude.volumes[1].container: \"/data\" is also the destination of "
      "volumes[0]" },
    { "bad-container-persistent.toml", "claude",
      "bad-container-persistent.toml:4: profiles.claude.volumes[0].container: \"/root\" is also persistent_dirs[0]" },
    { "bad-container-relative.toml", "claude",
      "bad-container-relative.toml:3: profiles.claude.volumes[0].container: \"data\" is not an absolute path" },
    { "bad-container-trailing.toml", "claude",
      "bad-container-trailing.toml:3: profiles.claude.volumes[0].container: \"/data/\" has a trailing '/'" },
    { "bad-container-workspace.toml", "claude",
      "bad-container-workspace.toml:3: profiles.claude.volumes[0].container: \"/workspace/sub\" overlaps the protected "
      "sandbox destination /workspace" },
    { "bad-data-root-symlink.toml", "claude",
      "bad-data-root-symlink.toml:2: storage.data_root: \"@/home/link/data\" is not canonical (its ancestor "
      "\"@/home/link\" resolves to \"@/home/shared\")" },
    { "bad-dotdot-data-root.toml", "claude",
      "bad-dotdot-data-root.toml:2: storage.data_root: \"~/a/../b\" has a '..' segment" },
    { "bad-dotdot-host.toml", "claude",
      "bad-dotdot-host.toml:3: profiles.claude.volumes[0].host: \"{profile_dir}/../x\" has a '..' segment" },
    { "bad-dotdot.toml", "claude",
      "bad-dotdot.toml:3: profiles.claude.persistent_dirs[1]: \"/usr/../etc\" has a '..' segment" },
    { "bad-duplicate-key.toml", "claude",
      "bad-duplicate-key.toml:3: duplicate key profiles.claude.image (first defined at line 2)" },
    { "bad-env-name.toml", "claude",
      "bad-env-name.toml:4: profiles.claude.env.1BAD: not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)" },
    { "bad-env-ref.toml", "claude",
      "bad-env-ref.toml:3: profiles.claude.env.K: \"env:\" does not name a valid host environment variable" },
    { "bad-env-table-type.toml", "claude",
      "bad-env-table-type.toml:3: profiles.claude.env: expected a table, found an array" },
    { "bad-env-type.toml", "claude",
      "bad-env-type.toml:3: profiles.claude.env.K: expected a string, found an integer" },
    { "bad-host-bits.toml", "claude",
      "bad-host-bits.toml:2: network.default_deny[0]: \"10.0.0.1/8\" has host bits set (did you mean "
      "\"10.0.0.0/8\"?)" },
    { "bad-image.toml", "claude", "bad-image.toml:2: profiles.claude.image: \"a b\" is not an image reference" },
    { "bad-ipv6.toml", "claude",
      "bad-ipv6.toml:2: network.default_deny[1]: \"fd00::/8\" is an IPv6 prefix; IPv6 is disabled in v1" },
    { "bad-missing-env.toml", "claude",
      "bad-missing-env.toml:3: profiles.claude.env.K: host environment variable \"LZ_TEST_MISSING_VAR\" is not set" },
    { "bad-missing-image.toml", "claude", "bad-missing-image.toml:1: profiles.claude: missing required key image" },
    { "bad-other-profile.toml", "default",
      "bad-other-profile.toml:6: profiles.other.persistent_dirs[0]: \"/usr/../etc\" has a '..' segment" },
    { "bad-persistent-dot.toml", "claude",
      "bad-persistent-dot.toml:3: profiles.claude.persistent_dirs[0]: \"/usr/./local\" has a '.' segment" },
    { "bad-persistent-dup.toml", "claude",
      "bad-persistent-dup.toml:3: profiles.claude.persistent_dirs[1]: \"/root\" is listed twice (also "
      "persistent_dirs[0])" },
    { "bad-persistent-overlap.toml", "claude",
      "bad-persistent-overlap.toml:5: profiles.claude.persistent_dirs[1]: \"/usr\" overlaps persistent_dirs[0] "
      "\"/usr/local\" (no persistent directory may contain another)" },
    { "bad-persistent-root.toml", "claude",
      "bad-persistent-root.toml:3: profiles.claude.persistent_dirs[0]: \"/\" cannot be a destination" },
    { "bad-persistent-run.toml", "claude",
      "bad-persistent-run.toml:3: profiles.claude.persistent_dirs[0]: \"/run\" overlaps the protected sandbox "
      "destination /run/lazaret" },
    { "bad-persistent-type.toml", "claude",
      "bad-persistent-type.toml:3: profiles.claude.persistent_dirs[1]: expected a string, found an integer" },
    { "bad-prefix-len.toml", "claude",
      "bad-prefix-len.toml:3: profiles.claude.allow_egress[0]: \"10.0.0.0/33\" has an invalid prefix length (0 to "
      "32)" },
    { "bad-prefix-no-len.toml", "claude",
      "bad-prefix-no-len.toml:3: profiles.claude.deny_egress[0]: \"10.0.0.1\" has no prefix length (write a.b.c.d/len, "
      "e.g. /32 for one address)" },
    { "bad-prefix-octal.toml", "claude",
      "bad-prefix-octal.toml:2: network.default_allow[0]: \"010.0.0.0/8\" is not an IPv4 prefix of the form "
      "a.b.c.d/len" },
    { "bad-prefix-type.toml", "claude",
      "bad-prefix-type.toml:2: network.default_allow: expected an array, found a string" },
    { "bad-profile-key.toml", "claude",
      "bad-profile-key.toml:3: profiles.claude.ignored-state: unknown key (expected one of: image, persistent_dirs, "
      "allow_egress, deny_egress, env, volumes, ignored_state, host_ca_certificates, command, host_tool_paths_add, "
      "host_tool_paths_remove, egress, allow_hosts, deny_hosts, tls_gate, publish, credentials, private_dirs)" },
    { "bad-profile-name-dot.toml", "claude",
      "bad-profile-name-dot.toml:1: profiles.\"a.b\": invalid profile name (must match ^[a-z0-9_-]{2,32}$)" },
    { "bad-profile-name-short.toml", "claude",
      "bad-profile-name-short.toml:1: profiles.a: invalid profile name (must match ^[a-z0-9_-]{2,32}$)" },
    { "bad-profile-name-after.toml", "claude",
      "bad-profile-name-after.toml:6: profiles.Other: invalid profile name (must match ^[a-z0-9_-]{2,32}$)" },
    { "bad-profile-name.toml", "claude",
      "bad-profile-name.toml:1: profiles.Claude: invalid profile name (must match ^[a-z0-9_-]{2,32}$)" },
    { "bad-profile-reserved.toml", "claude",
      "bad-profile-reserved.toml:1: profiles.domains: the profile name \"domains\" is reserved ({data_root}/domains is "
      "Lazaret's own)" },
    { "bad-profile-reserved-images.toml", "claude",
      "bad-profile-reserved-images.toml:1: profiles.images: the profile name \"images\" is reserved "
      "({data_root}/images is Lazaret's own)" },
    { "bad-profile-type.toml", "claude", "bad-profile-type.toml:2: profiles.claude: expected a table, found a string" },
    { "bad-redefined-table.toml", "claude",
      "bad-redefined-table.toml:4: table [profiles.claude] is defined twice (first at line 1)" },
    { "bad-relative-data-root.toml", "claude",
      "bad-relative-data-root.toml:2: storage.data_root: \"data\" is not an absolute path" },
    { "bad-relative-host.toml", "claude",
      "bad-relative-host.toml:3: profiles.claude.volumes[0].host: \"relative/dir\" is not an absolute path" },
    { "bad-relative-socket-dir.toml", "claude",
      "bad-relative-socket-dir.toml:2: escalation.socket_dir: \"run/lazaret\" is not an absolute path" },
    { "bad-relative-token.toml", "claude",
      "bad-relative-token.toml:3: profiles.claude.volumes[0].host: \"{profile_name}/x\" (expanded to \"claude/x\") is "
      "not an absolute path" },
    { "bad-syntax.toml", "claude", "bad-syntax.toml:3: expected ',' or ']' in an array, found '\"'" },
    { "bad-tilde-user.toml", "claude",
      "bad-tilde-user.toml:2: storage.data_root: \"~root/data\" is not an absolute path" },
    { "bad-token-data-root.toml", "claude",
      "bad-token-data-root.toml:2: storage.data_root: expansion tokens are not allowed here: \"{profile_dir}/x\"" },
    { "bad-type-section.toml", "claude", "bad-type-section.toml:1: storage: expected a table, found a string" },
    { "bad-type.toml", "claude", "bad-type.toml:2: escalation.enabled: expected a boolean, found a string" },
    { "bad-unknown-key.toml", "claude",
      "bad-unknown-key.toml:2: storage.data_roots: unknown key (expected one of: data_root, prepared_keep_days, "
      "prepared_max_bytes, linger_seconds)" },
    { "bad-unknown-section.toml", "claude",
      "bad-unknown-section.toml:1: storag: unknown key (expected one of: storage, network, escalation, profiles)" },
    { "bad-unknown-token.toml", "claude",
      "bad-unknown-token.toml:3: profiles.claude.volumes[0].host: unknown expansion token \"{home}\" in \"{home}/x\" "
      "(known: {profile_dir}, {domain_dir}, {profile_name}, {domain_hash}, {workspace_dir})" },
    { "bad-volume-gitdir.toml", "claude",
      "bad-volume-gitdir.toml:3: profiles.claude.volumes[0].host: \"@/ws/.git/hooks\" is inside the workspace's .git "
      "directory (SR-4)" },
    { "bad-volume-key.toml", "claude",
      "bad-volume-key.toml:3: profiles.claude.volumes[0].options: unknown key (expected one of: host, container, "
      "mode)" },
    { "bad-volume-missing.toml", "claude",
      "bad-volume-missing.toml:3: profiles.claude.volumes[0].host: \"@/home/missing\" does not exist (only volumes "
      "strictly beneath {profile_dir} are created)" },
    { "bad-volume-mode.toml", "claude",
      "bad-volume-mode.toml:3: profiles.claude.volumes[0].mode: \"rx\" is not a volume mode (one of \"rw\", \"ro\", "
      "\"z\")" },
    { "bad-volume-no-mode.toml", "claude",
      "bad-volume-no-mode.toml:3: profiles.claude.volumes[0]: missing required key mode (one of \"rw\", \"ro\", "
      "\"z\")" },
    { "bad-volume-storage-root.toml", "claude",
      "bad-volume-storage-root.toml:3: profiles.claude.volumes[0].host: \"@/home\" contains the Storage Root" },
    { "bad-volume-symlink.toml", "claude",
      "bad-volume-symlink.toml:3: profiles.claude.volumes[0].host: \"@/home/link\" is not canonical (it resolves to "
      "\"@/home/shared\")" },
    { "bad-volume-type.toml", "claude",
      "bad-volume-type.toml:3: profiles.claude.volumes[0]: expected a table, found a string" },
    { "bad-volume-workspace.toml", "claude",
      "bad-volume-workspace.toml:3: profiles.claude.volumes[0].host: \"@/ws\" contains the workspace; it is mounted "
      "only at /workspace, with its .git protections" },
    /* selecting a profile that is not defined: no fallback */
    { "good.toml", "nope",
      "good.toml: profile \"nope\" is not defined (defined profiles: default, claude, opencode; built-in: default, "
      "claude, codex, opencode)" },
    { "bad-unknown-key.toml", NULL,
      "bad-unknown-key.toml:2: storage.data_roots: unknown key (expected one of: data_root, prepared_keep_days, "
      "prepared_max_bytes, linger_seconds)" },
    /* path resolution comes before environment resolution */
    { "good.toml", "opencode",
      "good.toml:50: profiles.opencode.volumes[0].host: \"@/home/does-not-exist\" does not exist (only volumes "
      "strictly beneath {profile_dir} are created)" },
};

static void test_bad_fixtures(void **state) {
    (void)state;
    int failures = 0;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad_cases); i++) {
        const struct bad *b = &bad_cases[i];
        struct lz_config *c = NULL;
        struct lz_error err;
        char tail[4096], exp[8192];
        subst(b->msg, tail, sizeof tail);
        char *dir = realpath(fixtures, NULL);
        assert_non_null(dir);
        snprintf(exp, sizeof exp, "%s/%s", dir, tail);
        free(dir);
        int r = load(b->file, b->profile, &c, &err);
        if (r >= 0) {
            print_error("%s: accepted, expected \"%s\"\n", b->file, exp);
            lz_config_free(c);
            failures++;
        } else if (strcmp(err.msg, exp) != 0 || err.code != r) {
            print_error("%s:\n   got \"%s\"\n  want \"%s\"\n", b->file, err.msg, exp);
            failures++;
        }
        assert_null(c);
    }
    assert_int_equal(failures, 0);
}

static void test_bad_volume_domain_dir(void **state) {
    (void)state;
    /* {domain_dir} itself holds the Domain Store: never a volume. */
    uint8_t id[32];
    char hex[65], dd[8192], exp[16384];
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(lz_domain_id_v1("claude", ws, id), 0);
    lz_hex(id, 32, hex);
    snprintf(dd, sizeof dd, "%s/.local/share/lazaret/domains/%s", home, hex);
    assert_int_equal(lz_mkdir_p(dd, 0700), 0);
    assert_int_equal(load("bad-volume-domain-dir.toml", "claude", &c, &err), -EINVAL);
    char *dir = realpath(fixtures, NULL);
    snprintf(exp, sizeof exp,
             "%s/bad-volume-domain-dir.toml:3: profiles.claude.volumes[0].host: \"%s\" is Lazaret's own "
             "state under the Storage Root; only paths strictly beneath {profile_dir} or {domain_dir} may be volumes",
             dir, dd);
    free(dir);
    assert_string_equal(err.msg, exp);
}

/* ---- generated files -------------------------------------------------- */

static void expect_fail_content(const char *name, const char *content, const char *profile, const char *msg_fmt) {
    char path[8192], exp[16384], tail[8192];
    snprintf(path, sizeof path, "%s/%s", root, name);
    write_file(path, content);
    struct lz_config *c = NULL;
    struct lz_error err;
    int r = load_path(path, profile, NULL, &c, &err);
    subst(msg_fmt, tail, sizeof tail);
    snprintf(exp, sizeof exp, "%s:%s", path, tail);
    if (r >= 0)
        lz_config_free(c);
    assert_true(r < 0);
    if (strcmp(err.msg, exp) != 0)
        print_error("got  \"%s\"\nwant \"%s\"\n", err.msg, exp);
    assert_string_equal(err.msg, exp);
}

static void test_sr2_config_in_volume(void **state) {
    (void)state;
    char path[8192], exp[16384];
    xmkdir(home, "cfg");
    snprintf(path, sizeof path, "%s/cfg/config.toml", home);
    write_file(path,
               "[profiles.claude]\nimage = \"img\"\n"
               "volumes = [{ host = \"~/cfg\", container = \"/cfg\", mode = \"ro\" }]\n");
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), -EINVAL);
    snprintf(exp, sizeof exp,
             "%s:3: profiles.claude.volumes[0].host: \"%s/cfg\" contains the configuration file; host "
             "configuration must not be mounted into the sandbox (SR-2)",
             path, home);
    assert_string_equal(err.msg, exp);

    /* the file itself as a volume */
    write_file(path,
               "[profiles.claude]\nimage = \"img\"\n"
               "volumes = [{ host = \"~/cfg/config.toml\", container = \"/cfg\", mode = \"ro\" }]\n");
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "contains the configuration file"));
}

static void test_sr2_config_in_workspace(void **state) {
    (void)state;
    char path[8192], exp[16384];
    snprintf(path, sizeof path, "%s/sub/lazaret.toml", ws);
    write_file(path, "[profiles.claude]\nimage = \"img\"\n");
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), -EINVAL);
    snprintf(exp, sizeof exp,
             "%s: the configuration file is inside the workspace \"%s\"; host configuration must not "
             "be reachable from the sandbox (SR-2)",
             path, ws);
    assert_string_equal(err.msg, exp);

    /* a symlink to it from outside the workspace does not help: the
     * canonical target is what counts */
    char link[8192];
    snprintf(link, sizeof link, "%s/cfg-link.toml", root);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(load_path(link, "claude", NULL, &c, &err), -EINVAL);
    assert_string_equal(err.msg, exp);
    unlink(link);
    unlink(path);
}

/* Commands that start no sandbox (image, doctor) load the configuration
 * with no_workspace: in a directory that holds the configuration file, the
 * Storage Root and an auto-approval rule's executable ($HOME, typically),
 * they work, while a run there is refused as before. */
static void test_no_workspace_in_any_directory(void **state) {
    (void)state;
    char path[8192], content[16384], tool[8192];
    snprintf(path, sizeof path, "%s/home/.config/lazaret/config.toml", ws);
    snprintf(tool, sizeof tool, "%s/home/bin/tool", ws);
    snprintf(content, sizeof content, "%s/home/.config/lazaret", ws);
    assert_int_equal(lz_mkdir_p(content, 0700), 0);
    snprintf(content, sizeof content, "%s/home/bin", ws);
    assert_int_equal(lz_mkdir_p(content, 0700), 0);
    write_file(tool, "#!/bin/sh\n");
    assert_int_equal(chmod(tool, 0755), 0);
    snprintf(content, sizeof content,
             "[storage]\ndata_root = \"%s/home/.local/share/lazaret\"\n"
             "[[escalation.auto_approve]]\nargv = [\"%s\"]\n"
             "[profiles.claude]\nimage = \"img\"\n",
             ws, tool);
    write_file(path, content);
    char hd[8192];
    snprintf(hd, sizeof hd, "%s/home", ws);
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load_path(path, "claude", hd, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "overlap"));

    struct lz_config_opts o = { .config_path = path, .profile = "claude", .workspace = hd, .no_workspace = true };
    memset(&err, 0, sizeof err);
    assert_int_equal(lz_config_load(&o, &c, &err), 0);
    char want[8192];
    snprintf(want, sizeof want, "%s/home/.local/share/lazaret", ws);
    assert_string_equal(c->data_root, want);
    lz_config_free(c);
    /* What the file gets wrong is still refused. */
    write_file(path, "[profiles.claude]\n");
    memset(&err, 0, sizeof err);
    assert_int_equal(lz_config_load(&o, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "missing required key image"));
    unlink(path);
    unlink(tool);
}

static void test_data_root_in_workspace(void **state) {
    (void)state;
    char content[8192];
    snprintf(content, sizeof content, "[storage]\ndata_root = \"%s/state\"\n[profiles.claude]\nimage = \"img\"\n", ws);
    expect_fail_content("dr.toml", content, "claude",
                        "2: storage.data_root: the Storage Root \"@/ws/state\" and the workspace \"@/ws\" overlap; the "
                        "sandbox could reach Lazaret's own state; run lazaret in a project directory, or set [storage] "
                        "data_root outside the workspace");
    snprintf(content, sizeof content, "[escalation]\nsocket_dir = \"%s/sub\"\n[profiles.claude]\nimage = \"img\"\n",
             ws);
    expect_fail_content("sd-ws.toml", content, "claude",
                        "2: escalation.socket_dir: \"@/ws/sub\" and the workspace \"@/ws\" overlap");
    expect_fail_content("sd.toml",
                        "[escalation]\nsocket_dir = \"~\"\n[profiles.claude]\nimage = \"img\"\n"
                        "volumes = [{ host = \"~/shared\", container = \"/s\", mode = \"rw\" }]\n",
                        "claude",
                        "5: profiles.claude.volumes[0].host: \"@/home/shared\" overlaps escalation.socket_dir");
}

static void test_gc_keys(void **state) {
    (void)state;
    char path[8192];
    snprintf(path, sizeof path, "%s/gc.toml", root);
    write_file(path,
               "[storage]\nprepared_keep_days = 0\nprepared_max_bytes = 10737418240\nlinger_seconds = 0\n"
               "[profiles.claude]\nimage = \"img\"\n");
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    assert_int_equal(c->prepared_keep_days, 0);
    assert_int_equal(c->prepared_max_bytes, UINT64_C(10737418240));
    assert_int_equal(c->linger_seconds, 0);
    uint8_t fp[32];
    memcpy(fp, c->fingerprint, sizeof fp);
    lz_config_free(c);
    /* the gc policy is not part of the Configuration Fingerprint */
    write_file(path, "[storage]\n[profiles.claude]\nimage = \"img\"\n");
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    assert_int_equal(c->prepared_keep_days, 14);
    assert_int_equal(c->prepared_max_bytes, 0);
    assert_int_equal(c->linger_seconds, LZ_LINGER_SECONDS_DEFAULT);
    /* nor is the linger: the coordinator's own timer */
    assert_memory_equal(c->fingerprint, fp, sizeof fp);
    lz_config_free(c);

    expect_fail_content("gc-neg.toml", "[storage]\nprepared_keep_days = -1\n[profiles.claude]\nimage = \"img\"\n",
                        "claude", "2: storage.prepared_keep_days: -1 is out of range (0 to 1000000)");
    expect_fail_content("gc-big.toml", "[storage]\nprepared_keep_days = 1000001\n[profiles.claude]\nimage = \"img\"\n",
                        "claude", "2: storage.prepared_keep_days: 1000001 is out of range (0 to 1000000)");
    expect_fail_content("gc-negb.toml", "[storage]\nprepared_max_bytes = -5\n[profiles.claude]\nimage = \"img\"\n",
                        "claude", "2: storage.prepared_max_bytes: -5 is out of range (0 to 9223372036854775807)");
    expect_fail_content("gc-type.toml", "[storage]\nprepared_max_bytes = \"10G\"\n[profiles.claude]\nimage = \"img\"\n",
                        "claude", "2: storage.prepared_max_bytes: expected an integer, found a string");
    expect_fail_content("linger-neg.toml", "[storage]\nlinger_seconds = -1\n[profiles.claude]\nimage = \"img\"\n",
                        "claude", "2: storage.linger_seconds: -1 is out of range (0 to 86400)");
}

/* lazaret.toml(5), README, docs/state.md: a profile without persistent_dirs
 * gets the built-in default's (what a package manager writes), and
 * `persistent_dirs = []` gets none. */
static void test_persistent_dirs_default(void **state) {
    (void)state;
    static const char *const want[] = { "/etc", "/opt", "/root", "/usr", "/var" };
    char path[8192];
    snprintf(path, sizeof path, "%s/pdirs.toml", root);
    write_file(path, "[profiles.claude]\nimage = \"img\"\n");
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    assert_int_equal(c->profile.n_persistent_dirs, LZ_ARRAY_SIZE(want));
    for (size_t i = 0; i < LZ_ARRAY_SIZE(want); i++)
        assert_string_equal(c->profile.persistent_dirs[i], want[i]);
    uint8_t fp[32];
    memcpy(fp, c->fingerprint, sizeof fp);
    lz_config_free(c);
    /* Listing the same directories is the same configuration. */
    write_file(path,
               "[profiles.claude]\nimage = \"img\"\n"
               "persistent_dirs = [\"/etc\", \"/opt\", \"/root\", \"/usr\", \"/var\"]\n");
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    assert_memory_equal(c->fingerprint, fp, sizeof fp);
    lz_config_free(c);
    /* Control: an empty list is none, and another fingerprint. */
    write_file(path, "[profiles.claude]\nimage = \"img\"\npersistent_dirs = []\n");
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    assert_int_equal(c->profile.n_persistent_dirs, 0);
    assert_memory_not_equal(c->fingerprint, fp, sizeof fp);
    lz_config_free(c);
}

/* Host-tool configuration paths (docs/host-tools.md): the default set, a
 * profile's changes (never silently), and the fingerprint. */
static void test_host_tool_paths(void **state) {
    (void)state;
    char path[8192];
    snprintf(path, sizeof path, "%s/ht.toml", root);
    write_file(path, "[profiles.claude]\nimage = \"img\"\n");
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    size_t n_default = c->profile.n_host_tools;
    assert_true(n_default >= 10);
    bool has_claude = false, has_vscode = false;
    for (size_t i = 0; i < n_default; i++) {
        has_claude = has_claude || !strcmp(c->profile.host_tools[i], ".claude");
        has_vscode = has_vscode || !strcmp(c->profile.host_tools[i], ".vscode");
    }
    assert_true(has_claude && has_vscode);
    assert_int_equal(c->profile.n_host_tools_added + c->profile.n_host_tools_removed, 0);
    uint8_t fp[32];
    memcpy(fp, c->fingerprint, sizeof fp);
    lz_config_free(c);
    write_file(path,
               "[profiles.claude]\nimage = \"img\"\nhost_tool_paths_add = [\".fleet\"]\n"
               "host_tool_paths_remove = [\".IDEA\"]\n");
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    assert_int_equal(c->profile.n_host_tools, n_default);
    assert_string_equal(c->profile.host_tools[n_default - 1], ".fleet");
    for (size_t i = 0; i < c->profile.n_host_tools; i++)
        assert_string_not_equal(c->profile.host_tools[i], ".idea");
    /* A change to the set is a change of the Domain's configuration. */
    assert_memory_not_equal(c->fingerprint, fp, sizeof fp);
    lz_config_free(c);
    expect_fail_content("ht1.toml", "[profiles.claude]\nimage = \"img\"\nhost_tool_paths_remove = [\".nope\"]\n",
                        "claude",
                        "3: profiles.claude.host_tool_paths_remove[0]: \".nope\" is not in the default set (see "
                        "`lazaret config check` or lazaret.toml(5) for it)");
    expect_fail_content("ht2.toml", "[profiles.claude]\nimage = \"img\"\nhost_tool_paths_add = [\".vscode\"]\n",
                        "claude",
                        "3: profiles.claude.host_tool_paths_add[0]: \".vscode\" is already in the default set "
                        "(nothing to add)");
    expect_fail_content("ht3.toml", "[profiles.claude]\nimage = \"img\"\nhost_tool_paths_add = [\".Git\"]\n", "claude",
                        "3: profiles.claude.host_tool_paths_add[0]: \".Git\" is not a host-tool path name: .git has "
                        "its own protections (docs/security-git.md)");
    expect_fail_content("ht4.toml", "[profiles.claude]\nimage = \"img\"\nhost_tool_paths_add = [\"a/b\"]\n", "claude",
                        "3: profiles.claude.host_tool_paths_add[0]: \"a/b\" is not a host-tool path name: it "
                        "contains '/' (give one name, matched at any depth)");
    expect_fail_content("ht5.toml", "[profiles.claude]\nimage = \"img\"\nhost_tool_paths_add = [\"..\"]\n", "claude",
                        "3: profiles.claude.host_tool_paths_add[0]: \"..\" is not a host-tool path name: it is . "
                        "or ..");
    expect_fail_content("ht6.toml", "[profiles.claude]\nimage = \"img\"\nhost_tool_paths_add = [\".x\", \".X\"]\n",
                        "claude", "3: profiles.claude.host_tool_paths_add[1]: \".X\" is listed twice");
    expect_fail_content("ht7.toml", "[profiles.claude]\nimage = \"img\"\nhost_tool_paths_add = \".x\"\n", "claude",
                        "3: profiles.claude.host_tool_paths_add: expected an array, found a string");
}

static void test_limits(void **state) {
    (void)state;
    /* arrays */
    size_t cap = 64 * 1024;
    char *buf = malloc(cap);
    assert_non_null(buf);
    size_t o = (size_t)snprintf(buf, cap, "[profiles.claude]\nimage = \"img\"\npersistent_dirs = [");
    for (int i = 0; i <= LZ_CONFIG_MAX_LIST; i++)
        o += (size_t)snprintf(buf + o, cap - o, "\"/d%d\",", i);
    snprintf(buf + o, cap - o, "]\n");
    expect_fail_content("long-list.toml", buf, "claude", "3: profiles.claude.persistent_dirs: more than 256 elements");

    /* strings */
    o = (size_t)snprintf(buf, cap, "[profiles.claude]\nimage = \"");
    for (int i = 0; i <= LZ_CONFIG_MAX_STRING; i++)
        buf[o++] = 'x';
    snprintf(buf + o, cap - o, "\"\n");
    expect_fail_content("long-string.toml", buf, "claude", "2: profiles.claude.image: string longer than 4096 bytes");
    free(buf);

    /* the file */
    char path[8192];
    snprintf(path, sizeof path, "%s/big.toml", root);
    cap = LZ_CONFIG_MAX_FILE + 2;
    buf = malloc(cap);
    assert_non_null(buf);
    memset(buf, '#', cap - 1);
    buf[cap - 1] = '\0';
    write_file(path, buf);
    free(buf);
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), -EFBIG);
    char exp[16384];
    snprintf(exp, sizeof exp, "%s: larger than 1048576 bytes", path);
    assert_string_equal(err.msg, exp);
    unlink(path);
}

static void test_env_non_utf8(void **state) {
    (void)state;
    setenv("LZ_TEST_API_KEY",
           "bad\xff"
           "value",
           1);
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load("good.toml", "claude", &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg,
                           "good.toml:40: profiles.claude.env.ANTHROPIC_API_KEY: host environment variable "
                           "\"LZ_TEST_API_KEY\" is not valid UTF-8"));
    /* the value never appears in a message */
    assert_null(strstr(err.msg, "value"));
    setenv("LZ_TEST_API_KEY", "", 1); /* empty is a value */
    c = load_ok("good.toml", "claude");
    assert_string_equal(c->profile.env[0].value, "");
    lz_config_free(c);
}

/* ---- locating the file, the built-in default -------------------------- */

static void test_builtin_default(void **state) {
    (void)state;
    char xdg[2048], exp[8192];
    snprintf(xdg, sizeof xdg, "%s/empty-xdg", root);
    assert_int_equal(lz_mkdir_p(xdg, 0700), 0);
    setenv("XDG_CONFIG_HOME", xdg, 1);
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load_path(NULL, NULL, NULL, &c, &err), 0);
    assert_true(c->builtin_default);
    assert_null(c->source_path);
    snprintf(exp, sizeof exp, "%s/.local/share/lazaret", home);
    assert_string_equal(c->data_root, exp);
    assert_int_equal(c->n_default_allow, 1);
    assert_string_equal(c->default_allow[0], "0.0.0.0/0");
    static const char *const deny[] = { "10.0.0.0/8",    "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
                                        "100.64.0.0/10", "127.0.0.0/8",   "224.0.0.0/4",    "240.0.0.0/4" };
    assert_int_equal(c->n_default_deny, LZ_ARRAY_SIZE(deny));
    for (size_t i = 0; i < LZ_ARRAY_SIZE(deny); i++)
        assert_string_equal(c->default_deny[i], deny[i]);
    assert_true(c->escalation_enabled);
    assert_null(c->escalation_socket_dir);
    assert_int_equal(c->n_auto_approve, 0);
    assert_string_equal(c->profile.name, "default");
    assert_string_equal(c->profile.image, LZ_BUILTIN_IMAGE);
    assert_string_equal(c->profile.image, "builtin:debian-bookworm");
    /* where a package manager writes: `apt-get install` persists */
    static const char *const pdirs[] = { "/etc", "/opt", "/root", "/usr", "/var" };
    assert_int_equal(c->profile.n_persistent_dirs, LZ_ARRAY_SIZE(pdirs));
    for (size_t i = 0; i < LZ_ARRAY_SIZE(pdirs); i++)
        assert_string_equal(c->profile.persistent_dirs[i], pdirs[i]);
    assert_int_equal(c->prepared_keep_days, 14);
    assert_int_equal(c->prepared_max_bytes, 0);
    assert_true(c->profile.ignored_state);
    assert_int_equal(c->profile.n_env, 0);
    assert_int_equal(c->profile.n_volumes, 0);
    assert_int_equal(strlen(c->fingerprint_hex), 64);
    lz_config_free(c);

    /* XDG_DATA_HOME moves the Storage Root */
    char data[2048];
    snprintf(data, sizeof data, "%s/xdg-data", root);
    setenv("XDG_DATA_HOME", data, 1);
    assert_int_equal(load_path(NULL, NULL, NULL, &c, &err), 0);
    snprintf(exp, sizeof exp, "%s/lazaret", data);
    assert_string_equal(c->data_root, exp);
    lz_config_free(c);

    /* only "default" and the agents exist without a file */
    assert_int_equal(load_path(NULL, "nope", NULL, &c, &err), -ENOENT);
    assert_string_equal(err.msg,
                        "profile \"nope\" is not defined: no configuration file exists and the built-in "
                        "configuration defines only \"default\", \"claude\", \"codex\" and \"opencode\"");
}

static void test_xdg_lookup(void **state) {
    (void)state;
    char xdg[2048], path[8192], content[256];
    snprintf(xdg, sizeof xdg, "%s/xdg", root);
    snprintf(path, sizeof path, "%s/lazaret", xdg);
    assert_int_equal(lz_mkdir_p(path, 0700), 0);
    snprintf(path, sizeof path, "%s/lazaret/config.toml", xdg);
    snprintf(content, sizeof content, "[profiles.default]\nimage = \"from-xdg\"\n");
    write_file(path, content);
    setenv("XDG_CONFIG_HOME", xdg, 1);
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load_path(NULL, NULL, NULL, &c, &err), 0);
    assert_false(c->builtin_default);
    assert_string_equal(c->source_path, path);
    assert_string_equal(c->profile.image, "from-xdg");
    lz_config_free(c);

    /* without XDG_CONFIG_HOME: $HOME/.config/lazaret/config.toml */
    unsetenv("XDG_CONFIG_HOME");
    snprintf(path, sizeof path, "%s/.config/lazaret", home);
    assert_int_equal(lz_mkdir_p(path, 0700), 0);
    snprintf(path, sizeof path, "%s/.config/lazaret/config.toml", home);
    write_file(path, "[profiles.default]\nimage = \"from-home\"\n");
    assert_int_equal(load_path(NULL, NULL, NULL, &c, &err), 0);
    assert_string_equal(c->source_path, path);
    assert_string_equal(c->profile.image, "from-home");
    lz_config_free(c);

    /* a relative XDG_CONFIG_HOME is ignored, as the XDG spec says */
    setenv("XDG_CONFIG_HOME", "relative", 1);
    assert_int_equal(load_path(NULL, NULL, NULL, &c, &err), 0);
    assert_string_equal(c->source_path, path);
    lz_config_free(c);

    /* an existing file that does not define "default" keeps the built-in
     * default profile, with the file's own sections in force */
    write_file(path, "[profiles.claude]\nimage = \"x\"\n");
    assert_int_equal(load_path(NULL, NULL, NULL, &c, &err), 0);
    assert_string_equal(c->profile.name, "default");
    assert_string_equal(c->profile.image, LZ_BUILTIN_IMAGE);
    assert_true(c->profile.builtin);
    assert_false(c->builtin_default);
    assert_true(c->profile.ignored_state);
    assert_int_equal(c->profile.n_persistent_dirs, 5);
    lz_config_free(c);
    write_file(path, "[escalation]\nprompt_timeout_seconds = 42\n");
    assert_int_equal(load_path(NULL, NULL, NULL, &c, &err), 0);
    assert_string_equal(c->profile.image, LZ_BUILTIN_IMAGE);
    assert_int_equal(c->escalation_prompt_timeout_s, 42);
    lz_config_free(c);
    /* the issue's file: one auto-approval rule and nothing else; default
     * and the built-in agents stay, each with the rule in force */
    write_file(path, "[[escalation.auto_approve]]\nargv = [\"/bin/true\"]\n");
    assert_int_equal(load_path(NULL, NULL, NULL, &c, &err), 0);
    assert_string_equal(c->profile.name, "default");
    assert_string_equal(c->profile.image, LZ_BUILTIN_IMAGE);
    assert_int_equal(c->n_auto_approve, 1);
    lz_config_free(c);
    assert_int_equal(load_path(NULL, "claude", NULL, &c, &err), 0);
    assert_string_equal(c->profile.name, "claude");
    assert_true(c->profile.builtin);
    assert_int_equal(c->n_auto_approve, 1);
    lz_config_free(c);
    /* a file that defines "default" itself is what counts */
    write_file(path, "[profiles.default]\nimage = \"mine\"\n");
    assert_int_equal(load_path(NULL, NULL, NULL, &c, &err), 0);
    assert_string_equal(c->profile.image, "mine");
    assert_false(c->profile.builtin);
    lz_config_free(c);
    /* a name neither the file nor the built-ins define still refuses */
    write_file(path, "# nothing\n");
    assert_int_equal(load_path(NULL, "nope", NULL, &c, &err), -ENOENT);
    char exp[16384];
    snprintf(exp, sizeof exp,
             "%s: profile \"nope\" is not defined (no profiles are defined; built-in: default, claude, codex, "
             "opencode)",
             path);
    assert_string_equal(err.msg, exp);
    unlink(path);
}

static void test_explicit_config_errors(void **state) {
    (void)state;
    struct lz_config *c = NULL;
    struct lz_error err;
    char path[8192], exp[16384];
    snprintf(path, sizeof path, "%s/nonexistent.toml", root);
    assert_int_equal(load_path(path, NULL, NULL, &c, &err), -ENOENT);
    snprintf(exp, sizeof exp, "%s: No such file or directory", path);
    assert_string_equal(err.msg, exp);

    assert_int_equal(load_path(root, NULL, NULL, &c, &err), -EINVAL);
    snprintf(exp, sizeof exp, "%s: not a regular file", root);
    assert_string_equal(err.msg, exp);

    snprintf(path, sizeof path, "%s/../x.toml", root);
    assert_int_equal(load_path(path, NULL, NULL, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "not a usable path"));

    assert_int_equal(load("good.toml", "Bad.Name", &c, &err), -EINVAL);
    assert_string_equal(err.msg, "invalid profile name \"Bad.Name\" (must match ^[a-z0-9_-]{2,32}$)");

    snprintf(path, sizeof path, "%s/no-such-workspace", root);
    assert_int_equal(load("good.toml", "claude", &c, &err), 0);
    lz_config_free(c);
    c = NULL;
    struct lz_config_opts o = { .workspace = path };
    assert_int_equal(lz_config_load(&o, &c, &err), -ENOENT);
    snprintf(exp, sizeof exp, "workspace \"%s\": No such file or directory", path);
    assert_string_equal(err.msg, exp);
    assert_null(c);
}

static void test_workspace_resolution(void **state) {
    (void)state;
    /* NULL workspace = the current directory; symlinks are resolved */
    char cwd[4096], link[8192];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(ws), 0);
    struct lz_config_opts o = { .profile = "claude" };
    char p[8192];
    snprintf(p, sizeof p, "%s/good.toml", fixtures);
    char *abs = realpath(p, NULL);
    assert_non_null(abs);
    o.config_path = abs;
    struct lz_config *c = NULL;
    struct lz_error err;
    int r = lz_config_load(&o, &c, &err);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(r, 0);
    assert_string_equal(c->workspace, ws);
    char fp1[65];
    memcpy(fp1, c->fingerprint_hex, 65);
    lz_config_free(c);

    snprintf(link, sizeof link, "%s/ws-link", root);
    assert_int_equal(symlink(ws, link), 0);
    o.workspace = link;
    assert_int_equal(lz_config_load(&o, &c, &err), 0);
    assert_string_equal(c->workspace, ws);
    assert_string_equal(c->fingerprint_hex, fp1);
    lz_config_free(c);
    unlink(link);
    free(abs);
}

/* ---- fingerprint ------------------------------------------------------ */

static void test_fingerprint_vector_file(void **state) {
    (void)state;
    /* Workspace /etc: the rule's /usr/bin/true must lie outside it (an
     * auto_approve executable inside the workspace is refused). */
    char *etc = realpath("/etc", NULL), *tru = realpath("/usr/bin/true", NULL);
    bool usable = etc && strcmp(etc, "/etc") == 0 && tru && strcmp(tru, "/usr/bin/true") == 0 &&
        strncmp(fixtures, "/etc/", 5) != 0;
    free(etc);
    free(tru);
    if (!usable)
        skip();
    char p[8192];
    snprintf(p, sizeof p, "%s/vector.toml", fixtures);
    struct lz_config *c = NULL;
    struct lz_error err;
    int r = load_path(p, "vector", "/etc", &c, &err);
    if (r < 0)
        print_error("%s\n", err.msg);
    assert_int_equal(r, 0);
    /* Also computed independently from the encoding in domain_id.h. */
    assert_string_equal(c->domain_id_hex, "fb62411e69802b9dada5fbe82c52ab2a45a3ad2be22ac5b78c892980a3e4f45b");
    assert_string_equal(c->fingerprint_hex, "25e674fd58298fe888a3a67f7c8c463ed60e7a46410b87e110f15d6161ffed82");
    assert_string_equal(c->profile.volumes[0].host, "/nonexistent-lazaret-test/data/vector/v");
    assert_true(c->profile.volumes[0].create);
    assert_int_equal(c->n_default_deny, 2);
    lz_config_free(c);
}

static int load_exact(const char *workspace, struct lz_config **c, struct lz_error *err) {
    struct lz_config_opts o = { .profile = "default", .workspace = workspace, .workspace_exact = true };
    memset(err, 0, sizeof *err);
    return lz_config_load(&o, c, err);
}

/* A directory inside a Git repository: the repository's top level is the
 * workspace (the Domain), the directory the start directory. */
static void test_workspace_repository_top(void **state) {
    (void)state;
    struct lz_config *top = NULL, *c = NULL;
    struct lz_error err;
    char d[4096], exp[4096];
    assert_int_equal(load_path(NULL, NULL, ws, &top, &err), 0);
    assert_string_equal(top->workspace, ws);
    assert_string_equal(top->start_dir, "");

    /* two levels down: the same Domain and fingerprint, started below */
    snprintf(d, sizeof d, "%s/sub/web", ws);
    assert_int_equal(lz_mkdir_p(d, 0700), 0);
    assert_int_equal(load_path(NULL, NULL, d, &c, &err), 0);
    assert_string_equal(c->workspace, ws);
    assert_string_equal(c->start_dir, "sub/web");
    assert_string_equal(c->domain_id_hex, top->domain_id_hex);
    assert_string_equal(c->fingerprint_hex, top->fingerprint_hex);
    lz_config_free(c);
    /* through a symlink: the canonical directory counts */
    snprintf(exp, sizeof exp, "%s/web-link", root);
    assert_int_equal(symlink(d, exp), 0);
    assert_int_equal(load_path(NULL, NULL, exp, &c, &err), 0);
    assert_string_equal(c->workspace, ws);
    assert_string_equal(c->start_dir, "sub/web");
    lz_config_free(c);
    unlink(exp);
    /* the exact workspace (the coordinator's load): no lookup */
    assert_int_equal(load_exact(d, &c, &err), 0);
    assert_string_equal(c->workspace, d);
    assert_string_equal(c->start_dir, "");
    assert_string_not_equal(c->domain_id_hex, top->domain_id_hex);
    lz_config_free(c);

    /* the nearest .git wins: a nested repository (a gitfile, as a
     * submodule's) is its own workspace */
    snprintf(d, sizeof d, "%s/sub/inner/src", ws);
    assert_int_equal(lz_mkdir_p(d, 0700), 0);
    snprintf(exp, sizeof exp, "%s/sub/inner/.git", ws);
    write_file(exp, "gitdir: ../../.git/modules/inner\n");
    assert_int_equal(load_path(NULL, NULL, d, &c, &err), 0);
    snprintf(exp, sizeof exp, "%s/sub/inner", ws);
    assert_string_equal(c->workspace, exp);
    assert_string_equal(c->start_dir, "src");
    lz_config_free(c);

    /* in no repository: the directory itself, as before */
    snprintf(d, sizeof d, "%s/plain", root);
    assert_int_equal(load_path(NULL, NULL, d, &c, &err), 0);
    assert_string_equal(c->workspace, d);
    assert_string_equal(c->start_dir, "");
    lz_config_free(c);

    /* a home directory kept in Git is never the workspace of a project
     * below it; a run in home itself keeps home */
    xmkdir(home, ".git");
    snprintf(d, sizeof d, "%s/proj/x", home);
    assert_int_equal(lz_mkdir_p(d, 0700), 0);
    assert_int_equal(load_path(NULL, NULL, d, &c, &err), 0);
    assert_string_equal(c->workspace, d);
    assert_string_equal(c->start_dir, "");
    lz_config_free(c);
    snprintf(exp, sizeof exp, "%s/.git", home);
    assert_int_equal(lz_rm_rf_at(AT_FDCWD, exp), 0);
    /* nor does the walk pass home on its way up */
    snprintf(exp, sizeof exp, "%s/.git", root);
    assert_int_equal(lz_mkdir_p(exp, 0700), 0);
    assert_int_equal(load_path(NULL, NULL, d, &c, &err), 0);
    assert_string_equal(c->workspace, d);
    lz_config_free(c);
    snprintf(exp, sizeof exp, "%s/.git", root);
    assert_int_equal(lz_rm_rf_at(AT_FDCWD, exp), 0);

    /* config check says both */
    snprintf(d, sizeof d, "%s/sub/web", ws);
    assert_int_equal(load_path(NULL, NULL, d, &c, &err), 0);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    lz_config_print(f, c);
    fclose(f);
    snprintf(exp, sizeof exp,
             "# workspace: \"%s\" (the top level of the Git repository holding the current directory)\n"
             "# start directory: \"/workspace/sub/web\"\n",
             ws);
    assert_non_null(strstr(buf, exp));
    free(buf);
    lz_config_free(c);
    lz_config_free(top);
}

/* private_dirs (privdirs.h): workspace-relative, checked strictly, in the
 * fingerprint only when set. */
static void test_private_dirs(void **state) {
    (void)state;
    char path[8192];
    snprintf(path, sizeof path, "%s/pd.toml", root);
    write_file(path, "[profiles.claude]\nimage = \"img\"\n");
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    assert_int_equal(c->profile.n_private_dirs, 0);
    uint8_t fp[32];
    memcpy(fp, c->fingerprint, sizeof fp);
    lz_config_free(c);
    /* An empty list is no list: the same fingerprint as before the key. */
    write_file(path, "[profiles.claude]\nimage = \"img\"\nprivate_dirs = []\n");
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    assert_memory_equal(c->fingerprint, fp, sizeof fp);
    lz_config_free(c);
    write_file(path,
               "[profiles.claude]\nimage = \"img\"\n"
               "private_dirs = [\"node_modules\", \"target\", \".venv\", \"web/node_modules\"]\n");
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    assert_int_equal(c->profile.n_private_dirs, 4);
    assert_string_equal(c->profile.private_dirs[3], "web/node_modules");
    assert_memory_not_equal(c->fingerprint, fp, sizeof fp);
    uint8_t fp2[32];
    memcpy(fp2, c->fingerprint, sizeof fp2);
    lz_config_free(c);
    /* The order is the binds' order: another order, another fingerprint. */
    write_file(path,
               "[profiles.claude]\nimage = \"img\"\n"
               "private_dirs = [\"target\", \"node_modules\", \".venv\", \"web/node_modules\"]\n");
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    assert_memory_not_equal(c->fingerprint, fp2, sizeof fp2);
    lz_config_free(c);
    static const struct {
        const char *value, *msg;
    } bad[] = {
        { "\"\"", "\"\" is not a workspace-relative directory: it is empty" },
        { "\"/abs\"",
          "\"/abs\" is not a workspace-relative directory: it is absolute (private directories are "
          "relative to the workspace)" },
        { "\"a/../b\"", "\"a/../b\" is not a workspace-relative directory: it has a '.' or '..' component" },
        { "\"..\"", "\"..\" is not a workspace-relative directory: it has a '.' or '..' component" },
        { "\"./a\"", "\"./a\" is not a workspace-relative directory: it has a '.' or '..' component" },
        { "\"a//b\"", "\"a//b\" is not a workspace-relative directory: it has an empty component" },
        { "\"a/\"", "\"a/\" is not a workspace-relative directory: it ends with '/'" },
        { "\".git\"", "\".git\" is not a workspace-relative directory: it has a .git component" },
        { "\"sub/.GIT/x\"", "\"sub/.GIT/x\" is not a workspace-relative directory: it has a .git component" },
        { "\"a\\nb\"", "\"a\\x0ab\" is not a workspace-relative directory: it contains a control character" },
        { "\".vscode\"", "\".vscode\" is a host-tool configuration path (.vscode), served by the router" },
        { "\"x/.claude/y\"", "\"x/.claude/y\" is a host-tool configuration path (x/.claude), served by the router" },
        { "1", "expected a string, found an integer" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        char content[512], msg[1024];
        snprintf(content, sizeof content, "[profiles.claude]\nimage = \"img\"\nprivate_dirs = [%s]\n", bad[i].value);
        snprintf(msg, sizeof msg, "3: profiles.claude.private_dirs[0]: %s", bad[i].msg);
        expect_fail_content("pd-bad.toml", content, "claude", msg);
    }
    expect_fail_content("pd1.toml", "[profiles.claude]\nimage = \"img\"\nprivate_dirs = [\"a\", \"a\"]\n", "claude",
                        "3: profiles.claude.private_dirs[1]: \"a\" is listed twice (also private_dirs[0])");
    expect_fail_content("pd2.toml", "[profiles.claude]\nimage = \"img\"\nprivate_dirs = [\"a/b\", \"a\"]\n", "claude",
                        "3: profiles.claude.private_dirs[1]: \"a\" overlaps private_dirs[0] \"a/b\" (no private "
                        "directory may contain another)");
    /* "ab" is not inside "a". */
    write_file(path, "[profiles.claude]\nimage = \"img\"\nprivate_dirs = [\"a\", \"ab\", \"a.b\"]\n");
    assert_int_equal(load_path(path, "claude", NULL, &c, &err), 0);
    lz_config_free(c);
    expect_fail_content("pd3.toml", "[profiles.claude]\nimage = \"img\"\nprivate_dirs = \"a\"\n", "claude",
                        "3: profiles.claude.private_dirs: expected an array, found a string");
    expect_fail_content("pd4.toml",
                        "[profiles.claude]\nimage = \"img\"\nignored_state = false\nprivate_dirs = [\"a\"]\n", "claude",
                        "4: profiles.claude.private_dirs: private directories need ignored_state = true (with "
                        "ignored_state = false every path of the workspace is the host's)");
    char many[2048] = "[profiles.claude]\nimage = \"img\"\nprivate_dirs = [";
    for (int i = 0; i <= LZ_PRIVDIRS_MAX; i++) {
        char one[32];
        snprintf(one, sizeof one, "%s\"d%d\"", i ? ", " : "", i);
        strcat(many, one);
    }
    strcat(many, "]\n");
    expect_fail_content("pd5.toml", many, "claude",
                        "3: profiles.claude.private_dirs: more than 16 private directories");
    char longc[300];
    memset(longc, 'x', 256);
    longc[256] = '\0';
    char content[600];
    snprintf(content, sizeof content, "[profiles.claude]\nimage = \"img\"\nprivate_dirs = [\"%s\"]\n", longc);
    write_file(path, content);
    assert_true(load_path(path, "claude", NULL, &c, &err) < 0);
    assert_non_null(strstr(err.msg, "longer than 255 bytes"));
    assert_null(lz_privdir_invalid("node_modules"));
    assert_true(lz_privdirs_nested("a", "a/b") && lz_privdirs_nested("a/b", "a") && lz_privdirs_nested("a", "a"));
    assert_false(lz_privdirs_nested("a", "ab") || lz_privdirs_nested("a/b", "a/c"));
}

static void test_fingerprint_stability(void **state) {
    (void)state;
    struct lz_config *a = load_ok("good.toml", "claude");
    struct lz_config *b = load_ok("good.toml", "claude");
    assert_string_equal(a->fingerprint_hex, b->fingerprint_hex);
    lz_config_free(b);

    /* the host value behind env: is not configuration */
    setenv("LZ_TEST_API_KEY", "a-completely-different-secret", 1);
    b = load_ok("good.toml", "claude");
    assert_string_equal(b->profile.env[0].value, "a-completely-different-secret");
    assert_string_equal(a->fingerprint_hex, b->fingerprint_hex);
    lz_config_free(b);

    /* everything else is: another profile, another workspace, another
     * Storage Root */
    b = load_ok("good.toml", "default");
    assert_string_not_equal(a->fingerprint_hex, b->fingerprint_hex);
    lz_config_free(b);
    struct lz_error err;
    char sub[8192];
    snprintf(sub, sizeof sub, "%s/plain", root); /* in no repository: a workspace of its own */
    char p[8192];
    snprintf(p, sizeof p, "%s/good.toml", fixtures);
    assert_int_equal(load_path(p, "claude", sub, &b, &err), 0);
    assert_string_not_equal(a->fingerprint_hex, b->fingerprint_hex);
    assert_string_not_equal(a->domain_id_hex, b->domain_id_hex);
    lz_config_free(b);
    char h2[8192];
    snprintf(h2, sizeof h2, "%s/shared", home); /* same tree, different ~ */
    setenv("HOME", h2, 1);
    assert_int_equal(lz_mkdir_p(h2, 0700), 0);
    char shared2[8192 + 16];
    snprintf(shared2, sizeof shared2, "%s/shared", h2);
    assert_int_equal(lz_mkdir_p(shared2, 0700), 0);
    b = load_ok("good.toml", "claude");
    assert_string_not_equal(a->fingerprint_hex, b->fingerprint_hex);
    assert_string_equal(a->domain_id_hex, b->domain_id_hex);
    lz_config_free(b);
    lz_config_free(a);
}

/* ---- printing --------------------------------------------------------- */

static void test_print_redacts(void **state) {
    (void)state;
    struct lz_config *c = load_ok("good.toml", "claude");
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_non_null(f);
    lz_config_print(f, c);
    fclose(f);
    assert_null(strstr(out, "sk-test-secret-value"));
    assert_null(strstr(out, "C.UTF-8"));
    assert_non_null(strstr(out, "ANTHROPIC_API_KEY = \"<redacted>\"  # from \"env:LZ_TEST_API_KEY\""));
    assert_non_null(strstr(out, "LANG = \"<redacted>\"  # literal"));
    char line[256];
    snprintf(line, sizeof line, "# Domain ID: %s\n", c->domain_id_hex);
    assert_non_null(strstr(out, line));
    snprintf(line, sizeof line, "# Configuration Fingerprint: %s\n", c->fingerprint_hex);
    assert_non_null(strstr(out, line));
    assert_non_null(strstr(out, "[profiles.claude]\nimage = \"docker.io/library/debian:trixie\"\n"));
    assert_non_null(strstr(out, "mode = \"z\" },  # created on first use\n"));
    free(out);
    lz_config_free(c);
}

/* ---- helpers ---------------------------------------------------------- */

static void test_prefix_parse(void **state) {
    (void)state;
    char buf[19];
    uint32_t addr;
    unsigned len;
    const char *why;
    assert_int_equal(lz_ipv4_prefix_parse("10.0.0.0/8", buf, &addr, &len, &why), 0);
    assert_string_equal(buf, "10.0.0.0/8");
    assert_int_equal(addr, 0x0a000000);
    assert_int_equal(len, 8);
    assert_int_equal(lz_ipv4_prefix_parse("0.0.0.0/0", buf, NULL, NULL, NULL), 0);
    assert_int_equal(lz_ipv4_prefix_parse("255.255.255.255/32", buf, NULL, NULL, NULL), 0);
    assert_string_equal(buf, "255.255.255.255/32");
    static const char *const bad[] = { "10.0.0.0/8 ",
                                       " 10.0.0.0/8",
                                       "10.0.0/8",
                                       "10.0.0.0.0/8",
                                       "256.0.0.0/8",
                                       "10.0.0.0/",
                                       "10.0.0.0/08",
                                       "10.0.0.0/-1",
                                       "+1.0.0.0/8",
                                       "1.2.3.4/32x",
                                       "",
                                       "/8",
                                       "1..2.3/8",
                                       "0x1.0.0.0/8",
                                       "1.2.3.4/1000",
                                       "00.0.0.0/0" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        if (lz_ipv4_prefix_parse(bad[i], buf, NULL, NULL, &why) != -EINVAL)
            print_error("accepted \"%s\"\n", bad[i]);
        assert_int_equal(lz_ipv4_prefix_parse(bad[i], buf, NULL, NULL, &why), -EINVAL);
    }
    assert_int_equal(lz_ipv4_prefix_parse("192.168.1.1/16", buf, NULL, NULL, &why), -EINVAL);
    assert_string_equal(why, "has host bits set");
    assert_string_equal(buf, "192.168.0.0/16");
    assert_int_equal(lz_ipv4_prefix_parse("::/0", buf, NULL, NULL, &why), -EINVAL);
    assert_non_null(strstr(why, "IPv6 is disabled in v1"));
}

static void test_profile_names(void **state) {
    (void)state;
    assert_true(lz_profile_name_valid("default"));
    assert_true(lz_profile_name_valid("ab"));
    assert_true(lz_profile_name_valid("a-b_c-09"));
    assert_true(lz_profile_name_valid("abcdefghijabcdefghijabcdefghij12"));
    assert_false(lz_profile_name_valid("abcdefghijabcdefghijabcdefghij123"));
    assert_false(lz_profile_name_valid("a"));
    assert_false(lz_profile_name_valid(""));
    assert_false(lz_profile_name_valid("Ab"));
    assert_false(lz_profile_name_valid("a.b"));
    assert_false(lz_profile_name_valid("a/b"));
    assert_false(lz_profile_name_valid("a b"));
    assert_false(lz_profile_name_valid("a$b"));
}

/* ---- [[escalation.auto_approve]] ---------------------------------------- */

/* A tree of executables for the rules (@ = root):
 *   @/opt/bin/tool                 a plain executable
 *   @/opt/bin/python3.11           named like an interpreter
 *   @/opt/bin/python3 -> python3.11, @/opt/bin/runpy -> python3 (a chain)
 *   @/opt/bin/{bash,git,make,env,sudo,find}   named like their classes
 *   @/opt/bin/notexec (0644), @/opt/bin/script.py (0644), @/opt/bin/dir/
 *   @/opt/bin/intows -> @/ws/bin/evil      a link out of the workspace's reach into it
 *   @/ws/bin/evil, @/ws/link-to-tool -> @/opt/bin/tool
 *   @/home/data/bin/x  (Storage Root)   @/vol/x, @/vol2/x (volumes)
 *   @/sock/x (socket_dir)   @/cfg/x (beside the file)   @/run/lazaret/x */
static void aa_exec(const char *rel, const char *content, mode_t mode) {
    char p[4096];
    subst(rel, p, sizeof p);
    char *d = lz_xstrdup(p);
    *strrchr(d, '/') = '\0';
    assert_int_equal(lz_mkdir_p(d, 0700), 0);
    free(d);
    write_file(p, content);
    assert_int_equal(chmod(p, mode), 0);
}

static void aa_link(const char *target, const char *rel) {
    char p[4096], t[4096];
    subst(rel, p, sizeof p);
    subst(target, t, sizeof t);
    unlink(p);
    assert_int_equal(symlink(t, p), 0);
}

static void aa_tree(void) {
    static bool done;
    if (done)
        return;
    done = true;
    static const char *const ex[] = { "@/opt/bin/tool",  "@/opt/bin/python3.11",
                                      "@/opt/bin/bash",  "@/opt/bin/git",
                                      "@/opt/bin/make",  "@/opt/bin/env",
                                      "@/opt/bin/sudo",  "@/opt/bin/find",
                                      "@/ws/bin/evil",   "@/home/data/bin/x",
                                      "@/vol/x",         "@/vol2/x",
                                      "@/sock/x",        "@/cfg/x",
                                      "@/run/lazaret/x", "@/home/bin/tool2",
                                      "@/opt/bin/lister" };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(ex); i++)
        aa_exec(ex[i],
                "\x7f"
                "ELF-not-really\n",
                0755);
    aa_exec("@/opt/bin/notexec", "x\n", 0644);
    aa_exec("@/opt/bin/script.py", "print(1)\n", 0644);
    aa_exec("@/opt/bin/shim", "#!/bin/sh\nexec tool \"$@\"\n", 0755);
    aa_exec("@/opt/bin/dir/.keep", "", 0644);
    aa_link("python3.11", "@/opt/bin/python3");
    aa_link("python3", "@/opt/bin/runpy");
    aa_link("@/ws/bin/evil", "@/opt/bin/intows");
    aa_link("@/opt/bin/tool", "@/ws/link-to-tool");
}

/* Writes @/cfg/config.toml with rules (and extra [escalation] keys) and
 * loads profile "default". The first rule's argv is on line 7. */
static int aa_load(const char *esc, const char *rules, struct lz_config **c, struct lz_error *err) {
    aa_tree();
    char raw[8192], text[16384], p[4096];
    snprintf(raw, sizeof raw,
             "[storage]\n"
             "data_root = \"@/home/data\"\n"
             "[escalation]\n"
             "socket_dir = \"@/sock\"\n"
             "%s\n"
             "%s\n"
             "[profiles.default]\n"
             "image = \"x\"\n"
             "volumes = [{ host = \"@/vol\", container = \"/data\", mode = \"rw\" }]\n"
             "[profiles.other]\n"
             "image = \"x\"\n"
             "volumes = [{ host = \"@/vol2\", container = \"/data\", mode = \"rw\" }]\n",
             esc ? esc : "#", rules);
    subst(raw, text, sizeof text);
    subst("@/cfg/config.toml", p, sizeof p);
    write_file(p, text);
    char rt[4096];
    subst("@/run", rt, sizeof rt);
    setenv("XDG_RUNTIME_DIR", rt, 1);
    char path[4096];
    subst("@/opt/bin:/usr/bin:/bin", path, sizeof path);
    setenv("PATH", path, 1);
    *c = NULL;
    return load_path(p, "default", NULL, c, err);
}

/* One rule ("argv = [...]" and maybe allow_extra_args) must be refused with
 * a message containing every one of the fragments (@ = root). */
static void aa_refused(const char *rule, const char *frag1, const char *frag2) {
    char rules[4096], f[4096];
    snprintf(rules, sizeof rules, "[[escalation.auto_approve]]\n%s\n", rule);
    struct lz_config *c = NULL;
    struct lz_error err;
    int r = aa_load(NULL, rules, &c, &err);
    if (r >= 0)
        print_error("accepted: %s\n", rule);
    assert_true(r < 0);
    assert_null(c);
    const char *fr[] = { frag1, frag2 };
    for (size_t i = 0; i < 2; i++) {
        if (!fr[i])
            continue;
        subst(fr[i], f, sizeof f);
        if (!strstr(err.msg, f))
            print_error("message: %s\nmissing: %s\n", err.msg, f);
        assert_non_null(strstr(err.msg, f));
    }
}

/* One rule must be accepted; returns the loaded configuration. */
static struct lz_config *aa_ok(const char *rule) {
    char rules[4096];
    snprintf(rules, sizeof rules, "[[escalation.auto_approve]]\n%s\n", rule);
    struct lz_config *c = NULL;
    struct lz_error err;
    int r = aa_load(NULL, rules, &c, &err);
    if (r < 0)
        print_error("refused: %s: %s\n", rule, err.msg);
    assert_int_equal(r, 0);
    assert_int_equal(c->n_auto_approve, 1);
    return c;
}

static void test_aa_resolution(void **state) {
    (void)state;
    char exp[4096];
    /* a bare name: through PATH at load, recorded for the coordinator */
    struct lz_config *c = aa_ok("argv = [\"tool\", \"a\"]");
    subst("@/opt/bin/tool", exp, sizeof exp);
    assert_string_equal(c->auto_approve[0].argv[0], exp);
    assert_string_equal(c->auto_approve[0].written, "tool");
    assert_true(c->auto_approve[0].found_in_path);
    assert_string_equal(c->auto_approve[0].argv[1], "a");
    assert_null(c->auto_approve[0].argv[2]);
    assert_null(c->auto_approve[0].warning); /* exact, plain: nothing to say */
    subst("@/opt/bin:/usr/bin:/bin", exp, sizeof exp);
    assert_string_equal(c->auto_approve_path, exp);
    lz_config_free(c);

    /* a relative PATH entry (the current directory) is never searched */
    char path[4096], cwd[4096];
    assert_non_null(getcwd(cwd, sizeof cwd));
    subst("@/opt/bin", path, sizeof path);
    assert_int_equal(chdir(path), 0);
    char rules[] = "[[escalation.auto_approve]]\nargv = [\"tool\"]\n";
    struct lz_error err;
    aa_tree();
    /* aa_load sets PATH; override after by loading by hand */
    assert_int_equal(aa_load(NULL, rules, &c, &err), 0);
    lz_config_free(c);
    setenv("PATH", ".:bin:/nonexistent-lazaret", 1);
    char p[4096];
    subst("@/cfg/config.toml", p, sizeof p);
    int r = load_path(p, "default", NULL, &c, &err);
    assert_int_equal(chdir(cwd), 0);
    assert_int_equal(r, -EINVAL);
    assert_non_null(strstr(err.msg, "escalation.auto_approve[0].argv[0]: \"tool\" is not found in PATH"));

    /* "~/" is expanded */
    c = aa_ok("argv = [\"~/bin/tool2\"]");
    subst("@/home/bin/tool2", exp, sizeof exp);
    assert_string_equal(c->auto_approve[0].argv[0], exp);
    lz_config_free(c);
}

static void test_aa_symlink_chain(void **state) {
    (void)state;
    char exp[4096];
    /* runpy -> python3 -> python3.11: the chain's names count */
    aa_refused("argv = [\"@/opt/bin/runpy\", \"-c\", \"print(1)\"]",
               "escalation.auto_approve[0].argv[0]: refused:", "python3.11 is an interpreter given -c");
    /* the same through a bare name */
    aa_refused("argv = [\"runpy\", \"-m\", \"http.server\"]", "given -m", NULL);
    /* the canonical path is what a request must name */
    struct lz_config *c = aa_ok("argv = [\"@/opt/bin/runpy\", \"@/opt/bin/script.py\"]");
    subst("@/opt/bin/python3.11", exp, sizeof exp);
    assert_string_equal(c->auto_approve[0].argv[0], exp);
    subst("@/opt/bin/runpy", exp, sizeof exp);
    assert_string_equal(c->auto_approve[0].written, exp);
    assert_false(c->auto_approve[0].found_in_path);
    assert_non_null(c->auto_approve[0].warning);
    assert_non_null(strstr(c->auto_approve[0].warning, "python3.11 is an interpreter running"));
    /* config check shows the resolution and the warning */
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    lz_config_print(f, c);
    fclose(f);
    char line[8192];
    subst("argv = [\"@/opt/bin/python3.11\", \"@/opt/bin/script.py\"]\n# argv[0] as written: \"@/opt/bin/runpy\"\n"
          "allow_extra_args = false\n# cwd: a fresh empty directory per run\n"
          "# WARNING: python3.11 is an interpreter running",
          line, sizeof line);
    if (!strstr(out, line))
        print_error("%s", out);
    assert_non_null(strstr(out, line));
    assert_non_null(strstr(out, "prompt_timeout_seconds = 300\n"));
    free(out);
    lz_config_free(c);
}

static void test_aa_locations(void **state) {
    (void)state;
    aa_refused("argv = [\"bin/tool\"]",
               "config.toml:7: escalation.auto_approve[0].argv[0]: \"bin/tool\" is a relative path", NULL);
    aa_refused("argv = [\"./tool\"]", "is a relative path", NULL);
    aa_refused("argv = [\"~other/tool\"]", "is a relative path", NULL);
    aa_refused("argv = [\"no-such-tool-lazaret\"]", "\"no-such-tool-lazaret\" is not found in PATH", NULL);
    aa_refused("argv = [\"@/opt/bin/missing\"]", "@/opt/bin/missing\": No such file or directory", NULL);
    aa_refused("argv = [\"@/opt/bin/notexec\"]", "\"@/opt/bin/notexec\" is not executable", NULL);
    aa_refused("argv = [\"@/opt/bin/dir\"]", "\"@/opt/bin/dir\" is not a regular file", NULL);
    aa_refused("argv = [\"@/opt/bin/../bin/tool\"]", "has a '..' segment", NULL);
    aa_refused("argv = [\"@/ws/bin/evil\"]",
               "escalation.auto_approve[0].argv[0]: the executable \"@/ws/bin/evil\" lies inside the workspace", NULL);
    aa_refused("argv = [\"@/ws/link-to-tool\"]", "the executable \"@/ws/link-to-tool\" lies inside the workspace",
               NULL);
    /* a link outside pointing in: the file it names is inside */
    aa_refused("argv = [\"@/opt/bin/intows\"]", "the executable \"@/ws/bin/evil\" lies inside the workspace", NULL);
    aa_refused("argv = [\"@/home/data/bin/x\"]", "lies inside the Storage Root", NULL);
    aa_refused("argv = [\"@/vol/x\"]", "lies inside profiles.default.volumes[0].host", NULL);
    aa_refused("argv = [\"@/vol2/x\"]", "lies inside profiles.other.volumes[0].host", NULL);
    aa_refused("argv = [\"@/sock/x\"]", "lies inside escalation.socket_dir", NULL);
    aa_refused("argv = [\"@/cfg/x\"]", "lies inside the configuration file's directory", NULL);
    aa_refused("argv = [\"@/run/lazaret/x\"]", "lies inside Lazaret's runtime directory", NULL);
    /* an interpreter's script is checked the same way */
    aa_refused("argv = [\"@/opt/bin/python3\", \"@/ws/bin/evil\"]",
               "escalation.auto_approve[0].argv[1]: the script \"@/ws/bin/evil\" lies inside the workspace", NULL);
    aa_refused("argv = [\"@/opt/bin/python3\", \"@/opt/bin/nope.py\"]", "argv[1]: the script", "is not an existing");
    /* the message names the rule by its index */
    char rules[] = "[[escalation.auto_approve]]\nargv = [\"tool\"]\n"
                   "[[escalation.auto_approve]]\nargv = [\"tool\", \"x\"]\n"
                   "[[escalation.auto_approve]]\nargv = [\"@/opt/bin/git\", \"status\"]\n";
    char r2[4096];
    subst(rules, r2, sizeof r2);
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(aa_load(NULL, r2, &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "config.toml:11: escalation.auto_approve[2].argv[0]: refused: git is"));
}

/* cwd = "workspace" needs its acknowledgement; every argument is checked
 * against the sandbox-writable trees like argv[0]. */
static void test_aa_cwd_and_args(void **state) {
    (void)state;
    aa_refused("argv = [\"tool\"]\ncwd = \"workspace\"",
               "escalation.auto_approve[0].cwd: cwd = \"workspace\" lets the sandbox choose code",
               "add runs_workspace_code = true");
    aa_refused("argv = [\"tool\"]\ncwd = \"workspace\"\nruns_workspace_code = false", "runs_workspace_code = true",
               NULL);
    aa_refused("argv = [\"tool\"]\nruns_workspace_code = true",
               "escalation.auto_approve[0].runs_workspace_code: is true but the rule runs in a fresh empty", NULL);
    aa_refused("argv = [\"tool\"]\ncwd = \"/tmp\"",
               "escalation.auto_approve[0].cwd: \"/tmp\" is not a working directory a rule can name", NULL);
    aa_refused("argv = [\"tool\"]\ncwd = 1", "escalation.auto_approve[0].cwd: expected a string", NULL);
    aa_refused("argv = [\"tool\"]\nruns_workspace_code = \"yes\"", "runs_workspace_code: expected a boolean", NULL);
    /* accepted with the key; config check shows it and warns */
    struct lz_config *c = aa_ok("argv = [\"tool\", \"-q\", \"tests/\"]\ncwd = \"workspace\"\n"
                                "runs_workspace_code = true");
    assert_true(c->auto_approve[0].cwd_workspace);
    struct lz_esc_rule *rv = NULL;
    size_t rn = 0;
    assert_int_equal(lz_autoapprove_rules(c, &rv, &rn), 0); /* what the Host Coordinator holds */
    assert_int_equal(rn, 1);
    assert_true(rv[0].cwd_workspace);
    free(rv);
    assert_non_null(c->auto_approve[0].warning);
    assert_non_null(strstr(c->auto_approve[0].warning, "runs on the host without a prompt"));
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    lz_config_print(f, c);
    fclose(f);
    assert_non_null(strstr(out, "cwd = \"workspace\"\nruns_workspace_code = true\n# WARNING: "));
    free(out);
    lz_config_free(c);
    c = aa_ok("argv = [\"tool\", \"-q\"]\ncwd = \"empty\"");
    assert_false(c->auto_approve[0].cwd_workspace);
    lz_config_free(c);

    /* arguments: inside a tree, as an option's value, through a link,
     * holding a tree, climbing with ".." */
    aa_refused("argv = [\"tool\", \"@/ws/conftest.py\"]",
               "escalation.auto_approve[0].argv[1]: \"@/ws/conftest.py\": @/ws/conftest.py lies inside @/ws, the "
               "workspace",
               NULL);
    aa_refused("argv = [\"tool\", \"-q\", \"--rootdir=@/ws\"]", "argv[2]:", "the workspace");
    aa_refused("argv = [\"tool\", \"-I@/vol/inc\"]", "argv[1]:", "profiles.default.volumes[0].host");
    aa_refused("argv = [\"tool\", \"@/opt/bin/intows\"]", "lies inside @/ws", "the workspace");
    aa_refused("argv = [\"tool\", \"@/home\"]", "@/home contains", "the Storage Root");
    aa_refused("argv = [\"tool\", \"../x\"]", "argv[1]: \"../x\": it has a '..' path component", NULL);
    aa_refused("argv = [\"tool\", \"@/run/lazaret\"]", "Lazaret's runtime directory", NULL);
    /* controls: the same shapes outside every tree */
    c = aa_ok("argv = [\"tool\", \"@/opt/bin/script.py\", \"--rootdir=@/opt\", \"-I@/opt/bin\", \"tests/x\", "
              "\"s/a/b/\"]");
    lz_config_free(c);
}

/* The trees the sandbox can write or Lazaret controls are one set
 * (sbwrite.h lz_sbw_trees) for its three users: the loader's refusals, the
 * request-time check (lz_autoapprove_trees) and the prompt's warnings
 * (lz_sbw_build). For one configuration, every tree of the request-time set
 * refuses a rule at load and an argument at request time, and every tree
 * the prompt warns about is in it; a path outside every tree passes all
 * three (the control). */
static void test_aa_one_tree_set(void **state) {
    (void)state;
    struct lz_config *c = aa_ok("argv = [\"tool\", \"-q\"]");
    char **v = NULL;
    size_t n = 0;
    lz_autoapprove_trees(c, &v, &n);
    struct lz_sbw reach = { 0 }, wr = { 0 };
    lz_sbw_trees(c, LZ_SBW_REACH, NULL, NULL, 0, &reach);
    lz_sbw_build(c, &wr);
    /* the request-time set is the REACH set, in its order */
    assert_int_equal(n, reach.n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(v[i], reach.v[i].path);
    /* every kind of tree is there: workspace, Storage Root, the selected
     * profile's volume, socket_dir, the file's directory, runtime dir */
    const char *const want[] = { "@/ws", "@/home/data", "@/vol", "@/sock", "@/cfg", "@/run/lazaret" };
    for (size_t k = 0; k < LZ_ARRAY_SIZE(want); k++) {
        char w[4096];
        subst(want[k], w, sizeof w);
        bool found = false;
        for (size_t i = 0; i < n; i++)
            found = found || !strcmp(v[i], w);
        if (!found)
            print_error("missing from the set: %s\n", w);
        assert_true(found);
    }
    /* the prompt's trees are among them, with the writable ones only:
     * neither socket_dir nor the file's directory */
    char sock[4096], cfg[4096];
    subst("@/sock", sock, sizeof sock);
    subst("@/cfg", cfg, sizeof cfg);
    for (size_t j = 0; j < wr.n; j++) {
        bool found = false;
        for (size_t i = 0; i < n; i++)
            found = found || !strcmp(v[i], wr.v[j].path);
        assert_true(found);
        assert_string_not_equal(wr.v[j].path, sock);
        assert_string_not_equal(wr.v[j].path, cfg);
    }
    assert_true(wr.n >= 4);
    /* each tree refuses at load and at request time */
    for (size_t i = 0; i < n; i++) {
        char rule[4096], arg[4096], why[512];
        snprintf(arg, sizeof arg, "%s/x", v[i]);
        snprintf(rule, sizeof rule, "argv = [\"tool\", \"%s\"]", arg);
        aa_refused(rule, "which the sandbox can write or Lazaret controls", NULL);
        size_t hit = SIZE_MAX;
        assert_int_equal(lz_autoapprove_arg_reaches(arg, (const char *const *)v, n, &hit, why, sizeof why), -EPERM);
        assert_true(hit < n);
    }
    /* a file in a writable tree is flagged at the prompt; the control
     * outside every tree passes all three */
    char in_ws[4096], out[4096], why[512];
    subst("@/ws/bin/evil", in_ws, sizeof in_ws);
    subst("@/opt/bin/script.py", out, sizeof out);
    assert_string_equal(lz_sbw_find(&wr, NULL, in_ws), "the workspace");
    assert_null(lz_sbw_find(&wr, NULL, out));
    assert_int_equal(lz_autoapprove_arg_reaches(out, (const char *const *)v, n, NULL, why, sizeof why), 0);
    char rule[4096];
    snprintf(rule, sizeof rule, "argv = [\"tool\", \"%s\"]", out);
    lz_config_free(aa_ok(rule));
    lz_sbw_free(&wr);
    lz_sbw_free(&reach);
    lz_strv_free(v, n);
    lz_config_free(c);
}

static void test_aa_classes(void **state) {
    (void)state;
    /* shells: never with -c (alone or in a cluster), stdin or extra args */
    aa_refused("argv = [\"@/opt/bin/bash\", \"-c\", \"true\"]", "refused: bash given -c (a command string", NULL);
    aa_refused("argv = [\"@/opt/bin/bash\", \"-ec\", \"true\"]", "bash given -ec", NULL);
    aa_refused("argv = [\"@/opt/bin/bash\", \"--command=x\"]", "bash given --command=x", NULL);
    aa_refused("argv = [\"@/opt/bin/bash\", \"-s\"]", "bash given -s", NULL);
    aa_refused("argv = [\"@/opt/bin/bash\"]", "names no script: it would read its program from standard input", NULL);
    aa_refused("argv = [\"@/opt/bin/bash\", \"@/opt/bin/script.py\"]\nallow_extra_args = true",
               "bash is a shell: with allow_extra_args = true the sandbox chooses the program", NULL);
    aa_refused("argv = [\"@/opt/bin/bash\", \"run.sh\"]",
               "argv[1] run.sh: the script bash runs must be an absolute path", NULL);
    /* interpreters */
    aa_refused("argv = [\"@/opt/bin/python3\", \"-c\", \"1\"]", "python3.11 is an interpreter given -c", NULL);
    aa_refused("argv = [\"@/opt/bin/python3\", \"-Ic\", \"1\"]", "given -Ic", NULL);
    aa_refused("argv = [\"@/opt/bin/python3\", \"@/opt/bin/script.py\"]\nallow_extra_args = true",
               "python3.11 is an interpreter: with allow_extra_args = true", NULL);
    aa_refused("argv = [\"@/opt/bin/python3\", \"-\"]", "names no script", NULL);
    /* refused outright, with any arguments */
    aa_refused("argv = [\"@/opt/bin/git\", \"status\"]", "git is a program that runs code the sandbox controls",
               "seed 000");
    aa_refused("argv = [\"@/opt/bin/git\"]", "git is a program that runs code the sandbox controls", NULL);
    aa_refused("argv = [\"@/opt/bin/make\", \"test\"]", "make is a program that runs code the sandbox controls",
               "working directory");
    /* wrappers: only written out completely, and never around the above */
    aa_refused("argv = [\"@/opt/bin/env\", \"tool\"]\nallow_extra_args = true",
               "env is a wrapper that runs another program: with allow_extra_args = true", NULL);
    aa_refused("argv = [\"@/opt/bin/env\", \"python3\", \"-c\", \"1\"]", "python3 is an interpreter given -c", NULL);
    aa_refused("argv = [\"@/opt/bin/sudo\", \"sh\", \"-c\", \"id\"]", "sh given -c", NULL);
    aa_refused("argv = [\"@/opt/bin/sudo\", \"-s\"]", "sudo given -s", NULL);
    aa_refused("argv = [\"@/opt/bin/env\", \"git\", \"status\"]", "git is a program that runs code", NULL);
    /* options that run programs: never with extra args */
    aa_refused("argv = [\"@/opt/bin/find\", \".\"]\nallow_extra_args = true",
               "find with allow_extra_args = true is refused", "-exec");

    /* permitted, with a warning where it is risky */
    struct lz_config *c = aa_ok("argv = [\"@/opt/bin/env\", \"tool\", \"x\"]");
    assert_non_null(strstr(c->auto_approve[0].warning, "env is a wrapper that runs another program"));
    lz_config_free(c);
    c = aa_ok("argv = [\"@/opt/bin/find\", \"@/opt\", \"-name\", \"x\"]");
    assert_non_null(strstr(c->auto_approve[0].warning, "find: its -exec"));
    lz_config_free(c);
    c = aa_ok("argv = [\"@/opt/bin/bash\", \"@/opt/bin/script.py\"]");
    assert_non_null(strstr(c->auto_approve[0].warning, "bash is a shell running"));
    lz_config_free(c);
    c = aa_ok("argv = [\"tool\", \"x\"]\nallow_extra_args = true");
    assert_true(c->auto_approve[0].allow_extra_args);
    assert_non_null(strstr(c->auto_approve[0].warning, "the sandbox chooses every argument after argv[1]"));
    lz_config_free(c);
    c = aa_ok("argv = [\"@/opt/bin/shim\"]");
    assert_non_null(strstr(c->auto_approve[0].warning, "a script run by \"/bin/sh\""));
    lz_config_free(c);
}

static void test_aa_prompt_timeout(void **state) {
    (void)state;
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(aa_load("prompt_timeout_seconds = 4", "", &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg,
                           "config.toml:5: escalation.prompt_timeout_seconds: 4 is too short to read a prompt "
                           "(at least 5 seconds)"));
    assert_int_equal(aa_load("prompt_timeout_seconds = 86401", "", &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "escalation.prompt_timeout_seconds"));
    assert_int_equal(aa_load("prompt_timeout_seconds = \"300\"", "", &c, &err), -EINVAL);
    assert_int_equal(aa_load("prompt_timeout_seconds = 5", "", &c, &err), 0);
    assert_int_equal(c->escalation_prompt_timeout_s, 5);
    char fp[65];
    memcpy(fp, c->fingerprint_hex, 65);
    lz_config_free(c);
    assert_int_equal(aa_load(NULL, "", &c, &err), 0);
    assert_int_equal(c->escalation_prompt_timeout_s, LZ_ESC_PROMPT_TIMEOUT_DEFAULT);
    /* host policy of the prompt, not a property of the Domain */
    assert_string_equal(c->fingerprint_hex, fp);
    lz_config_free(c);
}

static void test_aa_match(void **state) {
    (void)state;
    char r[4096];
    subst("[[escalation.auto_approve]]\nargv = [\"tool\", \"sts\", \"id\"]\n"
          "[[escalation.auto_approve]]\nargv = [\"@/opt/bin/lister\", \"list\"]\nallow_extra_args = true\n",
          r, sizeof r);
    struct lz_config *c = NULL;
    struct lz_error err;
    assert_int_equal(aa_load(NULL, r, &c, &err), 0);
    struct lz_esc_rule *rules = NULL;
    size_t n = 0;
    assert_int_equal(lz_autoapprove_rules(c, &rules, &n), 0);
    assert_int_equal(n, 2);
    char tool[4096], env[4096];
    subst("@/opt/bin/tool", tool, sizeof tool);
    subst("@/opt/bin/lister", env, sizeof env);
    size_t which = 99;

    char *exact[] = { tool, "sts", "id" };
    assert_true(lz_autoapprove_match(rules, n, exact, 3, &which));
    assert_int_equal(which, 0);
    /* one extra argument: prompted, not matched */
    char *extra[] = { tool, "sts", "id", "--debug" };
    assert_false(lz_autoapprove_match(rules, n, extra, 4, NULL));
    /* fewer arguments never match a longer rule */
    assert_false(lz_autoapprove_match(rules, n, exact, 2, NULL));
    assert_false(lz_autoapprove_match(rules, n, exact, 0, NULL));
    /* a relative or bare argv[0] never matches, though the rule was
     * written as a bare name */
    char *bare[] = { "tool", "sts", "id" };
    assert_false(lz_autoapprove_match(rules, n, bare, 3, NULL));
    char *rel[] = { "./tool", "sts", "id" };
    assert_false(lz_autoapprove_match(rules, n, rel, 3, NULL));
    /* the same basename elsewhere never matches */
    char *other[] = { "/usr/local/bin/tool", "sts", "id" };
    assert_false(lz_autoapprove_match(rules, n, other, 3, NULL));
    /* nor an unnormalized spelling of the same file */
    char slashed[4200];
    snprintf(slashed, sizeof slashed, "/%s", tool);
    char *sl[] = { slashed, "sts", "id" };
    assert_false(lz_autoapprove_match(rules, n, sl, 3, NULL));
    /* a NULL element never matches */
    char *hole[] = { tool, NULL, "id" };
    assert_false(lz_autoapprove_match(rules, n, hole, 3, NULL));

    /* allow_extra_args: the rule is a prefix */
    char *e1[] = { env, "list" };
    char *e2[] = { env, "list", "a", "b" };
    char *e3[] = { env, "lis" };
    char *e4[] = { env, "list-x" };
    assert_true(lz_autoapprove_match(rules, n, e1, 2, &which));
    assert_int_equal(which, 1);
    assert_true(lz_autoapprove_match(rules, n, e2, 4, &which));
    assert_false(lz_autoapprove_match(rules, n, e3, 2, NULL));
    assert_false(lz_autoapprove_match(rules, n, e4, 2, NULL));
    /* positive control for the layout: a rule written by hand */
    char *hand_argv[] = { "/bin/x", "y" };
    struct lz_esc_rule hand = { .argv = hand_argv, .argc = 2, .allow_extra_args = false };
    char *hx[] = { "/bin/x", "y" };
    assert_true(lz_autoapprove_match(&hand, 1, hx, 2, NULL));
    free(rules);
    lz_config_free(c);
}

/* Rules are in the fingerprint: a client whose rules differ cannot join a
 * Domain whose coordinator holds others (docs/escalation.md). */
static void test_aa_fingerprint(void **state) {
    (void)state;
    struct lz_config *a = NULL, *b = NULL;
    struct lz_error err;
    assert_int_equal(aa_load(NULL, "", &a, &err), 0);
    assert_int_equal(aa_load(NULL, "[[escalation.auto_approve]]\nargv = [\"tool\"]\n", &b, &err), 0);
    assert_string_not_equal(a->fingerprint_hex, b->fingerprint_hex);
    char fp[65];
    memcpy(fp, b->fingerprint_hex, 65);
    lz_config_free(a);
    lz_config_free(b);
    /* allow_extra_args counts */
    assert_int_equal(
        aa_load(NULL, "[[escalation.auto_approve]]\nargv = [\"tool\"]\nallow_extra_args = true\n", &a, &err), 0);
    assert_string_not_equal(a->fingerprint_hex, fp);
    lz_config_free(a);
    /* the same text resolving to another executable counts (the
     * canonical path is hashed, not the spelling) */
    char alt[4096];
    subst("@/opt/alt", alt, sizeof alt);
    aa_exec("@/opt/alt/tool",
            "\x7f"
            "ELF\n",
            0755);
    assert_int_equal(aa_load(NULL, "[[escalation.auto_approve]]\nargv = [\"tool\"]\n", &a, &err), 0);
    assert_string_equal(a->fingerprint_hex, fp);
    lz_config_free(a);
    char path[8192], p[4096];
    snprintf(path, sizeof path, "%s:/usr/bin", alt);
    subst("@/cfg/config.toml", p, sizeof p);
    setenv("PATH", path, 1);
    assert_int_equal(load_path(p, "default", NULL, &a, &err), 0);
    assert_string_not_equal(a->fingerprint_hex, fp);
    lz_config_free(a);

    /* The coordinator resolves bare names with the PATH the client handed
     * over, not its own: the same executable, the same fingerprint. */
    assert_int_equal(aa_load(NULL, "[[escalation.auto_approve]]\nargv = [\"tool\"]\n", &a, &err), 0);
    int fd = -1;
    assert_int_equal(lz_envpass_create(a, &fd, &err), 0);
    struct lz_envpass *ep = NULL;
    assert_int_equal(lz_envpass_read(fd, &ep, &err), 0);
    close(fd);
    assert_string_equal(lz_envpass_get(ep, "PATH"), a->auto_approve_path);
    setenv("PATH", "/usr/bin:/bin", 1); /* the coordinator's own PATH */
    struct lz_config_opts o = {
        .config_path = p, .profile = "default", .workspace = ws, .lookup_env = lz_envpass_get, .lookup_env_ud = ep
    };
    assert_int_equal(lz_config_load(&o, &b, &err), 0);
    assert_string_equal(b->fingerprint_hex, a->fingerprint_hex);
    assert_string_equal(b->auto_approve[0].argv[0], a->auto_approve[0].argv[0]);
    lz_config_free(b);
    lz_envpass_free(ep);
    /* positive control: without the hand-over it is refused, not guessed */
    o.lookup_env_ud = NULL;
    struct lz_envpass *empty = NULL;
    int efd = memfd_create("t", MFD_CLOEXEC);
    assert_true(efd >= 0);
    assert_int_equal(lz_envpass_read(efd, &empty, &err), 0);
    close(efd);
    o.lookup_env_ud = empty;
    assert_int_equal(lz_config_load(&o, &b, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "is a bare name and PATH is not set (not handed over by the client)"));
    lz_envpass_free(empty);
    lz_config_free(a);
}

/* ---- command and the built-in agent profiles -------------------------- */

static int text_load(const char *body, const char *profile, struct lz_config **c, struct lz_error *err) {
    char text[8192], p[4096];
    subst(body, text, sizeof text);
    subst("@/cfgcmd/config.toml", p, sizeof p);
    char dir[4096];
    subst("@/cfgcmd", dir, sizeof dir);
    assert_int_equal(lz_mkdir_p(dir, 0700), 0);
    write_file(p, text);
    return load_path(p, profile, NULL, c, err);
}

static void test_command(void **state) {
    (void)state;
    struct lz_config *a = NULL, *b = NULL;
    struct lz_error err;
    assert_int_equal(
        text_load("[profiles.dev]\nimage = \"x\"\ncommand = [\"claude\", \"--model\", \"\"]\n", "dev", &a, &err), 0);
    assert_int_equal(a->profile.n_command, 3);
    assert_string_equal(a->profile.command[0], "claude");
    assert_string_equal(a->profile.command[2], "");
    assert_null(a->profile.command[3]);
    assert_false(a->profile.builtin);

    /* A session default, not a Domain property: the fingerprint and the
     * Domain ID ignore it, so a client with another command joins. */
    assert_int_equal(text_load("[profiles.dev]\nimage = \"x\"\n", "dev", &b, &err), 0);
    assert_null(b->profile.command);
    assert_int_equal(b->profile.n_command, 0);
    assert_string_equal(a->fingerprint_hex, b->fingerprint_hex);
    assert_string_equal(a->domain_id_hex, b->domain_id_hex);
    lz_config_free(b);
    /* positive control: the same comparison sees a change of image */
    assert_int_equal(text_load("[profiles.dev]\nimage = \"y\"\ncommand = [\"claude\"]\n", "dev", &b, &err), 0);
    assert_string_not_equal(a->fingerprint_hex, b->fingerprint_hex);
    lz_config_free(b);

    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_non_null(f);
    lz_config_print(f, a);
    fclose(f);
    assert_non_null(strstr(out, "[profiles.dev]\nimage = \"x\"\ncommand = [\"claude\", \"--model\", \"\"]\n"));
    free(out);
    lz_config_free(a);

    static const struct {
        const char *body, *msg;
    } bad[] = {
        { "[profiles.dev]\nimage = \"x\"\ncommand = []\n",
          "config.toml:3: profiles.dev.command: must not be empty (leave the key out for a login shell)" },
        { "[profiles.dev]\nimage = \"x\"\ncommand = [\"\"]\n",
          "config.toml:3: profiles.dev.command[0]: the program must not be empty" },
        { "[profiles.dev]\nimage = \"x\"\ncommand = \"claude\"\n",
          "config.toml:3: profiles.dev.command: expected an array, found a string" },
        { "[profiles.dev]\nimage = \"x\"\ncommand = [\"claude\", 1]\n",
          "config.toml:3: profiles.dev.command[1]: expected a string, found an integer" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(bad); i++) {
        assert_int_equal(text_load(bad[i].body, "dev", &a, &err), -EINVAL);
        const char *want = bad[i].msg;
        if (!strstr(err.msg, want))
            print_error("case %zu: got \"%s\"\n", i, err.msg);
        assert_non_null(strstr(err.msg, want));
    }
}

/* Credentials (config_creds.c): the declaration, its checks, what the
 * fingerprint sees, and that no value is ever printed. */
static void test_credentials(void **state) {
    (void)state;
    struct lz_config *a = NULL, *b = NULL;
    struct lz_error err;
    static const char base[] = "[profiles.dev]\nimage = \"x\"\nallow_hosts = [\"api.example.com:443\", "
                               "\"git.example.com\"]\n";
    char t[4096];
    setenv("LZ_TEST_CRED", "sk-real-123", 1);
    snprintf(t, sizeof t,
             "%s[profiles.dev.credentials.API_KEY]\nhost = \"API.Example.com.\"\nheader = \"X-Api-Key\"\n"
             "format = \"{}\"\nfrom_env = \"LZ_TEST_CRED\"\n"
             "[profiles.dev.credentials.GH]\nhost = \"git.example.com\"\nformat = \"basic\"\n"
             "from_command = [\"gh\", \"auth\", \"token\"]\npush_refs = [\"refs/heads/agent/*\"]\n",
             base);
    assert_int_equal(text_load(t, "dev", &a, &err), 0);
    assert_int_equal(a->profile.n_credentials, 2);
    const struct lz_credential *k = &a->profile.credentials[0], *g = &a->profile.credentials[1];
    assert_string_equal(k->var, "API_KEY");
    assert_string_equal(k->host, "api.example.com");
    assert_string_equal(k->header, "x-api-key");
    assert_false(k->basic);
    assert_string_equal(k->value, "sk-real-123");
    assert_int_equal(k->from, LZ_CRED_FROM_ENV);
    assert_string_equal(g->var, "GH");
    assert_true(g->basic);
    assert_string_equal(g->header, "authorization");
    assert_string_equal(g->username, "x-access-token");
    assert_int_equal(g->from, LZ_CRED_FROM_COMMAND);
    assert_null(g->value); /* fetched when the Domain starts */
    assert_int_equal(g->n_push_refs, 1);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    lz_config_print(f, a);
    fclose(f);
    assert_null(strstr(out, "sk-real-123"));
    assert_non_null(strstr(out, "[profiles.dev.credentials.API_KEY]  # the sandbox holds a placeholder"));
    assert_non_null(strstr(out, "from_command = [\"gh\", \"auth\", \"token\"]  # run when the Domain starts\n"));
    free(out);

    /* Another value: the same configuration; another header: not. */
    setenv("LZ_TEST_CRED", "sk-other", 1);
    assert_int_equal(text_load(t, "dev", &b, &err), 0);
    assert_string_equal(a->fingerprint_hex, b->fingerprint_hex);
    lz_config_free(b);
    char t2[4096];
    snprintf(t2, sizeof t2, "%s", t);
    char *h = strstr(t2, "X-Api-Key");
    memcpy(h, "X-Api-Kez", 9);
    assert_int_equal(text_load(t2, "dev", &b, &err), 0);
    assert_string_not_equal(a->fingerprint_hex, b->fingerprint_hex);
    lz_config_free(b);
    lz_config_free(a);

    static const struct {
        const char *decl, *want;
    } bad[] = {
        { "host = \"api.example.com\"\nfrom_env = \"LZ_TEST_CRED\"\nfrom_file = \"/x\"\n",
          "more than one of from_env" },
        { "host = \"api.example.com\"\n", "says where the value comes from" },
        { "from_env = \"LZ_TEST_CRED\"\n", "missing required key host" },
        { "host = \"*.example.com\"\nfrom_env = \"LZ_TEST_CRED\"\n", "without a wildcard or a port" },
        { "host = \"10.0.0.1\"\nfrom_env = \"LZ_TEST_CRED\"\n", "is not a host name" },
        { "host = \"other.example.com\"\nfrom_env = \"LZ_TEST_CRED\"\n", "is not allowed on TCP port 443" },
        { "host = \"api.example.com\"\nheader = \"Host\"\nfrom_env = \"LZ_TEST_CRED\"\n", "frames or routes" },
        { "host = \"api.example.com\"\nheader = \"x y\"\nfrom_env = \"LZ_TEST_CRED\"\n", "is not a header name" },
        { "host = \"api.example.com\"\nformat = \"Bearer\"\nfrom_env = \"LZ_TEST_CRED\"\n", "exactly once" },
        { "host = \"api.example.com\"\nformat = \"{}{}\"\nfrom_env = \"LZ_TEST_CRED\"\n", "exactly once" },
        { "host = \"api.example.com\"\nformat = \"basic\"\nheader = \"x-k\"\nfrom_env = \"LZ_TEST_CRED\"\n",
          "carried in the authorization header" },
        { "host = \"api.example.com\"\nusername = \"u\"\nfrom_env = \"LZ_TEST_CRED\"\n", "format = \"basic\" only" },
        { "host = \"api.example.com\"\nfrom_file = \"relative\"\n", "an absolute path or one starting with ~/" },
        { "host = \"api.example.com\"\nfrom_command = []\n", "a program and up to 63 arguments" },
        { "host = \"api.example.com\"\nfrom_command = [\"bin/gh\"]\n", "a bare name" },
        { "host = \"api.example.com\"\nfrom_env = \"LZ_TEST_CRED\"\npush_refs = [\"heads/x\"]\n",
          "must start with refs/" },
        { "host = \"api.example.com\"\nfrom_env = \"LZ_TEST_CRED\"\npush_refs = [\"refs/heads/a**\"]\n",
          "** inside a component" },
        { "host = \"api.example.com\"\nfrom_env = \"LZ_TEST_CRED\"\npush_delete = true\n", "with push_refs only" },
        { "host = \"api.example.com\"\nfrom_env = \"LZ_TEST_UNSET_CRED\"\n",
          "host environment variable \"LZ_TEST_UNSET_CRED\" is not set" },
        { "host = \"api.example.com\"\nfrom_env = \"LZ_TEST_BAD_CRED\"\n", "cannot go into an HTTP header" },
        { "host = \"api.example.com\"\nnope = 1\nfrom_env = \"LZ_TEST_CRED\"\n", "unknown key" },
    };
    unsetenv("LZ_TEST_UNSET_CRED");
    setenv("LZ_TEST_BAD_CRED", "sk\r\nX-Evil: 1", 1);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(t, sizeof t, "%s[profiles.dev.credentials.K]\n%s", base, bad[i].decl);
        a = NULL;
        int r = text_load(t, "dev", &a, &err);
        if (r != -EINVAL || !strstr(err.msg, bad[i].want))
            fail_msg("case %zu: r=%d msg=%s (want %s)", i, r, err.msg, bad[i].want);
    }
    /* The variable cannot also be passed by env; the gate must be there. */
    snprintf(t, sizeof t,
             "%senv = { K = \"v\" }\n[profiles.dev.credentials.K]\nhost = \"api.example.com\"\n"
             "from_env = \"LZ_TEST_CRED\"\n",
             base);
    assert_int_equal(text_load(t, "dev", &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "is also in profiles.dev.env"));
    snprintf(t, sizeof t,
             "%stls_gate = \"off\"\n[profiles.dev.credentials.K]\nhost = \"api.example.com\"\n"
             "from_env = \"LZ_TEST_CRED\"\n",
             base);
    assert_int_equal(text_load(t, "dev", &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "needs the TLS gate"));
    snprintf(t, sizeof t,
             "%segress = \"open\"\n[profiles.dev.credentials.K]\nhost = \"api.example.com\"\n"
             "from_env = \"LZ_TEST_CRED\"\n",
             base);
    assert_int_equal(text_load(t, "dev", &a, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "does not run under egress = \"open\""));

    /* A built-in agent profile under egress = "open": its key goes in as
     * it is (no gate); under "locked" without the host: not used. */
    setenv("ANTHROPIC_API_KEY", "sk-host-key", 1);
    assert_int_equal(text_load("[network]\negress = \"open\"\n", "claude", &a, &err), 0);
    assert_true(a->profile.credentials[0].passed_plain);
    assert_string_equal(a->profile.credentials[0].value, "sk-host-key");
    lz_config_free(a);
    assert_int_equal(text_load("[network]\negress = \"locked\"\n", "claude", &a, &err), 0);
    assert_true(a->profile.credentials[0].unreachable);
    assert_null(a->profile.credentials[0].value);
    lz_config_free(a);
    unsetenv("ANTHROPIC_API_KEY");
    unsetenv("LZ_TEST_CRED");
    unsetenv("LZ_TEST_BAD_CRED");
}

static void test_builtin_agents(void **state) {
    (void)state;
    char xdg[2048], exp[8192];
    snprintf(xdg, sizeof xdg, "%s/empty-xdg-agents", root);
    assert_int_equal(lz_mkdir_p(xdg, 0700), 0);
    setenv("XDG_CONFIG_HOME", xdg, 1);
    unsetenv("ANTHROPIC_API_KEY");
    unsetenv("OPENAI_API_KEY");
    struct lz_config *c = NULL, *d = NULL;
    struct lz_error err;

    /* No file: the built-in claude, with the built-in globals. */
    assert_int_equal(load_path(NULL, "claude", NULL, &c, &err), 0);
    assert_true(c->builtin_default);
    assert_true(c->profile.builtin);
    assert_string_equal(c->profile.name, "claude");
    assert_string_equal(c->profile.image, "builtin:agent-claude");
    assert_int_equal(c->profile.n_command, 1);
    assert_string_equal(c->profile.command[0], "claude");
    assert_int_equal(c->profile.n_persistent_dirs, 5);
    assert_int_equal(c->n_default_deny, 8);
    assert_int_equal(c->profile.n_volumes, 1);
    snprintf(exp, sizeof exp, "%s/.local/share/lazaret/claude/claude", home);
    assert_string_equal(c->profile.volumes[0].host, exp);
    assert_string_equal(c->profile.volumes[0].container, "/root/.claude");
    assert_true(c->profile.volumes[0].create);
    assert_false(c->profile.volumes[0].read_only);
    assert_int_equal(c->profile.volumes[0].line, 0);
    /* the agent's state is under {profile_dir}, never in the workspace */
    assert_true(strncmp(c->profile.volumes[0].host, c->profile_dir, strlen(c->profile_dir)) == 0);
    assert_true(strncmp(c->profile.volumes[0].host, ws, strlen(ws)) != 0);
    /* env: CLAUDE_CONFIG_DIR and IS_SANDBOX (literals); the API key is a
     * credential (optional, unset: not used) bound to api.anthropic.com */
    assert_int_equal(c->profile.n_env, 2);
    assert_string_equal(c->profile.env[0].name, "CLAUDE_CONFIG_DIR");
    assert_string_equal(c->profile.env[0].value, "/root/.claude");
    assert_string_equal(c->profile.env[1].name, "IS_SANDBOX");
    assert_string_equal(c->profile.env[1].value, "1");
    assert_int_equal(c->profile.n_credentials, 2);
    assert_string_equal(c->profile.credentials[1].var, "CLAUDE_CODE_OAUTH_TOKEN");
    assert_string_equal(c->profile.credentials[1].prefix, "Bearer ");
    assert_string_equal(c->profile.credentials[0].var, "ANTHROPIC_API_KEY");
    assert_string_equal(c->profile.credentials[0].host, "api.anthropic.com");
    assert_string_equal(c->profile.credentials[0].header, "x-api-key");
    assert_string_equal(c->profile.credentials[0].prefix, "");
    assert_string_equal(c->profile.credentials[0].suffix, "");
    assert_true(c->profile.credentials[0].optional);
    assert_false(c->profile.credentials[0].passed_plain);
    assert_null(c->profile.credentials[0].value);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_non_null(f);
    lz_config_print(f, c);
    fclose(f);
    assert_non_null(strstr(out,
                           "# built-in agent profile (the configuration does not define \"claude\")\n"
                           "[profiles.claude]\nimage = \"builtin:agent-claude\"\ncommand = [\"claude\"]\n"));
    assert_non_null(strstr(out,
                           "[profiles.claude.credentials.ANTHROPIC_API_KEY]  # not used: \"ANTHROPIC_API_KEY\" is "
                           "not set on the host\nhost = \"api.anthropic.com\"  # TCP port 443\n"
                           "header = \"x-api-key\"\nformat = \"{}\"\nfrom_env = \"ANTHROPIC_API_KEY\"\n"));
    free(out);

    /* Set on the host: passed, and the fingerprint does not change (only
     * the reference text is configuration). */
    setenv("ANTHROPIC_API_KEY", "sk-host-key", 1);
    assert_int_equal(load_path(NULL, "claude", NULL, &d, &err), 0);
    assert_string_equal(d->profile.credentials[0].value, "sk-host-key");
    assert_string_equal(c->fingerprint_hex, d->fingerprint_hex);
    out = NULL;
    f = open_memstream(&out, &len);
    lz_config_print(f, d);
    fclose(f);
    assert_null(strstr(out, "sk-host-key"));
    free(out);
    lz_config_free(d);
    lz_config_free(c);
    unsetenv("ANTHROPIC_API_KEY");

    assert_int_equal(load_path(NULL, "codex", NULL, &c, &err), 0);
    assert_string_equal(c->profile.image, "builtin:agent-codex");
    assert_string_equal(c->profile.command[0], "codex");
    assert_string_equal(c->profile.volumes[0].container, "/root/.codex");
    assert_string_equal(c->profile.credentials[0].var, "OPENAI_API_KEY");
    assert_string_equal(c->profile.credentials[0].header, "authorization");
    assert_string_equal(c->profile.credentials[0].prefix, "Bearer ");
    assert_null(c->profile.credentials[0].value);
    lz_config_free(c);
    assert_int_equal(load_path(NULL, "opencode", NULL, &c, &err), 0);
    assert_string_equal(c->profile.image, "builtin:agent-opencode");
    assert_string_equal(c->profile.command[0], "opencode");
    assert_int_equal(c->profile.n_volumes, 2);
    assert_string_equal(c->profile.volumes[0].container, "/root/.config/opencode");
    assert_string_equal(c->profile.volumes[1].container, "/root/.local/share/opencode");
    snprintf(exp, sizeof exp, "%s/.local/share/lazaret/opencode/share", home);
    assert_string_equal(c->profile.volumes[1].host, exp);
    lz_config_free(c);

    /* A file that does not define codex: the built-in, under the file's
     * Storage Root and network lists. */
    assert_int_equal(load("good.toml", "codex", &c, &err), 0);
    assert_false(c->builtin_default);
    assert_true(c->profile.builtin);
    assert_string_equal(c->profile.image, "builtin:agent-codex");
    subst("@/home/data/codex/codex", exp, sizeof exp);
    assert_string_equal(c->profile.volumes[0].host, exp);
    assert_int_equal(c->n_default_deny, 3);
    assert_int_equal(c->n_auto_approve, 2);
    lz_config_free(c);

    /* A user profile of the same name wins, and keeps the strict rule. */
    c = load_ok("good.toml", "claude");
    assert_false(c->profile.builtin);
    assert_string_equal(c->profile.image, "docker.io/library/debian:trixie");
    assert_null(c->profile.command);
    lz_config_free(c);
    unsetenv("LZ_TEST_API_KEY");
    assert_int_equal(load("good.toml", "claude", &c, &err), -EINVAL);
    assert_non_null(strstr(err.msg, "host environment variable \"LZ_TEST_API_KEY\" is not set"));
    assert_int_equal(
        text_load("[profiles.claude]\nimage = \"x\"\nenv = { K = \"env:ANTHROPIC_API_KEY\" }\n", "claude", &c, &err),
        -EINVAL);
    assert_non_null(strstr(err.msg, "host environment variable \"ANTHROPIC_API_KEY\" is not set"));
    assert_int_equal(text_load("[profiles.claude]\nimage = \"x\"\n", "claude", &c, &err), 0);
    assert_false(c->profile.builtin);
    assert_string_equal(c->profile.image, "x");
    lz_config_free(c);
}

#define T(f) cmocka_unit_test_setup(f, env_reset)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_good_claude),
        T(test_good_default_profile),
        T(test_tokens),
        T(test_tilde_with_trailing_slash_home),
        T(test_bad_fixtures),
        T(test_bad_volume_domain_dir),
        T(test_sr2_config_in_volume),
        T(test_sr2_config_in_workspace),
        T(test_no_workspace_in_any_directory),
        T(test_data_root_in_workspace),
        T(test_gc_keys),
        T(test_persistent_dirs_default),
        T(test_host_tool_paths),
        T(test_private_dirs),
        T(test_limits),
        T(test_env_non_utf8),
        T(test_builtin_default),
        T(test_xdg_lookup),
        T(test_explicit_config_errors),
        T(test_workspace_resolution),
        T(test_fingerprint_vector_file),
        T(test_fingerprint_stability),
        T(test_workspace_repository_top),
        T(test_print_redacts),
        T(test_prefix_parse),
        T(test_profile_names),
        T(test_aa_resolution),
        T(test_aa_symlink_chain),
        T(test_aa_locations),
        T(test_aa_cwd_and_args),
        T(test_aa_one_tree_set),
        T(test_aa_classes),
        T(test_aa_prompt_timeout),
        T(test_aa_match),
        T(test_aa_fingerprint),
        T(test_command),
        T(test_builtin_agents),
        T(test_credentials),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
