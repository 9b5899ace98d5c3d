/* config_print.c — `lazaret config check`'s view of a resolved
 * configuration (lz_config_print, see config.h): env values redacted. */
#include "config_int.h"

#include <arpa/inet.h>
#include <inttypes.h>

/* ---- printing -------------------------------------------------------- */

static void print_list(FILE *out, const char *label, char *const *v, size_t n) {
    char d[DISP_MAX];
    fprintf(out, "%s = [", label);
    for (size_t i = 0; i < n; i++)
        fprintf(out, "%s%s", i ? ", " : "", cfg_disp(v[i], d, sizeof d));
    fprintf(out, "]\n");
}

static void print_rule(FILE *out, const struct lz_hostrule *r, const char *note) {
    char txt[LZ_HOSTRULE_TEXT_MAX];
    if (lz_hostrule_format(r, txt, sizeof txt) < 0)
        snprintf(txt, sizeof txt, "?");
    fprintf(out, "  \"%s\",%s%s\n", txt, note ? "  # " : "", note ? note : "");
}

/* The profile's egress policy as the Domain will apply it: the preset,
 * the effective name rules with their origin, the prefixes in effect. */
static void print_egress(FILE *out, const struct lz_config *c) {
    const struct lz_profile *p = &c->profile;
    fprintf(out, "egress = \"%s\"%s\n", lz_egress_name(p->egress),
            p->egress_inherited ? "  # from [network] egress (or its built-in default)" : "");
    fprintf(out, "allow_hosts = [%s", p->n_allow_hosts ? "\n" : "");
    for (size_t i = 0; i < p->n_allow_hosts; i++)
        print_rule(out, &p->allow_hosts[i], i < p->n_allow_hosts_preset ? "preset \"balanced\"" : NULL);
    fprintf(out, "]\n");
    if (p->egress == LZ_EGRESS_OPEN)
        fprintf(out, "# under \"open\" every name that deny_hosts does not deny resolves\n");
    fprintf(out, "deny_hosts = [%s", p->n_deny_hosts ? "\n" : "");
    for (size_t i = 0; i < p->n_deny_hosts; i++)
        print_rule(out, &p->deny_hosts[i], NULL);
    fprintf(out, "]\n");
    if (p->egress == LZ_EGRESS_OPEN) {
        fputs("# prefixes allowed: [network] default_allow and allow_egress\n", out);
    } else {
        fprintf(out, "# prefixes allowed: allow_egress only ([network] default_allow does not apply under \"%s\")\n",
                lz_egress_name(p->egress));
    }
    if (p->egress == LZ_EGRESS_OPEN)
        fprintf(out, "tls_gate = \"%s\"  # no gate under \"open\"\n", lz_tls_gate_name(p->tls_gate));
    else
        fprintf(out, "tls_gate = \"%s\"%s\n", lz_tls_gate_name(p->tls_gate),
                p->tls_gate == LZ_TLS_GATE_OFF ? "  # TCP/443 to learned addresses without a server-name check"
                                               : "  # TCP/443 to learned addresses: the server name (SNI) is checked");
    fputs("# prefixes denied: [network] default_deny and deny_egress\n", out);
    fputs("# precedence: deny wins; a name must match an allow rule; addresses outside a learned name need "
          "allow_egress\n",
          out);
}

void lz_config_print(FILE *out, const struct lz_config *c) {
    char d[DISP_MAX], d2[DISP_MAX];
    const struct lz_profile *p = &c->profile;
    fprintf(out, "# configuration: %s\n",
            c->builtin_default ? "built-in default" : cfg_disp(c->source_path, d, sizeof d));
    if (c->start_dir && c->start_dir[0]) {
        fprintf(out, "# workspace: %s (the top level of the Git repository holding the current directory)\n",
                cfg_disp(c->workspace, d, sizeof d));
        _cleanup_free_ char *sd = lz_xasprintf(LZ_SANDBOX_WORKSPACE "/%s", c->start_dir);
        fprintf(out, "# start directory: %s\n", cfg_disp(sd, d, sizeof d));
    } else {
        fprintf(out, "# workspace: %s\n", cfg_disp(c->workspace, d, sizeof d));
        fprintf(out, "# start directory: \"" LZ_SANDBOX_WORKSPACE "\"\n");
    }
    fprintf(out, "\n[storage]\ndata_root = %s\n", cfg_disp(c->data_root, d, sizeof d));
    fprintf(out, "linger_seconds = %" PRId64 "\n", c->linger_seconds);
    fprintf(out, "prepared_keep_days = %" PRId64 "\nprepared_max_bytes = %" PRIu64 "\n", c->prepared_keep_days,
            c->prepared_max_bytes);
    fprintf(out, "\n[network]\n");
    print_list(out, "default_allow", c->default_allow, c->n_default_allow);
    print_list(out, "default_deny", c->default_deny, c->n_default_deny);
    fprintf(out, "egress = \"%s\"\n", lz_egress_name(c->default_egress));
    if (c->resolver_set) {
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &c->resolver.sin_addr, a, sizeof a);
        fprintf(out, "resolver = \"%s:%u\"\n", a, (unsigned)ntohs(c->resolver.sin_port));
    } else {
        fprintf(out, "# resolver: the first IPv4 nameserver of /etc/resolv.conf when the Domain starts\n");
    }
    fprintf(out, "\n[escalation]\nenabled = %s\n", c->escalation_enabled ? "true" : "false");
    if (c->escalation_socket_dir)
        fprintf(out, "socket_dir = %s\n", cfg_disp(c->escalation_socket_dir, d, sizeof d));
    else
        fprintf(out, "# socket_dir: default (beneath $XDG_RUNTIME_DIR)\n");
    fprintf(out, "prompt_timeout_seconds = %" PRId64 "\n", c->escalation_prompt_timeout_s);
    /* Each rule as the Host Coordinator matches it: argv[0] is the
     * canonical executable a request must name byte for byte. */
    for (size_t i = 0; i < c->n_auto_approve; i++) {
        const struct lz_auto_approve *a = &c->auto_approve[i];
        fprintf(out, "\n[[escalation.auto_approve]]  # rule %zu\n", i);
        print_list(out, "argv", a->argv, a->argc);
        if (a->written && strcmp(a->written, a->argv[0]) != 0)
            fprintf(out, "# argv[0] as written: %s%s\n", cfg_disp(a->written, d, sizeof d),
                    a->found_in_path ? " (found through PATH when the configuration was loaded)" : "");
        fprintf(out, "allow_extra_args = %s\n", a->allow_extra_args ? "true" : "false");
        if (a->cwd_workspace)
            fprintf(out, "cwd = \"workspace\"\nruns_workspace_code = true\n");
        else
            fprintf(out, "# cwd: a fresh empty directory per run\n");
        if (a->warning)
            fprintf(out, "# WARNING: %s\n", a->warning);
    }
    if (p->builtin)
        fprintf(out, "\n# built-in %sprofile (the configuration does not define \"%s\")",
                strcmp(p->name, LZ_DEFAULT_PROFILE) ? "agent " : "", p->name);
    fprintf(out, "\n[profiles.%s]\nimage = %s\n", p->name, cfg_disp(p->image, d, sizeof d));
    if (p->command)
        print_list(out, "command", p->command, p->n_command);
    else
        fprintf(out, "# command: none (a login shell)\n");
    print_list(out, "persistent_dirs", p->persistent_dirs, p->n_persistent_dirs);
    print_list(out, "allow_egress", p->allow_egress, p->n_allow_egress);
    print_list(out, "deny_egress", p->deny_egress, p->n_deny_egress);
    print_egress(out, c);
    fprintf(out, "publish = [");
    for (size_t i = 0; i < p->n_publish; i++) {
        char t[LZ_PUBLISH_TEXT_MAX];
        lz_publish_format(&p->publish[i], t, sizeof t);
        fprintf(out, "%s\"%s\"", i ? ", " : "", t);
    }
    fprintf(out, "]%s\n", p->n_publish ? "  # host address:host port:sandbox port" : "");
    fprintf(out, "ignored_state = %s\n", p->ignored_state ? "true" : "false");
    print_list(out, "private_dirs", p->private_dirs, p->n_private_dirs);
    if (p->n_host_tools_added)
        print_list(out, "host_tool_paths_add", p->host_tools_added, p->n_host_tools_added);
    if (p->n_host_tools_removed)
        print_list(out, "host_tool_paths_remove", p->host_tools_removed, p->n_host_tools_removed);
    fputs("# ", out);
    lz_config_host_tools_note(out, p);
    fprintf(out, "host_ca_certificates = %s\n", p->host_ca_certificates ? "true" : "false");
    fprintf(out, "volumes = [%s", p->n_volumes ? "\n" : "");
    for (size_t i = 0; i < p->n_volumes; i++)
        fprintf(out, "  { host = %s, container = %s, mode = \"%s\" },%s\n", cfg_disp(p->volumes[i].host, d, sizeof d),
                cfg_disp(p->volumes[i].container, d2, sizeof d2), p->volumes[i].mode,
                p->volumes[i].create ? "  # created on first use" : "");
    fprintf(out, "]\n");
    fprintf(out, "\n[profiles.%s.env]  # values redacted\n", p->name);
    for (size_t i = 0; i < p->n_env; i++) {
        if (p->env[i].reference && !p->env[i].value)
            fprintf(out, "# %s: not passed (%s is not set on the host)\n", p->env[i].name,
                    cfg_disp(p->env[i].reference + 4, d, sizeof d));
        else if (p->env[i].reference)
            fprintf(out, "%s = \"<redacted>\"  # from %s\n", p->env[i].name,
                    cfg_disp(p->env[i].reference, d, sizeof d));
        else
            fprintf(out, "%s = \"<redacted>\"  # literal\n", p->env[i].name);
    }
    for (size_t i = 0; i < p->n_credentials; i++) {
        const struct lz_credential *cr = &p->credentials[i];
        fprintf(out, "\n[profiles.%s.credentials.%s]", p->name, cr->var);
        if (cr->passed_plain)
            fprintf(out, "  # passed into the sandbox as it is: no TLS gate under egress = \"%s\"%s",
                    lz_egress_name(p->egress), p->tls_gate == LZ_TLS_GATE_OFF ? " with tls_gate = \"off\"" : "");
        else if (cr->unreachable)
            fprintf(out, "  # not used: this profile does not allow %s on TCP port 443", cr->host);
        else if (cr->from == LZ_CRED_FROM_ENV && !cr->value)
            fprintf(out, "  # not used: %s is not set on the host", cfg_disp(cr->from_env, d, sizeof d));
        else
            fprintf(out, "  # the sandbox holds a placeholder; the TLS gate adds the value for this host only");
        fprintf(out, "\nhost = \"%s\"  # TCP port 443\nheader = \"%s\"\n", cr->host, cr->header);
        if (cr->basic)
            fprintf(out, "format = \"basic\"\nusername = %s\n", cfg_disp(cr->username, d, sizeof d));
        else {
            _cleanup_free_ char *f = lz_xasprintf("%s{}%s", cr->prefix, cr->suffix);
            fprintf(out, "format = %s\n", cfg_disp(f, d, sizeof d));
        }
        if (cr->from == LZ_CRED_FROM_ENV)
            fprintf(out, "from_env = %s\n", cfg_disp(cr->from_env, d, sizeof d));
        else if (cr->from == LZ_CRED_FROM_FILE)
            fprintf(out, "from_file = %s  # read when the Domain starts\n", cfg_disp(cr->from_file, d, sizeof d));
        else {
            fprintf(out, "from_command = [");
            for (size_t k = 0; k < cr->n_from_command; k++)
                fprintf(out, "%s%s", k ? ", " : "", cfg_disp(cr->from_command[k], d, sizeof d));
            fprintf(out, "]  # run when the Domain starts\n");
        }
        if (cr->n_push_refs) {
            print_list(out, "push_refs", cr->push_refs, cr->n_push_refs);
            fprintf(out, "push_delete = %s\n", cr->push_delete ? "true" : "false");
        }
    }
    fprintf(out, "\n# Profile directory: %s\n", cfg_disp(c->profile_dir, d, sizeof d));
    fprintf(out, "# Domain Root: %s\n", cfg_disp(c->domain_dir, d, sizeof d));
    fprintf(out, "# Domain ID: %s\n", c->domain_id_hex);
    fprintf(out, "# Configuration Fingerprint: %s\n", c->fingerprint_hex);
}
