#include "template.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "agt_version.h"
#include "cleanup.h"
#include "util.h"
#include "xalloc.h"
#include "yamlutil.h"

#define SCRIPT_MAX (1024 * 1024)

void agt_host_from_facts(struct agt_host *h, const struct agt_host_facts *f)
{
  memset(h, 0, sizeof *h);
  h->os = f->os == AGT_OS_DARWIN ? "darwin" : "linux";
  h->arch = f->arch[0] ? f->arch : "unknown";
  if (f->os == AGT_OS_DARWIN) {
    h->os_version = f->os_version[0] ? f->os_version : NULL;
    h->rosetta = f->rosetta;
  }
}

void agt_host_detect(struct agt_host *h, struct agt_host_facts *f)
{
  if (agt_host_facts_native(f) < 0) { /* unknown facts: the system agt was built for */
    memset(f, 0, sizeof *f);
    f->os = agt_os_native();
  }
  agt_host_from_facts(h, f);
}

static int host_is_darwin(const struct agt_host *host)
{
  return strcmp(host->os, "darwin") == 0;
}

const char *agt_default_vm_type(const struct agt_host *host)
{
  if (!host_is_darwin(host))
    return "qemu";
  return host->os_version == NULL || agt_macos_has_vz(host->os_version) ? "vz" : "qemu";
}

char *agt_lima_size(unsigned long long n)
{
  static const char *const units[] = {"TiB", "GiB", "MiB", "KiB"};

  for (int i = 0; i < 4; i++) {
    unsigned long long u = 1ull << (10 * (4 - i));
    if (n >= u && n % u == 0)
      return xasprintf("%llu%s", n / u, units[i]);
  }
  return xasprintf("%llu", n);
}

/* Editing the document.  libyaml keeps nodes in an array that grows as nodes are added, so
 * nodes are held by index and looked up again after every addition. */

struct render {
  yaml_document_t *doc;
  agt_yaml_t *y;
  const char *dir; /* the template's directory */
};

static yaml_node_t *node(struct render *r, int id)
{
  return yaml_document_get_node(r->doc, id);
}

static int add_str(struct render *r, const char *s, yaml_scalar_style_t style)
{
  int id = yaml_document_add_scalar(r->doc, NULL, (yaml_char_t *)s, (int)strlen(s), style);
  if (id == 0) {
    fputs("agt: out of memory\n", stderr);
    exit(70);
  }
  return id;
}

static int add_map(struct render *r)
{
  return yaml_document_add_mapping(r->doc, NULL, YAML_BLOCK_MAPPING_STYLE);
}

static int add_seq(struct render *r)
{
  return yaml_document_add_sequence(r->doc, NULL, YAML_BLOCK_SEQUENCE_STYLE);
}

static int map_value(struct render *r, int map, const char *key)
{
  yaml_node_t *m = node(r, map);

  for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
    const char *k = agt_yaml_scalar(node(r, p->key));
    if (k && strcmp(k, key) == 0)
      return p->value;
  }
  return 0;
}

/* Set map[key] = value, replacing the old value in place or appending the pair. */
static void map_set(struct render *r, int map, const char *key, int value)
{
  yaml_node_t *m = node(r, map);
  int k;

  for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
    const char *ks = agt_yaml_scalar(node(r, p->key));
    if (ks && strcmp(ks, key) == 0) {
      p->value = value;
      return;
    }
  }
  k = add_str(r, key, YAML_PLAIN_SCALAR_STYLE);
  yaml_document_append_mapping_pair(r->doc, map, k, value);
}

static void map_set_str(struct render *r, int map, const char *key, const char *value,
                        yaml_scalar_style_t style)
{
  map_set(r, map, key, add_str(r, value, style));
}

/* The mapping under key, made one when absent or null. */
static int map_child_map(struct render *r, int map, const char *key, agt_error_t *err)
{
  int v = map_value(r, map, key);

  if (v && node(r, v)->type == YAML_MAPPING_NODE)
    return v;
  if (v &&
      !(node(r, v)->type == YAML_SCALAR_NODE && (strcmp(agt_yaml_scalar(node(r, v)), "") == 0 ||
                                                 strcmp(agt_yaml_scalar(node(r, v)), "null") == 0)))
    return agt_yaml_error(r->y, node(r, v), err, "'%s' must be a mapping", key);
  v = add_map(r);
  map_set(r, map, key, v);
  return v;
}

/* The sequence under key, made one (block style) when absent or null. */
static int map_child_seq(struct render *r, int map, const char *key, agt_error_t *err)
{
  int v = map_value(r, map, key);

  if (v && node(r, v)->type == YAML_SEQUENCE_NODE) {
    node(r, v)->data.sequence.style = YAML_BLOCK_SEQUENCE_STYLE;
    return v;
  }
  if (v &&
      !(node(r, v)->type == YAML_SCALAR_NODE && (strcmp(agt_yaml_scalar(node(r, v)), "") == 0 ||
                                                 strcmp(agt_yaml_scalar(node(r, v)), "null") == 0)))
    return agt_yaml_error(r->y, node(r, v), err, "'%s' must be a list", key);
  v = add_seq(r);
  map_set(r, map, key, v);
  return v;
}

static void add_mount(struct render *r, int seq, const char *location, const char *mount_point,
                      int writable)
{
  int m = add_map(r);

  map_set_str(r, m, "location", location, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
  if (mount_point && strcmp(mount_point, location) != 0)
    map_set_str(r, m, "mountPoint", mount_point, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
  map_set_str(r, m, "writable", writable ? "true" : "false", YAML_PLAIN_SCALAR_STYLE);
  yaml_document_append_sequence_item(r->doc, seq, m);
}

/* provision[] and probes[] entries given as `file: {url: RELATIVE}` (or `file: RELATIVE`)
 * become `script:` with the file's text, so the rendered YAML stands alone. */
static int inline_files(struct render *r, int root, const char *key, agt_error_t *err)
{
  int seq = map_value(r, root, key);
  yaml_node_t *s = seq ? node(r, seq) : NULL;

  if (s == NULL || s->type != YAML_SEQUENCE_NODE)
    return 0;
  for (int i = 0; i < s->data.sequence.items.top - s->data.sequence.items.start; i++) {
    int item = node(r, seq)->data.sequence.items.start[i];
    int file = node(r, item)->type == YAML_MAPPING_NODE ? map_value(r, item, "file") : 0;
    const char *url;
    cleanup_free char *path = NULL, *text = NULL;
    yaml_node_t *it;

    if (file == 0)
      continue;
    if (node(r, file)->type == YAML_MAPPING_NODE) {
      int u = map_value(r, file, "url");
      url = u ? agt_yaml_scalar(node(r, u)) : NULL;
    } else {
      url = agt_yaml_scalar(node(r, file));
    }
    if (url == NULL || url[0] == '/' || strstr(url, "://") || strstr(url, ".."))
      return agt_yaml_error(r->y, node(r, file), err,
                            "%s: 'file' must name a file beside the template", key);
    path = xasprintf("%s/%s", r->dir, url);
    text = agt_read_file(path, SCRIPT_MAX, NULL, err);
    if (text == NULL)
      return agt_error_wrap(err, "%s: inline %s", r->y->file, key);
    /* replace the pair `file: ...` by `script: TEXT` */
    it = node(r, item);
    for (long j = 0; j < it->data.mapping.pairs.top - it->data.mapping.pairs.start; j++) {
      if (node(r, item)->data.mapping.pairs.start[j].value == file) {
        int k = add_str(r, "script", YAML_PLAIN_SCALAR_STYLE);
        int v = add_str(r, text, YAML_LITERAL_SCALAR_STYLE);
        node(r, item)->data.mapping.pairs.start[j].key = k;
        node(r, item)->data.mapping.pairs.start[j].value = v;
        break;
      }
    }
  }
  return 0;
}

struct outbuf {
  char *buf;
  size_t len, cap;
};

static int write_cb(void *data, unsigned char *buffer, size_t size)
{
  struct outbuf *o = data;

  if (o->len + size + 1 > o->cap) {
    o->cap = (o->len + size + 1) * 2;
    o->buf = xrealloc(o->buf, o->cap);
  }
  memcpy(o->buf + o->len, buffer, size);
  o->len += size;
  o->buf[o->len] = '\0';
  return 1;
}

static int check_source_tree(const char *dir, agt_error_t *err)
{
  cleanup_free char *m = xasprintf("%s/meson.build", dir);
  cleanup_free char *g = xasprintf("%s/guest/meson.build", dir);
  struct stat st;

  if (stat(m, &st) < 0 || stat(g, &st) < 0)
    return agt_error_kind(err, AGT_E_INVALID,
                          "vm.agt_source '%s' is not an agt source tree (no guest/meson.build): "
                          "the VM builds agtd from it",
                          dir);
  return 0;
}

int agt_template_render(const struct agt_config *cfg, const struct agt_host *host,
                        const char *jails_disk, char **out, agt_error_t *err)
{
  const char *tmpl = agt_config_get(cfg, AGT_CFG_VM_TEMPLATE);
  const char *vm_type = agt_config_get(cfg, AGT_CFG_VM_TYPE);
  const char *arch = agt_config_get(cfg, AGT_CFG_VM_ARCH);
  const char *image = agt_config_get(cfg, AGT_CFG_VM_IMAGE);
  const char *digest = agt_config_get(cfg, AGT_CFG_VM_IMAGE_DIGEST);
  const char *kernel = agt_config_get(cfg, AGT_CFG_VM_KERNEL);
  const char *cmdline = agt_config_get(cfg, AGT_CFG_VM_KERNEL_CMDLINE);
  const char *initrd = agt_config_get(cfg, AGT_CFG_VM_INITRD);
  const char *mount_type = agt_config_get(cfg, AGT_CFG_VM_MOUNT_TYPE);
  const char *rosetta = agt_config_get(cfg, AGT_CFG_VM_ROSETTA);
  const char *source = agt_config_get(cfg, AGT_CFG_VM_AGT_SOURCE);
  cleanup_free char *dir = NULL, *mem = NULL, *disk = NULL, *src_mp = NULL;
  struct agt_strv roots = {0};
  struct outbuf ob = {0};
  struct render r;
  yaml_emitter_t em;
  agt_yaml_t y;
  uint64_t n;
  int root, v, ret = -1;
  const char *slash;

  *out = NULL;
  if (strcmp(vm_type, "auto") == 0)
    vm_type = agt_default_vm_type(host);
  if (strcmp(vm_type, "vz") == 0 && !host_is_darwin(host))
    return agt_error_kind(err, AGT_E_INVALID, "vm.vm_type vz needs macOS (this host is %s)",
                          host->os);
  if (strcmp(vm_type, "vz") == 0 && host->os_version && !agt_macos_has_vz(host->os_version))
    return agt_error_kind(err, AGT_E_INVALID,
                          "vm.vm_type vz needs macOS 13 or later (this Mac runs macOS %s): "
                          "use qemu (brew install qemu) or auto",
                          host->os_version);
  if (strcmp(rosetta, "on") == 0) {
    if (strcmp(vm_type, "vz") != 0 || strcmp(host->arch, "aarch64") != 0)
      return agt_error_kind(err, AGT_E_INVALID,
                            "vm.rosetta on needs a Mac with Apple silicon and vm_type vz (this "
                            "host: %s %s, vm_type %s)",
                            host->os, host->arch, vm_type);
    if (!host->rosetta && host->os_version)
      return agt_error_kind(err, AGT_E_INVALID,
                            "vm.rosetta on: Rosetta is not installed on this Mac (no %s): "
                            "softwareupdate --install-rosetta --agree-to-license",
                            AGT_ROSETTA_PATH);
  }
  if (check_source_tree(source, err) < 0)
    return -1;
  if ((kernel || initrd || digest) && image == NULL)
    return agt_error_kind(err, AGT_E_INVALID,
                          "%s is set but vm.image is not: it belongs to vm.image",
                          kernel   ? "vm.kernel"
                          : initrd ? "vm.initrd"
                                   : "vm.image_digest");
  if ((cmdline || initrd) && kernel == NULL)
    return agt_error_kind(err, AGT_E_INVALID, "%s is set but vm.kernel is not",
                          cmdline ? "vm.kernel_cmdline" : "vm.initrd");
  if (agt_yaml_load_file(&y, tmpl, err) < 0 || agt_yaml_refuse_nul(&y, err) < 0) {
    agt_yaml_release(&y);
    return agt_error_wrap(err, "template");
  }
  slash = strrchr(tmpl, '/');
  dir = slash ? xstrndup(tmpl, (size_t)(slash - tmpl)) : xstrdup(".");
  r.doc = &y.doc;
  r.y = &y;
  r.dir = dir;
  if (agt_yaml_root(&y) == NULL || agt_yaml_root(&y)->type != YAML_MAPPING_NODE) {
    agt_yaml_error(&y, agt_yaml_root(&y), err, "a Lima template is a mapping");
    goto out;
  }
  root = 1; /* libyaml's root node is always the first */

  map_set_str(&r, root, "vmType", vm_type, YAML_PLAIN_SCALAR_STYLE);
  if (strcmp(rosetta, "on") == 0) {
    /* vmOpts.vz.rosetta: x86_64 Linux binaries run in the aarch64 guest (binfmt_misc) */
    int vo, vz, ro;
    if ((vo = map_child_map(&r, root, "vmOpts", err)) < 0 ||
        (vz = map_child_map(&r, vo, "vz", err)) < 0 ||
        (ro = map_child_map(&r, vz, "rosetta", err)) < 0)
      goto out;
    map_set_str(&r, ro, "enabled", "true", YAML_PLAIN_SCALAR_STYLE);
    map_set_str(&r, ro, "binfmt", "true", YAML_PLAIN_SCALAR_STYLE);
  }
  if (strcmp(arch, "default") != 0)
    map_set_str(&r, root, "arch", arch, YAML_PLAIN_SCALAR_STYLE);
  map_set_str(&r, root, "cpus", agt_config_get(cfg, AGT_CFG_VM_CPUS), YAML_PLAIN_SCALAR_STYLE);
  if (agt_config_size(cfg, AGT_CFG_VM_MEMORY, &n, err) < 0)
    goto out;
  mem = agt_lima_size(n);
  map_set_str(&r, root, "memory", mem, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
  if (agt_config_size(cfg, AGT_CFG_VM_DISK, &n, err) < 0)
    goto out;
  disk = agt_lima_size(n);
  map_set_str(&r, root, "disk", disk, YAML_DOUBLE_QUOTED_SCALAR_STYLE);

  if (image) {
    int seq = add_seq(&r), im = add_map(&r);
    map_set_str(&r, im, "location", image, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    map_set_str(&r, im, "arch", strcmp(arch, "default") ? arch : host->arch,
                YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    if (digest)
      map_set_str(&r, im, "digest", digest, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    if (kernel) { /* direct kernel boot: Lima hands these to QEMU's -kernel/-append/-initrd */
      int k = add_map(&r);
      map_set_str(&r, k, "location", kernel, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
      if (cmdline)
        map_set_str(&r, k, "cmdline", cmdline, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
      map_set(&r, im, "kernel", k);
    }
    if (initrd) {
      int d = add_map(&r);
      map_set_str(&r, d, "location", initrd, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
      map_set(&r, im, "initrd", d);
    }
    yaml_document_append_sequence_item(r.doc, seq, im);
    map_set(&r, root, "images", seq);
  }

  /* param: the guest path of the source tree comes from the template */
  if ((v = map_child_map(&r, root, "param", err)) < 0)
    goto out;
  {
    int mp = map_value(&r, v, "AgtSourceDir");
    const char *s = mp ? agt_yaml_scalar(node(&r, mp)) : NULL;
    src_mp = xstrdup(s && s[0] == '/' ? s : "/opt/agt/src");
  }

  if ((v = map_child_seq(&r, root, "mounts", err)) < 0)
    goto out;
  for (size_t i = 0; i < cfg->nmounts; i++) {
    const struct agt_cfg_mount *m = &cfg->mounts[i];
    const char *mp = m->mount_point ? m->mount_point : m->location;
    if (strchr(mp, ':')) {
      cleanup_free char *where = agt_cfg_origin_str(&m->origin);
      agt_error_kind(err, AGT_E_INVALID, "%s: mount point '%s' must not contain ':'", where, mp);
      goto out;
    }
    add_mount(&r, v, m->location, m->mount_point, m->writable);
    agt_strv_push(&roots, mp);
  }
  add_mount(&r, v, source, src_mp, 0);
  if (strcmp(mount_type, "default") != 0)
    map_set_str(&r, root, "mountType", mount_type, YAML_PLAIN_SCALAR_STYLE);
  else
    map_set_str(&r, root, "mountType", strcmp(vm_type, "vz") == 0 ? "virtiofs" : "9p",
                YAML_PLAIN_SCALAR_STYLE);

  v = map_child_map(&r, root, "param", err);
  {
    cleanup_free char *s = NULL;
    size_t len = 0;
    for (size_t i = 0; i < roots.n; i++)
      len += strlen(roots.v[i]) + 1;
    s = xzalloc(len + 1);
    for (size_t i = 0; i < roots.n; i++) {
      if (i)
        strcat(s, ":");
      strcat(s, roots.v[i]);
    }
    map_set_str(&r, v, "AgtSourceDir", src_mp, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    map_set_str(&r, v, "AgtWorkspaceRoots", s, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    map_set_str(&r, v, "AgtdSocket", agt_config_get(cfg, AGT_CFG_AGTD_SOCKET),
                YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    map_set_str(&r, v, "AgtJailsDisk", jails_disk ? jails_disk : "",
                YAML_DOUBLE_QUOTED_SCALAR_STYLE);
  }
  if (jails_disk) {
    /* Lima attaches it without formatting it; provisioning makes it btrfs, and Lima's boot
     * script mounts it as btrfs from the second boot on. */
    int seq = add_seq(&r), d = add_map(&r);
    map_set_str(&r, d, "name", jails_disk, YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    map_set_str(&r, d, "format", "false", YAML_PLAIN_SCALAR_STYLE);
    map_set_str(&r, d, "fsType", "btrfs", YAML_DOUBLE_QUOTED_SCALAR_STYLE);
    yaml_document_append_sequence_item(r.doc, seq, d);
    map_set(&r, root, "additionalDisks", seq);
  }

  if (inline_files(&r, root, "provision", err) < 0 || inline_files(&r, root, "probes", err) < 0)
    goto out;

  {
    char head[1024];
    snprintf(head, sizeof head,
             "# Rendered by agt %s from %s for %s/%s.\n"
             "# agt writes this again for every new VM; change agt's config, not this file.\n",
             AGT_VERSION, tmpl, host->os, host->arch);
    write_cb(&ob, (unsigned char *)head, strlen(head));
  }
  if (!yaml_emitter_initialize(&em)) {
    agt_error_kind(err, AGT_E_INTERNAL, "cannot initialise the YAML emitter");
    goto out;
  }
  yaml_emitter_set_output(&em, write_cb, &ob);
  yaml_emitter_set_unicode(&em, 1);
  yaml_emitter_set_width(&em, 1000);
  yaml_emitter_set_indent(&em, 2);
  y.doc.start_implicit = 1;
  y.doc.end_implicit = 1;
  y.loaded = 0; /* yaml_emitter_dump destroys the document, even when it fails */
  if (!yaml_emitter_open(&em) || !yaml_emitter_dump(&em, &y.doc) || !yaml_emitter_close(&em)) {
    agt_error_kind(err, AGT_E_INTERNAL, "write the rendered template: %s",
                   em.problem ? em.problem : "YAML emitter failed");
    yaml_emitter_delete(&em);
    goto out;
  }
  yaml_emitter_delete(&em);
  *out = steal_pointer(&ob.buf);
  ret = 0;
out:
  agt_strv_clear(&roots);
  free(ob.buf);
  agt_yaml_release(&y);
  return ret;
}
