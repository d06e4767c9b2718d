/* The jail's seccomp filter, compiled once with libseccomp when agtd starts and loaded in
 * each jail with one prctl(), so the spawn path allocates nothing.  docs/SECURITY.md lists
 * what it denies and why. */
#ifndef AGT_SECCOMP_H
#define AGT_SECCOMP_H

#include <linux/filter.h>
#include <stddef.h>

#include "error.h"

struct agt_seccomp_prog {
  struct sock_fprog prog; /* points into filter */
  struct sock_filter *filter;
};

int agt_seccomp_compile(struct agt_seccomp_prog *p, agt_error_t *err);
/* The same filter in two parts whose union is the whole: `ahead` (all but the mount, move_mount
 * and unshare rules) for a prepared jail to load before its claim, `tail` (those rules) to
 * load at the end of the claim.  Each syscall then runs through both. */
int agt_seccomp_compile_split(struct agt_seccomp_prog *ahead, struct agt_seccomp_prog *tail,
                              agt_error_t *err);
void agt_seccomp_release(struct agt_seccomp_prog *p);

#endif
