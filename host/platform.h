/* What differs between the systems agt runs on (Linux and macOS): default paths, and the
 * host's facts (CPUs, memory, OS version, Apple silicon, vz).  Each decision is a function
 * of the OS passed as a value, and the macOS facts are read through a sysctl function
 * passed in, so the unit tests take the macOS branch on Linux.  The only compile-time
 * choices are agt_os_native() and the real sysctl reader (built by the macOS cross build). */
#ifndef AGT_HOST_PLATFORM_H
#define AGT_HOST_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

enum agt_os {
  AGT_OS_LINUX,
  AGT_OS_DARWIN,
};

/* The system agt was built for. */
enum agt_os agt_os_native(void);
/* "darwin" for macOS (uname -s, lowercased), "linux" for the rest. */
enum agt_os agt_os_from_name(const char *name);

/* agt's config file when neither --config nor $AGT_CONFIG names one:
 * $XDG_CONFIG_HOME/agt/config.yaml when that is set (absolute), else
 * macOS: ~/Library/Application Support/agt/config.yaml;
 * Linux: ~/.config/agt/config.yaml.  Newly allocated. */
char *agt_platform_config_file(enum agt_os os);
/* agt's cache directory (not created): $XDG_CACHE_HOME/agt when set (absolute), else
 * macOS: ~/Library/Caches/agt; Linux: ~/.cache/agt. */
char *agt_platform_cache_dir(enum agt_os os);
/* Lima's home when $LIMA_HOME is unset: ~/.lima, Lima's own default on both systems. */
char *agt_platform_lima_home(enum agt_os os);

/* Where macOS keeps Rosetta 2 once installed (softwareupdate --install-rosetta). */
#define AGT_ROSETTA_PATH "/Library/Apple/usr/share/rosetta/rosetta"

/* The host's facts, as `agt doctor` shows them and the template uses them. */
struct agt_host_facts {
  enum agt_os os;
  unsigned cpus;       /* 0: unknown */
  uint64_t memory;     /* bytes; 0: unknown */
  char os_version[32]; /* macOS: "14.5" (kern.osproductversion); Linux: the kernel release */
  char arch[16];       /* the machine's: "aarch64" or "x86_64" (Apple silicon is aarch64 even
                        * when agt runs as x86_64 under Rosetta) */
  int apple_silicon;   /* macOS: hw.optional.arm64 is 1 */
  int translated;      /* macOS: this agt is an x86_64 build running under Rosetta */
  int vz;              /* macOS: Virtualization.framework is usable by Lima (macOS 13+) */
  int rosetta;         /* macOS on Apple silicon: Rosetta 2 is installed */
};

/* sysctlbyname(3)'s shape: fills buf (*len bytes at most), sets *len; -1 with errno. */
typedef int (*agt_sysctl_fn)(void *ctx, const char *name, void *buf, size_t *len);
/* access(path, F_OK)'s shape: 0 when the path exists. */
typedef int (*agt_exists_fn)(void *ctx, const char *path);

/* macOS's facts, read through `sysctl` and `exists`.  Returns -1 (errno set) when a fact
 * every Mac has (hw.ncpu, hw.memsize, kern.osproductversion) cannot be read. */
int agt_host_facts_darwin(agt_sysctl_fn sysctl, agt_exists_fn exists, void *ctx,
                          struct agt_host_facts *f);
/* Linux's facts: sysconf(3) and uname(2); no /proc. */
int agt_host_facts_linux(struct agt_host_facts *f);
/* This machine's. */
int agt_host_facts_native(struct agt_host_facts *f);

/* "13.0" and later: macOS versions whose Virtualization.framework Lima's vz driver uses. */
int agt_macos_has_vz(const char *version);

/* `agt doctor`'s rows about the host's facts, measured against what the VM is to get. */
enum agt_fact_result { AGT_FACT_OK, AGT_FACT_WARN, AGT_FACT_FAIL };
struct agt_fact_row {
  const char *check;
  enum agt_fact_result result;
  char detail[192];
  const char *fix; /* NULL when ok */
};
#define AGT_FACT_ROWS 5
struct agt_vm_wants {
  unsigned cpus;       /* vm.cpus */
  uint64_t memory;     /* vm.memory, bytes */
  const char *vm_type; /* vm.vm_type: auto, vz or qemu */
  int rosetta;         /* vm.rosetta is on */
};
/* Fills rows (system, vz and rosetta on macOS, cpus, memory); returns how many. */
size_t agt_host_fact_rows(const struct agt_host_facts *f, const struct agt_vm_wants *want,
                          struct agt_fact_row rows[AGT_FACT_ROWS]);

#endif
