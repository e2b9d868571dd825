/* The FUSE INIT handshake.  The daemon reads the kernel's INIT itself, lets
 * libfuse answer it into a pipe standing in for the session's descriptor
 * (so libfuse's own state is what it would be anyway), adds the flags of
 * the features libfuse 3.14 does not know, and writes that answer to
 * /dev/fuse.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ckptfs/log.h"
#include "handshake.h"
#include "mount.h"
#include "passthrough.h"
#include "uring.h"

/* Lets libfuse answer the INIT in buf into a pipe standing in for the
 * session's descriptor; *len gets the answer's length.  0, or -errno once
 * libfuse has answered the kernel itself (the pipe could not be set up). */
static int init_reply_from_libfuse(struct fuse_session *se, const struct fuse_buf *buf,
				   uint8_t *reply, size_t cap, size_t *len)
{
	int fd = fuse_session_fd(se), saved = -1, p[2];
	ssize_t got;

	if (pipe2(p, O_CLOEXEC) == 0) {
		saved = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (saved < 0 || dup3(p[1], fd, O_CLOEXEC) < 0) {
			int e = errno;

			if (saved >= 0)
				close(saved);
			close(p[0]);
			close(p[1]);
			errno = e;
			saved = -1;
		}
	}
	if (saved < 0) {
		int rc = -errno;

		fuse_session_process_buf(se, buf);	/* the kernel must get its answer */
		return rc;
	}
	fuse_session_process_buf(se, buf);
	/* The session's descriptor must come back whatever happened. */
	while (dup3(saved, fd, O_CLOEXEC) < 0 && errno == EINTR)
		;
	close(saved);
	close(p[1]);
	got = read(p[0], reply, cap);
	close(p[0]);
	if (got < (ssize_t)sizeof(struct fuse_out_header))
		return -EPROTO;
	*len = (size_t)got;
	return 0;
}

int ckfs_init_handshake(struct ckfs *fs, struct fuse_session *se)
{
	struct fuse_buf buf = { .mem = NULL };
	const struct fuse_in_header *in;
	struct fuse_init_in init_in;
	uint8_t reply[512];
	struct fuse_out_header *out_hdr = (struct fuse_out_header *)reply;
	struct fuse_init_out *init_out = (struct fuse_init_out *)(out_hdr + 1);
	size_t len = 0;
	int got, rc;

	got = fuse_session_receive_buf(se, &buf);
	if (got <= 0) {
		free(buf.mem);
		return got < 0 ? got : -ENOTCONN;	/* the loop will see it too */
	}
	in = buf.mem;
	if ((size_t)got < sizeof(*in) + offsetof(struct fuse_init_in, flags2) + sizeof(uint32_t) ||
	    in->opcode != FUSE_INIT) {
		/* Not what every kernel sends first: let libfuse deal with it. */
		fuse_session_process_buf(se, &buf);
		free(buf.mem);
		return -EPROTO;
	}
	memset(&init_in, 0, sizeof(init_in));
	memcpy(&init_in, in + 1, (size_t)got - sizeof(*in) < sizeof(init_in) ? (size_t)got - sizeof(*in)
									      : sizeof(init_in));
	rc = init_reply_from_libfuse(se, &buf, reply, sizeof(reply), &len);
	free(buf.mem);
	if (rc) {
		ck_err("FUSE handshake: %s", strerror(-rc));
		return rc;
	}
	if (out_hdr->error == 0 &&
	    len >= sizeof(*out_hdr) + offsetof(struct fuse_init_out, unused) + sizeof(uint32_t)) {
		if (fs->cfg->passthrough)
			ckfs_passthrough_negotiate(fs, &init_in, init_out);
		if (fs->cfg->io_uring)
			ckfs_uring_negotiate(fs, &init_in, init_out);
	}
	if (write(fuse_session_fd(se), reply, len) != (ssize_t)len) {
		rc = -errno;
		ck_err("FUSE handshake: answering INIT: %s", strerror(-rc));
		fs->passthrough.on = 0;
		ckfs_uring_forget(fs);
		return rc;
	}
	return 0;
}
