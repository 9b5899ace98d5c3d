/* test_egress_config.c — the configuration of egress by name (config.h,
 * enum lz_egress): the keys egress, allow_hosts, deny_hosts, [network]
 * egress and resolver, accepted and refused (each refusal with its whole
 * message); the presets resolved per profile; precedence (deny wins);
 * the Configuration Fingerprint moved by each key while the Domain ID
 * stays; [network] default_allow applied by lz_netpolicy_derive only under
 * "open"; what `config check` prints.
 *
 * Every configuration is written to @/cfg.toml of a temporary tree (@/home
 * is HOME, @/ws the workspace). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>

#include "agents.h"
#include "config.h"
#include "domain_id.h"
#include "hostrule.h"
#include "netpolicy.h"

static char root[1024], home[1100], ws[1100], cfg[1100];

#define A(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (uint32_t)(d))

static int setup(void **state) {
    (void)state;
    char tmpl[] = "/tmp/lz-test-egress-XXXXXX";
    if (!mkdtemp(tmpl))
        return -1;
    char *rp = realpath(tmpl, NULL);
    if (!rp || strlen(rp) > 512)
        return -1;
    snprintf(root, sizeof root, "%s", rp);
    free(rp);
    snprintf(home, sizeof home, "%s/home", root);
    snprintf(ws, sizeof ws, "%s/ws", root);
    snprintf(cfg, sizeof cfg, "%s/cfg.toml", root);
    if (lz_mkdir_p(home, 0700) < 0 || lz_mkdir_p(ws, 0700) < 0)
        return -1;
    setenv("HOME", home, 1);
    unsetenv("XDG_CONFIG_HOME");
    unsetenv("XDG_DATA_HOME");
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return lz_rm_rf_at(AT_FDCWD, root) < 0 ? -1 : 0;
}

/* Loads text as the configuration file (NULL: no file, the built-in
 * configuration). */
static int try_load(const char *text, const char *profile, struct lz_config **ret, struct lz_error *err) {
    memset(err, 0, sizeof *err);
    if (text)
        assert_int_equal(lz_write_file_atomic_at(AT_FDCWD, cfg, text, strlen(text), 0600), 0);
    struct lz_config_opts o = { .config_path = text ? cfg : NULL, .profile = profile, .workspace = ws };
    return lz_config_load(&o, ret, err);
}

static struct lz_config *load_ok(const char *text, const char *profile) {
    struct lz_config *c = NULL;
    struct lz_error err;
    int r = try_load(text, profile, &c, &err);
    if (r < 0)
        print_error("unexpected failure: %s\n", err.msg);
    assert_int_equal(r, 0);
    assert_non_null(c);
    return c;
}

/* The text must be refused with exactly "@/cfg.toml:" + want. */
static void refused(const char *text, const char *profile, const char *want) {
    struct lz_config *c = NULL;
    struct lz_error err;
    int r = try_load(text, profile, &c, &err);
    assert_null(c);
    assert_int_equal(r, -EINVAL);
    char exp[4096];
    snprintf(exp, sizeof exp, "%s:%s", cfg, want);
    if (strcmp(err.msg, exp) != 0)
        print_error("   got \"%s\"\n  want \"%s\"\n", err.msg, exp);
    assert_string_equal(err.msg, exp);
}

static bool has_rule(const struct lz_profile *p, const char *text, size_t from, size_t to) {
    char buf[LZ_HOSTRULE_TEXT_MAX];
    for (size_t i = from; i < to && i < p->n_allow_hosts; i++) {
        assert_int_equal(lz_hostrule_format(&p->allow_hosts[i], buf, sizeof buf), 0);
        if (strcmp(buf, text) == 0)
            return true;
    }
    return false;
}

static size_t count(const char *const *v) {
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

/* ---- presets ------------------------------------------------------------ */

static void test_presets_builtin(void **state) {
    (void)state;
    size_t ndev = count(lz_dev_hosts);
    assert_true(ndev > 0);
    /* No file: "balanced"; the default profile gets the developer list. */
    struct lz_config *c = load_ok(NULL, NULL);
    assert_int_equal(c->default_egress, LZ_EGRESS_BALANCED);
    assert_false(c->resolver_set);
    assert_int_equal(c->profile.egress, LZ_EGRESS_BALANCED);
    assert_true(c->profile.egress_inherited);
    assert_int_equal(c->profile.n_allow_hosts_preset, ndev);
    assert_int_equal(c->profile.n_allow_hosts, ndev);
    assert_true(has_rule(&c->profile, "github.com:22,443", 0, ndev));
    assert_true(has_rule(&c->profile, "*.githubusercontent.com:443", 0, ndev));
    assert_false(has_rule(&c->profile, "api.anthropic.com:443", 0, SIZE_MAX));
    assert_int_equal(c->profile.n_deny_hosts, 0);
    lz_config_free(c);

    /* Each agent: the developer list, then its own names. */
    for (const struct lz_agent *a = lz_agents; a->name; a++) {
        c = load_ok(NULL, a->name);
        assert_int_equal(c->profile.egress, LZ_EGRESS_BALANCED);
        size_t n = ndev + count(a->hosts);
        assert_true(count(a->hosts) > 0);
        assert_int_equal(c->profile.n_allow_hosts_preset, c->profile.n_allow_hosts);
        assert_true(c->profile.n_allow_hosts <= n);
        for (size_t i = 0; a->hosts[i]; i++)
            assert_true(has_rule(&c->profile, a->hosts[i], 0, SIZE_MAX));
        lz_config_free(c);
    }
    c = load_ok(NULL, "claude");
    assert_true(has_rule(&c->profile, "api.anthropic.com:443", 0, SIZE_MAX));
    assert_false(has_rule(&c->profile, "chatgpt.com:443", 0, SIZE_MAX));
    lz_config_free(c);
    c = load_ok(NULL, "codex");
    assert_true(has_rule(&c->profile, "chatgpt.com:443", 0, SIZE_MAX));
    assert_false(has_rule(&c->profile, "api.anthropic.com:443", 0, SIZE_MAX));
    lz_config_free(c);
}

static void test_presets_file(void **state) {
    (void)state;
    size_t ndev = count(lz_dev_hosts);
    const char *text = "[network]\n"
                       "egress = \"locked\"\n"
                       "[profiles.inherits]\n"
                       "image = \"img\"\n"
                       "allow_hosts = [\"example.org:443\"]\n"
                       "[profiles.bal]\n"
                       "image = \"img\"\n"
                       "egress = \"balanced\"\n"
                       "allow_hosts = [\"example.org:443\", \"github.com:22,443\", \"example.org:443\"]\n"
                       "[profiles.agentimg]\n"
                       "image = \"" LZ_AGENT_IMAGE_PREFIX "codex\"\n"
                       "egress = \"balanced\"\n"
                       "[profiles.claude]\n"
                       "image = \"img\"\n"
                       "egress = \"balanced\"\n"
                       "[profiles.op]\n"
                       "image = \"img\"\n"
                       "egress = \"open\"\n"
                       "allow_hosts = [\"example.org\"]\n"
                       "deny_hosts = [\"*.evil.example\"]\n";
    /* [network] egress is the default of a profile without its own. */
    struct lz_config *c = load_ok(text, "inherits");
    assert_int_equal(c->default_egress, LZ_EGRESS_LOCKED);
    assert_int_equal(c->profile.egress, LZ_EGRESS_LOCKED);
    assert_true(c->profile.egress_inherited);
    assert_int_equal(c->profile.n_allow_hosts_preset, 0);
    assert_int_equal(c->profile.n_allow_hosts, 1);
    assert_true(has_rule(&c->profile, "example.org:443", 0, 1));
    lz_config_free(c);
    /* The built-in agents inherit it too: no built-in names. */
    c = load_ok(text, "codex");
    assert_int_equal(c->profile.egress, LZ_EGRESS_LOCKED);
    assert_int_equal(c->profile.n_allow_hosts, 0);
    lz_config_free(c);

    /* balanced: the preset first, then the profile's own, duplicates once. */
    c = load_ok(text, "bal");
    assert_int_equal(c->profile.egress, LZ_EGRESS_BALANCED);
    assert_false(c->profile.egress_inherited);
    assert_int_equal(c->profile.n_allow_hosts_preset, ndev);
    assert_int_equal(c->profile.n_allow_hosts, ndev + 1);
    assert_true(has_rule(&c->profile, "github.com:22,443", 0, ndev));
    assert_true(has_rule(&c->profile, "example.org:443", ndev, ndev + 1));
    lz_config_free(c);

    /* The agent's names follow the image, not the profile's name. */
    c = load_ok(text, "agentimg");
    assert_true(has_rule(&c->profile, "chatgpt.com:443", 0, c->profile.n_allow_hosts_preset));
    lz_config_free(c);
    c = load_ok(text, "claude");
    assert_int_equal(c->profile.n_allow_hosts, ndev);
    assert_false(has_rule(&c->profile, "api.anthropic.com:443", 0, SIZE_MAX));
    lz_config_free(c);

    /* open: the profile's own rules only. */
    c = load_ok(text, "op");
    assert_int_equal(c->profile.egress, LZ_EGRESS_OPEN);
    assert_int_equal(c->profile.n_allow_hosts_preset, 0);
    assert_int_equal(c->profile.n_allow_hosts, 1);
    assert_int_equal(c->profile.n_deny_hosts, 1);
    assert_true(c->profile.deny_hosts[0].wildcard);
    assert_string_equal(c->profile.deny_hosts[0].name, "evil.example");
    lz_config_free(c);

    assert_string_equal(lz_egress_name(LZ_EGRESS_OPEN), "open");
    assert_string_equal(lz_egress_name(LZ_EGRESS_BALANCED), "balanced");
    assert_string_equal(lz_egress_name(LZ_EGRESS_LOCKED), "locked");
    assert_string_equal(lz_egress_name((enum lz_egress)0), "?");
    assert_string_equal(lz_egress_name((enum lz_egress)99), "?");
}

/* Every built-in list parses and passes the configuration's own check
 * (ports), alone and with every agent's. */
static void test_preset_lists_valid(void **state) {
    (void)state;
    struct lz_hostrule r;
    struct lz_error err;
    for (size_t i = 0; lz_dev_hosts[i]; i++)
        assert_int_equal(lz_hostrule_parse(lz_dev_hosts[i], 0, &r, &err), 0);
    for (const struct lz_agent *a = lz_agents; a->name; a++) {
        for (size_t i = 0; a->hosts[i]; i++) {
            assert_int_equal(lz_hostrule_parse(a->hosts[i], 0, &r, &err), 0);
            assert_true(r.n_ports > 0); /* ports explicit */
        }
        assert_ptr_equal(lz_agent_of_image(a->name), NULL);
        char img[128];
        snprintf(img, sizeof img, "%s%s", LZ_AGENT_IMAGE_PREFIX, a->name);
        assert_ptr_equal(lz_agent_of_image(img), a);
    }
    assert_null(lz_agent_of_image(LZ_AGENT_IMAGE_PREFIX "nope"));
    assert_null(lz_agent_of_image(NULL));
}

/* ---- precedence --------------------------------------------------------- */

static void test_precedence(void **state) {
    (void)state;
    const char *text = "[profiles.bal]\n"
                       "image = \"img\"\n"
                       "allow_hosts = [\"*.example.org:8443\"]\n"
                       "deny_hosts = [\"*.github.com\", \"bad.example.org\"]\n";
    struct lz_config *c = load_ok(text, "bal");
    const struct lz_profile *p = &c->profile;
    struct lz_hostports ports;
    /* a preset's wildcard, denied by the profile: deny wins */
    assert_int_equal(
        lz_hostrule_decide(p->allow_hosts, p->n_allow_hosts, p->deny_hosts, p->n_deny_hosts, "api.github.com", &ports),
        LZ_HOST_DENIED);
    /* the preset's exact name is not below the denied suffix */
    assert_int_equal(
        lz_hostrule_decide(p->allow_hosts, p->n_allow_hosts, p->deny_hosts, p->n_deny_hosts, "github.com", &ports),
        LZ_HOST_ALLOWED);
    assert_false(ports.all);
    assert_true(lz_hostports_has(&ports, 22));
    assert_true(lz_hostports_has(&ports, 443));
    assert_false(lz_hostports_has(&ports, 80));
    /* the profile's own wildcard, one name of it denied */
    assert_int_equal(lz_hostrule_decide(p->allow_hosts, p->n_allow_hosts, p->deny_hosts, p->n_deny_hosts,
                                        "good.example.org", &ports),
                     LZ_HOST_ALLOWED);
    assert_true(lz_hostports_has(&ports, 8443));
    assert_int_equal(
        lz_hostrule_decide(p->allow_hosts, p->n_allow_hosts, p->deny_hosts, p->n_deny_hosts, "bad.example.org", &ports),
        LZ_HOST_DENIED);
    /* a name no rule lists */
    assert_int_equal(
        lz_hostrule_decide(p->allow_hosts, p->n_allow_hosts, p->deny_hosts, p->n_deny_hosts, "example.net", &ports),
        LZ_HOST_UNLISTED);
    lz_config_free(c);
}

/* ---- refusals ----------------------------------------------------------- */

#define P "[profiles.pp]\nimage = \"img\"\n"

static void test_refused_egress(void **state) {
    (void)state;
    refused(P "egress = \"strict\"\n", "pp",
            "3: profiles.pp.egress: \"strict\" is not an egress preset: write \"open\" (the prefix policy alone, "
            "every name resolves), \"balanced\" (the built-in names of the profile plus allow_hosts) or \"locked\" "
            "(allow_hosts and allow_egress only)");
    refused("[network]\negress = \"Open\"\n", NULL,
            "2: network.egress: \"Open\" is not an egress preset: write \"open\" (the prefix policy alone, every name "
            "resolves), \"balanced\" (the built-in names of the profile plus allow_hosts) or \"locked\" (allow_hosts "
            "and allow_egress only)");
    refused(P "egress = 1\n", "pp", "3: profiles.pp.egress: expected a string, found an integer");
    /* every profile is checked, not only the selected one */
    refused(P "[profiles.other]\nimage = \"img\"\negress = \"\"\n", "pp",
            "5: profiles.other.egress: \"\" is not an egress preset: write \"open\" (the prefix policy alone, every "
            "name resolves), \"balanced\" (the built-in names of the profile plus allow_hosts) or \"locked\" "
            "(allow_hosts and allow_egress only)");
}

static void test_refused_hosts(void **state) {
    (void)state;
    refused(P "allow_hosts = \"example.org\"\n", "pp", "3: profiles.pp.allow_hosts: expected an array, found a string");
    refused(P "deny_hosts = [1]\n", "pp", "3: profiles.pp.deny_hosts[0]: expected a string, found an integer");
    /* the rule's own messages (hostrule.h), under the key and line */
    refused(P "allow_hosts = [\"ok.example\",\n  \"*.com\"]\n", "pp",
            "4: profiles.pp.allow_hosts[1]: host rule \"*.com\" allows a whole top-level domain (any name anyone "
            "can register): name a domain under it, \"*.example.com\"");
    refused(P "allow_hosts = [\"a_b.example\"]\n", "pp",
            "3: profiles.pp.allow_hosts[0]: host rule \"a_b.example\": host name \"a_b.example\" has the byte "
            "\"_\" at 1: a host name has only letters, digits, '-' and dots between labels");
    refused(P "deny_hosts = [\"mail.example:25\"]\n", "pp",
            "3: profiles.pp.deny_hosts[0]: deny rule \"mail.example:25\" names a port: a deny rule denies the host "
            "on every port (allow only the ports you want instead)");
    refused(P "allow_hosts = [\"10.1.2.3\"]\n", "pp",
            "3: profiles.pp.allow_hosts[0]: host rule \"10.1.2.3\": \"10.1.2.3\" is not a host name (its last "
            "label is all digits): name an address range with allow_egress");
    /* the same host both allowed and denied by the profile (ports aside) */
    refused(P "allow_hosts = [\"x.example\", \"github.com:443\"]\ndeny_hosts = [\"y.example\",\n \"GitHub.com.\"]\n",
            "pp",
            "3: profiles.pp.allow_hosts[1]: \"github.com\" is also denied by profiles.pp.deny_hosts[1] at line 5; "
            "the same host cannot be both allowed and denied: remove one of them");
    refused(P "allow_hosts = [\"*.x.example:443\"]\ndeny_hosts = [\"*.x.example\"]\n", "pp",
            "3: profiles.pp.allow_hosts[0]: \"*.x.example\" is also denied by profiles.pp.deny_hosts[0] at line 4; "
            "the same host cannot be both allowed and denied: remove one of them");

    /* a bound on each list */
    char *big = lz_xasprintf("%s", P "allow_hosts = [");
    for (int i = 0; i <= LZ_CONFIG_MAX_HOSTRULES; i++) {
        char *n = lz_xasprintf("%s\"h%d.example\",", big, i);
        free(big);
        big = n;
    }
    char *t = lz_xasprintf("%s]\n", big);
    refused(t, "pp",
            "3: profiles.pp.allow_hosts: more than 256 host rules; a wildcard (\"*.example.com\") covers every name "
            "below a domain");
    free(t);
    free(big);

    /* more distinct ports than a decision can union */
    char *ports = lz_xasprintf("%s", P "egress = \"locked\"\nallow_hosts = [");
    for (int i = 0; i < 9; i++) {
        char *n = lz_xasprintf("%s\"p%d.example:%d,%d,%d,%d,%d,%d,%d,%d\",", ports, i, 1000 + i * 8, 1001 + i * 8,
                               1002 + i * 8, 1003 + i * 8, 1004 + i * 8, 1005 + i * 8, 1006 + i * 8, 1007 + i * 8);
        free(ports);
        ports = n;
    }
    t = lz_xasprintf("%s]\n", ports);
    refused(t, "pp",
            "4: profiles.pp.allow_hosts: the host rules name more than 64 distinct ports (with the preset's rules): "
            "name fewer ports");
    free(t);
    free(ports);
}

static void test_refused_resolver(void **state) {
    (void)state;
    static const struct {
        const char *value, *msg;
    } cases[] = {
        { "\"dns.google\"",
          "\"dns.google\" is a name; the resolver is what looks names up, so it must be an address: write an IPv4 "
          "address, optionally with a port: \"192.0.2.53\" or \"192.0.2.53:5353\"" },
        { "\"dns.google:53\"",
          "\"dns.google:53\" is a name; the resolver is what looks names up, so it must be an address: write an IPv4 "
          "address, optionally with a port: \"192.0.2.53\" or \"192.0.2.53:5353\"" },
        { "\"2001:db8::53\"",
          "\"2001:db8::53\" looks like an IPv6 address; only IPv4 resolvers are supported: write an IPv4 address, "
          "optionally with a port: \"192.0.2.53\" or \"192.0.2.53:5353\"" },
        { "\"[::1]:53\"",
          "\"[::1]:53\" looks like an IPv6 address; only IPv4 resolvers are supported: write an IPv4 address, "
          "optionally with a port: \"192.0.2.53\" or \"192.0.2.53:5353\"" },
        { "\"0.0.0.0\"",
          "\"0.0.0.0\": 0.0.0.0 is not a resolver's address: write an IPv4 address, optionally with a port: "
          "\"192.0.2.53\" or \"192.0.2.53:5353\"" },
        { "\"192.0.2.53:0\"",
          "\"192.0.2.53:0\": the port must be a number from 1 to 65535: write an IPv4 address, optionally with a "
          "port: \"192.0.2.53\" or \"192.0.2.53:5353\"" },
        { "\"192.0.2.53:65536\"",
          "\"192.0.2.53:65536\": the port must be a number from 1 to 65535: write an IPv4 address, optionally with "
          "a port: \"192.0.2.53\" or \"192.0.2.53:5353\"" },
        { "\"192.0.2.53:\"",
          "\"192.0.2.53:\": the port must be a number from 1 to 65535: write an IPv4 address, optionally with a "
          "port: \"192.0.2.53\" or \"192.0.2.53:5353\"" },
        { "\"192.0.2.53:053\"",
          "\"192.0.2.53:053\": the port must be a number from 1 to 65535: write an IPv4 address, optionally with a "
          "port: \"192.0.2.53\" or \"192.0.2.53:5353\"" },
        { "\"192.0.2.53:+53\"",
          "\"192.0.2.53:+53\": the port must be a number from 1 to 65535: write an IPv4 address, optionally with a "
          "port: \"192.0.2.53\" or \"192.0.2.53:5353\"" },
        { "\"192.0.2\"",
          "\"192.0.2\" is not an IPv4 address: write an IPv4 address, optionally with a port: \"192.0.2.53\" or "
          "\"192.0.2.53:5353\"" },
        { "\"192.0.2.053\"",
          "\"192.0.2.053\" is not an IPv4 address: write an IPv4 address, optionally with a port: \"192.0.2.53\" or "
          "\"192.0.2.53:5353\"" },
        { "\"\"",
          "\"\" is not an IPv4 address: write an IPv4 address, optionally with a port: \"192.0.2.53\" or "
          "\"192.0.2.53:5353\"" },
        { "\":53\"",
          "\":53\" is not an IPv4 address: write an IPv4 address, optionally with a port: \"192.0.2.53\" or "
          "\"192.0.2.53:5353\"" },
        { "\"192.0.2.53/32\"",
          "\"192.0.2.53/32\" is not an IPv4 address: write an IPv4 address, optionally with a port: \"192.0.2.53\" "
          "or \"192.0.2.53:5353\"" },
        { "53", "expected a string, found an integer" },
    };
    for (size_t i = 0; i < LZ_ARRAY_SIZE(cases); i++) {
        char text[256], want[1024];
        snprintf(text, sizeof text, "[network]\nresolver = %s\n", cases[i].value);
        snprintf(want, sizeof want, "2: network.resolver: %s", cases[i].msg);
        refused(text, NULL, want);
    }
    refused("[network]\nresolvers = \"192.0.2.53\"\n", NULL,
            "2: network.resolvers: unknown key (expected one of: default_allow, default_deny, egress, resolver)");
}

static void test_resolver_ok(void **state) {
    (void)state;
    struct lz_config *c = load_ok("[network]\nresolver = \"192.0.2.53\"\n", NULL);
    assert_true(c->resolver_set);
    assert_int_equal(c->resolver.sin_family, AF_INET);
    assert_int_equal(ntohl(c->resolver.sin_addr.s_addr), A(192, 0, 2, 53));
    assert_int_equal(ntohs(c->resolver.sin_port), 53);
    lz_config_free(c);
    c = load_ok("[network]\nresolver = \"127.0.0.53:5353\"\n", NULL);
    assert_int_equal(ntohl(c->resolver.sin_addr.s_addr), A(127, 0, 0, 53));
    assert_int_equal(ntohs(c->resolver.sin_port), 5353);
    lz_config_free(c);
    c = load_ok("[network]\nresolver = \"10.1.1.1:65535\"\n", NULL);
    assert_int_equal(ntohs(c->resolver.sin_port), 65535);
    lz_config_free(c);
    c = load_ok("[network]\n", NULL);
    assert_false(c->resolver_set);
    assert_int_equal(c->default_egress, LZ_EGRESS_BALANCED);
    lz_config_free(c);
}

/* ---- fingerprint -------------------------------------------------------- */

#define BASE_PROFILE                                                                                                   \
    "[profiles.fp]\nimage = \"img\"\negress = \"locked\"\n"                                                            \
    "allow_hosts = [\"a.example:443\", \"*.b.example\"]\ndeny_hosts = [\"c.example\"]\n"

static void fp_of(const char *text, char ret_fp[65], char ret_id[65]) {
    struct lz_config *c = load_ok(text, "fp");
    memcpy(ret_fp, c->fingerprint_hex, 65);
    memcpy(ret_id, c->domain_id_hex, 65);
    lz_config_free(c);
}

static void test_fingerprint(void **state) {
    (void)state;
    char base[65], base_id[65], fp[65], id[65];
    fp_of(BASE_PROFILE, base, base_id);
    /* the same policy written otherwise: same fingerprint */
    fp_of("[profiles.fp]\nimage = \"img\"\negress = \"locked\"\n"
          "allow_hosts = [\"*.B.example.\", \"a.example:443\", \"a.example:443\"]\ndeny_hosts = [\"c.example\"]\n",
          fp, id);
    assert_string_equal(fp, base);
    fp_of("[network]\negress = \"locked\"\n[profiles.fp]\nimage = \"img\"\n"
          "allow_hosts = [\"a.example:443\", \"*.b.example\"]\ndeny_hosts = [\"c.example\"]\n",
          fp, id);
    assert_string_equal(fp, base);

    static const char *const changed[] = {
        /* egress */
        "[profiles.fp]\nimage = \"img\"\negress = \"balanced\"\n"
        "allow_hosts = [\"a.example:443\", \"*.b.example\"]\ndeny_hosts = [\"c.example\"]\n",
        "[profiles.fp]\nimage = \"img\"\negress = \"open\"\n"
        "allow_hosts = [\"a.example:443\", \"*.b.example\"]\ndeny_hosts = [\"c.example\"]\n",
        /* [network] egress, for a profile without its own */
        "[network]\negress = \"balanced\"\n[profiles.fp]\nimage = \"img\"\n"
        "allow_hosts = [\"a.example:443\", \"*.b.example\"]\ndeny_hosts = [\"c.example\", \"f.example\"]\n",
        /* allow_hosts: one more rule, another port, a wildcard instead */
        "[profiles.fp]\nimage = \"img\"\negress = \"locked\"\n"
        "allow_hosts = [\"a.example:443\", \"*.b.example\", \"d.example\"]\ndeny_hosts = [\"c.example\"]\n",
        "[profiles.fp]\nimage = \"img\"\negress = \"locked\"\n"
        "allow_hosts = [\"a.example:443,8443\", \"*.b.example\"]\ndeny_hosts = [\"c.example\"]\n",
        "[profiles.fp]\nimage = \"img\"\negress = \"locked\"\n"
        "allow_hosts = [\"a.example:443\", \"b.example\"]\ndeny_hosts = [\"c.example\"]\n",
        /* deny_hosts */
        "[profiles.fp]\nimage = \"img\"\negress = \"locked\"\n"
        "allow_hosts = [\"a.example:443\", \"*.b.example\"]\ndeny_hosts = [\"c.example\", \"e.example\"]\n",
        "[profiles.fp]\nimage = \"img\"\negress = \"locked\"\n"
        "allow_hosts = [\"a.example:443\", \"*.b.example\"]\n",
        /* resolver, and its port */
        "[network]\nresolver = \"192.0.2.53\"\n" BASE_PROFILE,
        "[network]\nresolver = \"192.0.2.53:54\"\n" BASE_PROFILE,
    };
    char seen[LZ_ARRAY_SIZE(changed)][65];
    for (size_t i = 0; i < LZ_ARRAY_SIZE(changed); i++) {
        fp_of(changed[i], fp, id);
        if (strcmp(fp, base) == 0)
            print_error("case %zu did not change the fingerprint\n", i);
        assert_string_not_equal(fp, base);
        assert_string_equal(id, base_id); /* the Domain is the same */
        for (size_t j = 0; j < i; j++)
            assert_string_not_equal(fp, seen[j]);
        memcpy(seen[i], fp, 65);
    }
}

/* "open" without host rules or resolver is the prefix policy of before:
 * the fingerprint is what it was (nothing appended); balanced differs. */
static void test_fingerprint_open_unchanged(void **state) {
    (void)state;
    char open_fp[65], id[65], fp[65];
    fp_of("[profiles.fp]\nimage = \"img\"\negress = \"open\"\n", open_fp, id);
    struct lz_config *c = load_ok("[profiles.fp]\nimage = \"img\"\negress = \"open\"\n", "fp");
    uint8_t raw[32];
    char hex[65];
    c->profile.egress = (enum lz_egress)0; /* a configuration of before the key */
    assert_int_equal(lz_config_fingerprint_v1(c, raw), 0);
    lz_hex(raw, 32, hex);
    assert_string_equal(hex, open_fp);
    c->profile.egress = LZ_EGRESS_BALANCED;
    assert_int_equal(lz_config_fingerprint_v1(c, raw), 0);
    lz_hex(raw, 32, hex);
    assert_string_not_equal(hex, open_fp);
    lz_config_free(c);
    fp_of("[profiles.fp]\nimage = \"img\"\n", fp, id);
    assert_string_not_equal(fp, open_fp);
}

/* ---- the derived policy ------------------------------------------------- */

static void derive_case(const char *egress, bool want_public) {
    char text[512];
    snprintf(text, sizeof text,
             "[network]\ndefault_allow = [\"0.0.0.0/0\", \"192.168.7.0/24\"]\n"
             "[profiles.nn]\nimage = \"img\"\n%s%s%s"
             "allow_egress = [\"198.51.100.0/24\"]\ndeny_egress = [\"198.51.100.128/25\"]\n",
             egress ? "egress = \"" : "", egress ? egress : "", egress ? "\"\n" : "");
    struct lz_config *c = load_ok(text, "nn");
    static const uint32_t host[] = { A(203, 0, 113, 9) };
    struct lz_netpolicy p;
    struct lz_error err = { 0 };
    assert_int_equal(lz_netpolicy_derive(c, host, 1, &p, &err), 0);
    enum lz_net_action pub = want_public ? LZ_NET_ALLOW : LZ_NET_DENY;
    /* default_allow: public addresses and the LAN prefix, only under open */
    assert_int_equal(lz_netpolicy_lookup(&p, A(8, 8, 8, 8)), pub);
    assert_int_equal(lz_netpolicy_lookup(&p, A(192, 168, 7, 5)), pub);
    bool has_default = false;
    for (size_t i = 0; i < p.n; i++)
        if (p.rules[i].len == 0 && p.rules[i].action == LZ_NET_ALLOW)
            has_default = true;
    assert_int_equal(has_default, want_public);
    /* every other rule, whatever the preset */
    assert_int_equal(lz_netpolicy_lookup(&p, A(198, 51, 100, 7)), LZ_NET_ALLOW);
    assert_int_equal(lz_netpolicy_lookup(&p, A(198, 51, 100, 200)), LZ_NET_DENY);
    assert_int_equal(lz_netpolicy_lookup(&p, A(192, 168, 8, 1)), LZ_NET_DENY);
    assert_int_equal(lz_netpolicy_lookup(&p, A(10, 1, 2, 3)), LZ_NET_DENY);
    assert_int_equal(lz_netpolicy_lookup(&p, A(203, 0, 113, 9)), LZ_NET_DENY);
    assert_int_equal(lz_netpolicy_lookup(&p, A(10, 0, 2, 2)), LZ_NET_DENY);
    assert_int_equal(lz_netpolicy_lookup(&p, LZ_NET_DNS), LZ_NET_ALLOW);
    lz_netpolicy_clear(&p);
    lz_config_free(c);
}

static void test_derive(void **state) {
    (void)state;
    derive_case("open", true);
    derive_case("balanced", false);
    derive_case("locked", false);
    derive_case(NULL, false); /* the built-in default is balanced */
}

/* ---- config check --------------------------------------------------------- */

static char *print_of(const char *text, const char *profile) {
    struct lz_config *c = load_ok(text, profile);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    assert_non_null(f);
    lz_config_print(f, c);
    fclose(f);
    lz_config_free(c);
    return out;
}

static void test_print(void **state) {
    (void)state;
    char *out = print_of("[network]\nresolver = \"192.0.2.53:5353\"\n"
                         "[profiles.pp]\nimage = \"img\"\nallow_hosts = [\"x.example:443\"]\n"
                         "deny_hosts = [\"*.evil.example\"]\n",
                         "pp");
    assert_non_null(strstr(out, "\n[network]\n"));
    assert_non_null(strstr(out, "\negress = \"balanced\"\nresolver = \"192.0.2.53:5353\"\n"));
    assert_non_null(strstr(out, "\negress = \"balanced\"  # from [network] egress (or its built-in default)\n"));
    assert_non_null(strstr(out, "allow_hosts = [\n  \"deb.debian.org:80,443\",  # preset \"balanced\"\n"));
    assert_non_null(strstr(out, "  \"github.com:22,443\",  # preset \"balanced\"\n"));
    assert_non_null(strstr(out, "  \"x.example:443\",\n]\n"));
    assert_non_null(strstr(out, "deny_hosts = [\n  \"*.evil.example\",\n]\n"));
    assert_non_null(strstr(out,
                           "# prefixes allowed: allow_egress only ([network] default_allow does not apply under "
                           "\"balanced\")\n"));
    assert_non_null(strstr(out,
                           "# precedence: deny wins; a name must match an allow rule; addresses outside a "
                           "learned name need allow_egress\n"));
    free(out);
    out = print_of("[profiles.pp]\nimage = \"img\"\negress = \"open\"\n", "pp");
    assert_non_null(strstr(out, "\negress = \"open\"\nallow_hosts = []\n"));
    assert_non_null(strstr(out, "# under \"open\" every name that deny_hosts does not deny resolves\n"));
    assert_non_null(strstr(out, "# prefixes allowed: [network] default_allow and allow_egress\n"));
    assert_non_null(strstr(out, "# resolver: the first IPv4 nameserver of /etc/resolv.conf"));
    assert_null(strstr(out, "preset \"balanced\""));
    free(out);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_builtin),
        cmocka_unit_test(test_presets_file),
        cmocka_unit_test(test_preset_lists_valid),
        cmocka_unit_test(test_precedence),
        cmocka_unit_test(test_refused_egress),
        cmocka_unit_test(test_refused_hosts),
        cmocka_unit_test(test_refused_resolver),
        cmocka_unit_test(test_resolver_ok),
        cmocka_unit_test(test_fingerprint),
        cmocka_unit_test(test_fingerprint_open_unchanged),
        cmocka_unit_test(test_derive),
        cmocka_unit_test(test_print),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
