/* A jail's captured output on disk: console.log, rotated once to console.log.1 when it
 * reaches half the budget, so that at most the budget stays on disk.
 *
 * Readers address output by absolute offset (bytes since the jail's first output).  Each file
 * carries the offset of its first byte in an extended attribute (trusted.agt.base; absent:
 * 0), set before the file takes its name, so the offsets are read from the files themselves:
 * right after any restart of agtd, whoever wrote last, whatever a record says.
 *
 * When the output was written is kept beside each file, in console.log.idx (and
 * console.log.1.idx): records of 16 bytes, {absolute offset, CLOCK_REALTIME in ns}, each
 * saying that the output from that offset on was written at that time (or later, until the
 * next record).  The writer adds one before an append when at least a millisecond passed
 * since the last one and either 64 bytes were written since or a second passed, so a line's
 * time is exact to the append that wrote it, or within a second for small writes close
 * together.  An index rotates with its file and counts against the budget, so both stay
 * bounded; a record cut short (a crash) is ignored.  Offsets are absolute, so a record
 * means the same in either index file.
 *
 * libc only: the jail's keeper (keeper.c) writes the log with this too. */
#ifndef AGT_OUTLOG_H
#define AGT_OUTLOG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define AGT_OUTLOG_XATTR "trusted.agt.base"

struct agt_outlog_pos {
  uint64_t base;     /* offset of console.log's first byte */
  uint64_t size;     /* bytes in console.log */
  uint64_t old_base; /* offset of console.log.1's first byte (== base when there is none) */
};

/* Where the log stands, from the files (path: console.log; old_path: console.log.1). */
void agt_outlog_stat(const char *path, const char *old_path, struct agt_outlog_pos *pos);

/* Both files open at once, whoever rotates them meanwhile: the bytes of each by offset.  The
 * current file is opened first: when a rotation comes between the two opens, the old one is
 * the same file and is left out (its bytes are in the current one). */
struct agt_outlog_snap {
  int fd, old_fd; /* -1 when absent */
  uint64_t base, size, old_base, old_size;
};
void agt_outlog_snapshot(const char *path, const char *old_path, struct agt_outlog_snap *s);
/* Read up to max bytes at absolute offset off from one of the files: bytes read, 0 when no
 * file holds off, -1 on an error. */
ssize_t agt_outlog_pread(const struct agt_outlog_snap *s, uint64_t off, char *buf, size_t max);
void agt_outlog_snap_close(struct agt_outlog_snap *s);

struct agt_outlog {
  const char *path, *old_path; /* not owned */
  uint64_t budget;             /* bytes kept on disk: the two files together */
  struct agt_outlog_pos pos;
  int fd;
  int idx_fd;        /* console.log.idx, -1 until the first append */
  uint64_t idx_size; /* its bytes */
  uint64_t last_off; /* the last record's offset and time */
  int64_t last_ns;
};

/* A record of the index: output from off on was written at ns (CLOCK_REALTIME). */
struct agt_outlog_time {
  uint64_t off;
  int64_t ns;
};
#define AGT_OUTLOG_IDX_SUFFIX ".idx"

/* The records of both index files, sorted by offset, those of [from, to) and the last one
 * before from (which dates the bytes at from).  *out is malloc'd (NULL when none).  Returns
 * how many. */
size_t agt_outlog_times(const char *path, const char *old_path, uint64_t from, uint64_t to,
                        struct agt_outlog_time **out);
/* The offset of the first output written at ns or later, by the index; end when none was. */
uint64_t agt_outlog_offset_at(const char *path, const char *old_path, int64_t ns, uint64_t end);

/* Start appending to the log (its position from the files); no file is made until output. */
void agt_outlog_open(struct agt_outlog *l, const char *path, const char *old_path, uint64_t budget);
/* Append, rotating at half the budget.  -1 with errno when a write failed (what was not
 * written is lost; the next append tries again). */
int agt_outlog_append(struct agt_outlog *l, const char *data, size_t len);
void agt_outlog_close(struct agt_outlog *l);

#endif
