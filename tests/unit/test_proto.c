/* Unit tests for the session protocol codec (proto.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "proto.h"

#include <sys/socket.h>

static void fill_hello(struct lz_hello *h, char **argv, size_t argc, char **envv, size_t envc) {
    memset(h, 0, sizeof *h);
    h->version = LZ_PROTO_VERSION;
    for (int i = 0; i < 32; i++) {
        h->domain_id[i] = (uint8_t)i;
        h->fingerprint[i] = (uint8_t)(255 - i);
    }
    h->flags = LZ_HELLO_TTY;
    h->rows = 40;
    h->cols = 132;
    h->argv = argv;
    h->argc = argc;
    h->envv = envv;
    h->envc = envc;
    h->cwd = (char *)"/workspace/sub";
}

static void test_roundtrip(void **state) {
    (void)state;
    char *argv[] = { "/bin/sh", "-c", "echo 'x y'", NULL };
    char *envv[] = { "TERM=xterm-256color", "LANG=C.UTF-8", NULL };
    struct lz_hello h, d;
    fill_hello(&h, argv, 3, envv, 2);
    uint8_t buf[LZ_PROTO_MAX];
    size_t len;
    assert_int_equal(lz_hello_encode(&h, buf, sizeof buf, &len), 0);
    struct lz_error err = { 0 };
    assert_int_equal(lz_hello_decode(buf, len, &d, &err), 0);
    assert_int_equal(d.version, LZ_PROTO_VERSION);
    assert_memory_equal(d.domain_id, h.domain_id, 32);
    assert_memory_equal(d.fingerprint, h.fingerprint, 32);
    assert_int_equal(d.rows, 40);
    assert_int_equal(d.cols, 132);
    assert_int_equal(d.argc, 3);
    assert_string_equal(d.argv[2], "echo 'x y'");
    assert_null(d.argv[3]);
    assert_int_equal(d.envc, 2);
    assert_string_equal(d.envv[1], "LANG=C.UTF-8");
    assert_string_equal(d.cwd, "/workspace/sub");
    lz_hello_clear(&d);
}

/* The start directory: /workspace or below it in plain segments. */
static void test_cwd_checked(void **state) {
    (void)state;
    char *argv[] = { "true", NULL };
    char *envv[] = { "TERM=dumb", NULL };
    static const char *const good[] = { "", "/workspace", "/workspace/a", "/workspace/packages/web",
                                        "/workspace/.x/..y/a b" };
    static const char *const bad[] = { "/",
                                       "/etc",
                                       "workspace",
                                       "/workspace2",
                                       "/workspace/",
                                       "/workspace//a",
                                       "/workspace/./a",
                                       "/workspace/..",
                                       "/workspace/a/../../etc",
                                       "/workspace/a/" };
    uint8_t buf[LZ_PROTO_MAX];
    size_t len;
    struct lz_hello h, d;
    for (size_t i = 0; i < sizeof good / sizeof *good; i++) {
        fill_hello(&h, argv, 1, envv, 1);
        h.cwd = (char *)good[i];
        assert_int_equal(lz_hello_encode(&h, buf, sizeof buf, &len), 0);
        assert_int_equal(lz_hello_decode(buf, len, &d, NULL), 0);
        assert_string_equal(d.cwd, good[i]);
        lz_hello_clear(&d);
    }
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        fill_hello(&h, argv, 1, envv, 1);
        h.cwd = (char *)bad[i];
        assert_int_equal(lz_hello_encode(&h, buf, sizeof buf, &len), 0);
        assert_int_equal(lz_hello_decode(buf, len, &d, NULL), -EBADMSG);
    }
}

static void test_every_truncation_refused(void **state) {
    (void)state;
    char *argv[] = { "true", NULL };
    char *envv[] = { "TERM=dumb", NULL };
    struct lz_hello h, d;
    fill_hello(&h, argv, 1, envv, 1);
    uint8_t buf[LZ_PROTO_MAX];
    size_t len;
    assert_int_equal(lz_hello_encode(&h, buf, sizeof buf, &len), 0);
    for (size_t cut = 0; cut < len; cut++) {
        struct lz_error err = { 0 };
        assert_true(lz_hello_decode(buf, cut, &d, &err) < 0);
        assert_true(err.msg[0] != '\0');
    }
    /* A trailing byte is refused too. */
    buf[len] = 0;
    assert_true(lz_hello_decode(buf, len + 1, &d, NULL) < 0);
}

static void test_bad_fields_refused(void **state) {
    (void)state;
    char *argv[] = { "true", NULL };
    char *envv[] = { "TERM=dumb", NULL };
    struct lz_hello h, d;
    uint8_t buf[LZ_PROTO_MAX];
    size_t len;
    struct lz_error err = { 0 };

    /* Wrong version names both versions. */
    fill_hello(&h, argv, 1, envv, 1);
    h.version = 99;
    assert_int_equal(lz_hello_encode(&h, buf, sizeof buf, &len), 0);
    assert_int_equal(lz_hello_decode(buf, len, &d, &err), -EPROTONOSUPPORT);
    assert_non_null(strstr(err.msg, "protocol 99"));

    /* Unknown flag bits. */
    fill_hello(&h, argv, 1, envv, 1);
    h.flags = 0x80;
    assert_int_equal(lz_hello_encode(&h, buf, sizeof buf, &len), 0);
    assert_true(lz_hello_decode(buf, len, &d, NULL) < 0);

    /* An environment entry without '='. */
    char *bad_env[] = { "NOEQUALS", NULL };
    fill_hello(&h, argv, 1, bad_env, 1);
    assert_int_equal(lz_hello_encode(&h, buf, sizeof buf, &len), 0);
    assert_true(lz_hello_decode(buf, len, &d, NULL) < 0);

    /* A huge argc claimed with no bytes behind it. */
    fill_hello(&h, argv, 0, envv, 0);
    assert_int_equal(lz_hello_encode(&h, buf, sizeof buf, &len), 0);
    size_t argc_off = LZ_PROTO_HDR + 4 + 64 + 4 + 4;
    lz_put_u32(buf + argc_off, 1000);
    assert_true(lz_hello_decode(buf, len, &d, NULL) < 0);
    lz_put_u32(buf + argc_off, 0xffffffffu);
    assert_int_equal(lz_hello_decode(buf, len, &d, NULL), -E2BIG);

    /* A NUL inside a string. */
    fill_hello(&h, argv, 1, envv, 0);
    assert_int_equal(lz_hello_encode(&h, buf, sizeof buf, &len), 0);
    buf[argc_off + 4 + 4 + 1] = '\0'; /* "true" -> "t\0ue" */
    assert_true(lz_hello_decode(buf, len, &d, NULL) < 0);
}

static void test_encode_too_big(void **state) {
    (void)state;
    static char big[LZ_PROTO_STR_MAX + 2];
    memset(big, 'a', sizeof big - 1);
    char *argv[] = { big, NULL };
    struct lz_hello h;
    fill_hello(&h, argv, 1, NULL, 0);
    uint8_t buf[LZ_PROTO_MAX];
    size_t len;
    assert_int_equal(lz_hello_encode(&h, buf, sizeof buf, &len), -E2BIG);
}

static void test_control_decode(void **state) {
    (void)state;
    uint8_t b[LZ_PROTO_HDR + 4] = { LZ_MSG_STOP };
    uint8_t type = 0;
    uint32_t flags = 0;
    lz_put_u32(b + LZ_PROTO_HDR, LZ_STOP_FORCE | LZ_STOP_IF_LINGERING);
    assert_int_equal(lz_control_decode(b, sizeof b, &type, &flags), 0);
    assert_int_equal(type, LZ_MSG_STOP);
    assert_int_equal(flags, LZ_STOP_FORCE | LZ_STOP_IF_LINGERING);
    lz_put_u32(b + LZ_PROTO_HDR, 0x4); /* an unknown flag */
    assert_int_equal(lz_control_decode(b, sizeof b, &type, &flags), -EBADMSG);
    assert_int_equal(lz_control_decode(b, LZ_PROTO_HDR + 3, &type, &flags), -EBADMSG);
    b[0] = LZ_MSG_STATUS;
    assert_int_equal(lz_control_decode(b, LZ_PROTO_HDR, &type, &flags), 0);
    assert_int_equal(type, LZ_MSG_STATUS);
    assert_int_equal(lz_control_decode(b, sizeof b, &type, &flags), -EBADMSG);
    b[0] = LZ_MSG_NET; /* `lazaret net`: no payload */
    assert_int_equal(lz_control_decode(b, LZ_PROTO_HDR, &type, &flags), 0);
    assert_int_equal(type, LZ_MSG_NET);
    assert_int_equal(lz_control_decode(b, sizeof b, &type, &flags), -EBADMSG);
    b[0] = LZ_MSG_NET_REPLY; /* a reply is not a request */
    assert_int_equal(lz_control_decode(b, LZ_PROTO_HDR, &type, &flags), -EBADMSG);
}

static void test_seqpacket_send_recv(void **state) {
    (void)state;
    int sp[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp), 0);
    assert_int_equal(lz_msg_send(sp[0], LZ_MSG_DATA, 1, "hello", 5), 0);
    uint8_t buf[LZ_PROTO_MAX];
    ssize_t n = lz_msg_recv(sp[1], buf, sizeof buf);
    assert_int_equal(n, LZ_PROTO_HDR + 5);
    assert_int_equal(buf[0], LZ_MSG_DATA);
    assert_int_equal(buf[1], 1);
    assert_memory_equal(buf + LZ_PROTO_HDR, "hello", 5);
    /* Oversized payloads are refused before sending. */
    static uint8_t huge[LZ_PROTO_MAX];
    assert_int_equal(lz_msg_send(sp[0], LZ_MSG_DATA, 1, huge, sizeof huge), -EMSGSIZE);
    /* A message longer than the receive buffer is refused, not cut. */
    assert_int_equal(lz_msg_send(sp[0], LZ_MSG_DATA, 1, huge, 100), 0);
    assert_int_equal(lz_msg_recv(sp[1], buf, 50), -EBADMSG);
    close(sp[0]);
    assert_int_equal(lz_msg_recv(sp[1], buf, sizeof buf), 0);
    close(sp[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cwd_checked),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_every_truncation_refused),
        cmocka_unit_test(test_bad_fields_refused),
        cmocka_unit_test(test_encode_too_big),
        cmocka_unit_test(test_seqpacket_send_recv),
        cmocka_unit_test(test_control_decode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
