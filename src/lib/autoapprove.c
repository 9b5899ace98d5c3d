/* autoapprove.c — see autoapprove.h.
 *
 * The class table is a deny-list of the programs that most often turn one
 * approved argv into "anything": it cannot be complete, which is why the
 * real defence is the model: an auto-approved program runs in a fresh empty
 * directory the sandbox cannot write (unless its rule says cwd =
 * "workspace" and runs_workspace_code = true), no argument of a rule may
 * name a sandbox-writable tree, and allow_extra_args = false with every
 * argument written out. docs/escalation.md lists what never to
 * auto-approve. */
#include "autoapprove.h"

#include "config.h"
#include "sbwrite.h"

#include <limits.h>
#include <sys/stat.h>

bool lz_autoapprove_match(const struct lz_esc_rule *rules, size_t n, char *const *argv, size_t argc, size_t *ret_rule) {
    if (!rules || !argv || argc == 0)
        return false;
    for (size_t i = 0; i < argc; i++)
        if (!argv[i])
            return false;
    /* A rule's argv[0] is absolute, so byte equality already excludes a
     * relative request; say it anyway, it is the property that matters. */
    if (argv[0][0] != '/')
        return false;
    for (size_t r = 0; r < n; r++) {
        const struct lz_esc_rule *rule = &rules[r];
        if (rule->argc == 0 || !rule->argv || argc < rule->argc || (!rule->allow_extra_args && argc != rule->argc))
            continue;
        bool eq = true;
        for (size_t j = 0; j < rule->argc && eq; j++)
            eq = rule->argv[j] && strcmp(rule->argv[j], argv[j]) == 0;
        if (eq) {
            if (ret_rule)
                *ret_rule = r;
            return true;
        }
    }
    return false;
}

int lz_autoapprove_rules(const struct lz_config *c, struct lz_esc_rule **ret, size_t *ret_n) {
    struct lz_esc_rule *v = lz_xcalloc(c->n_auto_approve ? c->n_auto_approve : 1, sizeof *v);
    for (size_t i = 0; i < c->n_auto_approve; i++)
        v[i] = (struct lz_esc_rule){ .argv = c->auto_approve[i].argv,
                                     .argc = c->auto_approve[i].argc,
                                     .allow_extra_args = c->auto_approve[i].allow_extra_args,
                                     .cwd_workspace = c->auto_approve[i].cwd_workspace };
    *ret = v;
    *ret_n = c->n_auto_approve;
    return 0;
}

/* ---- classes ------------------------------------------------------------ */

/* In order of severity: when an executable is known by several names (a
 * symlink chain), the most severe class among them applies. */
enum aa_class {
    AA_PLAIN,
    AA_OPTEXEC, /* options can run programs or write any file: never with extra args */
    AA_TEXT,    /* awk, sed: the program is text in the rule */
    AA_WRAPPER, /* runs another argv */
    AA_INTERP,  /* runs a script */
    AA_MULTI,   /* busybox, toybox: argv[1] is the program */
    AA_SHELL,
    AA_PROJECT, /* refused outright */
};

struct family {
    const char *name;
    enum aa_class cls;
    /* Short option letters (alone or in a cluster) and long options
     * (exact, or followed by '=') that give the program its code inline,
     * from standard input or from a terminal. */
    const char *letters;
    const char *const *longs;
    const char *why; /* for AA_PROJECT and AA_OPTEXEC: the reason */
};

static const char *const sh_long[] = { "--command", "--init-command", "--interactive", NULL };
static const char *const node_long[] = { "--eval",        "--print",  "--require",
                                         "--import",      "--loader", "--experimental-loader",
                                         "--interactive", NULL };
static const char *const julia_long[] = { "--eval", "--print", NULL };
static const char *const su_long[] = { "--command", "--session-command", "--shell", "--login", NULL };
static const char *const sudo_long[] = { "--shell", "--login", NULL };
static const char *const script_long[] = { "--command", NULL };

#define SHELL(n)                                                                                                       \
    { n, AA_SHELL, "csiC", sh_long, NULL }
#define PROJ(n, w)                                                                                                     \
    { n, AA_PROJECT, NULL, NULL, w }
#define OPTX(n, w)                                                                                                     \
    { n, AA_OPTEXEC, NULL, NULL, w }
#define WRAP(n)                                                                                                        \
    { n, AA_WRAPPER, NULL, NULL, NULL }

static const char git_why[] = "git runs hooks, aliases, pagers, editors and helpers from its configuration, including "
                              "the workspace's own (seed 000: git is never auto-approved, with any subcommand)";
static const char build_why[] = "it reads its instructions (build files, package scripts, tool configuration) from the "
                                "working directory, which is the sandbox-writable workspace";
static const char stdin_why[] = "it takes the command to run from standard input, which the sandbox supplies";
static const char initfile_why[] = "it reads an init file from the working directory (the workspace) and runs "
                                   "arbitrary commands";
static const char files_why[] = "with arguments of the sandbox's choosing it writes, removes or changes any file the "
                                "developer can";

static const struct family families[] = {
    SHELL("sh"),
    SHELL("bash"),
    SHELL("rbash"),
    SHELL("dash"),
    SHELL("ash"),
    SHELL("hush"),
    SHELL("zsh"),
    SHELL("fish"),
    SHELL("ksh"),
    SHELL("mksh"),
    SHELL("pdksh"),
    SHELL("oksh"),
    SHELL("loksh"),
    SHELL("yash"),
    SHELL("posh"),
    SHELL("csh"),
    SHELL("tcsh"),
    SHELL("elvish"),
    SHELL("nu"),
    SHELL("xonsh"),
    SHELL("pwsh"),
    SHELL("rc"),
    SHELL("es"),
    { "busybox", AA_MULTI, NULL, NULL, NULL },
    { "toybox", AA_MULTI, NULL, NULL, NULL },
    /* -m runs a module from sys.path, whose first entry is then the
     * working directory: the workspace. */
    { "python", AA_INTERP, "cm", NULL, NULL },
    { "pypy", AA_INTERP, "cm", NULL, NULL },
    { "perl", AA_INTERP, "eE", NULL, NULL },
    { "ruby", AA_INTERP, "e", NULL, NULL },
    { "jruby", AA_INTERP, "e", NULL, NULL },
    { "irb", AA_INTERP, NULL, NULL, NULL },
    { "node", AA_INTERP, "epri", node_long, NULL },
    { "nodejs", AA_INTERP, "epri", node_long, NULL },
    { "php", AA_INTERP, "rRBEFa", NULL, NULL },
    { "lua", AA_INTERP, "eil", NULL, NULL },
    { "luajit", AA_INTERP, "eil", NULL, NULL },
    { "tclsh", AA_INTERP, NULL, NULL, NULL },
    { "wish", AA_INTERP, NULL, NULL, NULL },
    { "expect", AA_INTERP, "ci", NULL, NULL },
    { "osascript", AA_INTERP, "e", NULL, NULL },
    { "Rscript", AA_INTERP, "e", NULL, NULL },
    { "R", AA_INTERP, "e", NULL, NULL },
    { "julia", AA_INTERP, "eEi", julia_long, NULL },
    { "guile", AA_INTERP, "ce", NULL, NULL },
    { "awk", AA_TEXT, NULL, NULL, NULL },
    { "gawk", AA_TEXT, NULL, NULL, NULL },
    { "mawk", AA_TEXT, NULL, NULL, NULL },
    { "nawk", AA_TEXT, NULL, NULL, NULL },
    { "sed", AA_TEXT, NULL, NULL, NULL },
    { "gsed", AA_TEXT, NULL, NULL, NULL },
    WRAP("env"),
    { "sudo", AA_WRAPPER, "si", sudo_long, NULL },
    { "doas", AA_WRAPPER, "s", NULL, NULL },
    { "su", AA_WRAPPER, "csl", su_long, NULL },
    { "runuser", AA_WRAPPER, "csl", su_long, NULL },
    WRAP("pkexec"),
    WRAP("sg"),
    WRAP("nohup"),
    WRAP("nice"),
    WRAP("ionice"),
    WRAP("timeout"),
    WRAP("stdbuf"),
    WRAP("setsid"),
    WRAP("chroot"),
    WRAP("unshare"),
    WRAP("nsenter"),
    { "flock", AA_WRAPPER, "c", script_long, NULL },
    WRAP("time"),
    WRAP("strace"),
    WRAP("ltrace"),
    WRAP("chrt"),
    WRAP("taskset"),
    WRAP("setpriv"),
    WRAP("systemd-run"),
    { "script", AA_WRAPPER, "c", script_long, NULL },
    WRAP("firejail"),
    WRAP("bwrap"),
    WRAP("catchsegv"),
    WRAP("perf"),
    PROJ("git", git_why),
    PROJ("make", build_why),
    PROJ("gmake", build_why),
    PROJ("bmake", build_why),
    PROJ("npm", build_why),
    PROJ("npx", build_why),
    PROJ("yarn", build_why),
    PROJ("yarnpkg", build_why),
    PROJ("pnpm", build_why),
    PROJ("pnpx", build_why),
    PROJ("corepack", build_why),
    PROJ("bun", build_why),
    PROJ("bunx", build_why),
    PROJ("deno", build_why),
    PROJ("cargo", build_why),
    PROJ("go", build_why),
    PROJ("just", build_why),
    PROJ("rake", build_why),
    PROJ("bundle", build_why),
    PROJ("bundler", build_why),
    PROJ("composer", build_why),
    PROJ("gradle", build_why),
    PROJ("gradlew", build_why),
    PROJ("mvn", build_why),
    PROJ("mvnw", build_why),
    PROJ("ant", build_why),
    PROJ("ninja", build_why),
    PROJ("meson", build_why),
    PROJ("cmake", build_why),
    PROJ("tox", build_why),
    PROJ("nox", build_why),
    PROJ("poetry", build_why),
    PROJ("pipenv", build_why),
    PROJ("pip", build_why),
    PROJ("pipx", build_why),
    PROJ("uv", build_why),
    PROJ("uvx", build_why),
    PROJ("dotnet", build_why),
    PROJ("mix", build_why),
    PROJ("sbt", build_why),
    PROJ("xargs", stdin_why),
    PROJ("parallel", stdin_why),
    PROJ("watch", "it runs its command through sh -c"),
    PROJ("gdb", initfile_why),
    PROJ("valgrind", initfile_why),
    OPTX("find", "its -exec, -execdir, -ok and -fprint options run programs and write files"),
    OPTX("tar", "its --to-command, --checkpoint-action and --use-compress-program options run programs"),
    OPTX("rsync", "its -e/--rsh and --rsync-path options run programs"),
    OPTX("ssh", "it runs remote commands and -o ProxyCommand/LocalCommand run local ones"),
    OPTX("scp", "its -o ProxyCommand and -S options run programs"),
    OPTX("sftp", "its -o ProxyCommand and -S options run programs"),
    OPTX("zip", "its -TT/--unzip-command option runs a program"),
    OPTX("less", "it has shell escapes and input preprocessors"),
    OPTX("more", "it has shell escapes"),
    OPTX("man", "its -P/--pager and -H options run programs"),
    OPTX("vi", "it runs -c and + commands, including shell escapes"),
    OPTX("vim", "it runs -c and + commands, including shell escapes"),
    OPTX("nvim", "it runs -c and + commands, including shell escapes"),
    OPTX("view", "it runs -c and + commands, including shell escapes"),
    OPTX("ex", "it runs -c and + commands, including shell escapes"),
    OPTX("ed", "it has shell escapes"),
    OPTX("emacs", "its --eval and -l options run Lisp"),
    OPTX("m4", "its syscmd and esyscmd macros run shell commands"),
    OPTX("docker", "it runs containers with host mounts and privileges"),
    OPTX("podman", "it runs containers with host mounts"),
    OPTX("kubectl", "it runs commands in clusters with the developer's credentials"),
    OPTX("curl", "its -o, -K and --config options write and read any file"),
    OPTX("wget", "its -O, -e and --execute options write any file and run commands"),
    OPTX("dd", files_why),
    OPTX("cp", files_why),
    OPTX("mv", files_why),
    OPTX("rm", files_why),
    OPTX("ln", files_why),
    OPTX("install", files_why),
    OPTX("chmod", files_why),
    OPTX("chown", files_why),
    OPTX("tee", files_why),
    OPTX("truncate", files_why),
    OPTX("shred", files_why),
};

static const char *class_word(enum aa_class c) {
    switch (c) {
    case AA_SHELL: return "a shell";
    case AA_MULTI: return "a multi-call binary";
    case AA_INTERP: return "an interpreter";
    case AA_TEXT: return "a text-program interpreter";
    case AA_WRAPPER: return "a wrapper that runs another program";
    case AA_PROJECT: return "a program that runs code the sandbox controls";
    case AA_OPTEXEC: return "a program whose options run programs or write files";
    case AA_PLAIN: return "a program";
    }
    return "a program";
}

void lz_autoapprove_family(const char *path, char *ret, size_t size) {
    if (size == 0)
        return;
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    /* "python3.11" -> "python"; a name of digits only stays as it is. */
    size_t k = n;
    while (k > 0 && ((b[k - 1] >= '0' && b[k - 1] <= '9') || b[k - 1] == '.'))
        k--;
    if (k == 0)
        k = n;
    if (k >= size)
        k = size - 1;
    memcpy(ret, b, k);
    ret[k] = '\0';
}

static const struct family *lookup(const char *name) {
    char fam[256];
    lz_autoapprove_family(name, fam, sizeof fam);
    for (size_t i = 0; i < LZ_ARRAY_SIZE(families); i++)
        if (strcmp(families[i].name, fam) == 0)
            return &families[i];
    return NULL;
}

/* Whether arg gives the program code inline, from stdin or a terminal. */
static bool is_inline_opt(const struct family *f, const char *arg) {
    if (arg[0] != '-' || arg[1] == '\0')
        return false;
    if (f->longs)
        for (const char *const *l = f->longs; *l; l++) {
            size_t n = strlen(*l);
            if (strncmp(arg, *l, n) == 0 && (arg[n] == '\0' || arg[n] == '='))
                return true;
        }
    /* A short cluster ("-ec", "-xc"): any listed letter in it counts, even
     * where it might be an option's value; refusing too much is safe. */
    if (arg[1] == '-' || !f->letters)
        return false;
    for (const char *p = arg + 1; *p; p++)
        if (strchr(f->letters, *p))
            return true;
    return false;
}

#define WHY(...) snprintf(why, why_size, __VA_ARGS__)

static int check_vec(const struct family *f, const char *shown, char *const *argv, size_t argc, size_t base,
                     bool allow_extra, char *why, size_t why_size, size_t *ret_script, unsigned depth);

/* A wrapper's (or multi-call binary's) own arguments: any of them that is
 * itself a classified program is checked as the start of its own vector,
 * so that `env python3 -c`, `sudo git` or `nice make` are refused like
 * `python3 -c`, `git` and `make`. */
static int check_inner(char *const *argv, size_t argc, size_t base, char *why, size_t why_size, size_t *ret_script,
                       unsigned depth) {
    for (size_t i = 1; i < argc; i++) {
        const struct family *g = lookup(argv[i]);
        if (!g)
            continue;
        size_t script = 0;
        if (check_vec(g, argv[i], argv + i, argc - i, base + i, false, why, why_size, &script, depth + 1) < 0)
            return -EPERM;
        /* The inner program's script is checked by the loader like any
         * other (its index in this vector). */
        if (script && ret_script)
            *ret_script = i + script;
        return 0;
    }
    return 0;
}

static int check_vec(const struct family *f, const char *shown, char *const *argv, size_t argc, size_t base,
                     bool allow_extra, char *why, size_t why_size, size_t *ret_script, unsigned depth) {
    why[0] = '\0';
    if (depth > 4) {
        WHY("argv[%zu]: too many nested wrappers", base);
        return -EPERM;
    }
    if (!f) {
        if (allow_extra)
            WHY("the sandbox chooses every argument after argv[%zu]: make sure no option of this program runs "
                "another program, loads code or writes files it should not",
                argc - 1);
        return 0;
    }
    const char *w = class_word(f->cls);
    switch (f->cls) {
    case AA_PLAIN: return 0;
    case AA_PROJECT: WHY("%s is %s: %s", shown, w, f->why); return -EPERM;
    case AA_OPTEXEC:
        if (allow_extra) {
            WHY("%s with allow_extra_args = true is refused: %s; write every argument out", shown, f->why);
            return -EPERM;
        }
        WHY("%s: %s; every argument is fixed by this rule", shown, f->why);
        return 0;
    case AA_TEXT:
        if (allow_extra) {
            WHY("%s is %s: with allow_extra_args = true the sandbox could add a program (-e, -f, a script); write "
                "every argument out",
                shown, w);
            return -EPERM;
        }
        WHY("%s is %s: the program text in this rule runs with the developer's authority (awk's system(), sed's e "
            "and w commands)",
            shown, w);
        return 0;
    case AA_WRAPPER:
    case AA_MULTI:
        if (allow_extra) {
            WHY("%s is %s: with allow_extra_args = true the sandbox chooses the program it runs; write every "
                "argument out and set allow_extra_args = false",
                shown, w);
            return -EPERM;
        }
        for (size_t i = 1; i < argc; i++)
            if (is_inline_opt(f, argv[i])) {
                WHY("%s given %s runs a shell or a command string, which is never auto-approved", shown, argv[i]);
                return -EPERM;
            }
        if (f->cls == AA_MULTI) {
            if (argc < 2) {
                WHY("%s is %s and the rule names no program (argv[%zu])", shown, w, base + 1);
                return -EPERM;
            }
            const struct family *g = lookup(argv[1]);
            if (g &&
                check_vec(g, argv[1], argv + 1, argc - 1, base + 1, false, why, why_size, ret_script, depth + 1) < 0)
                return -EPERM;
            if (ret_script && *ret_script)
                *ret_script += 1;
        } else if (check_inner(argv, argc, base, why, why_size, ret_script, depth) < 0) {
            return -EPERM;
        }
        WHY("%s is %s: every argument is fixed by this rule, but check what it runs (a bare program name is looked "
            "up in PATH when it runs)",
            shown, w);
        return 0;
    case AA_SHELL:
    case AA_INTERP: break;
    }
    /* Shells and interpreters. */
    if (allow_extra) {
        WHY("%s is %s: with allow_extra_args = true the sandbox chooses the program it runs; write every argument out "
            "and set allow_extra_args = false",
            shown, w);
        return -EPERM;
    }
    size_t op = 0;
    for (size_t i = 1; i < argc && !op; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            op = i + 1 < argc ? i + 1 : argc;
            break;
        }
        if (a[0] == '-' && a[1] != '\0') {
            if (is_inline_opt(f, a)) {
                if (f->cls == AA_SHELL)
                    WHY("%s given %s (a command string, or commands from standard input or a terminal) is never "
                        "auto-approved",
                        shown, a);
                else
                    WHY("%s is %s given %s: its program would be text in the request or come from standard input, "
                        "a terminal or the working directory (the workspace); refused",
                        shown, w, a);
                return -EPERM;
            }
            continue;
        }
        op = i;
    }
    if (op == 0 || op >= argc || strcmp(argv[op], "-") == 0) {
        WHY("%s is %s and the rule names no script: it would read its program from standard input, which the "
            "sandbox supplies",
            shown, w);
        return -EPERM;
    }
    if (argv[op][0] != '/') {
        WHY("argv[%zu] %s: the script %s runs must be an absolute path (a relative one is found in the working "
            "directory, the workspace; write an option's value joined to it, e.g. -Wignore)",
            base + op, argv[op], shown);
        return -EPERM;
    }
    if (ret_script)
        *ret_script = op;
    WHY("%s is %s running %s: the script and everything it loads must stay out of the sandbox's reach", shown, w,
        argv[op]);
    return 0;
}

int lz_autoapprove_check(const char *const *names, size_t n_names, char *const *argv, size_t argc,
                         bool allow_extra_args, char *why, size_t why_size, size_t *ret_script) {
    if (why_size == 0 || argc == 0)
        return -EINVAL;
    /* The most severe class among all the names of the executable. */
    const struct family *f = NULL;
    const char *shown = argv[0];
    for (size_t i = 0; i < n_names; i++) {
        const struct family *g = lookup(names[i]);
        if (g && (!f || g->cls >= f->cls)) { /* ties: the later name, the canonical file last */
            f = g;
            shown = names[i];
        }
    }
    size_t script = 0;
    char sb[512];
    const char *b = strrchr(shown, '/');
    snprintf(sb, sizeof sb, "%s", b ? b + 1 : shown);
    int r = check_vec(f, sb, argv, argc, 0, allow_extra_args, why, why_size, &script, 0);
    if (r < 0)
        return r;
    if (ret_script)
        *ret_script = script;
    return 0;
}

/* ---- arguments that reach a sandbox-writable tree ------------------------ */

/* Bounds on one argument looked at: its candidates and their prefixes are
 * resolved on the host, so a hostile request must not make it costly. */
#define ARG_MAX_BYTES 4096
#define ARG_MAX_SLASHES 64

static bool path_within(const char *p, const char *anc) {
    size_t n = strlen(anc);
    if (n == 1 && anc[0] == '/')
        return true;
    return strncmp(p, anc, n) == 0 && (p[n] == '\0' || p[n] == '/');
}

/* Characters after which a path starts inside one argument: an option's
 * value (--rootdir=/x, -o:/x), a list (a:/x,/y), a response file (@/x). */
static bool is_sep(char c) {
    return c == '=' || c == ':' || c == ',' || c == ';' || c == '@' || c == ' ' || c == '\t' || c == '\'' || c == '"';
}

/* n bytes of src (starting with '/') without "//" runs, "." components or
 * a trailing '/'; out has room for n + 2 bytes. */
static void normalize(const char *src, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        while (i < n && src[i] == '/')
            i++;
        size_t s = i;
        while (i < n && src[i] != '/')
            i++;
        size_t len = i - s;
        if (len == 0 || (len == 1 && src[s] == '.'))
            continue;
        out[o++] = '/';
        memcpy(out + o, src + s, len);
        o += len;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
}

/* p (normalized, absolute) as the host resolves it now: its longest
 * existing prefix through realpath, the rest appended as written. A
 * missing component that is a symbolic link (one that resolves nowhere
 * yet) is -ELOOP: whoever can create its target decides where it goes. */
static int resolve_prefix(const char *p, char *out, size_t size) {
    size_t ends[ARG_MAX_SLASHES + 2], k = 0, n = strlen(p);
    for (size_t i = 1; i <= n && k < LZ_ARRAY_SIZE(ends); i++)
        if (i == n || p[i] == '/')
            ends[k++] = i;
    char buf[PATH_MAX], rp[PATH_MAX];
    if (n >= sizeof buf)
        return -ENAMETOOLONG;
    /* Prefixes that resolve are the first ones (a longer one resolves only
     * through its shorter ones): a binary search, O(log k) realpath calls. */
    size_t lo = 0, hi = k, best = SIZE_MAX;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        memcpy(buf, p, ends[mid]);
        buf[ends[mid]] = '\0';
        if (realpath(buf, rp)) {
            best = mid;
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    const char *base = "", *rest = p;
    if (best != SIZE_MAX) {
        memcpy(buf, p, ends[best]);
        buf[ends[best]] = '\0';
        if (!realpath(buf, rp))
            return -errno; /* it changed under us: refuse */
        base = strcmp(rp, "/") == 0 ? "" : rp;
        rest = p + ends[best];
    }
    if (*rest) {
        /* The first missing component. */
        const char *e = strchr(rest + 1, '/');
        size_t cl = e ? (size_t)(e - rest) : strlen(rest);
        int m = snprintf(buf, sizeof buf, "%s%.*s", base, (int)cl, rest);
        struct stat st;
        if (m > 0 && (size_t)m < sizeof buf && lstat(buf, &st) == 0 && S_ISLNK(st.st_mode))
            return -ELOOP;
    }
    int m = snprintf(out, size, "%s%s", base, rest);
    if (m < 0 || (size_t)m >= size)
        return -ENAMETOOLONG;
    if (!*out)
        snprintf(out, size, "/");
    return 0;
}

static int check_cand(const char *s, size_t len, bool strong, const char *const *trees, size_t n_trees,
                      size_t *ret_tree, char *why, size_t why_size) {
    char norm[ARG_MAX_BYTES + 2], canon[PATH_MAX];
    normalize(s, len, norm);
    int r = resolve_prefix(norm, canon, sizeof canon);
    if (r == -ELOOP) {
        WHY("%s goes through a symbolic link whose target does not exist: what it names is decided later", norm);
        return -EPERM;
    }
    if (r < 0) {
        WHY("%s cannot be resolved (%s)", norm, strerror(-r));
        return -EPERM;
    }
    for (size_t t = 0; t < n_trees; t++) {
        const char *tr = trees[t];
        if (!tr || tr[0] != '/')
            continue;
        bool in = path_within(norm, tr) || path_within(canon, tr);
        /* A directory that holds the tree: a program that walks it (a test
         * runner, a linter) reaches the tree's files. */
        bool holds = strong && (path_within(tr, norm) || path_within(tr, canon));
        if (in || holds) {
            *ret_tree = t;
            WHY("%s %s %s", strcmp(norm, canon) ? canon : norm, in ? "lies inside" : "contains", tr);
            return -EPERM;
        }
    }
    return 0;
}

int lz_autoapprove_arg_reaches(const char *arg, const char *const *trees, size_t n_trees, size_t *ret_tree, char *why,
                               size_t why_size) {
    size_t tree = SIZE_MAX;
    if (ret_tree)
        *ret_tree = SIZE_MAX;
    if (!arg || why_size == 0)
        return -EINVAL;
    why[0] = '\0';
    size_t n = strnlen(arg, ARG_MAX_BYTES + 1), slashes = 0;
    if (n > ARG_MAX_BYTES) {
        WHY("it is longer than %d bytes, too long to check where it points", ARG_MAX_BYTES);
        return -E2BIG;
    }
    for (size_t i = 0; i < n; i++)
        slashes += arg[i] == '/';
    if (slashes > ARG_MAX_SLASHES) {
        WHY("it has more than %d '/', too many to check where it points", ARG_MAX_SLASHES);
        return -E2BIG;
    }
    /* A ".." component climbs out of whatever directory it starts in: out
     * of the fresh empty working directory, too. */
    for (size_t i = 0; i + 1 < n; i++)
        if (arg[i] == '.' && arg[i + 1] == '.' && (i == 0 || arg[i - 1] == '/' || is_sep(arg[i - 1])) &&
            (i + 2 == n || arg[i + 2] == '/' || is_sep(arg[i + 2]))) {
            WHY("it has a '..' path component, which climbs out of the directory it starts in");
            return -EPERM;
        }
    /* "~/x" where a path starts: many programs expand it themselves
     * (configuration paths, ssh, git), so it is checked as the developer's
     * home directory would make it. */
    const char *home = lz_home_dir();
    for (size_t p = 0; home && p + 1 < n; p++) {
        if (arg[p] != '~' || arg[p + 1] != '/' || (p > 0 && !is_sep(arg[p - 1]) && !(p == 2 && arg[0] == '-')))
            continue;
        char ex[ARG_MAX_BYTES + PATH_MAX + 2];
        int m = snprintf(ex, sizeof ex, "%s%s", home, arg + p + 1);
        if (m < 0 || (size_t)m >= sizeof ex || (size_t)m > ARG_MAX_BYTES) {
            WHY("%s, with ~ expanded, is too long to check where it points", arg + p);
            return -E2BIG;
        }
        size_t e = 0;
        while (ex[e] && !is_sep(ex[e]))
            e++;
        int r = check_cand(ex, (size_t)m, true, trees, n_trees, &tree, why, why_size);
        if (r == 0 && ex[e])
            r = check_cand(ex, e, true, trees, n_trees, &tree, why, why_size);
        if (r < 0) {
            if (ret_tree)
                *ret_tree = tree;
            return r;
        }
    }
    for (size_t p = 0; p < n; p++) {
        if (arg[p] != '/' || (p > 0 && arg[p - 1] == '/'))
            continue;
        /* Where a path plainly starts (the argument, an option's value,
         * -I/x): also refused when it holds a tree. Elsewhere (the middle
         * of "s/a/b/", "tests/unit") only when it lies inside one. */
        bool strong = p == 0 || is_sep(arg[p - 1]) || (p == 2 && arg[0] == '-');
        size_t e = p;
        while (e < n && !is_sep(arg[e]))
            e++;
        int r = check_cand(arg + p, n - p, strong, trees, n_trees, &tree, why, why_size);
        if (r == 0 && e < n)
            r = check_cand(arg + p, e - p, strong, trees, n_trees, &tree, why, why_size);
        if (r < 0) {
            if (ret_tree)
                *ret_tree = tree;
            return r;
        }
    }
    return 0;
}

void lz_autoapprove_trees(const struct lz_config *c, char ***ret, size_t *ret_n) {
    struct lz_sbw t = { 0 };
    lz_sbw_trees(c, LZ_SBW_REACH, NULL, NULL, 0, &t);
    char **v = lz_xcalloc(t.n + 1, sizeof *v);
    for (size_t i = 0; i < t.n; i++)
        v[i] = TAKE_PTR(t.v[i].path);
    *ret_n = t.n;
    lz_sbw_free(&t);
    *ret = v;
}
