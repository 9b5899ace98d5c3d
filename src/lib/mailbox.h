/* mailbox.h — the escalation mailbox directory (docs/escalation.md).
 *
 * Per Domain generation the Host Coordinator keeps <gen dir>/mailbox/
 * (0700) with req/ (sandbox -> host: escalation-request, chunk-ack,
 * cancel, stdin-chunk) and res/ (host -> sandbox: request-ack, developer-decision,
 * result-chunk, result-end), bound into the sandbox at
 * /run/lazaret/mailbox (req/ read-write, res/ read-only), and the HC's
 * public key in hc.pub (64 hex + newline).
 *
 * A writer writes ".tmp-<random>" in the directory and renames it to
 *
 *     <request-id: 32 lowercase hex>.<record-name>.<seq: decimal, no leading zeros>
 *
 * (seq 0 for single records). A reader takes only names of exactly that
 * form (lz_mbox_name_parse), opens each relative to the directory fd with
 * O_RDONLY|O_NOFOLLOW|O_NONBLOCK, refuses anything but a regular file with
 * one link, bounds the size (LZ_RECORD_MAX) before reading, reads it once
 * and unlinks it (lz_mbox_take); only then are the bytes given to
 * lz_record_open. Names, owners, times and PIDs of the files are not
 * evidence of anything: only the signature inside is.
 *
 * Bound (docs/escalation.md, "The mailbox's bound"): req/ and res/ are
 * each a tmpfs of their own, mounted by the Runtime Supervisor in the
 * Domain's user and mount namespaces (supervisor.h) before the sandbox
 * starts, at most LZ_MBOX_TMPFS_BYTES and LZ_MBOX_TMPFS_INODES each. The
 * host's runtime directory only holds the empty mount points: a writer
 * past the bound gets ENOSPC, whatever it holds open or renames, and a
 * full req/ (the sandbox's) never stops the coordinator's writes to res/.
 * The coordinator reaches both through the directory descriptors the
 * Supervisor passes back (rschan.h, MAILBOX).
 *
 * This module is shared by the Host Coordinator and the static Escalation
 * Client (src/escalate/), so it depends on util.c and record.c only.
 */
#pragma once

#include "record.h"

#define LZ_MBOX_NAME_MAX 96

/* The legitimate maximum of one direction at once: LZ_MBOX_LIVE_MAX live
 * or lingering requests (escalation.c), each with at most LZ_MBOX_PER_REQ
 * records of at most LZ_RECORD_MAX bytes: req/ holds the request, one
 * chunk-ack, one cancel and LZ_RECORD_STDIN_WINDOW stdin-chunks; res/ the
 * request-ack, the decision, the result-end and the window of 8
 * result-chunks; and one temporary file being written. 24 MiB each. */
#define LZ_MBOX_LIVE_MAX 32
#define LZ_MBOX_PER_REQ 12
#define LZ_MBOX_TMPFS_BYTES ((unsigned long long)LZ_MBOX_LIVE_MAX * LZ_MBOX_PER_REQ * LZ_RECORD_MAX)
#define LZ_MBOX_TMPFS_INODES 1024 /* 384 records with margin; the root directory counts */

struct lz_mbox_name {
    uint8_t request_id[LZ_RECORD_ID_LEN];
    unsigned kind; /* enum lz_record_kind */
    uint64_t seq;
};

/* 0 when name is exactly "<32 lowercase hex>.<record-name>.<seq>" with a
 * known record name and a canonical decimal seq (no sign, no leading zero,
 * fits u64); -EINVAL otherwise (temporary files, anything else). */
int lz_mbox_name_parse(const char *name, struct lz_mbox_name *ret);
/* Formats the name of n into buf (LZ_MBOX_NAME_MAX). */
int lz_mbox_name_format(const struct lz_mbox_name *n, char *buf, size_t cap);

/* Why lz_mbox_take refused an entry (for the log). */
enum lz_mbox_refusal {
    LZ_MBOX_OK = 0,
    LZ_MBOX_GONE,        /* no such entry (already taken) */
    LZ_MBOX_SYMLINK,     /* a symbolic link */
    LZ_MBOX_NOT_REGULAR, /* directory, FIFO, socket, device */
    LZ_MBOX_LINKED,      /* a regular file with more than one link */
    LZ_MBOX_TOO_LARGE,   /* larger than LZ_RECORD_MAX */
    LZ_MBOX_IO,          /* open/read error */
};
const char *lz_mbox_refusal_name(enum lz_mbox_refusal r);

/* Takes the entry `name` of dirfd: opened without following a symlink and
 * without blocking on a FIFO, checked (regular, one link, size bound),
 * read once into buf (cap >= LZ_RECORD_MAX), its pages freed (as
 * lz_mbox_remove), and removed whether it was accepted or refused (a refused directory is removed recursively). 0 with
 * *ret_len, or -EPERM / -ENOENT / -EIO with *ret_why saying why. */
int lz_mbox_take(int dirfd, const char *name, uint8_t *buf, size_t cap, size_t *ret_len, enum lz_mbox_refusal *ret_why);

/* Removes the regular file `name` of dirfd (or whatever else it is, as
 * unlinkat), its pages freed first (truncated through its own inode): a
 * descriptor the sandbox still holds keeps nothing of it. 0 or -errno. */
int lz_mbox_remove(int dirfd, const char *name);

/* Writes bytes as `name` in dirfd: ".tmp-<random>" (O_EXCL, mode 0644 so
 * the sandbox's reader may open it), then rename. No fsync: the mailbox
 * lives in the runtime directory and does not outlive the generation. */
int lz_mbox_put(int dirfd, const char *name, const uint8_t *bytes, size_t len);

/* Seals rec with sk and puts it under its canonical name (kind, seq from
 * rec: lz_record_seq, the chunk's seq for a result-chunk or stdin-chunk,
 * 0 otherwise). */
int lz_mbox_put_record(int dirfd, const uint8_t sk[crypto_sign_SECRETKEYBYTES], const struct lz_record *rec,
                       struct lz_error *err);

/* Hex of a 16-byte ID (33 bytes) and its parse (0 or -EINVAL). */
void lz_mbox_id_hex(const uint8_t id[LZ_RECORD_ID_LEN], char out[2 * LZ_RECORD_ID_LEN + 1]);
int lz_mbox_hex_decode(const char *hex, uint8_t *out, size_t n);
