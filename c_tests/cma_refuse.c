/* Refuses cross-memory attach, as a kernel whose policy forbids it does
 * (EPERM). LD_PRELOADed by the cma_refused.* tests (run_cma_refused.sh), so
 * that ferrocoll's fallbacks from reading peers' memory to the rings and
 * slots run across real processes. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/types.h>
#include <sys/uio.h>

ssize_t process_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal,
                         const struct iovec *remote, unsigned long nremote,
                         unsigned long flags) {
  (void)pid; (void)local; (void)nlocal; (void)remote; (void)nremote; (void)flags;
  errno = EPERM;
  return -1;
}

ssize_t process_vm_writev(pid_t pid, const struct iovec *local, unsigned long nlocal,
                          const struct iovec *remote, unsigned long nremote,
                          unsigned long flags) {
  (void)pid; (void)local; (void)nlocal; (void)remote; (void)nremote; (void)flags;
  errno = EPERM;
  return -1;
}
