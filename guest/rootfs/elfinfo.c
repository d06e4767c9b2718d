#include "elfinfo.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"
#include "xalloc.h"

#define MAX_PHDRS 512
#define MAX_NEEDED 4096
#define MAX_APPLET_NAME 64

/* An open ELF file: header reads go through pread; applet scans load the whole file. */
struct img {
  int fd;
  const unsigned char *p; /* whole file, for applet scans; NULL otherwise */
  size_t n;               /* file size */
  int bits, be;
  unsigned machine, type;
  /* program headers, decoded */
  struct seg {
    uint32_t type, flags;
    uint64_t offset, vaddr, filesz, memsz;
  } * segs;
  size_t nsegs;
  /* R_*_RELATIVE relocations from DT_RELA, sorted by offset (the in-file word is 0 there) */
  struct rel {
    uint64_t off, addend;
  } * rels;
  size_t nrels;
};

#define MAX_WHOLE_FILE (64u << 20)

static void img_release(struct img *m)
{
  if (m->fd >= 0)
    close(m->fd);
  free((void *)m->p);
  free(m->segs);
  free(m->rels);
  memset(m, 0, sizeof *m);
  m->fd = -1;
}

static int read_at(const struct img *m, uint64_t off, void *buf, size_t size)
{
  if (off > m->n || size > m->n - off)
    return -1;
  if (m->p) {
    memcpy(buf, m->p + off, size);
    return 0;
  }
  size_t done = 0;
  while (done < size) {
    ssize_t r = pread(m->fd, (char *)buf + done, size - done, (off_t)(off + done));
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return -1;
    done += (size_t)r;
  }
  return 0;
}

static int rd(const struct img *m, uint64_t off, unsigned size, uint64_t *v)
{
  unsigned char b[8];
  uint64_t x = 0;

  if (size > sizeof b || read_at(m, off, b, size) < 0)
    return -1;
  for (unsigned i = 0; i < size; i++) {
    unsigned sh = m->be ? (size - 1 - i) * 8 : i * 8;
    x |= (uint64_t)b[i] << sh;
  }
  *v = x;
  return 0;
}

/* A word of the file's class (4 or 8 bytes). */
static int rdw(const struct img *m, uint64_t off, uint64_t *v)
{
  return rd(m, off, (unsigned)m->bits / 8, v);
}

static int img_open(struct img *m, const char *path, int whole, agt_error_t *err)
{
  struct stat st;
  unsigned char id[EI_NIDENT];

  memset(m, 0, sizeof *m);
  m->fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (m->fd < 0)
    return agt_error_make(err, errno, "open '%s'", path);
  if (fstat(m->fd, &st) < 0) {
    agt_error_make(err, errno, "stat '%s'", path);
    img_release(m);
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    img_release(m);
    return agt_error_kind(err, AGT_E_INVALID, "'%s' is not a regular file", path);
  }
  m->n = (size_t)st.st_size;
  if (m->n < 52 || read_at(m, 0, id, sizeof id) < 0 || memcmp(id, ELFMAG, SELFMAG) != 0) {
    img_release(m); /* smaller than any ELF header, or no ELF magic: not ELF */
    return 1;
  }
  if (whole) {
    unsigned char *buf;
    if (m->n > MAX_WHOLE_FILE) {
      img_release(m);
      return agt_error_kind(err, AGT_E_LIMIT, "'%s' is larger than %u MiB", path,
                            MAX_WHOLE_FILE >> 20);
    }
    buf = xmalloc(m->n);
    if (read_at(m, 0, buf, m->n) < 0) {
      free(buf);
      agt_error_make(err, errno ? errno : EIO, "read '%s'", path);
      img_release(m);
      return -1;
    }
    m->p = buf;
  }
  if (id[EI_CLASS] != ELFCLASS32 && id[EI_CLASS] != ELFCLASS64)
    goto corrupt;
  if (id[EI_DATA] != ELFDATA2LSB && id[EI_DATA] != ELFDATA2MSB)
    goto corrupt;
  m->bits = id[EI_CLASS] == ELFCLASS64 ? 64 : 32;
  m->be = id[EI_DATA] == ELFDATA2MSB;

  uint64_t type, machine, phoff, phentsize, phnum;
  int is64 = m->bits == 64;
  if (rd(m, 16, 2, &type) || rd(m, 18, 2, &machine) ||
      rd(m, is64 ? 32 : 28, is64 ? 8 : 4, &phoff) || rd(m, is64 ? 54 : 42, 2, &phentsize) ||
      rd(m, is64 ? 56 : 44, 2, &phnum))
    goto corrupt;
  m->type = (unsigned)type;
  m->machine = (unsigned)machine;
  if (phnum == 0)
    return 0;
  if (phnum > MAX_PHDRS || phentsize < (is64 ? sizeof(Elf64_Phdr) : sizeof(Elf32_Phdr)))
    goto corrupt;
  m->segs = xzalloc(phnum * sizeof *m->segs);
  for (uint64_t i = 0; i < phnum; i++) {
    uint64_t b = phoff + i * phentsize, t, f, o, va, fs, ms;
    if (is64) {
      if (rd(m, b, 4, &t) || rd(m, b + 4, 4, &f) || rd(m, b + 8, 8, &o) || rd(m, b + 16, 8, &va) ||
          rd(m, b + 32, 8, &fs) || rd(m, b + 40, 8, &ms))
        goto corrupt;
    } else {
      if (rd(m, b, 4, &t) || rd(m, b + 4, 4, &o) || rd(m, b + 8, 4, &va) || rd(m, b + 16, 4, &fs) ||
          rd(m, b + 20, 4, &ms) || rd(m, b + 24, 4, &f))
        goto corrupt;
    }
    m->segs[m->nsegs++] = (struct seg){(uint32_t)t, (uint32_t)f, o, va, fs, ms};
  }
  return 0;

corrupt:
  img_release(m);
  return agt_error_kind(err, AGT_E_INVALID, "'%s': truncated or corrupt ELF headers", path);
}

/* File offset of a virtual address inside a PT_LOAD's file image, and how many bytes follow. */
static int vtoff(const struct img *m, uint64_t v, uint64_t *off, uint64_t *avail)
{
  for (size_t i = 0; i < m->nsegs; i++) {
    const struct seg *s = &m->segs[i];
    if (s->type != PT_LOAD || v < s->vaddr || v - s->vaddr >= s->filesz)
      continue;
    if (s->offset > m->n || s->filesz > m->n - s->offset)
      return -1;
    *off = s->offset + (v - s->vaddr);
    *avail = s->filesz - (v - s->vaddr);
    return 0;
  }
  return -1;
}

static const struct seg *find_seg(const struct img *m, uint32_t type)
{
  for (size_t i = 0; i < m->nsegs; i++)
    if (m->segs[i].type == type)
      return &m->segs[i];
  return NULL;
}

/* Iterate PT_DYNAMIC: calls fn(tag, val) for each entry until DT_NULL. */
struct dyn {
  uint64_t strtab, strsz, rela, relasz, relaent;
  int has_strtab;
  uint64_t needed[MAX_NEEDED];
  size_t nneeded;
  uint64_t rpath, runpath;
  int has_rpath, has_runpath;
};

static int read_dynamic(const struct img *m, struct dyn *d)
{
  const struct seg *s = find_seg(m, PT_DYNAMIC);
  unsigned w = (unsigned)m->bits / 8;

  memset(d, 0, sizeof *d);
  if (s == NULL)
    return 0;
  if (s->offset > m->n || s->filesz > m->n - s->offset)
    return -1;
  for (uint64_t o = s->offset; o + 2 * w <= s->offset + s->filesz; o += 2 * w) {
    uint64_t tag, val;
    if (rdw(m, o, &tag) || rdw(m, o + w, &val))
      return -1;
    if (tag == DT_NULL)
      break;
    switch (tag) {
    case DT_NEEDED:
      if (d->nneeded >= MAX_NEEDED)
        return -1;
      d->needed[d->nneeded++] = val;
      break;
    case DT_STRTAB:
      d->strtab = val;
      d->has_strtab = 1;
      break;
    case DT_STRSZ:
      d->strsz = val;
      break;
    case DT_RPATH:
      d->rpath = val;
      d->has_rpath = 1;
      break;
    case DT_RUNPATH:
      d->runpath = val;
      d->has_runpath = 1;
      break;
    case DT_RELA:
      d->rela = val;
      break;
    case DT_RELASZ:
      d->relasz = val;
      break;
    case DT_RELAENT:
      d->relaent = val;
      break;
    default:
      break;
    }
  }
  return 0;
}

/* The string at offset `i` of the dynamic string table. */
static char *dynstr(const struct img *m, const struct dyn *d, uint64_t i)
{
  uint64_t off, avail;
  char buf[4096];
  size_t n;

  if (!d->has_strtab || vtoff(m, d->strtab, &off, &avail) < 0)
    return NULL;
  if (d->strsz && d->strsz < avail)
    avail = d->strsz;
  if (i >= avail)
    return NULL;
  n = avail - i < sizeof buf ? (size_t)(avail - i) : sizeof buf;
  if (read_at(m, off + i, buf, n) < 0 || memchr(buf, '\0', n) == NULL)
    return NULL;
  return xstrdup(buf);
}

int rootfs_elf_read(const char *path, struct rootfs_elf *e, agt_error_t *err)
{
  struct img m;
  struct dyn *d = NULL;
  const struct seg *s;
  int r;

  memset(e, 0, sizeof *e);
  r = img_open(&m, path, 0, err);
  if (r != 0)
    return r;
  e->bits = m.bits;
  e->big_endian = m.be;
  e->machine = m.machine;
  e->type = m.type;

  s = find_seg(&m, PT_INTERP);
  if (s) {
    char buf[PATH_MAX];
    if (s->filesz == 0 || s->filesz > sizeof buf || read_at(&m, s->offset, buf, s->filesz) < 0 ||
        memchr(buf, '\0', s->filesz) == NULL)
      goto corrupt;
    e->interp = xstrdup(buf);
  }
  d = xmalloc(sizeof *d);
  if (read_dynamic(&m, d) < 0)
    goto corrupt;
  e->dynamic = find_seg(&m, PT_DYNAMIC) != NULL;
  e->needed = xzalloc((d->nneeded + 1) * sizeof(char *));
  for (size_t i = 0; i < d->nneeded; i++) {
    e->needed[i] = dynstr(&m, d, d->needed[i]);
    if (e->needed[i] == NULL || e->needed[i][0] == '\0')
      goto corrupt;
  }
  if (d->has_rpath && (e->rpath = dynstr(&m, d, d->rpath)) == NULL)
    goto corrupt;
  if (d->has_runpath && (e->runpath = dynstr(&m, d, d->runpath)) == NULL)
    goto corrupt;
  free(d);
  img_release(&m);
  return 0;

corrupt:
  free(d);
  img_release(&m);
  rootfs_elf_release(e);
  return agt_error_kind(err, AGT_E_INVALID, "'%s': corrupt ELF dynamic section", path);
}

void rootfs_elf_release(struct rootfs_elf *e)
{
  free(e->interp);
  agt_strv_free(e->needed);
  free(e->rpath);
  free(e->runpath);
  memset(e, 0, sizeof *e);
}

int rootfs_elf_ident(const char *path, int *bits, unsigned *machine, agt_error_t *err)
{
  struct img m;
  int r = img_open(&m, path, 0, err);

  if (r != 0)
    return r;
  *bits = m.bits;
  *machine = m.machine;
  img_release(&m);
  return 0;
}

/* ---- applet tables ---- */

static int applet_char(unsigned char c)
{
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-' || c == '+' || c == '[' || c == ']' || c == ':';
}

/* Length of a valid applet name at p (NUL-terminated within n bytes), or 0. */
static size_t applet_name_len(const unsigned char *p, size_t n)
{
  size_t i;

  for (i = 0; i < n && i <= MAX_APPLET_NAME; i++) {
    if (p[i] == '\0')
      return i;
    if (!applet_char(p[i]))
      return 0;
  }
  return 0;
}

static int relative_type(unsigned machine, uint64_t type)
{
  switch (machine) {
  case EM_X86_64:
    return type == R_X86_64_RELATIVE;
  case EM_AARCH64:
    return type == R_AARCH64_RELATIVE;
  case EM_386:
    return type == R_386_RELATIVE;
  case EM_ARM:
    return type == R_ARM_RELATIVE;
  case EM_RISCV:
    return type == 3; /* R_RISCV_RELATIVE */
  case EM_PPC64:
    return type == R_PPC64_RELATIVE;
  case EM_S390:
    return type == R_390_RELATIVE;
  default:
    return 0;
  }
}

static int rel_cmp(const void *a, const void *b)
{
  const struct rel *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

/* Collect R_*_RELATIVE entries of DT_RELA: in a PIE their target words hold 0 in the file and
 * the value is the addend.  (DT_REL and DT_RELR keep the addend in place, so the file's word
 * is already right.) */
static int load_relas(struct img *m)
{
  struct dyn *d = xmalloc(sizeof *d);
  uint64_t off, avail, ent;
  int ret = -1;

  if (read_dynamic(m, d) < 0)
    goto out;
  ret = 0;
  if (d->rela == 0 || d->relasz == 0)
    goto out;
  ent = d->relaent ? d->relaent : (uint64_t)(m->bits == 64 ? 24 : 12);
  if (ent < (uint64_t)(m->bits == 64 ? 24 : 12) || vtoff(m, d->rela, &off, &avail) < 0 ||
      d->relasz > avail) {
    ret = -1;
    goto out;
  }
  m->rels = xmalloc((size_t)(d->relasz / ent + 1) * sizeof *m->rels);
  for (uint64_t o = off; o + ent <= off + d->relasz; o += ent) {
    uint64_t r_off, info, addend, type;
    unsigned w = (unsigned)m->bits / 8;
    if (rdw(m, o, &r_off) || rdw(m, o + w, &info) || rdw(m, o + 2 * w, &addend)) {
      ret = -1;
      goto out;
    }
    type = m->bits == 64 ? (info & 0xffffffffu) : (info & 0xffu);
    if (relative_type(m->machine, type))
      m->rels[m->nrels++] = (struct rel){r_off, addend};
  }
  qsort(m->rels, m->nrels, sizeof *m->rels, rel_cmp);
out:
  free(d);
  return ret;
}

/* The pointer-sized word at virtual address v after relative relocation. */
static int word_at(const struct img *m, uint64_t v, uint64_t *val)
{
  uint64_t off, avail;
  size_t lo = 0, hi = m->nrels;

  while (lo < hi) {
    size_t mid = (lo + hi) / 2;
    if (m->rels[mid].off == v) {
      *val = m->rels[mid].addend;
      return 0;
    }
    if (m->rels[mid].off < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  if (vtoff(m, v, &off, &avail) < 0 || avail < (uint64_t)m->bits / 8)
    return -1;
  return rdw(m, off, val);
}

static int in_exec_seg(const struct img *m, uint64_t v)
{
  for (size_t i = 0; i < m->nsegs; i++) {
    const struct seg *s = &m->segs[i];
    if (s->type == PT_LOAD && (s->flags & PF_X) && v >= s->vaddr && v - s->vaddr < s->memsz)
      return 1;
  }
  return 0;
}

/* A NUL-terminated string at v (any bytes), or NULL. */
static const char *cstr_at(const struct img *m, uint64_t v, size_t max)
{
  uint64_t off, avail;

  if (vtoff(m, v, &off, &avail) < 0)
    return NULL;
  if (avail > max)
    avail = max;
  if (memchr(m->p + off, '\0', (size_t)avail) == NULL)
    return NULL;
  return (const char *)m->p + off;
}

static const char *name_at(const struct img *m, uint64_t v)
{
  uint64_t off, avail;

  if (vtoff(m, v, &off, &avail) < 0)
    return NULL;
  if (applet_name_len(m->p + off, (size_t)avail) == 0)
    return NULL;
  return (const char *)m->p + off;
}

/* One toy_list record at v: {char *name; void (*main)(void); char *options; unsigned flags}. */
static int toy_record(const struct img *m, uint64_t v, const char **name, unsigned *flags)
{
  unsigned w = (unsigned)m->bits / 8;
  uint64_t pname, pmain, popts, off, avail, fl;

  if (word_at(m, v, &pname) || word_at(m, v + w, &pmain) || word_at(m, v + 2 * w, &popts))
    return -1;
  if ((*name = name_at(m, pname)) == NULL || !in_exec_seg(m, pmain))
    return -1;
  if (popts != 0 && cstr_at(m, popts, 4096) == NULL)
    return -1;
  if (vtoff(m, v + 3 * w, &off, &avail) < 0 || avail < 4 || rd(m, off, 4, &fl))
    return -1;
  *flags = (unsigned)fl;
  return 0;
}

static int strp_cmp(const void *a, const void *b)
{
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int toybox_applets(const struct img *m, char ***out)
{
  unsigned w = (unsigned)m->bits / 8, rec = 4 * w;
  uint64_t best_at = 0;
  size_t best_n = 0;

  /* Corrupt headers may describe huge or overlapping segments: look at what the file
   * holds, and at most twice its size in all. */
  uint64_t budget = 2 * (uint64_t)m->n / w + 1024;

  /* toy_list[0] is always the multiplexer "toybox"; the rest is sorted for bsearch. */
  for (size_t i = 0; i < m->nsegs; i++) {
    const struct seg *s = &m->segs[i];
    uint64_t len, end;
    if (s->type != PT_LOAD || (s->flags & PF_X) || s->offset >= m->n)
      continue;
    len = s->filesz < m->n - s->offset ? s->filesz : m->n - s->offset;
    if (s->vaddr > UINT64_MAX - len - 2 * rec)
      continue;
    end = s->vaddr + len;
    for (uint64_t v = (s->vaddr + w - 1) / w * w; v + rec <= end; v += w) {
      if (budget-- == 0)
        goto done;
      const char *name, *prev;
      unsigned flags;
      size_t n;
      if (toy_record(m, v, &name, &flags) < 0 || strcmp(name, "toybox") != 0)
        continue;
      prev = NULL;
      for (n = 1;; n++) {
        if (toy_record(m, v + n * rec, &name, &flags) < 0)
          break;
        if (prev && strcmp(prev, name) >= 0)
          break;
        prev = name;
      }
      if (n > best_n) {
        best_n = n;
        best_at = v;
      }
    }
  }
done:
  if (best_n < 2)
    return -1;

  char **v = xzalloc(best_n * sizeof(char *));
  size_t k = 0;
  for (size_t i = 1; i < best_n; i++) {
    const char *name;
    unsigned flags;
    if (toy_record(m, best_at + i * rec, &name, &flags) < 0)
      break;
    if ((flags & 0xf) == 0) /* TOYMASK_LOCATION: shell builtins are not installed */
      continue;
    v[k++] = xstrdup(name);
  }
  v[k] = NULL;
  *out = v;
  return 0;
}

/* busybox keeps its applet names as one sorted string "[\0[[\0acpid\0...": the longest sorted
 * run of NUL-separated names in the file. */
static int busybox_applets(const struct img *m, char ***out)
{
  size_t best_start = 0, best_n = 0, i = 0;

  if (memmem(m->p, m->n, "BusyBox v", 9) == NULL) /* the banner of every busybox build */
    return -1;
  while (i < m->n) {
    if ((i > 0 && m->p[i - 1] != '\0') || !applet_char(m->p[i])) {
      i++;
      continue;
    }
    size_t j = i, n = 0, len;
    const char *prev = NULL;
    while (j < m->n && (len = applet_name_len(m->p + j, m->n - j)) > 0) {
      const char *name = (const char *)m->p + j;
      if (prev && strcmp(prev, name) >= 0)
        break;
      prev = name;
      n++;
      j += len + 1;
    }
    if (n > best_n) {
      best_n = n;
      best_start = i;
    }
    i = j > i ? j : i + 1;
  }
  if (best_n < 8)
    return -1;

  char **v = xzalloc((best_n + 1) * sizeof(char *));
  size_t k = 0, j = best_start;
  for (size_t n = 0; n < best_n; n++) {
    size_t len = applet_name_len(m->p + j, m->n - j);
    if (strcmp((const char *)m->p + j, "busybox") != 0)
      v[k++] = xstrndup((const char *)m->p + j, len);
    j += len + 1;
  }
  v[k] = NULL;
  *out = v;
  return 0;
}

int rootfs_elf_applets(const char *path, enum rootfs_applet_format format, char ***names,
                       agt_error_t *err)
{
  struct img m;
  int r;
  char **v = NULL;

  *names = NULL;
  r = img_open(&m, path, 1, err);
  if (r < 0)
    return -1;
  if (r == 1)
    return agt_error_kind(err, AGT_E_INVALID, "'%s' is not an ELF file", path);
  if (format == ROOTFS_APPLETS_TOYBOX) {
    if (load_relas(&m) < 0) {
      img_release(&m);
      return agt_error_kind(err, AGT_E_INVALID, "'%s': corrupt relocations", path);
    }
    r = toybox_applets(&m, &v);
  } else if (format == ROOTFS_APPLETS_BUSYBOX) {
    r = busybox_applets(&m, &v);
  } else {
    r = -1;
  }
  img_release(&m);
  if (r < 0)
    return agt_error_kind(err, AGT_E_INVALID, "'%s': no %s applet table found", path,
                          format == ROOTFS_APPLETS_TOYBOX ? "toybox" : "busybox");
  size_t n = 0;
  while (v[n])
    n++;
  qsort(v, n, sizeof *v, strp_cmp);
  *names = v;
  return 0;
}
