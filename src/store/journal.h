/* Private to src/store and the packs in it (src/packstore): the store's
 * journal, which tells every index of the store what changed in it
 * (docs/format.md, "Journal"; docs/design.md, "One store, many nodes").
 *
 * Every change to the store's durable records -- a manifest written,
 * replaced or removed, a tombstone, a packmap, records appended to a pack
 * or moved by gc -- is followed by a journal entry naming it, before the
 * index transaction that records it commits: STORE/journal/NNNNNNNNNNNNNNNN
 * (the sequence number, 16 decimal digits), a small checksummed text file
 * written whole to a temporary name and linked into place, so that two
 * writers (processes, or nodes of a shared filesystem) can never take the
 * same number and numbers have no gaps.  An index remembers the last entry
 * it applied (meta "journal"); following the store is reading the entries
 * after it, one open() each, the first missing one ending the walk.
 *
 * Thread rules: functions taking a store may be called from any thread;
 * those taking a txn run inside the caller's LMDB write transaction. */
#ifndef CKPTFS_STORE_JOURNAL_H
#define CKPTFS_STORE_JOURNAL_H

#include <stddef.h>
#include <stdint.h>
#include <lmdb.h>

#include "ckptfs/buf.h"
#include "ckptfs/error.h"
#include "index.h"

#define CK_JOURNAL_DIR "journal"
#define CK_JOURNAL_VERSION 1
#define CK_META_JOURNAL "journal"     /* meta: u64 LE, the last entry applied */
#define CK_JOURNAL_MAX_BYTES 65536
#define CK_JOURNAL_MAX_SCANS 1024     /* pack ranges or emptied packs in one entry */
#define CK_JOURNAL_TAG_NONE "none"

/* A pack range whose records are new: compaction appended them, or gc
 * copied live records there. */
struct ck_journal_scan {
	uint32_t pack;
	uint64_t from, to;
};

struct ck_journal_entry {
	int64_t time_ns;                /* when it was written */
	/* The checkpoint whose manifest, tombstone or packmap changed (NULL:
	 * none), with a tag of each file as it is now (ck_journal_tag). */
	char *series, *name;
	char manifest[33], tombstone[33], packmap[33];
	struct ck_journal_scan *scans;
	size_t nscans;
	uint32_t *emptied;              /* packs gc emptied: nothing may be read from them */
	size_t nemptied;
	int has_pos;                    /* the pack compaction appends to, and its durable end */
	uint32_t pack_cur;
	uint64_t pack_end;
};

void ck_journal_entry_clear(struct ck_journal_entry *e);

/* A short fingerprint of a file as it is now: 32 hex digits of the
 * XXH3-128 of its size and last 64 bytes (manifests, tombstones and
 * packmaps all end with a checksum of everything before it), or "none"
 * when it does not exist.  0 or -errno. */
int ck_journal_tag(const char *path, char out[33]);

/* Text of an entry (the one spelling the parser accepts); 0 or -ENOMEM,
 * -EINVAL for what it cannot hold.  Parse: untrusted bytes; 0, -EBADMSG
 * (no valid checksum line: torn or edited), -EPROTONOSUPPORT, -EINVAL
 * (err says where), -ENOMEM. */
int ck_journal_format(struct ck_buf *out, const struct ck_journal_entry *e);
int ck_journal_parse(const char *text, size_t len, struct ck_journal_entry *out, struct ck_error *err);

/* Appends e to the store's journal; *seq (may be NULL) gets its number.
 * The entry is durable when this returns.  0 or -errno with err. */
int ck_journal_append(struct ck_store *st, const struct ck_journal_entry *e, uint64_t *seq, struct ck_error *err);

/* An entry naming checkpoint (series, name), its files' tags read now,
 * with the pack ranges and position of e_packs (may be NULL), appended. */
int ck_journal_note_ckpt(struct ck_store *st, const char *series, const char *name,
			 const struct ck_journal_entry *e_packs, uint64_t *seq, struct ck_error *err);

/* Entry seq of the store's journal: 0, -ENOENT when there is none (yet),
 * or -errno / the parse's errors with err. */
int ck_journal_read(const char *store, uint64_t seq, struct ck_journal_entry *out, struct ck_error *err);

/* The highest entry number in STORE/journal (0 when empty or absent). */
int ck_journal_head(const char *store, uint64_t *head);

/* The index's position in the journal (meta "journal", 0 when unset). */
int ck_journal_applied(MDB_txn *txn, struct ck_store *st, uint64_t *seq);
int ck_journal_put_applied(MDB_txn *txn, struct ck_store *st, uint64_t seq);
/* Sets the position in a transaction of its own. */
int ck_journal_set_applied(struct ck_store *st, uint64_t seq, struct ck_error *err);
/* After the writer of txn appended entry seq: the index has applied it too
 * when it had applied everything before it. */
int ck_journal_mark_own(MDB_txn *txn, struct ck_store *st, uint64_t seq);

#endif
