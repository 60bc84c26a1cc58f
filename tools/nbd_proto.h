/*
 * nbd_proto.h - the NBD protocol's wire constants, as the protocol document
 * (NetworkBlockDevice/nbd, doc/proto.md) names them: the fixed newstyle handshake, options
 * and their replies, transmission requests, replies and error values. All integers on the
 * wire are big-endian.
 *
 * Owns: numbers only. Used by the server (nbd_server.c) and by tests/test_nbd.c, which speaks
 * the protocol to it.
 */
#ifndef ZLFS_NBD_PROTO_H
#define ZLFS_NBD_PROTO_H

#define NBD_MAGIC 0x4e42444d41474943ull       /* "NBDMAGIC" */
#define NBD_IHAVEOPT 0x49484156454f5054ull    /* "IHAVEOPT" */
#define NBD_REP_MAGIC 0x0003e889045565a9ull   /* option replies */
#define NBD_REQUEST_MAGIC 0x25609513u
#define NBD_SIMPLE_REPLY_MAGIC 0x67446698u

/* handshake flags (server) and client flags */
#define NBD_FLAG_FIXED_NEWSTYLE (1u << 0)
#define NBD_FLAG_NO_ZEROES (1u << 1)
#define NBD_FLAG_C_FIXED_NEWSTYLE NBD_FLAG_FIXED_NEWSTYLE
#define NBD_FLAG_C_NO_ZEROES NBD_FLAG_NO_ZEROES

/* options */
#define NBD_OPT_EXPORT_NAME 1u
#define NBD_OPT_ABORT 2u
#define NBD_OPT_LIST 3u
#define NBD_OPT_STARTTLS 5u
#define NBD_OPT_INFO 6u
#define NBD_OPT_GO 7u
#define NBD_OPT_STRUCTURED_REPLY 8u

/* option reply types */
#define NBD_REP_ACK 1u
#define NBD_REP_SERVER 2u
#define NBD_REP_INFO 3u
#define NBD_REP_ERR_UNSUP (0x80000000u | 1u)
#define NBD_REP_ERR_INVALID (0x80000000u | 3u)
#define NBD_REP_ERR_TOO_BIG (0x80000000u | 9u)

/* NBD_REP_INFO types */
#define NBD_INFO_EXPORT 0u
#define NBD_INFO_BLOCK_SIZE 3u

/* transmission flags */
#define NBD_FLAG_HAS_FLAGS (1u << 0)
#define NBD_FLAG_READ_ONLY (1u << 1)
#define NBD_FLAG_SEND_FLUSH (1u << 2)
#define NBD_FLAG_SEND_FUA (1u << 3)
#define NBD_FLAG_SEND_TRIM (1u << 5)
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6)

/* request types and command flags */
#define NBD_CMD_READ 0u
#define NBD_CMD_WRITE 1u
#define NBD_CMD_DISC 2u
#define NBD_CMD_FLUSH 3u
#define NBD_CMD_TRIM 4u
#define NBD_CMD_WRITE_ZEROES 6u
#define NBD_CMD_FLAG_FUA (1u << 0)
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)

/* error values in replies */
#define NBD_EPERM 1u
#define NBD_EIO 5u
#define NBD_ENOMEM 12u
#define NBD_EINVAL 22u
#define NBD_ENOSPC 28u
#define NBD_EOVERFLOW 75u
#define NBD_ENOTSUP 95u

/* sizes on the wire */
#define NBD_REQUEST_SIZE 28u
#define NBD_REPLY_SIZE 16u
#define NBD_MAX_REQUEST (32u << 20) /* the largest request a server must take */

#endif
