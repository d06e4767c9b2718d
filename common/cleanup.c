#include "cleanup.h"

#include <errno.h>
#include <unistd.h>

void agt_cleanup_freep(void *p)
{
  void **pp = (void **)p;
  free(*pp);
  *pp = NULL;
}

void agt_cleanup_closep(int *fd)
{
  if (*fd >= 0) {
    int saved = errno;
    close(*fd);
    errno = saved;
  }
  *fd = -1;
}

void agt_cleanup_filep(FILE **f)
{
  if (*f)
    fclose(*f);
  *f = NULL;
}

void agt_cleanup_dirp(DIR **d)
{
  if (*d)
    closedir(*d);
  *d = NULL;
}

void agt_strv_free(char **v)
{
  if (v == NULL)
    return;
  for (char **p = v; *p; p++)
    free(*p);
  free(v);
}

void agt_cleanup_strvp(char ***v)
{
  agt_strv_free(*v);
  *v = NULL;
}
