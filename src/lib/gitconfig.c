/* gitconfig.c — see gitconfig.h. */
#include "gitconfig.h"

#include <git2.h>
#include <limits.h>

void lz_strv_free(char **v, size_t n) {
    for (size_t i = 0; v && i < n; i++)
        free(v[i]);
    free(v);
}

/* Resolves value (absolute, ~/, or relative to base) and, when it lies
 * inside the workspace, appends its workspace-relative path. */
static void add_if_inside(const char *ws, const char *base, const char *value, char ***v, size_t *n) {
    _cleanup_free_ char *abs = NULL;
    if (value[0] == '/')
        abs = lz_xstrdup(value);
    else if (value[0] == '~' && value[1] == '/') {
        const char *home = lz_home_dir();
        if (!home)
            return;
        abs = lz_xasprintf("%s/%s", home, value + 2);
    } else
        abs = lz_xasprintf("%s/%s", base, value);
    /* The target may not exist yet (the agent could create it): resolve
     * the longest existing ancestor and keep the rest as written. */
    char real[PATH_MAX];
    _cleanup_free_ char *head = lz_xstrdup(abs);
    const char *tail = "";
    _cleanup_free_ char *tailbuf = NULL;
    while (!realpath(head, real)) {
        char *s = strrchr(head, '/');
        if (!s || s == head)
            return;
        *s = '\0';
        tailbuf = lz_xstrdup(abs + strlen(head));
        tail = tailbuf;
    }
    size_t wl = strlen(ws);
    _cleanup_free_ char *full = lz_xasprintf("%s%s", real, tail);
    if (strncmp(full, ws, wl) != 0 || full[wl] != '/' || full[wl + 1] == '\0')
        return;
    const char *rel = full + wl + 1;
    if (strstr(rel, "/../") || !strncmp(rel, "../", 3) || strstr(rel, "/./"))
        return;
    for (size_t i = 0; i < *n; i++)
        if (!strcmp((*v)[i], rel))
            return;
    *v = lz_xrealloc(*v, (*n + 1) * sizeof **v);
    (*v)[(*n)++] = lz_xstrdup(rel);
}

int lz_git_protected_paths(const char *ws, char ***ret, size_t *ret_n, struct lz_error *err) {
    char **v = NULL;
    size_t n = 0;
    git_libgit2_init();
    git_repository *repo = NULL;
    if (git_repository_open_ext(&repo, ws, GIT_REPOSITORY_OPEN_NO_SEARCH, NULL) < 0) {
        git_libgit2_shutdown();
        *ret = NULL;
        *ret_n = 0;
        return 0; /* not a repository: nothing beyond the router's own rules */
    }
    git_config *cfg = NULL;
    int r = git_repository_config_snapshot(&cfg, repo);
    if (r < 0) {
        const git_error *e = git_error_last();
        lz_error_set(err, -EINVAL, "cannot read the Git configuration of %s: %s", ws,
                     e && e->message ? e->message : "unknown error");
        git_repository_free(repo);
        git_libgit2_shutdown();
        return -EINVAL;
    }
    _cleanup_free_ char *gitdir = lz_xasprintf("%s/.git", ws);
    git_config_iterator *it = NULL;
    if (git_config_iterator_glob_new(&it, cfg, "^(core\\.hookspath|include\\.path|includeif\\..*\\.path)$") == 0) {
        git_config_entry *e;
        while (git_config_next(&e, it) == 0) {
            if (!e->value || !e->value[0])
                continue;
            /* hooksPath is relative to the work tree; include paths to the
             * including file, which for the repository's own config is .git. */
            bool hooks = !strcmp(e->name, "core.hookspath");
            add_if_inside(ws, hooks ? ws : gitdir, e->value, &v, &n);
        }
        git_config_iterator_free(it);
    }
    git_config_free(cfg);
    git_repository_free(repo);
    git_libgit2_shutdown();
    *ret = v;
    *ret_n = n;
    return 0;
}
