/* -o preload: the newest checkpoints' bytes in the kernel's page cache
 * before a resume asks for them.
 *
 * A trainer mounts, imports torch (a second or more) and loads the newest
 * checkpoint once.  Read through requests, that first load of a composite
 * waits for the daemon to hash and copy every MiB while it deserializes
 * (docs/bench.md, "first load after a mount").  Here the warm-up's thread
 * does that work while the trainer is still starting: it reads each file
 * as a read would be served (ck_vfile_read, which checks every hashed
 * range first, from the very bytes it copies, under verify=first) and
 * pushes the bytes into the mount's page cache with
 * fuse_lowlevel_notify_store.  The first load then reads cached pages, as
 * every later one does (files are opened with keep_cache).  Pages holding
 * bytes that fail their check are not pushed (ck_vfile_pages): a read of
 * them reaches the daemon, which refuses them.
 *
 * The kernel keeps pages only for an inode it knows, and knows none after
 * a mount, so each file pushed is looked up through the mountpoint first (a
 * stat, answered by the daemon's own workers; the name then stays cached
 * for entry_timeout).  The cache is only a cache: the kernel may evict
 * pushed pages, which are then read through requests as before.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "ckptfs/clock.h"
#include "ckptfs/log.h"
#include "ckptfs/records.h"
#include "materialize.h"
#include "nodes.h"
#include "preload.h"

/* Bytes read and pushed at a time (ck_vfile_pages): ranges up to this size
 * are hashed from the bytes pushed; longer ones are checked from the file
 * first. */
#define PIECE_MAX (16u << 20)

struct ckfs_preload {
	struct ckfs *fs;
	const atomic_int *stop;
	uint64_t budget;        /* bytes that may still be pushed */
	uint8_t *buf;           /* PIECE_MAX bytes, mapped until the end */
	size_t page;
	size_t files;
	uint64_t pushed;
	int materialize;        /* files may be materialized (materialize.h) */
	size_t materialized;
	double started;         /* ck_monotonic_s */
};

/* MemAvailable of /proc/meminfo in bytes, or 0. */
static uint64_t mem_available(void)
{
	char line[128];
	unsigned long long kib = 0;
	FILE *f = fopen("/proc/meminfo", "re");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
			break;
	fclose(f);
	return (uint64_t)kib << 10;
}

int ckfs_preload_begin(struct ckfs *fs, const atomic_int *stop, struct ckfs_preload **out)
{
	const struct ckfs_config *cfg = fs->cfg;
	struct ckfs_preload *p;
	long page = sysconf(_SC_PAGESIZE);
	uint64_t budget;

	*out = NULL;
	if (!cfg->preload_mib || cfg->mountpoint[0] != '/' || page <= 0)
		return 0;	/* off, or mounted on /dev/fd/N: no path to look files up by */
	budget = cfg->preload_mib == CKFS_PRELOAD_AUTO ? mem_available() / 4 : (uint64_t)cfg->preload_mib << 20;
	if (!budget)
		return 0;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	/* Mapped, not malloc'ed: it goes back to the kernel at the end
	 * instead of staying in the heap. */
	p->buf = mmap(NULL, PIECE_MAX, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p->buf == MAP_FAILED) {
		free(p);
		return -ENOMEM;
	}
	p->fs = fs;
	p->stop = stop;
	p->budget = budget;
	p->page = (size_t)page;
	p->materialize = fs->cfg->materialize_dir && fs->passthrough.on && !fs->passthrough.disabled;
	p->started = ck_monotonic_s();
	*out = p;
	return 0;
}

void ckfs_preload_end(struct ckfs_preload *p)
{
	struct timespec cpu;

	if (!p)
		return;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
	ck_debug("preload: %zu files materialized, %llu bytes of %zu files pushed to the page cache in %.3f s "
		 "(thread CPU %.3f s)", p->materialized, (unsigned long long)p->pushed, p->files,
		 ck_monotonic_s() - p->started,
		 (double)cpu.tv_sec + (double)cpu.tv_nsec / 1e9);
	munmap(p->buf, PIECE_MAX);
	free(p);
}

struct push_to {
	struct ckfs *fs;
	fuse_ino_t ino;
};

/* ck_pages_fn: len bytes at off of node ino into its page cache.  0 or
 * -errno (-ENOENT: the kernel forgot the inode). */
static int push(void *arg, uint64_t off, const void *bytes, size_t len)
{
	struct push_to *to = arg;
	struct fuse_bufvec bv = FUSE_BUFVEC_INIT(len);

	bv.buf[0].mem = (void *)(uintptr_t)bytes;	/* only read from */
	/* One writev: splicing memory would copy it into pipe pages first. */
	return fuse_lowlevel_notify_store(to->fs->se, to->ino, (off_t)off, &bv, FUSE_BUF_NO_SPLICE);
}

/* Whether the kernel reads node n itself or bypasses its page cache. */
static int not_cached(struct ckfs_preload *p, const struct ck_vnode *n, int served_as_saved)
{
	const struct ckfs_config *cfg = p->fs->cfg;

	if (served_as_saved && p->fs->passthrough.on)
		return 1;	/* passthrough: the kernel reads the physical file */
	if (cfg->direct_io == CKFS_DIO_ALL)
		return 1;
	return cfg->direct_io == CKFS_DIO_TORCH && ck_vnode_file_kind(n) == CK_FILE_TORCH;
}

int ckfs_preload_file(void *arg, const struct ck_vnode *n, const char *path, struct ck_vfile *f,
		      int served_as_saved)
{
	struct ckfs_preload *p = arg;
	struct push_to to = { p->fs, 0 };
	uint64_t size = ck_vfile_size(f), done = 0;
	struct ck_vattr a;
	char *full = NULL;
	struct stat st;
	int rc;

	if (!p->budget)
		return 1;
	if (not_cached(p, n, served_as_saved) || !size)
		return 0;
	/* A file to materialize needs only its node id, which the kernel
	 * learns at the first lookup (no walk of the mount: an unmount right
	 * after the mount would find it busy meanwhile). */
	if (size <= p->budget && p->materialize && ck_view_getattr(p->fs->view, n, &a) == 0) {
		rc = ckfs_materialize(p->fs, ckfs_fuse_ino(p->fs, a.ino), f, p->stop, p->buf, PIECE_MAX, p->page);
		if (rc > 0) {
			p->materialized++;
			p->budget -= size;
			return 0;
		}
		if (rc < 0) {
			ck_info("cannot write unnamed files in %s (%s): composites are preloaded into "
				"the page cache", p->fs->cfg->materialize_dir, strerror(-rc));
			p->materialize = 0;
		}
		if (atomic_load(p->stop))
			return 1;
	}
	if (asprintf(&full, "%s/%s", p->fs->cfg->mountpoint, path) < 0)
		return 1;
	/* The kernel learns the inode (its node id: ckfs_fuse_ino). */
	if (stat(full, &st) != 0 || (uint64_t)st.st_size != size) {
		ck_debug("preload: %s: not found through the mount", path);
		free(full);
		return 0;
	}
	free(full);
	to.ino = ckfs_fuse_ino(p->fs, st.st_ino);
	/* The start of each file first: loaders read a file mostly in order. */
	rc = ck_vfile_pages(f, p->budget, p->page, p->buf, PIECE_MAX, p->stop, push, &to, &done);
	if (rc)
		ck_debug("preload: %s: pushing after %llu bytes: %s", path, (unsigned long long)done,
			 strerror(-rc));
	p->files++;
	p->pushed += done;
	p->budget -= done < p->budget ? done : p->budget;
	return rc && rc != -ENOENT;	/* anything but a forgotten inode: stop */
}
