/* Rendering lima/agt.yaml into the YAML that limactl gets: the template read with libyaml,
 * the config applied to its tree, the result written back out.  lima/agt.yaml's header
 * lists what is set. */
#ifndef AGT_HOST_TEMPLATE_H
#define AGT_HOST_TEMPLATE_H

#include "config.h"
#include "error.h"

/* The machine the VM runs on: "darwin" or "linux" (uname -s, lowercased), and Lima's arch
 * name ("x86_64" or "aarch64"). */
struct agt_host {
  const char *os;
  const char *arch;
};

/* This machine. */
void agt_host_detect(struct agt_host *h, char *osbuf, size_t oslen, char *archbuf, size_t archlen);
/* "vz" or "qemu" for vm.vm_type "auto" on this host os. */
const char *agt_default_vm_type(const char *os);

/* Render the template named by vm.template.  *out is newly allocated YAML text. */
int agt_template_render(const struct agt_config *cfg, const struct agt_host *host, char **out,
                        agt_error_t *err);

/* "4GiB" for 4294967296: the largest binary unit that divides n. */
char *agt_lima_size(unsigned long long n);

#endif
