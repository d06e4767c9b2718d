#include "jail_seccomp.h"

#include <errno.h>
#include <linux/sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <linux/btrfs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "xalloc.h"

/* Denied with EPERM: the mount family, root switching, kernel keyrings, module and kexec
 * loading, BPF and perf, userfaultfd, io_uring (it reaches sockets without socket(2)),
 * tracing other processes, handle-based opens (the "shocker" escape), namespace creation
 * and entry, and host-wide clock, swap and reboot controls. */
static const char *const denied[] = {
    "mount",
    "umount",
    "umount2",
    "pivot_root",
    "chroot",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "open_tree",
    "move_mount",
    "mount_setattr",
    "open_by_handle_at",
    "name_to_handle_at",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "unshare",
    "setns",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "acct",
    "quotactl",
    "quotactl_fd",
    "lookup_dcookie",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "vhangup",
    "pidfd_getfd",
    "kcmp",
    "fanotify_init",
    "nfsservctl",
    "uselib",
    "create_module",
    "get_kernel_syms",
    "query_module",
    "_sysctl",
    "sysfs",
    "ustat",
    "vm86",
    "vm86old",
    "lsm_set_self_attr",
};

static int rule(scmp_filter_ctx ctx, uint32_t action, const char *name, unsigned n,
                const struct scmp_arg_cmp *args, agt_error_t *err)
{
  int nr = seccomp_syscall_resolve_name(name);
  int r;

  if (nr == __NR_SCMP_ERROR)
    return 0; /* not a syscall on this architecture */
  r = seccomp_rule_add_array(ctx, action, nr, n, args);
  if (r < 0 && r != -EEXIST)
    return agt_error_make(err, -r, "seccomp rule for '%s'", name);
  return 0;
}

/* What a prepared jail's init still calls after it loads its filter ahead of the claim:
 * the workspace's mount, /tmp's remount, the cgroup namespace (jail_setup.c, take_claim). */
static const char *const claim_calls[] = {"mount", "move_mount", "unshare", NULL};

static int in_list(const char *const *list, const char *name)
{
  for (; list && *list; list++)
    if (strcmp(*list, name) == 0)
      return 1;
  return 0;
}

/* The filter as BPF, out of libseccomp's context. */
static int export_prog(scmp_filter_ctx ctx, struct agt_seccomp_prog *p, agt_error_t *err)
{
  cleanup_close int fd = memfd_create("agt-seccomp", MFD_CLOEXEC);
  off_t size;
  int r;

  if (fd < 0)
    return agt_error_make(err, errno, "memfd_create");
  r = seccomp_export_bpf(ctx, fd);
  if (r < 0)
    return agt_error_make(err, -r, "seccomp_export_bpf");
  size = lseek(fd, 0, SEEK_END);
  if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0)
    return agt_error_kind(err, AGT_E_INTERNAL, "seccomp filter has a bad size");
  p->filter = xmalloc((size_t)size);
  if (pread(fd, p->filter, (size_t)size, 0) != size)
    return agt_error_make(err, errno, "read the seccomp filter");
  p->prog.len = (unsigned short)(size / (off_t)sizeof(struct sock_filter));
  p->prog.filter = p->filter;
  return 0;
}

/* The whole filter, less the syscalls in `skip`. */
static int compile(struct agt_seccomp_prog *p, const char *const *skip, agt_error_t *err)
{
  scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
  int r = -1;
  const uint64_t ns_flags = CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER |
                            CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP | 0x80 /* NEWTIME */;

  memset(p, 0, sizeof *p);
  if (ctx == NULL)
    return agt_error_kind(err, AGT_E_INTERNAL, "seccomp_init failed");
  /* Syscalls of a foreign architecture (int 0x80 from x86_64, say) hit libseccomp's default
   * bad-arch action and kill the process.  agtd sets no_new_privs itself before loading. */
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);

  for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++)
    if (!in_list(skip, denied[i]) && rule(ctx, SCMP_ACT_ERRNO(EPERM), denied[i], 0, NULL, err) < 0)
      goto out;

  /* clone3 passes its flags in memory that BPF cannot read: make libc fall back to clone. */
  if (rule(ctx, SCMP_ACT_ERRNO(ENOSYS), "clone3", 0, NULL, err) < 0)
    goto out;
  {
    /* clone(2) with any namespace flag.  x86_64 and aarch64 both pass flags in arg 0. */
    struct scmp_arg_cmp a = SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags, 0);
    for (unsigned bit = 0; bit < 64; bit++) {
      uint64_t f = 1ULL << bit;
      if (!(ns_flags & f))
        continue;
      a = (struct scmp_arg_cmp)SCMP_A0(SCMP_CMP_MASKED_EQ, f, f);
      if (rule(ctx, SCMP_ACT_ERRNO(EPERM), "clone", 1, &a, err) < 0)
        goto out;
    }
  }
  {
    /* TIOCSTI and TIOCLINUX push input into a terminal; compare only the low 32 bits so the
     * high-bit variant (CVE-2019-10063) is caught too. */
    struct scmp_arg_cmp a = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI);
    if (rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &a, err) < 0)
      goto out;
    a = (struct scmp_arg_cmp)SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX);
    if (rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &a, err) < 0)
      goto out;
  }
  {
    /* btrfs lets any user make subvolumes and snapshots where they may write: in a persistent
     * home (a subvolume with a quota, disk.h) a new one would have no limit of its own. */
    const unsigned long btrfs[] = {BTRFS_IOC_SUBVOL_CREATE,  BTRFS_IOC_SUBVOL_CREATE_V2,
                                   BTRFS_IOC_SNAP_CREATE,    BTRFS_IOC_SNAP_CREATE_V2,
                                   BTRFS_IOC_SNAP_DESTROY,   BTRFS_IOC_SNAP_DESTROY_V2,
                                   BTRFS_IOC_SUBVOL_SETFLAGS};
    for (size_t i = 0; i < sizeof btrfs / sizeof btrfs[0]; i++) {
      struct scmp_arg_cmp a = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, btrfs[i] & 0xffffffffu);
      if (rule(ctx, SCMP_ACT_ERRNO(EPERM), "ioctl", 1, &a, err) < 0)
        goto out;
    }
  }
  {
    /* Sockets that reach past the jail's network namespace: AF_VSOCK is the VM's channel to
     * its host; AF_PACKET and raw netlink audit/xfrm are not for agents. */
    const int families[] = {AF_VSOCK, AF_PACKET, AF_KEY, AF_ALG};
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
      struct scmp_arg_cmp a = SCMP_A0(SCMP_CMP_EQ, (uint64_t)families[i]);
      if (rule(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), "socket", 1, &a, err) < 0)
        goto out;
    }
  }
  {
    /* The kernel broadcasts uevents into every network namespace of the initial user
     * namespace, so a NETLINK_KOBJECT_UEVENT socket in a jail would follow the guest's
     * devices (found by tests/security, E8).  Other netlink protocols stay: rtnetlink is
     * how programs list their interfaces, and it only sees the jail's namespace. */
    struct scmp_arg_cmp a[2] = {SCMP_A0(SCMP_CMP_EQ, AF_NETLINK),
                                SCMP_A2(SCMP_CMP_EQ, 15 /* NETLINK_KOBJECT_UEVENT */)};
    if (rule(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), "socket", 2, a, err) < 0)
      goto out;
  }
  r = export_prog(ctx, p, err);
out:
  seccomp_release(ctx);
  if (r < 0)
    agt_seccomp_release(p);
  return r;
}

int agt_seccomp_compile(struct agt_seccomp_prog *p, agt_error_t *err)
{
  return compile(p, NULL, err);
}

int agt_seccomp_compile_split(struct agt_seccomp_prog *ahead, struct agt_seccomp_prog *tail,
                              agt_error_t *err)
{
  scmp_filter_ctx ctx;
  int r = -1;

  memset(tail, 0, sizeof *tail);
  if (compile(ahead, claim_calls, err) < 0)
    return -1;
  ctx = seccomp_init(SCMP_ACT_ALLOW);
  if (ctx == NULL) {
    agt_seccomp_release(ahead);
    return agt_error_kind(err, AGT_E_INTERNAL, "seccomp_init failed");
  }
  seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
  for (size_t i = 0; claim_calls[i]; i++)
    if (rule(ctx, SCMP_ACT_ERRNO(EPERM), claim_calls[i], 0, NULL, err) < 0)
      goto out;
  r = export_prog(ctx, tail, err);
out:
  seccomp_release(ctx);
  if (r < 0) {
    agt_seccomp_release(ahead);
    agt_seccomp_release(tail);
  }
  return r;
}

void agt_seccomp_release(struct agt_seccomp_prog *p)
{
  free(p->filter);
  memset(p, 0, sizeof *p);
}
