/* Unit tests for the pure parts of FUSE over io_uring (fusering.c): a
 * ring entry rebuilt as the classic request, a reply split into an
 * entry, the refusals of lengths that disagree, the possible-CPU list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "fusering.h"

#define CAP 256

struct entry {
    struct lz_fuse_uring_req_header hdr;
    char mem[LZ_FRING_ROOM + CAP];
};

static char *payload(struct entry *e) { return e->mem + LZ_FRING_ROOM; }

static void set_in(struct entry *e, uint32_t opcode, uint32_t len, uint64_t unique, uint32_t psz) {
    struct fuse_in_header in = { .len = len, .opcode = opcode, .unique = unique, .nodeid = 1 };
    memcpy(e->hdr.in_out, &in, sizeof in);
    e->hdr.ring_ent_in_out.payload_sz = psz;
}

static void test_lookup(void **state) {
    (void)state;
    /* LOOKUP: no per-opcode struct, the name in the payload (the kernel's
     * len stays the classic 40 + "f\0"). */
    struct entry e = { 0 };
    set_in(&e, FUSE_LOOKUP, 42, 7, 2);
    memcpy(payload(&e), "f", 2);
    char *req;
    size_t len;
    assert_int_equal(lz_fring_request(&e.hdr, payload(&e), CAP, &req, &len), 0);
    assert_int_equal(len, 42);
    assert_ptr_equal(req, payload(&e) - sizeof(struct fuse_in_header));
    struct fuse_in_header in;
    memcpy(&in, req, sizeof in);
    assert_int_equal(in.opcode, FUSE_LOOKUP);
    assert_int_equal(in.unique, 7);
    assert_string_equal(req + sizeof in, "f");
    assert_int_equal(lz_fring_unique(&e.hdr), 7);
}

static void test_write(void **state) {
    (void)state;
    /* WRITE: fuse_write_in in op_in, the data in the payload. */
    struct entry e = { 0 };
    struct fuse_write_in w = { .fh = 3, .offset = 10, .size = 5 };
    memcpy(e.hdr.op_in, &w, sizeof w);
    set_in(&e, FUSE_WRITE, (uint32_t)(sizeof(struct fuse_in_header) + sizeof w + 5), 9, 5);
    memcpy(payload(&e), "hello", 5);
    char *req;
    size_t len;
    assert_int_equal(lz_fring_request(&e.hdr, payload(&e), CAP, &req, &len), 0);
    assert_int_equal(len, sizeof(struct fuse_in_header) + sizeof w + 5);
    struct fuse_write_in got;
    memcpy(&got, req + sizeof(struct fuse_in_header), sizeof got);
    assert_int_equal(got.offset, 10);
    assert_int_equal(got.size, 5);
    assert_memory_equal(req + sizeof(struct fuse_in_header) + sizeof w, "hello", 5);
    /* GETATTR: the struct only, no payload. */
    struct entry g = { 0 };
    struct fuse_getattr_in ga = { .fh = 1 };
    memcpy(g.hdr.op_in, &ga, sizeof ga);
    set_in(&g, FUSE_GETATTR, (uint32_t)(sizeof(struct fuse_in_header) + sizeof ga), 11, 0);
    assert_int_equal(lz_fring_request(&g.hdr, payload(&g), CAP, &req, &len), 0);
    assert_int_equal(len, 56);
}

static void test_refused(void **state) {
    (void)state;
    struct entry e = { 0 };
    char *req = NULL;
    size_t len = 0;
    /* shorter than the header */
    set_in(&e, FUSE_GETATTR, 39, 1, 0);
    assert_int_equal(lz_fring_request(&e.hdr, payload(&e), CAP, &req, &len), -EBADMSG);
    /* a payload longer than len leaves */
    set_in(&e, FUSE_LOOKUP, 42, 1, 3);
    assert_int_equal(lz_fring_request(&e.hdr, payload(&e), CAP, &req, &len), -EBADMSG);
    /* a payload longer than the buffer */
    set_in(&e, FUSE_WRITE, 40 + CAP + 1, 1, CAP + 1);
    assert_int_equal(lz_fring_request(&e.hdr, payload(&e), CAP, &req, &len), -EBADMSG);
    /* a per-opcode part longer than op_in */
    set_in(&e, FUSE_WRITE, 40 + 129, 1, 0);
    assert_int_equal(lz_fring_request(&e.hdr, payload(&e), CAP, &req, &len), -EBADMSG);
    /* huge len: the subtraction must not wrap */
    set_in(&e, FUSE_WRITE, UINT32_MAX, 1, CAP);
    assert_int_equal(lz_fring_request(&e.hdr, payload(&e), CAP, &req, &len), -EBADMSG);
    assert_null(req);
    /* the largest valid: 128 bytes of op_in and a full payload */
    set_in(&e, FUSE_WRITE, 40 + 128 + CAP, 1, CAP);
    assert_int_equal(lz_fring_request(&e.hdr, payload(&e), CAP, &req, &len), 0);
    assert_ptr_equal(req, e.mem);
}

static void test_reply(void **state) {
    (void)state;
    struct entry e = { 0 };
    struct fuse_out_header oh = { .len = 0, .error = 0, .unique = 5 };
    struct fuse_attr_out ao = { .attr_valid = 1 };
    char tail[3] = "xyz";
    struct iovec iov[3] = { { &oh, sizeof oh }, { &ao, sizeof ao }, { tail, 3 } };
    assert_int_equal(lz_fring_reply(&e.hdr, payload(&e), CAP, iov, 3), 0);
    struct fuse_out_header got;
    memcpy(&got, e.hdr.in_out, sizeof got);
    assert_int_equal(got.unique, 5);
    assert_int_equal(got.len, sizeof oh + sizeof ao + 3);
    assert_int_equal(e.hdr.ring_ent_in_out.payload_sz, sizeof ao + 3);
    assert_memory_equal(payload(&e), &ao, sizeof ao);
    assert_memory_equal(payload(&e) + sizeof ao, "xyz", 3);
    /* an error: the header alone */
    oh.error = -ENOENT;
    assert_int_equal(lz_fring_reply(&e.hdr, payload(&e), CAP, iov, 1), 0);
    memcpy(&got, e.hdr.in_out, sizeof got);
    assert_int_equal(got.error, -ENOENT);
    assert_int_equal(e.hdr.ring_ent_in_out.payload_sz, 0);
    /* too big for the payload: refused, the entry untouched */
    char big[CAP + 1] = { 0 };
    struct iovec bi[2] = { { &oh, sizeof oh }, { big, sizeof big } };
    assert_int_equal(lz_fring_reply(&e.hdr, payload(&e), CAP, bi, 2), -EMSGSIZE);
    assert_int_equal(e.hdr.ring_ent_in_out.payload_sz, 0);
    /* not a header */
    struct iovec bad[1] = { { &oh, sizeof oh - 1 } };
    assert_int_equal(lz_fring_reply(&e.hdr, payload(&e), CAP, bad, 1), -EBADMSG);
    lz_fring_error(&e.hdr, 77, -EIO);
    memcpy(&got, e.hdr.in_out, sizeof got);
    assert_int_equal(got.unique, 77);
    assert_int_equal(got.error, -EIO);
    assert_int_equal(got.len, sizeof got);
}

static void test_cpus(void **state) {
    (void)state;
    unsigned n = 0;
    assert_int_equal(lz_fring_possible_cpus("0-1\n", 1023, &n), 0);
    assert_int_equal(n, 2);
    assert_int_equal(lz_fring_possible_cpus("0", 1023, &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(lz_fring_possible_cpus("0-3,8-11\n", 1023, &n), 0);
    assert_int_equal(n, 8);
    static const char *const bad[] = { "", "\n", "-1", "3-1", "0-", "0,", "a", "0-1\nx", "0-1024", "0-1,0-1023" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(lz_fring_possible_cpus(bad[i], 1023, &n), -EINVAL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup), cmocka_unit_test(test_write), cmocka_unit_test(test_refused),
        cmocka_unit_test(test_reply),  cmocka_unit_test(test_cpus),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
