/* Cleanup vocabulary: a variable declared with one of these is released when it goes out
 * of scope.  Ownership leaves a function through steal_pointer() (or steal_fd()), which
 * returns the value and clears the variable. */
#ifndef AGT_CLEANUP_H
#define AGT_CLEANUP_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>

void agt_cleanup_freep(void *p);
void agt_cleanup_closep(int *fd);
void agt_cleanup_filep(FILE **f);
void agt_cleanup_dirp(DIR **d);
void agt_cleanup_strvp(char ***v);

#define cleanup_free __attribute__((cleanup(agt_cleanup_freep)))
#define cleanup_close __attribute__((cleanup(agt_cleanup_closep)))
#define cleanup_file __attribute__((cleanup(agt_cleanup_filep)))
#define cleanup_dir __attribute__((cleanup(agt_cleanup_dirp)))
#define cleanup_strv __attribute__((cleanup(agt_cleanup_strvp)))

static inline void *agt_steal_pointer(void *pp)
{
  void **p = (void **)pp;
  void *v = *p;
  *p = NULL;
  return v;
}
/* Type-checked: the 0 ? branch makes the compiler check *(pp) is a pointer of the result type. */
#define steal_pointer(pp) (0 ? (*(pp)) : agt_steal_pointer(pp))

static inline int steal_fd(int *fd)
{
  int v = *fd;
  *fd = -1;
  return v;
}

void agt_strv_free(char **v);

#endif
