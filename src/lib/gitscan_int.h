/* gitscan_int.h — what the modules of the host-Git scan share (gitscan.h),
 * in layers, each calling only the ones above it in this list:
 *
 *  gitscan.c       the pure parts, the scan's record (notices, log, the
 *                  protected paths) and lz_gitscan_clear;
 *  gitscan_git.c   asking the host's git about each repository: its
 *                  configuration files and their includes, its hooks and
 *                  what they run;
 *  gitscan_walk.c  the workspace walk: finds the repositories and Git
 *                  directories, refuses links and unsafe indexes in them;
 *                  and the entry point lz_gitscan_run, which drives it.
 */
#pragma once

#include "gitscan.h"

/* ---- string vectors ---------------------------------------------------- */

struct strv {
    char **v;
    size_t n;
};

static inline bool strv_has(const struct strv *s, const char *x) {
    for (size_t i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], x))
            return true;
    return false;
}

static inline void strv_push(struct strv *s, char *owned) {
    s->v = lz_xrealloc(s->v, (s->n + 1) * sizeof *s->v);
    s->v[s->n++] = owned;
}

/* Adds a copy unless present; true if added. */
static inline bool strv_add(struct strv *s, const char *x) {
    if (strv_has(s, x))
        return false;
    strv_push(s, lz_xstrdup(x));
    return true;
}

static inline void strv_clear(struct strv *s) {
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* ---- one scan ----------------------------------------------------------- */

struct scan {
    char *ws; /* canonical workspace */
    const char *home;
    char *git;
    char **envp;
    int timeout_ms;
    size_t max_entries;
    unsigned max_depth;
    struct lz_gitscan *out;
    struct strv protect, notices, log;
    struct strv links;     /* refused links, workspace-relative */
    struct strv bad_index; /* indexes the host's git must not read, with the reason */
    struct strv cfgfiles;  /* config files read with --file (lexical absolute) */
    struct strv hookdirs;  /* hooks directories looked at (canonical) */
    struct strv gitdirs;   /* Git directories walked (canonical) */
    struct strv repos;     /* repositories asked (canonical -C dir or gitdir) */
    const char *bound;     /* the bound that was exceeded, or NULL */
};

/* A notice for the developer (once per text) and a line for the log. */
void lz_gs_notice(struct scan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void lz_gs_log(struct scan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Protects abs (any form) and every symlink on its way, where inside the
 * workspace; returns its canonical form (malloc'd) or NULL. */
char *lz_gs_protect_path(struct scan *s, const char *abs, const char *why);
/* The parent directory of path (malloc'd). */
char *lz_gs_dir_of(const char *path);
/* Component c (no slash) appended to the canonical directory path d. */
char *lz_gs_path_child(const char *d, const char *c);

/* gitscan_git.c: git on PATH (absolute entries only) or NULL; the clean
 * environment git runs with; the repository at dir (-C) or gitdir
 * (--git-dir) asked for its configuration and hooks, once each. */
char *lz_gs_find_git(void);
char **lz_gs_clean_env(void);
void lz_gs_scan_repo(struct scan *s, const char *dir, const char *gitdir);

/* gitscan_walk.c: walks the directory dfd (canonical abs) of the workspace
 * for repositories and Git directories. 0, or -E2BIG with s->bound set,
 * or another negative errno. */
int lz_gs_walk_tree(struct scan *s, int dfd, const char *abs, unsigned depth);
