/* hc_refusal.c — see hc_refusal.h. */
#include "hc_refusal.h"
#include "hc_session.h"
#include "refusal.h"

#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <time.h>
#include <sys/socket.h>

/* Records taken per dispatch: the loop comes back while more wait. */
#define REF_PER_DISPATCH 64
/* Records that do not decode are logged this many times per generation. */
#define REF_BAD_LOGGED 8

static int64_t wall_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

struct hc_ref {
    int fd;
    struct lz_refusal_history hist;
    unsigned bad;
    /* The latest notice of each kind, for sessions that could not take it
     * when it came. */
    char notice[LZ_REFK_COUNT][768];
};

int hc_ref_open(struct hc *h, int *ret_rs_end, struct lz_error *err) {
    int sp[2];
    /* SEQPACKET: one record a message. The kernel bounds what waits in it
     * (the sender's buffer); the routers never wait (MSG_DONTWAIT). */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) < 0)
        return lz_error_set(err, -errno, "cannot make the refusal channel: %s", strerror(errno));
    if (fcntl(sp[0], F_SETFL, O_NONBLOCK) < 0 || shutdown(sp[0], SHUT_WR) < 0 || shutdown(sp[1], SHUT_RD) < 0) {
        int e = -errno;
        close(sp[0]);
        close(sp[1]);
        return lz_error_set(err, e, "cannot set up the refusal channel: %s", strerror(-e));
    }
    struct hc_ref *f = calloc(1, sizeof *f);
    if (!f) {
        close(sp[0]);
        close(sp[1]);
        return lz_error_set(err, -ENOMEM, "out of memory");
    }
    f->fd = sp[0];
    hc_ref_free(h);
    h->ref = f;
    *ret_rs_end = sp[1];
    return 0;
}

void hc_ref_free(struct hc *h) {
    struct hc_ref *f = h->ref;
    if (!f)
        return;
    lz_closep(&f->fd);
    lz_refusal_history_clear(&f->hist);
    free(f);
    h->ref = NULL;
}

int hc_ref_fd(struct hc *h) { return h->ref ? h->ref->fd : -1; }

uint64_t hc_ref_total(const struct hc *h) { return h->ref ? h->ref->hist.total : 0; }

/* Where a router's paths are inside the sandbox. */
static const char *prefix_of(struct hc *h, unsigned tag) {
    if (tag == 0)
        return "/workspace";
    size_t i = tag - 1;
    if (i >= h->n_vol)
        return "(unknown router)";
    if (h->vol_of[i] == SIZE_MAX)
        return "/run/lazaret/repo/.git";
    return h->cfg->profile.volumes[h->vol_of[i]].container;
}

bool hc_ref_plain_shell(bool tty, char *const *argv, size_t argc) {
    if (!tty)
        return false;
    if (argc == 0)
        return true; /* the login shell */
    static const char *const shells[] = { "sh", "bash", "zsh", "dash", "ash", "ksh", "mksh", "fish", "tcsh", "csh" };
    const char *slash = strrchr(argv[0], '/');
    const char *prog = slash ? slash + 1 : argv[0];
    bool shell = false;
    for (size_t i = 0; i < LZ_ARRAY_SIZE(shells); i++)
        shell = shell || !strcmp(prog, shells[i]);
    for (size_t i = 1; shell && i < argc; i++)
        shell = !strcmp(argv[i], "-l") || !strcmp(argv[i], "-i") || !strcmp(argv[i], "--login") ||
            !strcmp(argv[i], "-il") || !strcmp(argv[i], "-li");
    return shell;
}

/* Can this session's terminal take a line now? Not inside a full-screen
 * program's screen, not while the escalation prompt holds it, and not
 * ahead of output still waiting for the client (it may be the very
 * bytes that leave the alternate screen). */
static bool can_show(const struct session *s) {
    return s->recorded && s->state == S_RUNNING && s->plain_shell && !s->alt.on && !s->pend.len &&
        !(s->filter && s->filter->output_blocked(s)) && s->sock >= 0;
}

static void show_pending(struct hc *h, struct session *s) {
    for (unsigned k = 0; k < LZ_REFK_COUNT; k++) {
        unsigned bit = 1u << k;
        if (!(s->ref_pending & bit) || !can_show(s))
            continue;
        s->ref_pending &= ~bit;
        s->ref_shown |= bit;
        hc_session_send(s, LZ_MSG_NOTICE, 0, h->ref->notice[k], strlen(h->ref->notice[k]));
    }
}

void hc_ref_tick(struct hc *h) {
    if (!h->ref)
        return;
    for (int i = 0; i < MAX_SESSIONS; i++) {
        struct session *s = h->s[i];
        if (s && s->ref_pending)
            show_pending(h, s);
    }
}

static void take(struct hc *h, const uint8_t *buf, size_t n) {
    struct hc_ref *f = h->ref;
    struct lz_refusal_rec rec;
    if (lz_refusal_decode(buf, n, &rec) < 0) {
        if (f->bad++ < REF_BAD_LOGGED)
            hc_log("refusals: an unreadable record (%zu bytes) was dropped", n);
        return;
    }
    const struct lz_refusal_entry *e = lz_refusal_history_add(&f->hist, &rec, prefix_of(h, rec.tag), wall_ms());
    if (rec.dropped)
        hc_log("refusals: a router could not send %" PRIu32 " records (the coordinator fell behind)", rec.dropped);
    unsigned bit = 1u << e->kind;
    lz_refusal_notice(e, f->notice[e->kind], sizeof f->notice[e->kind]);
    for (int i = 0; i < MAX_SESSIONS; i++) {
        struct session *s = h->s[i];
        if (!s || !s->plain_shell || (s->ref_shown & bit))
            continue;
        s->ref_pending |= bit;
        show_pending(h, s);
    }
}

void hc_ref_dispatch(struct hc *h) {
    if (!h->ref)
        return;
    static uint8_t buf[LZ_REFUSAL_MAX + 1];
    for (int i = 0; i < REF_PER_DISPATCH; i++) {
        ssize_t n = recv(h->ref->fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                hc_log("refusals: cannot read the channel: %s", strerror(errno));
            return;
        }
        if (n == 0) {
            /* Every router's end closed (the Supervisor gone): nothing
             * more will come; stop polling an fd that stays readable. */
            lz_closep(&h->ref->fd);
            return;
        }
        if ((size_t)n > sizeof buf) {
            take(h, buf, 0); /* too long for any record: counted as unreadable */
            continue;
        }
        take(h, buf, (size_t)n);
    }
}

static json_t *entry_json(const struct lz_refusal_entry *e) {
    /* The texts of `why` and `kind` are given once, in "reasons" and
     * "hints": the reply holds more entries. */
    json_t *o = json_pack("{s:I,s:I,s:s,s:s,s:s,s:s,s:s}", "seq", (json_int_t)e->seq, "at_ms", (json_int_t)e->at_ms,
                          "kind", lz_refusal_kind_name(e->kind), "why", lz_refusal_why_name(e->why), "op",
                          lz_refusal_op_name(e->op), "error", strerror(e->err), "path", e->path);
    if (o && e->path2)
        json_object_set_new(o, "path2", json_string(e->path2));
    if (o && e->detail)
        json_object_set_new(o, "detail", json_string(e->detail));
    return o;
}

char *hc_ref_report(struct hc *h, size_t cap) {
    static const struct lz_refusal_history none;
    const struct lz_refusal_history *hs = h->ref ? &h->ref->hist : &none;
    json_t *o = json_object();
    json_object_set_new(o, "total", json_integer((json_int_t)hs->total));
    json_object_set_new(o, "dropped", json_integer((json_int_t)hs->dropped));
    json_t *bk = json_object();
    for (unsigned k = 0; k < LZ_REFK_COUNT; k++)
        if (hs->by_kind[k])
            json_object_set_new(bk, lz_refusal_kind_name((enum lz_refusal_kind)k),
                                json_integer((json_int_t)hs->by_kind[k]));
    json_object_set_new(o, "by_kind", bk);
    json_t *reasons = json_object(), *hints = json_object();
    for (unsigned w = 1; w < LZ_REFW_END; w++)
        if (strcmp(lz_refusal_why_name((uint8_t)w), "other") != 0)
            json_object_set_new(reasons, lz_refusal_why_name((uint8_t)w), json_string(lz_refusal_why_text((uint8_t)w)));
    for (unsigned k = 0; k < LZ_REFK_COUNT; k++)
        json_object_set_new(hints, lz_refusal_kind_name((enum lz_refusal_kind)k),
                            json_string(lz_refusal_kind_hint((enum lz_refusal_kind)k)));
    json_object_set_new(o, "reasons", reasons);
    json_object_set_new(o, "hints", hints);
    /* The newest entries that fit, oldest first. */
    char *fixed = json_dumps(o, JSON_COMPACT);
    size_t used = fixed ? strlen(fixed) + 64 : cap;
    free(fixed);
    size_t budget = cap > used ? cap - used : 0, first = hs->n;
    json_t *items[LZ_REFUSAL_HISTORY];
    while (first > 0) {
        json_t *it = entry_json(lz_refusal_history_at(hs, first - 1));
        char *t = it ? json_dumps(it, JSON_COMPACT) : NULL;
        size_t l = t ? strlen(t) + 1 : SIZE_MAX;
        free(t);
        if (!it || l > budget) {
            json_decref(it);
            break;
        }
        budget -= l;
        items[--first] = it;
    }
    json_t *arr = json_array();
    for (size_t i = first; i < hs->n; i++)
        json_array_append_new(arr, items[i]);
    json_object_set_new(o, "kept", json_integer((json_int_t)(hs->n - first)));
    json_object_set_new(o, "events", arr);
    char *txt = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return txt;
}
