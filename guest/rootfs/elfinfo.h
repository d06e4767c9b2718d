/* Just enough ELF to copy a binary with its shared-library closure, without running it or
 * ldd: the program interpreter, DT_NEEDED, DT_RPATH/DT_RUNPATH, the class and the machine.
 * And the applet list of a multicall binary (toybox, busybox), read from its tables. */
#ifndef AGT_ROOTFS_ELFINFO_H
#define AGT_ROOTFS_ELFINFO_H

#include <stddef.h>

#include "error.h"

struct rootfs_elf {
  int bits;         /* 32 or 64 */
  int big_endian;   /* 1 for ELFDATA2MSB */
  unsigned machine; /* e_machine */
  unsigned type;    /* e_type: ET_EXEC, ET_DYN, ... */
  int dynamic;      /* has a PT_DYNAMIC segment */
  char *interp;     /* PT_INTERP, or NULL */
  char **needed;    /* DT_NEEDED in order, NULL-terminated (never NULL itself) */
  char *rpath;      /* DT_RPATH, or NULL */
  char *runpath;    /* DT_RUNPATH, or NULL */
};

/* Read the ELF headers of the file at path.  Returns 0 when it is ELF and *e is filled, 1 when
 * it is not an ELF file (nothing to release), -1 on error (unreadable, or truncated or
 * corrupt ELF). */
int rootfs_elf_read(const char *path, struct rootfs_elf *e, agt_error_t *err);
void rootfs_elf_release(struct rootfs_elf *e);

/* The class and machine of an ELF file: 0 and the values, 1 when not ELF, -1 on error. */
int rootfs_elf_ident(const char *path, int *bits, unsigned *machine, agt_error_t *err);

enum rootfs_applet_format {
  ROOTFS_APPLETS_NONE = 0,
  ROOTFS_APPLETS_TOYBOX,  /* toybox's toy_list[] table: {name, main, options, flags} */
  ROOTFS_APPLETS_BUSYBOX, /* busybox's applet_names[]: sorted NUL-separated names */
};

/* The applets a multicall binary provides, as `toybox` (no arguments) or `busybox --list`
 * would print them, read from the binary's data without executing it.  *names is a sorted,
 * NULL-terminated array without the binary's own name ("toybox"/"busybox").  An error when
 * the table cannot be found. */
int rootfs_elf_applets(const char *path, enum rootfs_applet_format format, char ***names,
                       agt_error_t *err);

#endif
