#ifndef AGT_CTL_H
#define AGT_CTL_H

#define AGT_DEFAULT_SOCKET "/run/agt/agtd.sock"
#define AGT_DEFAULT_STATE "/var/lib/agt"

/* argv[0] is "ctl". */
int agtd_ctl_main(int argc, char **argv);

#endif
