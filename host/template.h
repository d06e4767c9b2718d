/* Rendering lima/agt.yaml into the YAML that limactl gets: the template read with libyaml,
 * the config applied to its tree, the result written back out.  lima/agt.yaml's header
 * lists what is set. */
#ifndef AGT_HOST_TEMPLATE_H
#define AGT_HOST_TEMPLATE_H

#include "config.h"
#include "error.h"
#include "platform.h"

/* The machine the VM runs on: "darwin" or "linux" (uname -s, lowercased), and Lima's arch
 * name ("x86_64" or "aarch64"); on macOS, what decides vz and Rosetta. */
struct agt_host {
  const char *os;
  const char *arch;
  const char *os_version; /* macOS: "14.5"; NULL: unknown (taken as 13 or later) */
  int rosetta;            /* macOS on Apple silicon: Rosetta 2 is installed */
};

/* This machine, from its facts (platform.h), which *f keeps and *h points into.  On macOS
 * the arch is the machine's: aarch64 on Apple silicon even for an x86_64 agt under Rosetta. */
void agt_host_detect(struct agt_host *h, struct agt_host_facts *f);
/* The same from facts already read (the tests' macOS facts). */
void agt_host_from_facts(struct agt_host *h, const struct agt_host_facts *f);
/* "vz" or "qemu" for vm.vm_type "auto" on this host: vz on macOS 13 or later. */
const char *agt_default_vm_type(const struct agt_host *host);

/* Render the template named by vm.template.  jails_disk: the Lima disk for the jails'
 * layers (additionalDisks and param AgtJailsDisk), NULL for none.  *out is newly allocated
 * YAML text. */
int agt_template_render(const struct agt_config *cfg, const struct agt_host *host,
                        const char *jails_disk, char **out, agt_error_t *err);

/* "4GiB" for 4294967296: the largest binary unit that divides n. */
char *agt_lima_size(unsigned long long n);

#endif
