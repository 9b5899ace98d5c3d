/* credgate.c — see credgate.h. */
#include "credgate.h"
#include "credstream.h"
#include "gateproto.h"
#include "minica.h"
#include "util.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>

#define CG_READ_MS 10000 /* the whole configuration */
#define CG_IO 16384      /* one read of a TLS stream */
#define CG_ROUNDS 32     /* moves before another connection gets a turn */

struct cg_host {
    char name[LZ_HOSTNAME_MAX + 1];
    size_t n;
    struct lz_cred_bind binds[LZ_GCFG_CREDS_MAX];
    char *rec[LZ_GCFG_CREDS_MAX]; /* each bind's record (its strings point into it); wiped when freed */
    size_t rec_len[LZ_GCFG_CREDS_MAX];
    const char *refs[LZ_GCFG_CREDS_MAX][LZ_CRED_PUSH_REFS_MAX];
    EVP_PKEY *leaf_key;
    X509 *leaf;
};

static struct cg_host hosts[LZ_GCFG_CREDS_MAX];
static size_t n_hosts;
static SSL_CTX *up_ctx, *down_ctx;
static struct lz_minica *ca;
static cg_report_fn report;
static uint8_t iobuf[CG_IO];

size_t cg_hosts(void) { return n_hosts; }

int cg_host(const char *sni) {
    for (size_t i = 0; sni && i < n_hosts; i++)
        if (!strcmp(hosts[i].name, sni))
            return (int)i;
    return -1;
}

void cg_set_report(cg_report_fn fn) { report = fn; }

/* ---- configuration ---- */

static int fail(char *msg, size_t cap, const char *what) {
    unsigned long e = ERR_get_error();
    char q[256] = "";
    if (e)
        ERR_error_string_n(e, q, sizeof q);
    ERR_clear_error();
    snprintf(msg, cap, "%s%s%s", what, q[0] ? ": " : "", q);
    return -1;
}

/* A NUL-terminated string at *p of what is left of [*p, end). */
static const char *next_str(char **p, char *end) {
    char *s = *p;
    char *z = s < end ? memchr(s, '\0', (size_t)(end - s)) : NULL;
    if (!z)
        return NULL;
    *p = z + 1;
    return s;
}

static int add_cred(char *rec, size_t len, char *msg, size_t cap) {
    char *p = rec, *end = rec + len;
    const char *f[10];
    for (int i = 0; i < 10; i++)
        if (!(f[i] = next_str(&p, end))) {
            snprintf(msg, cap, "a malformed credential record");
            return -1;
        }
    int h = cg_host(f[1]);
    if (h < 0) {
        if (n_hosts == LZ_GCFG_CREDS_MAX || strlen(f[1]) > LZ_HOSTNAME_MAX) {
            snprintf(msg, cap, "too many credential hosts");
            return -1;
        }
        h = (int)n_hosts++;
        snprintf(hosts[h].name, sizeof hosts[h].name, "%s", f[1]);
    }
    struct cg_host *H = &hosts[h];
    if (H->n == LZ_GCFG_CREDS_MAX) {
        snprintf(msg, cap, "too many credentials for %s", H->name);
        return -1;
    }
    struct lz_cred_bind *b = &H->binds[H->n];
    b->header = f[2];
    b->format = !strcmp(f[3], "basic") ? LZ_CRED_BASIC : LZ_CRED_TEMPLATE;
    b->prefix = f[4];
    b->suffix = f[5];
    b->username = f[6];
    b->placeholder = f[7];
    b->value = (const uint8_t *)f[8];
    b->value_len = strlen(f[8]);
    b->push_delete = !strcmp(f[9], "1");
    size_t nr = 0;
    const char *r;
    while (nr < LZ_CRED_PUSH_REFS_MAX && (r = next_str(&p, end)))
        H->refs[H->n][nr++] = r;
    b->push_refs = nr ? H->refs[H->n] : NULL;
    b->n_push_refs = nr;
    H->rec[H->n] = rec;
    H->rec_len[H->n] = len;
    H->n++;
    return 0;
}

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned inlen, void *arg) {
    (void)ssl;
    (void)arg;
    /* HTTP/1.1 only: the request reader speaks nothing else. A client
     * that offers no http/1.1 (h2 only) gets no_application_protocol. */
    for (unsigned i = 0; i < inlen;) {
        unsigned l = in[i];
        if (i + 1 + l > inlen)
            break;
        if (l == 8 && !memcmp(in + i + 1, "http/1.1", 8)) {
            *out = in + i + 1;
            *outlen = 8;
            return SSL_TLSEXT_ERR_OK;
        }
        i += 1 + l;
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL;
}

static int read_all(int fd, uint8_t **ret, size_t *ret_len, char *msg, size_t cap) {
    size_t n = 0, c = 65536;
    uint8_t *b = malloc(c);
    long deadline = lz_now_ms() + CG_READ_MS;
    for (;;) {
        if (!b) {
            snprintf(msg, cap, "out of memory");
            return -1;
        }
        if (n == c) {
            if (c >= LZ_GCFG_MAX) {
                free(b);
                snprintf(msg, cap, "the configuration is larger than %u bytes", LZ_GCFG_MAX);
                return -1;
            }
            c *= 2;
            uint8_t *nb = realloc(b, c);
            if (!nb)
                free(b);
            b = nb;
            continue;
        }
        long left = deadline - lz_now_ms();
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (left <= 0 || poll(&p, 1, (int)left) == 0) {
            free(b);
            snprintf(msg, cap, "the configuration did not arrive in time");
            return -1;
        }
        ssize_t k = read(fd, b + n, c - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            free(b);
            snprintf(msg, cap, "cannot read the configuration: %s", strerror(errno));
            return -1;
        }
        if (k == 0)
            break;
        n += (size_t)k;
    }
    *ret = b;
    *ret_len = n;
    return 0;
}

int cg_config_read(int fd, char *msg, size_t cap) {
    uint8_t *buf = NULL;
    size_t len = 0;
    if (read_all(fd, &buf, &len, msg, cap) < 0)
        return -1;
    const uint8_t *key = NULL, *cert = NULL;
    size_t kl = 0, cl = 0;
    X509_STORE *store = X509_STORE_new();
    size_t n_trust = 0;
    bool end = false;
    int r = 0;
    for (size_t o = 0; !end && r == 0;) {
        if (len - o < 5) {
            r = -1;
            snprintf(msg, cap, "the configuration ends in the middle of a record");
            break;
        }
        uint8_t type = buf[o];
        uint32_t l;
        memcpy(&l, buf + o + 1, 4);
        o += 5;
        if (l > len - o) {
            r = -1;
            snprintf(msg, cap, "a configuration record is longer than what is left");
            break;
        }
        const uint8_t *d = buf + o;
        o += l;
        switch (type) {
        case LZ_GCFG_END: end = true; break;
        case LZ_GCFG_CA_KEY:
            key = d;
            kl = l;
            break;
        case LZ_GCFG_CA_CERT:
            cert = d;
            cl = l;
            break;
        case LZ_GCFG_TRUST_PEM: {
            BIO *bio = BIO_new_mem_buf(d, (int)l);
            X509 *x;
            while (bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
                if (X509_STORE_add_cert(store, x) == 1)
                    n_trust++;
                X509_free(x);
            }
            ERR_clear_error(); /* the end of the text, or a block not a certificate */
            BIO_free(bio);
            break;
        }
        case LZ_GCFG_CRED: {
            char *rec = malloc(l + 1);
            if (!rec) {
                r = -1;
                snprintf(msg, cap, "out of memory");
                break;
            }
            memcpy(rec, d, l);
            rec[l] = '\0';
            r = add_cred(rec, l, msg, cap);
            if (r < 0)
                free(rec);
            break;
        }
        default: r = -1; snprintf(msg, cap, "a configuration record of unknown type %u", type);
        }
    }
    if (r == 0 && (!end || !key || !cert || !n_hosts)) {
        r = -1;
        snprintf(msg, cap, "the configuration lacks %s",
                 !end                ? "its end"
                     : !key || !cert ? "the Domain CA"
                                     : "any credential");
    }
    if (r == 0) {
        const char *names[LZ_GCFG_CREDS_MAX];
        for (size_t i = 0; i < n_hosts; i++)
            names[i] = hosts[i].name;
        struct lz_error e = { 0 };
        if (lz_minica_import(names, n_hosts, key, kl, cert, cl, &ca, &e) < 0) {
            r = -1;
            snprintf(msg, cap, "the Domain CA: %s", e.msg);
        }
        for (size_t i = 0; r == 0 && i < n_hosts; i++)
            if (lz_minica_leaf(ca, hosts[i].name, &hosts[i].leaf_key, &hosts[i].leaf, &e) < 0) {
                r = -1;
                snprintf(msg, cap, "the certificate for %s: %s", hosts[i].name, e.msg);
            }
    }
    if (key)
        explicit_bzero((void *)key, kl);
    explicit_bzero(buf, len); /* the values were copied into their records */
    free(buf);
    if (r < 0) {
        X509_STORE_free(store);
        return -1;
    }
    /* Towards the real servers: the host's trust store, the name checked
     * (SSL_set1_host), TLS 1.2 at least, HTTP/1.1 by ALPN. */
    up_ctx = SSL_CTX_new(TLS_client_method());
    if (!up_ctx) {
        X509_STORE_free(store);
        return fail(msg, cap, "cannot make the TLS client context");
    }
    SSL_CTX_set_cert_store(up_ctx, store);
    SSL_CTX_set_verify(up_ctx, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_min_proto_version(up_ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(up_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    static const unsigned char alpn[] = "\x08http/1.1";
    if (SSL_CTX_set_alpn_protos(up_ctx, alpn, sizeof alpn - 1) != 0)
        return fail(msg, cap, "cannot set ALPN");
    /* Towards the sandbox: the leaf of the Domain CA for the host. No
     * session tickets or cache: nothing of a connection outlives it. */
    down_ctx = SSL_CTX_new(TLS_server_method());
    if (!down_ctx)
        return fail(msg, cap, "cannot make the TLS server context");
    SSL_CTX_set_min_proto_version(down_ctx, TLS1_2_VERSION);
    SSL_CTX_set_mode(down_ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_session_cache_mode(down_ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(down_ctx, 0);
    SSL_CTX_set_options(down_ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_options(up_ctx, SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_alpn_select_cb(down_ctx, alpn_select, NULL);
    /* The random generator seeded now, while getrandom is certain. */
    uint8_t warm[16];
    if (RAND_bytes(warm, sizeof warm) != 1)
        return fail(msg, cap, "no random bytes");
    return 0;
}

/* ---- connections ---- */

enum cg_phase { P_HANDSHAKES, P_RELAY };

struct cg_conn {
    enum cg_phase phase;
    int host;
    int cfd, ufd;
    SSL *us, *cs;
    struct lz_credreq *rq;
    struct lz_credscan *sc;
    struct lz_credout to_up, to_down;
    size_t up_off, down_off;
    bool c_eof, u_eof;       /* read side ended */
    bool refusing;           /* an answer of the gate's own goes out, then the end */
    bool down_shut;          /* close_notify sent to the sandbox */
    bool up_done, down_done; /* the handshakes */
    bool up_failed;
    uint64_t pushes; /* pushes already reported */
    uint32_t addr;
    uint16_t port;
    char why[LZ_CRED_WHY_MAX + 64];
};

struct cg_conn *cg_conn_new(int host, int cfd, int ufd, uint32_t addr, uint16_t port) {
    if (host < 0 || (size_t)host >= n_hosts)
        return NULL;
    struct cg_conn *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    struct cg_host *H = &hosts[host];
    t->host = host;
    t->cfd = cfd;
    t->ufd = ufd;
    t->addr = addr;
    t->port = port;
    t->us = SSL_new(up_ctx);
    t->cs = SSL_new(down_ctx);
    if (!t->us || !t->cs || SSL_set_fd(t->us, ufd) != 1 || SSL_set_fd(t->cs, cfd) != 1 ||
        SSL_set_tlsext_host_name(t->us, H->name) != 1 || SSL_set1_host(t->us, H->name) != 1 ||
        SSL_use_certificate(t->cs, H->leaf) != 1 || SSL_use_PrivateKey(t->cs, H->leaf_key) != 1) {
        ERR_clear_error();
        cg_conn_free(t);
        return NULL;
    }
    X509_VERIFY_PARAM_set_hostflags(SSL_get0_param(t->us), X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    SSL_set_connect_state(t->us);
    SSL_set_accept_state(t->cs);
    return t;
}

void cg_conn_free(struct cg_conn *t) {
    if (!t)
        return;
    SSL_free(t->us);
    SSL_free(t->cs);
    lz_credreq_free(t->rq);
    lz_credscan_free(t->sc);
    free(t->to_up.p);
    free(t->to_down.p);
    free(t);
}

bool cg_conn_handshaking(const struct cg_conn *t) { return t->phase != P_RELAY; }
const char *cg_conn_why(const struct cg_conn *t) { return t->why; }

static void tell(struct cg_conn *t, bool push, const char *why) {
    if (report)
        report(t->addr, t->port, hosts[t->host].name, push, why);
}

static enum cg_step reset(struct cg_conn *t, const char *what, const char *detail) {
    snprintf(t->why, sizeof t->why, "%s%s", what, detail);
    ERR_clear_error();
    return CG_RESET;
}

/* The reason OpenSSL gives for a failed handshake. */
static const char *ssl_reason(SSL *s, char *buf, size_t cap) {
    long v = SSL_get_verify_result(s);
    if (v != X509_V_OK) {
        snprintf(buf, cap, "certificate verify failed: %s", X509_verify_cert_error_string(v));
        return buf;
    }
    unsigned long e = ERR_peek_last_error();
    if (e)
        ERR_error_string_n(e, buf, cap);
    else
        snprintf(buf, cap, "the connection ended");
    return buf;
}

static bool would_block(SSL *s, int r) {
    int e = SSL_get_error(s, r);
    return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE;
}

/* The pushes the last feed read, each ref to the audit. */
static void tell_pushes(struct cg_conn *t) {
    struct lz_credreq_counts k;
    lz_credreq_counts(t->rq, &k);
    if (k.pushes == t->pushes)
        return;
    t->pushes = k.pushes;
    unsigned n = lz_credreq_push_n(t->rq);
    for (unsigned i = 0; i < n; i++) {
        struct lz_cred_push_cmd c;
        if (lz_credreq_push_get(t->rq, i, &c) < 0)
            continue;
        char m[200];
        int rl = c.ref_len > 120 ? 120 : (int)c.ref_len;
        snprintf(m, sizeof m, "%.*s %.12s..%.12s %s%s", rl, (const char *)c.ref, (const char *)c.old_id,
                 (const char *)c.new_id, c.allowed ? "let through" : "refused: ", c.allowed ? "" : c.why);
        tell(t, true, m);
    }
}

/* Writes what is queued in o (from *off) to s; true if it moved bytes.
 * -1 in *err on a broken connection. */
static bool flush(SSL *s, struct lz_credout *o, size_t *off, int *err) {
    if (*off >= o->len)
        return false;
    int k = SSL_write(s, o->p + *off, (int)(o->len - *off > INT32_MAX ? INT32_MAX : o->len - *off));
    if (k > 0) {
        *off += (size_t)k;
        if (*off == o->len)
            o->len = *off = 0;
        return true;
    }
    if (!would_block(s, k))
        *err = -1;
    return false;
}

static enum cg_step relay(struct cg_conn *t) {
    char why[LZ_CRED_WHY_MAX];
    for (int round = 0; round < CG_ROUNDS; round++) {
        bool moved = false;
        int err = 0;
        moved |= flush(t->cs, &t->to_down, &t->down_off, &err);
        if (err)
            return reset(t, "", "the sandbox's connection broke");
        if (!t->refusing) {
            moved |= flush(t->us, &t->to_up, &t->up_off, &err);
            if (err)
                return reset(t, "", "the server's connection broke");
        }
        /* The gate's own answer is out: an orderly end. */
        if ((t->refusing || t->u_eof) && t->to_down.len == 0) {
            if (!t->down_shut) {
                SSL_shutdown(t->cs);
                t->down_shut = true;
            }
            return CG_END;
        }
        /* The sandbox's requests, one read at a time while the last is out. */
        if (!t->refusing && !t->c_eof && t->to_up.len == 0) {
            int k = SSL_read(t->cs, iobuf, sizeof iobuf);
            if (k > 0) {
                moved = true;
                int r = lz_credreq_feed(t->rq, iobuf, (size_t)k, &t->to_up, why);
                tell_pushes(t);
                if (r == -ENOMEM)
                    return reset(t, "", "out of memory");
                if (r < 0) {
                    snprintf(t->why, sizeof t->why, "%s", why);
                    tell(t, false, why);
                    t->refusing = true;
                    t->to_up.len = t->up_off = 0;
                    /* Git reads a refused push's answer; others get a 403. */
                    if (lz_credreq_push_report(t->rq, &t->to_down) < 0 && lz_cred_forbidden(why, &t->to_down) < 0)
                        return reset(t, "", "out of memory");
                    SSL_shutdown(t->us);
                    continue;
                }
            } else if (!would_block(t->cs, k)) {
                t->c_eof = true;
                moved = true;
                if (lz_credreq_end(t->rq, why) < 0)
                    snprintf(t->why, sizeof t->why, "%s", why); /* logged with the end */
                SSL_shutdown(t->us);                            /* close_notify: no more requests */
            }
        }
        /* The server's responses, through the scanner. */
        if (!t->refusing && !t->u_eof && t->to_down.len == 0) {
            int k = SSL_read(t->us, iobuf, sizeof iobuf);
            if (k > 0) {
                moved = true;
                int r = lz_credscan_feed(t->sc, iobuf, (size_t)k, &t->to_down);
                if (r == -EACCES) {
                    tell(t, false,
                         "the server sent the credential's value back: the connection was cut before it "
                         "reached the sandbox");
                    return reset(t, "", "the server sent the credential's value back");
                }
                if (r < 0)
                    return reset(t, "", "out of memory");
            } else if (!would_block(t->us, k)) {
                t->u_eof = true;
                moved = true;
                if (lz_credscan_end(t->sc, &t->to_down) < 0)
                    return reset(t, "", "the server's last bytes were refused");
            }
        }
        if (t->c_eof && t->u_eof && t->to_down.len == 0 && t->to_up.len == 0)
            return CG_END;
        if (!moved)
            return CG_WAIT;
    }
    return CG_AGAIN;
}

/* The two handshakes run side by side: the sandbox's does not wait for
 * the server's (one round trip less before the first request). */
static enum cg_step handshakes(struct cg_conn *t) {
    char m[200];
    if (!t->up_done && !t->up_failed) {
        int k = SSL_connect(t->us);
        if (k == 1)
            t->up_done = true;
        else if (!would_block(t->us, k)) {
            t->up_failed = true;
            snprintf(t->why, sizeof t->why, "the server's TLS: %s", ssl_reason(t->us, m, sizeof m));
            ERR_clear_error();
        }
    }
    if (!t->down_done) {
        int k = SSL_accept(t->cs);
        if (k == 1)
            t->down_done = true;
        else if (!would_block(t->cs, k)) {
            unsigned long e = ERR_peek_last_error();
            if (ERR_GET_REASON(e) == SSL_R_NO_APPLICATION_PROTOCOL) {
                tell(t, false, "the client offered no HTTP/1.1 (ALPN): the gate speaks HTTP/1.1 only");
                return reset(t, "", "the client offered no HTTP/1.1 (ALPN)");
            }
            ERR_error_string_n(e, m, sizeof m);
            char w[300];
            snprintf(w, sizeof w, "the sandbox's TLS handshake failed (%s): does the client trust the Domain CA?",
                     e ? m : "the connection ended");
            tell(t, false, w);
            return reset(t, "", w);
        }
    }
    if (t->up_failed) {
        if (!t->down_done)
            return CG_WAIT; /* for an answer the client can read (the handshake deadline bounds it) */
        /* The sandbox's TLS is up: say why in an answer it can read. */
        char w[LZ_CRED_WHY_MAX];
        snprintf(w, sizeof w, "%s", t->why);
        tell(t, false, w);
        if (lz_cred_forbidden(w, &t->to_down) < 0)
            return reset(t, "", "out of memory");
        t->refusing = true;
        t->phase = P_RELAY;
        return relay(t);
    }
    if (!t->up_done || !t->down_done)
        return CG_WAIT;
    const struct cg_host *H = &hosts[t->host];
    if (lz_credreq_new(H->name, H->binds, H->n, &t->rq) < 0 || lz_credscan_new(H->binds, H->n, &t->sc) < 0)
        return reset(t, "", "cannot read this host's requests (out of memory, or a credential it refuses)");
    t->phase = P_RELAY;
    return relay(t);
}

enum cg_step cg_conn_step(struct cg_conn *t) {
    ERR_clear_error(); /* another connection's leftovers are not this one's reasons */
    if (t->phase != P_RELAY)
        return handshakes(t);
    return relay(t);
}
