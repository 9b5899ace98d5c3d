/* store.c — the Domain Store (see store.h). */
#include "store.h"

#include <time.h>

#include "db.h"

#define STORE_APP_ID 0x4c5a4453 /* "LZDS" */
/* 1: meta, generations, participants, processes, sessions.
 * 2: + audit (audit.h), with its append-only triggers.
 * 3: + audit_net (audit.h: network rows on the same chain), with its
 *    append-only triggers and the one seq space of both tables. */
#define STORE_VERSION LZ_STORE_VERSION
/* A bound on what one Domain Store can make a reader hold (one row per
 * generation or session: decades of use). */
#define STORE_MAX_ROWS 1000000

/* Stored times are wall-clock milliseconds (lz_now_ms is monotonic). */
static int64_t wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct lz_store {
    struct lz_db *db;
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

/* The escalation audit (audit.h defines the columns, their encoding and
 * the hash chain). The triggers make the table append-only for every
 * connection that does not drop them first: they stop a mistaken UPDATE or
 * DELETE, not someone who can write the file (the chain detects that). */
#define AUDIT_SQL                                                                                                      \
    "CREATE TABLE audit("                                                                                              \
    "  seq INTEGER PRIMARY KEY CHECK(seq >= 1),"                                                                       \
    "  gen INTEGER NOT NULL,"                                                                                          \
    "  request_id TEXT NOT NULL CHECK(length(request_id) = 32),"                                                       \
    "  session_id TEXT NOT NULL CHECK(length(session_id) = 32),"                                                       \
    "  received_ms INTEGER NOT NULL,"                                                                                  \
    "  decided_by TEXT NOT NULL CHECK(decided_by IN ('none','rule','developer')),"                                     \
    "  decided_ref INTEGER NOT NULL,"                                                                                  \
    "  decision TEXT NOT NULL CHECK(decision IN ('none','auto-approved','approved','approved-for-session',"            \
    "                                            'session-approved','edited','denied')),"                              \
    "  end_state TEXT NOT NULL CHECK(end_state IN ('completed','denied','timed-out','cancelled','failed')),"           \
    "  argv TEXT NOT NULL,"                                                                                            \
    "  edited_argv TEXT,"                                                                                              \
    "  executable TEXT NOT NULL,"                                                                                      \
    "  executable_sha256 TEXT NOT NULL CHECK(length(executable_sha256) IN (0, 64)),"                                   \
    "  cwd TEXT NOT NULL,"                                                                                             \
    "  exit_status INTEGER NOT NULL,"                                                                                  \
    "  signal INTEGER NOT NULL,"                                                                                       \
    "  output_bytes INTEGER NOT NULL,"                                                                                 \
    "  ended_ms INTEGER NOT NULL,"                                                                                     \
    "  prev_hash TEXT NOT NULL CHECK(length(prev_hash) = 64),"                                                         \
    "  row_hash TEXT NOT NULL CHECK(length(row_hash) = 64)) STRICT;"                                                   \
    "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit"                                                            \
    "  BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;"                                              \
    "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit"                                                            \
    "  BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;"

/* The network rows of the audit (audit.h): the same chain as table audit,
 * so a seq is held by at most one row of either table (the insert
 * triggers; lz_audit_verify reports a duplicate all the same). */
#define AUDIT_NET_SQL                                                                                                  \
    "CREATE TABLE audit_net("                                                                                          \
    "  seq INTEGER PRIMARY KEY CHECK(seq >= 1),"                                                                       \
    "  gen INTEGER NOT NULL,"                                                                                          \
    "  at_ms INTEGER NOT NULL,"                                                                                        \
    "  event TEXT NOT NULL CHECK(event IN ('learned','refused','denied','filtered','limited','allowed',"               \
    "                                      'suppressed','tls-refused','credential-refused','git-push')),"              \
    "  name TEXT NOT NULL,"                                                                                            \
    "  addrs TEXT NOT NULL,"                                                                                           \
    "  ports TEXT NOT NULL,"                                                                                           \
    "  detail TEXT NOT NULL,"                                                                                          \
    "  prev_hash TEXT NOT NULL CHECK(length(prev_hash) = 64),"                                                         \
    "  row_hash TEXT NOT NULL CHECK(length(row_hash) = 64)) STRICT;"                                                   \
    "CREATE TRIGGER audit_net_no_update BEFORE UPDATE ON audit_net"                                                    \
    "  BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;"                                              \
    "CREATE TRIGGER audit_net_no_delete BEFORE DELETE ON audit_net"                                                    \
    "  BEGIN SELECT RAISE(ABORT, 'the audit table is append-only'); END;"                                              \
    "CREATE TRIGGER audit_net_one_seq BEFORE INSERT ON audit_net"                                                      \
    "  WHEN EXISTS(SELECT 1 FROM audit WHERE seq = NEW.seq)"                                                           \
    "  BEGIN SELECT RAISE(ABORT, 'the audit already holds this seq'); END;"                                            \
    "CREATE TRIGGER audit_one_seq BEFORE INSERT ON audit"                                                              \
    "  WHEN EXISTS(SELECT 1 FROM audit_net WHERE seq = NEW.seq)"                                                       \
    "  BEGIN SELECT RAISE(ABORT, 'the audit already holds this seq'); END;"

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
    "  PRIMARY KEY(gen, session)) STRICT;" AUDIT_SQL AUDIT_NET_SQL;

/* 3 -> 4: the network rows' event may be 'tls-refused' (the TLS gate). A
 * CHECK cannot change in place: the table is made again as AUDIT_NET_SQL
 * says and the rows copied as they are (their hashes do not change), its
 * triggers (and the audit's trigger that names it) dropped first and made
 * again with it. */
#define AUDIT_NET_REMAKE_SQL(old)                                                                                      \
    "DROP TRIGGER audit_one_seq; DROP TRIGGER audit_net_no_update; DROP TRIGGER audit_net_no_delete;"                  \
    "DROP TRIGGER audit_net_one_seq;"                                                                                  \
    "ALTER TABLE audit_net RENAME TO " old ";" AUDIT_NET_SQL "INSERT INTO audit_net SELECT * FROM " old ";"            \
    "DROP TABLE " old ";"

/* Version 1 -> 2: the audit table; 2 -> 3: the audit's network rows; 3 ->
 * 4: their TLS gate event; 4 -> 5: the credential events of the gate
 * ('credential-refused', 'git-push'), made again the same way. Each in
 * the upgrade's one transaction (a version-1 store takes them all). */
static const char *const upgrade[] = { AUDIT_SQL, AUDIT_NET_SQL, AUDIT_NET_REMAKE_SQL("audit_net_v3"),
                                       AUDIT_NET_REMAKE_SQL("audit_net_v4") };

static int store_refuse(const char *path, int code, const struct lz_db_found *f, struct lz_error *err) {
    if (code == -EPROTONOSUPPORT)
        return lz_error_set(err, code,
                            "the Domain Store %s has version %lld; this lazaret reads versions up to %d "
                            "(a newer lazaret wrote it: use that version, or move the Domain aside)",
                            path, (long long)f->version, STORE_VERSION);
    if (f->application_id == 0 && f->version == 0)
        return lz_error_set(err, code, "%s is not a Lazaret Domain Store; refusing to use it", path);
    return lz_error_set(err, code, "%s is not a Lazaret Domain Store (application id %#llx); refusing to use it", path,
                        (unsigned long long)f->application_id);
}

static const struct lz_db_schema store_schema = {
    .name = "Domain Store",
    .application_id = STORE_APP_ID,
    .version = STORE_VERSION,
    .sql = schema,
    .wal = true,
    .mode = 0644, /* SQLite's own default, as before the layer */
    .refuse = store_refuse,
    .upgrade = upgrade,
};

/* A change that is its own transaction unless one is open. */
static int ok(int r) { return r < 0 ? r : 0; }

int lz_store_begin(struct lz_store *st, struct lz_error *err) { return lz_db_begin(st->db, true, err); }

int lz_store_commit(struct lz_store *st, struct lz_error *err) { return lz_db_commit(st->db, err); }

void lz_store_rollback(struct lz_store *st) { lz_db_rollback(st->db); }

static int meta_read(struct lz_store *st, const char *key, char **ret, struct lz_error *err) {
    return lz_db_get_text(st->db, ret, err, "SELECT value FROM meta WHERE key = ?1", "t", key);
}

/* SR-11: the stored identity must be the caller's. */
static int check_identity(struct lz_store *st, const struct lz_store_identity *id, struct lz_error *err) {
    const char *want[3] = { id->domain_id, id->profile, id->workspace };
    static const char *const keys[3] = { "domain_id", "profile", "workspace" };
    for (int i = 0; i < 3; i++) {
        if (!want[i])
            continue;
        _cleanup_free_ char *have = NULL;
        int r = meta_read(st, keys[i], &have, err);
        if (r < 0)
            return r;
        if (r == 0 || strcmp(have, want[i]) != 0)
            return lz_error_set(err, -EBADMSG,
                                "the Domain Store %s records %s \"%s\", not \"%s\"; refusing to reuse it "
                                "(run `lazaret state verify`)",
                                st->db->path, keys[i], have ? have : "(none)", want[i]);
    }
    return 0;
}

static int store_open(const char *domain_dir, const struct lz_store_identity *id, unsigned flags, struct lz_store **ret,
                      struct lz_error *err) {
    _cleanup_free_ char *path = lz_xasprintf("%s/domain.db", domain_dir);
    bool create = flags & LZ_DB_CREATE;
    if (create && (!id || !id->domain_id || !id->profile || !id->workspace))
        return lz_error_set(err, -EINVAL, "creating the Domain Store %s needs the Domain's identity", path);
    struct lz_store *st = lz_xcalloc(1, sizeof *st);
    int r = lz_db_open(path, &store_schema, flags, &st->db, err);
    if (r == -ENOENT || (r == 0 && st->db->fresh)) {
        r = lz_error_set(err, -ENOENT, "the Domain has no store (%s)", path);
        goto fail;
    }
    if (r < 0)
        goto fail;
    if (st->db->created) {
        char ms[32];
        snprintf(ms, sizeof ms, "%lld", (long long)wall_ms());
        r = lz_db_run(st->db, err,
                      "INSERT INTO meta VALUES('domain_id', ?1), ('profile', ?2), ('workspace', ?3),"
                      " ('created_ms', ?4), ('last_used_ms', ?4), ('anchor_gen', '1')",
                      "tttt", id->domain_id, id->profile, id->workspace, ms);
        if (r < 0)
            goto fail;
    }
    if ((id && (r = check_identity(st, id, err)) < 0) || (r = lz_db_commit(st->db, err)) < 0)
        goto fail;
    *ret = st;
    return 0;
fail:
    lz_store_close(st);
    return r;
}

int lz_store_open(const char *domain_dir, const struct lz_store_identity *id, bool create, struct lz_store **ret,
                  struct lz_error *err) {
    return store_open(domain_dir, id, create ? LZ_DB_CREATE : 0, ret, err);
}

int lz_store_open_readonly(const char *domain_dir, const struct lz_store_identity *id, struct lz_store **ret,
                           struct lz_error *err) {
    return store_open(domain_dir, id, LZ_DB_READONLY, ret, err);
}

int lz_store_version(const struct lz_store *st) { return st->db->version; }

int lz_store_upgraded_from(const struct lz_store *st) { return st->db->upgraded_from; }

struct lz_db *lz_store_db(struct lz_store *st) {
    return st->db;
}

void lz_store_close(struct lz_store *st) {
    if (!st)
        return;
    lz_db_close(st->db);
    free(st);
}

int lz_store_meta_get(struct lz_store *st, const char *key, char **ret, struct lz_error *err) {
    int r = meta_read(st, key, ret, err);
    if (r == 0)
        return lz_error_set(err, -ENOENT, "the Domain Store %s has no %s", st->db->path, key);
    return ok(r);
}

int lz_store_meta_set(struct lz_store *st, const char *key, const char *value, struct lz_error *err) {
    return ok(lz_db_run(st->db, err, "INSERT INTO meta VALUES(?1, ?2) ON CONFLICT(key) DO UPDATE SET value = ?2", "tt",
                        key, value));
}

int lz_store_meta_del(struct lz_store *st, const char *key, struct lz_error *err) {
    return ok(lz_db_run(st->db, err, "DELETE FROM meta WHERE key = ?1", "t", key));
}

/* Runs change(st, ud, err) in its own transaction unless one is open. */
static int change_in_txn(struct lz_store *st, int (*change)(struct lz_store *, void *, struct lz_error *), void *ud,
                         struct lz_error *err) {
    if (st->db->in_txn)
        return change(st, ud, err);
    int r = lz_db_begin(st->db, true, err);
    if (r < 0)
        return r;
    if ((r = change(st, ud, err)) < 0) {
        lz_db_rollback(st->db);
        return r;
    }
    return lz_db_commit(st->db, err);
}

struct gen_begin {
    const char *fingerprint;
    const struct lz_procid *hc;
    int64_t gen;
};

static int gen_begin(struct lz_store *st, void *ud, struct lz_error *err) {
    struct gen_begin *g = ud;
    char id[160];
    lz_procid_format(g->hc, id, sizeof id);
    char ms[32];
    snprintf(ms, sizeof ms, "%lld", (long long)wall_ms());
    int r = lz_db_run(st->db, err,
                      "INSERT INTO generations(gen, state, fingerprint, hc, started_ms) "
                      "VALUES((SELECT coalesce(max(gen), 0) + 1 FROM generations), 'starting', ?1, ?2, ?3)",
                      "tti", g->fingerprint, id, wall_ms());
    if (r < 0)
        return r;
    g->gen = sqlite3_last_insert_rowid(st->db->db);
    return lz_store_meta_set(st, "last_used_ms", ms, err);
}

int lz_store_gen_begin(struct lz_store *st, const char *fingerprint, const struct lz_procid *hc, int64_t *ret_gen,
                       struct lz_error *err) {
    struct gen_begin g = { .fingerprint = fingerprint, .hc = hc };
    int r = change_in_txn(st, gen_begin, &g, err);
    if (r < 0)
        return r;
    *ret_gen = g.gen;
    return 0;
}

int lz_store_gen_set_state(struct lz_store *st, int64_t gen, const char *state, struct lz_error *err) {
    bool end = !strcmp(state, "clean") || !strcmp(state, "failed");
    return ok(lz_db_run(st->db, err,
                        "UPDATE generations SET state = ?1, ended_ms = CASE WHEN ?3 THEN ?4 ELSE ended_ms END "
                        "WHERE gen = ?2",
                        "tiii", state, gen, (int64_t)end, wall_ms()));
}

struct part_set {
    int64_t gen;
    enum lz_role role;
    enum lz_pstate state;
    const char *artifact_id, *mount, *evidence;
};

static int part_set(struct lz_store *st, void *ud, struct lz_error *err) {
    const struct part_set *p = ud;
    const char *role = lz_role_name(p->role);
    int r;
    if (p->state == LZ_P_CLEAN) {
        if ((r = lz_db_run(st->db, err, "DELETE FROM processes WHERE gen = ?1 AND role = ?2", "it", p->gen, role)) < 0)
            return r;
        return ok(lz_db_run(st->db, err,
                            "INSERT INTO participants(gen, role, state, changed_ms) VALUES(?1, ?2, 'clean', ?3) "
                            "ON CONFLICT(gen, role) DO UPDATE SET state = 'clean', artifact_id = NULL, mount = NULL, "
                            "evidence = NULL, changed_ms = ?3",
                            "iti", p->gen, role, wall_ms()));
    }
    return ok(lz_db_run(st->db, err,
                        "INSERT INTO participants(gen, role, state, artifact_id, mount, evidence, changed_ms) "
                        "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7) "
                        "ON CONFLICT(gen, role) DO UPDATE SET state = ?3, artifact_id = coalesce(?4, artifact_id), "
                        "mount = coalesce(?5, mount), evidence = coalesce(?6, evidence), changed_ms = ?7",
                        "ittttti", p->gen, role, lz_pstate_name(p->state), p->artifact_id, p->mount, p->evidence,
                        wall_ms()));
}

int lz_store_part_set(struct lz_store *st, int64_t gen, enum lz_role role, enum lz_pstate state,
                      const char *artifact_id, const char *mount, const char *evidence, struct lz_error *err) {
    struct part_set p = { gen, role, state, artifact_id, mount, evidence };
    return change_in_txn(st, part_set, &p, err);
}

int lz_store_proc_set(struct lz_store *st, int64_t gen, enum lz_role role, const char *slot, const char *phase,
                      const struct lz_procid *id, struct lz_error *err) {
    return ok(lz_db_run(st->db, err,
                        "INSERT INTO processes VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
                        "ON CONFLICT(gen, role, slot) DO UPDATE SET phase = ?4, boot_id = ?5, pidfs_dev = ?6, "
                        "pidfs_ino = ?7, pid = ?8, start_time = ?9",
                        "itttt"
                        "iiii",
                        gen, lz_role_name(role), slot, phase, id->boot_id, (int64_t)id->dev, (int64_t)id->ino, id->pid,
                        id->start_time));
}

int lz_store_session_set(struct lz_store *st, int64_t gen, int64_t session, const char *state, bool tty,
                         const char *command, const char *phase, const struct lz_procid *exec, struct lz_error *err) {
    int r;
    if (!strcmp(state, "clean"))
        r = lz_db_run(st->db, err,
                      "UPDATE sessions SET state = 'clean', phase = 'unassigned', boot_id = NULL, pidfs_dev = NULL, "
                      "pidfs_ino = NULL, pid = NULL, start_time = NULL, ended_ms = ?3 WHERE gen = ?1 AND session = ?2",
                      "iii", gen, session, wall_ms());
    else if (!strcmp(state, "intent") && !exec)
        r = lz_db_run(st->db, err,
                      "INSERT INTO sessions(gen, session, state, tty, command, phase, started_ms) "
                      "VALUES(?1, ?2, 'intent', ?3, ?4, 'unassigned', ?5)",
                      "iiiti", gen, session, (int64_t)tty, command ? command : "", wall_ms());
    else if (exec)
        r = lz_db_run(st->db, err,
                      "UPDATE sessions SET state = ?3, phase = ?4, boot_id = ?5, pidfs_dev = ?6, pidfs_ino = ?7, "
                      "pid = ?8, start_time = ?9, command = COALESCE(?10, command) WHERE gen = ?1 AND session = ?2",
                      "iittt"
                      "iiiit",
                      gen, session, state, phase, exec->boot_id, (int64_t)exec->dev, (int64_t)exec->ino, exec->pid,
                      exec->start_time, command);
    else
        r = lz_db_run(st->db, err, "UPDATE sessions SET state = ?3 WHERE gen = ?1 AND session = ?2", "iit", gen,
                      session, state);
    return ok(r);
}

/* ---- the snapshot ---- */

static void fill_gen(void *e, sqlite3_stmt *q) {
    struct lz_store_gen *g = e;
    g->gen = sqlite3_column_int64(q, 0);
    lz_db_col_copy(q, 1, g->state, sizeof g->state);
    g->fingerprint = lz_db_col_dup(q, 2, false);
    const unsigned char *hc = sqlite3_column_text(q, 3);
    if (hc)
        lz_procid_parse((const char *)hc, &g->hc);
    g->started_ms = sqlite3_column_int64(q, 4);
    g->ended_ms = sqlite3_column_int64(q, 5);
}

static void clear_gen(void *e) { free(((struct lz_store_gen *)e)->fingerprint); }

static int role_col(sqlite3_stmt *q, int i) {
    const char *t = (const char *)sqlite3_column_text(q, i);
    return t ? lz_role_parse(t) : -EINVAL;
}

static void fill_part(void *e, sqlite3_stmt *q) {
    struct lz_store_part *p = e;
    p->gen = sqlite3_column_int64(q, 0);
    p->role = (enum lz_role)role_col(q, 1);
    const char *t = (const char *)sqlite3_column_text(q, 2);
    p->state = (enum lz_pstate)(t ? lz_pstate_parse(t) : -EINVAL);
    p->artifact_id = lz_db_col_dup(q, 3, false);
    p->mount = lz_db_col_dup(q, 4, false);
    p->evidence = lz_db_col_dup(q, 5, false);
}

static void clear_part(void *e) {
    struct lz_store_part *p = e;
    free(p->artifact_id);
    free(p->mount);
    free(p->evidence);
}

/* The pidfs identity in columns i..i+4: boot_id, dev, ino, pid, start_time. */
static void procid_cols(sqlite3_stmt *q, int i, struct lz_procid *id) {
    lz_db_col_copy(q, i, id->boot_id, sizeof id->boot_id);
    id->dev = (uint64_t)sqlite3_column_int64(q, i + 1);
    id->ino = (uint64_t)sqlite3_column_int64(q, i + 2);
    id->pid = sqlite3_column_int64(q, i + 3);
    id->start_time = sqlite3_column_int64(q, i + 4);
}

static void fill_proc(void *e, sqlite3_stmt *q) {
    struct lz_store_proc *p = e;
    p->gen = sqlite3_column_int64(q, 0);
    p->role = (enum lz_role)role_col(q, 1);
    lz_db_col_copy(q, 2, p->slot, sizeof p->slot);
    lz_db_col_copy(q, 3, p->phase, sizeof p->phase);
    procid_cols(q, 4, &p->id);
}

static void fill_session(void *e, sqlite3_stmt *q) {
    struct lz_store_session *p = e;
    p->gen = sqlite3_column_int64(q, 0);
    p->session = sqlite3_column_int64(q, 1);
    lz_db_col_copy(q, 2, p->state, sizeof p->state);
    p->tty = sqlite3_column_int64(q, 3) != 0;
    p->command = lz_db_col_dup(q, 4, false);
    lz_db_col_copy(q, 5, p->phase, sizeof p->phase);
    procid_cols(q, 6, &p->exec);
    p->started_ms = sqlite3_column_int64(q, 11);
    p->ended_ms = sqlite3_column_int64(q, 12);
}

static void clear_session(void *e) { free(((struct lz_store_session *)e)->command); }

static int read_locked(struct lz_store *st, struct lz_store_snapshot *s, struct lz_error *err) {
    struct lz_db *db = st->db;
    char **texts[4] = { &s->domain_id, &s->profile, &s->workspace, &s->reset_intent };
    static const char *const tkeys[4] = { "domain_id", "profile", "workspace", "reset_intent" };
    static const char *const ikeys[3] = { "created_ms", "last_used_ms", "anchor_gen" };
    int64_t *ivals[3] = { &s->created_ms, &s->last_used_ms, &s->anchor_gen };
    int r;
    for (int i = 0; i < 4; i++)
        if ((r = meta_read(st, tkeys[i], texts[i], err)) < 0)
            return r;
    for (int i = 0; i < 3; i++) {
        _cleanup_free_ char *v = NULL;
        if ((r = meta_read(st, ikeys[i], &v, err)) < 0)
            return r;
        if (r == 1)
            *ivals[i] = strtoll(v, NULL, 10);
    }
    if ((r = lz_db_read_rows(db, "generations",
                             "SELECT gen, state, fingerprint, hc, started_ms, ended_ms FROM generations ORDER BY gen",
                             STORE_MAX_ROWS, sizeof *s->gens, fill_gen, clear_gen, (void **)&s->gens, &s->n_gens,
                             err)) < 0 ||
        (r = lz_db_read_rows(db, "participants",
                             "SELECT gen, role, state, artifact_id, mount, evidence FROM participants "
                             "ORDER BY gen, rowid",
                             STORE_MAX_ROWS, sizeof *s->parts, fill_part, clear_part, (void **)&s->parts, &s->n_parts,
                             err)) < 0 ||
        (r = lz_db_read_rows(db, "processes",
                             "SELECT gen, role, slot, phase, boot_id, pidfs_dev, pidfs_ino, pid, start_time "
                             "FROM processes ORDER BY gen, rowid",
                             STORE_MAX_ROWS, sizeof *s->procs, fill_proc, NULL, (void **)&s->procs, &s->n_procs, err)) <
            0)
        return r;
    return lz_db_read_rows(db, "sessions",
                           "SELECT gen, session, state, tty, command, phase, boot_id, pidfs_dev, pidfs_ino, pid, "
                           "start_time, started_ms, ended_ms FROM sessions ORDER BY gen, session",
                           STORE_MAX_ROWS, sizeof *s->sessions, fill_session, clear_session, (void **)&s->sessions,
                           &s->n_sessions, err);
}

int lz_store_read(struct lz_store *st, struct lz_store_snapshot *ret, struct lz_error *err) {
    struct lz_store_snapshot s = { 0 };
    /* One read transaction: a consistent snapshot. */
    bool own = !st->db->in_txn;
    int r = own ? lz_db_begin(st->db, false, err) : 0;
    if (r == 0)
        r = read_locked(st, &s, err);
    if (own && st->db->in_txn)
        r = r < 0 ? (lz_db_rollback(st->db), r) : lz_db_commit(st->db, err);
    if (r < 0) {
        lz_store_snapshot_clear(&s);
        return r;
    }
    *ret = s;
    return 0;
}

void lz_store_snapshot_clear(struct lz_store_snapshot *s) {
    free(s->domain_id);
    free(s->profile);
    free(s->workspace);
    free(s->reset_intent);
    for (size_t i = 0; i < s->n_gens; i++)
        clear_gen(&s->gens[i]);
    free(s->gens);
    for (size_t i = 0; i < s->n_parts; i++)
        clear_part(&s->parts[i]);
    free(s->parts);
    free(s->procs);
    for (size_t i = 0; i < s->n_sessions; i++)
        clear_session(&s->sessions[i]);
    free(s->sessions);
    *s = (struct lz_store_snapshot){ 0 };
}

static void first_problem(void *ud, const char *line) { snprintf(ud, LZ_ERROR_MAX, "%s", line); }

int lz_store_check(struct lz_store *st, struct lz_error *err) {
    char first[LZ_ERROR_MAX] = "";
    int r = lz_db_integrity(st->db, 1, first_problem, first, err);
    if (r < 0)
        return r;
    if (r > 0)
        return lz_error_set(err, -EBADMSG, "Domain Store integrity check: %s", first);
    _cleanup_free_ char *table = NULL;
    r = lz_db_get_text(st->db, &table, err, "PRAGMA foreign_key_check", "");
    if (r < 0)
        return r;
    if (r > 0)
        return lz_error_set(err, -EBADMSG, "Domain Store: a %s row refers to a missing record", table ? table : "?");
    return 0;
}
