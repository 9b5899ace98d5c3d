/* store.c — the Domain Store (see store.h). */
#include "store.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <time.h>

#define STORE_APP_ID 0x4c5a4453 /* "LZDS" */
#define STORE_VERSION 1

/* Stored times are wall-clock milliseconds (lz_now_ms is monotonic). */
static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct lz_store {
    sqlite3 *db;
    int depth; /* explicit transaction open */
};

static const char *const role_names[LZ_ROLE_COUNT] = {
    "prepared_lower", "state_anchor", "git_routing", "network", "helper", "sandbox", "publication",
};
static const char *const pstate_names[] = {
    "intent", "lease_held", "prepared", "committed", "release_intent", "clean",
};

const char *lz_role_name(enum lz_role r) { return (unsigned)r < LZ_ROLE_COUNT ? role_names[r] : "?"; }
const char *lz_pstate_name(enum lz_pstate s) {
    return (unsigned)s < LZ_ARRAY_SIZE(pstate_names) ? pstate_names[s] : "?";
}
int lz_role_parse(const char *s) {
    for (int i = 0; i < LZ_ROLE_COUNT; i++)
        if (!strcmp(s, role_names[i]))
            return i;
    return -EINVAL;
}
int lz_pstate_parse(const char *s) {
    for (size_t i = 0; i < LZ_ARRAY_SIZE(pstate_names); i++)
        if (!strcmp(s, pstate_names[i]))
            return (int)i;
    return -EINVAL;
}

static const char schema[] =
    "CREATE TABLE meta(key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) STRICT;"
    "CREATE TABLE generations("
    "  gen INTEGER PRIMARY KEY,"
    "  state TEXT NOT NULL CHECK(state IN ('starting','running','stopping','clean','failed')),"
    "  fingerprint TEXT NOT NULL,"
    "  hc TEXT NOT NULL,"
    "  started_ms INTEGER NOT NULL,"
    "  ended_ms INTEGER) STRICT;"
    "CREATE TABLE participants("
    "  gen INTEGER NOT NULL REFERENCES generations(gen),"
    "  role TEXT NOT NULL CHECK(role IN ('prepared_lower','state_anchor','git_routing','network',"
    "                                    'helper','sandbox','publication')),"
    "  state TEXT NOT NULL CHECK(state IN ('intent','lease_held','prepared','committed',"
    "                                      'release_intent','clean')),"
    "  artifact_id TEXT, mount TEXT, evidence TEXT,"
    "  changed_ms INTEGER NOT NULL,"
    "  PRIMARY KEY(gen, role)) STRICT;"
    "CREATE TABLE processes("
    "  gen INTEGER NOT NULL, role TEXT NOT NULL, slot TEXT NOT NULL,"
    "  phase TEXT NOT NULL CHECK(phase IN ('staged','committed')),"
    "  boot_id TEXT NOT NULL, pidfs_dev INTEGER NOT NULL, pidfs_ino INTEGER NOT NULL,"
    "  pid INTEGER NOT NULL, start_time INTEGER NOT NULL,"
    "  PRIMARY KEY(gen, role, slot),"
    "  FOREIGN KEY(gen, role) REFERENCES participants(gen, role)) STRICT;"
    "CREATE TABLE sessions("
    "  gen INTEGER NOT NULL REFERENCES generations(gen),"
    "  session INTEGER NOT NULL,"
    "  state TEXT NOT NULL CHECK(state IN ('intent','running','release_intent','clean')),"
    "  tty INTEGER NOT NULL, command TEXT NOT NULL,"
    "  phase TEXT NOT NULL CHECK(phase IN ('unassigned','staged','committed')),"
    "  boot_id TEXT, pidfs_dev INTEGER, pidfs_ino INTEGER, pid INTEGER, start_time INTEGER,"
    "  started_ms INTEGER NOT NULL, ended_ms INTEGER,"
    "  PRIMARY KEY(gen, session)) STRICT;";

static int db_error(struct lz_store *st, struct lz_error *err, const char *what) {
    return lz_error_set(err, -EIO, "Domain Store: %s: %s", what, sqlite3_errmsg(st->db));
}

static int exec_sql(struct lz_store *st, const char *sql, struct lz_error *err) {
    char *m = NULL;
    if (sqlite3_exec(st->db, sql, NULL, NULL, &m) != SQLITE_OK) {
        int r = lz_error_set(err, -EIO, "Domain Store: %s", m ? m : sqlite3_errmsg(st->db));
        sqlite3_free(m);
        return r;
    }
    return 0;
}

static int pragma_int(sqlite3 *db, const char *sql, int64_t *ret) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
        return -EIO;
    int r = -EIO;
    if (sqlite3_step(s) == SQLITE_ROW) {
        *ret = sqlite3_column_int64(s, 0);
        r = 0;
    }
    sqlite3_finalize(s);
    return r;
}

int lz_store_begin(struct lz_store *st, struct lz_error *err) {
    if (st->depth)
        return lz_error_set(err, -EBUSY, "Domain Store: nested transaction");
    int r = exec_sql(st, "BEGIN IMMEDIATE", err);
    if (r == 0)
        st->depth = 1;
    return r;
}

int lz_store_commit(struct lz_store *st, struct lz_error *err) {
    st->depth = 0;
    int r = exec_sql(st, "COMMIT", err);
    if (r < 0)
        exec_sql(st, "ROLLBACK", NULL);
    return r;
}

void lz_store_rollback(struct lz_store *st) {
    if (st->depth)
        exec_sql(st, "ROLLBACK", NULL);
    st->depth = 0;
}

/* Runs one statement with text/int binds ("t" text or NULL, "i" int64),
 * in its own transaction unless one is open. */
static int run(struct lz_store *st, struct lz_error *err, const char *sql, const char *types, ...) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK)
        return db_error(st, err, "prepare");
    va_list ap;
    va_start(ap, types);
    for (int i = 0; types[i]; i++) {
        if (types[i] == 't') {
            const char *v = va_arg(ap, const char *);
            if (v)
                sqlite3_bind_text(s, i + 1, v, -1, SQLITE_TRANSIENT);
            else
                sqlite3_bind_null(s, i + 1);
        } else {
            sqlite3_bind_int64(s, i + 1, va_arg(ap, int64_t));
        }
    }
    va_end(ap);
    int rc = sqlite3_step(s);
    int r = rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : db_error(st, err, "write");
    sqlite3_finalize(s);
    return r;
}

static int meta_read(sqlite3 *db, const char *key, char **ret) {
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = ?1", -1, &s, NULL) != SQLITE_OK)
        return -EIO;
    sqlite3_bind_text(s, 1, key, -1, SQLITE_STATIC);
    int r = -ENOENT;
    if (sqlite3_step(s) == SQLITE_ROW) {
        *ret = lz_xstrdup((const char *)sqlite3_column_text(s, 0));
        r = 0;
    }
    sqlite3_finalize(s);
    return r;
}

int lz_store_open(const char *domain_dir, const struct lz_store_identity *id, bool create,
                  struct lz_store **ret, struct lz_error *err) {
    _cleanup_free_ char *path = lz_xasprintf("%s/domain.db", domain_dir);
    struct stat sb;
    bool exists = lstat(path, &sb) == 0;
    if (exists && !S_ISREG(sb.st_mode))
        return lz_error_set(err, -EINVAL, "%s is not a regular file; refusing to use it", path);
    if (!exists && !create)
        return lz_error_set(err, -ENOENT, "the Domain has no store (%s)", path);
    struct lz_store *st = lz_xcalloc(1, sizeof *st);
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | (create ? SQLITE_OPEN_CREATE : 0);
    if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK) {
        int r = lz_error_set(err, -EIO, "cannot open the Domain Store %s: %s", path,
                             st->db ? sqlite3_errmsg(st->db) : "out of memory");
        lz_store_close(st);
        return r;
    }
    sqlite3_busy_timeout(st->db, 5000);
    int64_t app = 0, ver = 0;
    if (pragma_int(st->db, "PRAGMA application_id", &app) < 0 ||
        pragma_int(st->db, "PRAGMA user_version", &ver) < 0) {
        int r = lz_error_set(err, -EBADMSG, "the Domain Store %s is not readable as SQLite: %s", path,
                             sqlite3_errmsg(st->db));
        lz_store_close(st);
        return r;
    }
    int r = 0;
    if (app == 0 && ver == 0) {
        /* A new file has no tables; anything else without our ID is not ours. */
        int64_t ntab = 0;
        pragma_int(st->db, "SELECT count(*) FROM sqlite_master", &ntab);
        if (ntab != 0) {
            r = lz_error_set(err, -EBADMSG, "%s is not a Lazaret Domain Store; refusing to use it", path);
            goto fail;
        }
        if (!create) {
            r = lz_error_set(err, -ENOENT, "the Domain has no store (%s)", path);
            goto fail;
        }
        if ((r = exec_sql(st, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;", err)) < 0 ||
            (r = lz_store_begin(st, err)) < 0)
            goto fail;
        char ms[32];
        snprintf(ms, sizeof ms, "%lld", (long long)wall_ms());
        if ((r = exec_sql(st, schema, err)) < 0 ||
            (r = run(st, err, "INSERT INTO meta VALUES('domain_id', ?1), ('profile', ?2), ('workspace', ?3),"
                              " ('created_ms', ?4), ('last_used_ms', ?4), ('anchor_gen', '1')",
                     "tttt", id->domain_id, id->profile, id->workspace, ms)) < 0 ||
            (r = exec_sql(st, "PRAGMA application_id=1280984147; PRAGMA user_version=1;", err)) < 0) {
            lz_store_rollback(st);
            goto fail;
        }
        if ((r = lz_store_commit(st, err)) < 0)
            goto fail;
    } else if (app != STORE_APP_ID) {
        r = lz_error_set(err, -EBADMSG, "%s is not a Lazaret Domain Store (application id %#llx); refusing to use it",
                         path, (unsigned long long)app);
        goto fail;
    } else if (ver != STORE_VERSION) {
        r = lz_error_set(err, -EPROTONOSUPPORT,
                         "the Domain Store %s has version %lld; this lazaret reads version %d only "
                         "(a newer lazaret wrote it: use that version, or move the Domain aside)",
                         path, (long long)ver, STORE_VERSION);
        goto fail;
    }
    if ((r = exec_sql(st, "PRAGMA foreign_keys=ON; PRAGMA synchronous=FULL;", err)) < 0)
        goto fail;
    /* SR-11: the stored identity must be the caller's. */
    if (id) {
        const char *want[3] = { id->domain_id, id->profile, id->workspace };
        static const char *const keys[3] = { "domain_id", "profile", "workspace" };
        for (int i = 0; i < 3; i++) {
            if (!want[i])
                continue;
            _cleanup_free_ char *have = NULL;
            if (meta_read(st->db, keys[i], &have) < 0 || strcmp(have, want[i]) != 0) {
                r = lz_error_set(err, -EBADMSG,
                                 "the Domain Store %s records %s \"%s\", not \"%s\"; refusing to reuse it "
                                 "(run `lazaret state verify`)",
                                 path, keys[i], have ? have : "(none)", want[i]);
                goto fail;
            }
        }
    }
    *ret = st;
    return 0;
fail:
    lz_store_close(st);
    return r;
}

void lz_store_close(struct lz_store *st) {
    if (!st)
        return;
    if (st->db)
        sqlite3_close(st->db);
    free(st);
}

int lz_store_meta_get(struct lz_store *st, const char *key, char **ret, struct lz_error *err) {
    int r = meta_read(st->db, key, ret);
    if (r == -EIO)
        return db_error(st, err, "read");
    return r;
}

int lz_store_meta_set(struct lz_store *st, const char *key, const char *value, struct lz_error *err) {
    return run(st, err, "INSERT INTO meta VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value = ?2", "tt", key,
               value);
}

int lz_store_meta_del(struct lz_store *st, const char *key, struct lz_error *err) {
    return run(st, err, "DELETE FROM meta WHERE key = ?1", "t", key);
}

int lz_store_gen_begin(struct lz_store *st, const char *fingerprint, const struct lz_procid *hc,
                       int64_t *ret_gen, struct lz_error *err) {
    char id[160];
    lz_procid_format(hc, id, sizeof id);
    char ms[32];
    snprintf(ms, sizeof ms, "%lld", (long long)wall_ms());
    bool own = st->depth == 0;
    int r;
    if (own && (r = lz_store_begin(st, err)) < 0)
        return r;
    if ((r = run(st, err,
                 "INSERT INTO generations(gen, state, fingerprint, hc, started_ms) "
                 "VALUES((SELECT coalesce(max(gen), 0) + 1 FROM generations), 'starting', ?1, ?2, ?3)",
                 "tti", fingerprint, id, wall_ms())) < 0 ||
        (r = lz_store_meta_set(st, "last_used_ms", ms, err)) < 0) {
        if (own)
            lz_store_rollback(st);
        return r;
    }
    int64_t g = sqlite3_last_insert_rowid(st->db);
    if (own && (r = lz_store_commit(st, err)) < 0)
        return r;
    *ret_gen = g;
    return 0;
}

int lz_store_gen_set_state(struct lz_store *st, int64_t gen, const char *state, struct lz_error *err) {
    bool end = !strcmp(state, "clean") || !strcmp(state, "failed");
    return run(st, err, "UPDATE generations SET state = ?1, ended_ms = CASE WHEN ?3 THEN ?4 ELSE ended_ms END "
                        "WHERE gen = ?2",
               "tiii", state, gen, (int64_t)end, wall_ms());
}

int lz_store_part_set(struct lz_store *st, int64_t gen, enum lz_role role, enum lz_pstate state,
                      const char *artifact_id, const char *mount, const char *evidence,
                      struct lz_error *err) {
    bool own = st->depth == 0;
    int r;
    if (own && (r = lz_store_begin(st, err)) < 0)
        return r;
    if (state == LZ_P_CLEAN) {
        r = run(st, err, "DELETE FROM processes WHERE gen = ?1 AND role = ?2", "it", gen, lz_role_name(role));
        if (r == 0)
            r = run(st, err,
                    "INSERT INTO participants(gen, role, state, changed_ms) VALUES(?1, ?2, 'clean', ?3) "
                    "ON CONFLICT(gen, role) DO UPDATE SET state = 'clean', artifact_id = NULL, mount = NULL, "
                    "evidence = NULL, changed_ms = ?3",
                    "iti", gen, lz_role_name(role), wall_ms());
    } else {
        r = run(st, err,
                "INSERT INTO participants(gen, role, state, artifact_id, mount, evidence, changed_ms) "
                "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                "ON CONFLICT(gen, role) DO UPDATE SET state = ?3, artifact_id = coalesce(?4, artifact_id), "
                "mount = coalesce(?5, mount), evidence = coalesce(?6, evidence), changed_ms = ?7",
                "ittttti", gen, lz_role_name(role), lz_pstate_name(state), artifact_id, mount, evidence,
                wall_ms());
    }
    if (r < 0) {
        if (own)
            lz_store_rollback(st);
        return r;
    }
    return own ? lz_store_commit(st, err) : 0;
}

int lz_store_proc_set(struct lz_store *st, int64_t gen, enum lz_role role, const char *slot,
                      const char *phase, const struct lz_procid *id, struct lz_error *err) {
    return run(st, err,
               "INSERT INTO processes VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
               "ON CONFLICT(gen, role, slot) DO UPDATE SET phase = ?4, boot_id = ?5, pidfs_dev = ?6, "
               "pidfs_ino = ?7, pid = ?8, start_time = ?9",
               "itttt" "iiii", gen, lz_role_name(role), slot, phase, id->boot_id, (int64_t)id->dev,
               (int64_t)id->ino, id->pid, id->start_time);
}

int lz_store_session_set(struct lz_store *st, int64_t gen, int64_t session, const char *state, bool tty,
                         const char *command, const char *phase, const struct lz_procid *exec,
                         struct lz_error *err) {
    if (!strcmp(state, "clean"))
        return run(st, err,
                   "UPDATE sessions SET state = 'clean', phase = 'unassigned', boot_id = NULL, pidfs_dev = NULL, "
                   "pidfs_ino = NULL, pid = NULL, start_time = NULL, ended_ms = ?3 WHERE gen = ?1 AND session = ?2",
                   "iii", gen, session, wall_ms());
    if (!strcmp(state, "intent") && !exec)
        return run(st, err,
                   "INSERT INTO sessions(gen, session, state, tty, command, phase, started_ms) "
                   "VALUES(?1, ?2, 'intent', ?3, ?4, 'unassigned', ?5)",
                   "iiiti", gen, session, (int64_t)tty, command ? command : "", wall_ms());
    if (exec)
        return run(st, err,
                   "UPDATE sessions SET state = ?3, phase = ?4, boot_id = ?5, pidfs_dev = ?6, pidfs_ino = ?7, "
                   "pid = ?8, start_time = ?9 WHERE gen = ?1 AND session = ?2",
                   "iittt" "iiii", gen, session, state, phase, exec->boot_id, (int64_t)exec->dev, (int64_t)exec->ino,
                   exec->pid, exec->start_time);
    return run(st, err, "UPDATE sessions SET state = ?3 WHERE gen = ?1 AND session = ?2", "iit", gen, session,
               state);
}

static char *col_dup(sqlite3_stmt *s, int i) {
    const unsigned char *t = sqlite3_column_text(s, i);
    return t ? lz_xstrdup((const char *)t) : NULL;
}

static void col_copy(sqlite3_stmt *s, int i, char *buf, size_t len) {
    const unsigned char *t = sqlite3_column_text(s, i);
    snprintf(buf, len, "%s", t ? (const char *)t : "");
}

int lz_store_read(struct lz_store *st, struct lz_store_snapshot *ret, struct lz_error *err) {
    struct lz_store_snapshot s = { 0 };
    int r = 0;
    sqlite3_stmt *q = NULL;
    char *v = NULL;
    meta_read(st->db, "domain_id", &s.domain_id);
    meta_read(st->db, "profile", &s.profile);
    meta_read(st->db, "workspace", &s.workspace);
    meta_read(st->db, "reset_intent", &s.reset_intent);
    static const char *const ikeys[3] = { "created_ms", "last_used_ms", "anchor_gen" };
    int64_t *ivals[3] = { &s.created_ms, &s.last_used_ms, &s.anchor_gen };
    for (int i = 0; i < 3; i++) {
        if (meta_read(st->db, ikeys[i], &v) == 0)
            *ivals[i] = strtoll(v, NULL, 10);
        free(TAKE_PTR(v));
    }
    if (sqlite3_prepare_v2(st->db, "SELECT gen, state, fingerprint, hc, started_ms, ended_ms FROM generations ORDER BY gen",
                           -1, &q, NULL) != SQLITE_OK)
        goto dberr;
    while (sqlite3_step(q) == SQLITE_ROW) {
        s.gens = lz_xrealloc(s.gens, (s.n_gens + 1) * sizeof *s.gens);
        struct lz_store_gen *g = &s.gens[s.n_gens++];
        *g = (struct lz_store_gen){ .gen = sqlite3_column_int64(q, 0) };
        col_copy(q, 1, g->state, sizeof g->state);
        g->fingerprint = col_dup(q, 2);
        const unsigned char *hc = sqlite3_column_text(q, 3);
        if (hc)
            lz_procid_parse((const char *)hc, &g->hc);
        g->started_ms = sqlite3_column_int64(q, 4);
        g->ended_ms = sqlite3_column_int64(q, 5);
    }
    sqlite3_finalize(q);
    if (sqlite3_prepare_v2(st->db, "SELECT gen, role, state, artifact_id, mount, evidence FROM participants ORDER BY gen, rowid",
                           -1, &q, NULL) != SQLITE_OK)
        goto dberr;
    while (sqlite3_step(q) == SQLITE_ROW) {
        s.parts = lz_xrealloc(s.parts, (s.n_parts + 1) * sizeof *s.parts);
        struct lz_store_part *p = &s.parts[s.n_parts++];
        *p = (struct lz_store_part){ .gen = sqlite3_column_int64(q, 0) };
        p->role = (enum lz_role)lz_role_parse((const char *)sqlite3_column_text(q, 1));
        p->state = (enum lz_pstate)lz_pstate_parse((const char *)sqlite3_column_text(q, 2));
        p->artifact_id = col_dup(q, 3);
        p->mount = col_dup(q, 4);
        p->evidence = col_dup(q, 5);
    }
    sqlite3_finalize(q);
    if (sqlite3_prepare_v2(st->db,
                           "SELECT gen, role, slot, phase, boot_id, pidfs_dev, pidfs_ino, pid, start_time "
                           "FROM processes ORDER BY gen, rowid",
                           -1, &q, NULL) != SQLITE_OK)
        goto dberr;
    while (sqlite3_step(q) == SQLITE_ROW) {
        s.procs = lz_xrealloc(s.procs, (s.n_procs + 1) * sizeof *s.procs);
        struct lz_store_proc *p = &s.procs[s.n_procs++];
        *p = (struct lz_store_proc){ .gen = sqlite3_column_int64(q, 0) };
        p->role = (enum lz_role)lz_role_parse((const char *)sqlite3_column_text(q, 1));
        col_copy(q, 2, p->slot, sizeof p->slot);
        col_copy(q, 3, p->phase, sizeof p->phase);
        col_copy(q, 4, p->id.boot_id, sizeof p->id.boot_id);
        p->id.dev = (uint64_t)sqlite3_column_int64(q, 5);
        p->id.ino = (uint64_t)sqlite3_column_int64(q, 6);
        p->id.pid = sqlite3_column_int64(q, 7);
        p->id.start_time = sqlite3_column_int64(q, 8);
    }
    sqlite3_finalize(q);
    if (sqlite3_prepare_v2(st->db,
                           "SELECT gen, session, state, tty, command, phase, boot_id, pidfs_dev, pidfs_ino, pid, "
                           "start_time, started_ms, ended_ms FROM sessions ORDER BY gen, session",
                           -1, &q, NULL) != SQLITE_OK)
        goto dberr;
    while (sqlite3_step(q) == SQLITE_ROW) {
        s.sessions = lz_xrealloc(s.sessions, (s.n_sessions + 1) * sizeof *s.sessions);
        struct lz_store_session *p = &s.sessions[s.n_sessions++];
        *p = (struct lz_store_session){ .gen = sqlite3_column_int64(q, 0), .session = sqlite3_column_int64(q, 1) };
        col_copy(q, 2, p->state, sizeof p->state);
        p->tty = sqlite3_column_int64(q, 3) != 0;
        p->command = col_dup(q, 4);
        col_copy(q, 5, p->phase, sizeof p->phase);
        col_copy(q, 6, p->exec.boot_id, sizeof p->exec.boot_id);
        p->exec.dev = (uint64_t)sqlite3_column_int64(q, 7);
        p->exec.ino = (uint64_t)sqlite3_column_int64(q, 8);
        p->exec.pid = sqlite3_column_int64(q, 9);
        p->exec.start_time = sqlite3_column_int64(q, 10);
        p->started_ms = sqlite3_column_int64(q, 11);
        p->ended_ms = sqlite3_column_int64(q, 12);
    }
    sqlite3_finalize(q);
    *ret = s;
    return 0;
dberr:
    r = db_error(st, err, "read");
    lz_store_snapshot_clear(&s);
    return r;
}

void lz_store_snapshot_clear(struct lz_store_snapshot *s) {
    free(s->domain_id);
    free(s->profile);
    free(s->workspace);
    free(s->reset_intent);
    for (size_t i = 0; i < s->n_gens; i++)
        free(s->gens[i].fingerprint);
    free(s->gens);
    for (size_t i = 0; i < s->n_parts; i++) {
        free(s->parts[i].artifact_id);
        free(s->parts[i].mount);
        free(s->parts[i].evidence);
    }
    free(s->parts);
    free(s->procs);
    for (size_t i = 0; i < s->n_sessions; i++)
        free(s->sessions[i].command);
    free(s->sessions);
    *s = (struct lz_store_snapshot){ 0 };
}

int lz_store_check(struct lz_store *st, struct lz_error *err) {
    sqlite3_stmt *q = NULL;
    if (sqlite3_prepare_v2(st->db, "PRAGMA integrity_check", -1, &q, NULL) != SQLITE_OK)
        return db_error(st, err, "integrity check");
    int r = 0;
    if (sqlite3_step(q) == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(q, 0);
        if (!t || strcmp(t, "ok") != 0)
            r = lz_error_set(err, -EBADMSG, "Domain Store integrity check: %s", t ? t : "?");
    }
    sqlite3_finalize(q);
    if (r < 0)
        return r;
    if (sqlite3_prepare_v2(st->db, "PRAGMA foreign_key_check", -1, &q, NULL) != SQLITE_OK)
        return db_error(st, err, "foreign key check");
    if (sqlite3_step(q) == SQLITE_ROW)
        r = lz_error_set(err, -EBADMSG, "Domain Store: a %s row refers to a missing record",
                         sqlite3_column_text(q, 0));
    sqlite3_finalize(q);
    return r;
}

void lz_crash_point(const char *step) {
    const char *want = lz_test_hook("LAZARET_TEST_CRASH");
    if (want && !strcmp(want, step))
        raise(SIGKILL);
}
