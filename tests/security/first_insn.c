/* A jail's agent that asks for its scheduling policy at its very first instruction, before
 * any C library start-up (which would take longer than the window it looks for): a prepared
 * jail's start runs SCHED_FIFO until the agent's exec (guest/jail/start_prio.h), and the agent
 * must be SCHED_OTHER before its own code runs.  Prints "first POLICY" (SCHED_RESET_ON_FORK
 * masked off) and exits.  No libc: linked with -nostdlib -static, system calls by hand. */
#if defined(__x86_64__)
#define NR_WRITE 1
#define NR_EXIT 60
#define NR_SCHED_GETSCHEDULER 145
static long sys3(long n, long a, long b, long c)
{
  long r;
  __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
  return r;
}
#elif defined(__aarch64__)
#define NR_WRITE 64
#define NR_EXIT 93
#define NR_SCHED_GETSCHEDULER 121
static long sys3(long n, long a, long b, long c)
{
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a;
  register long x1 __asm__("x1") = b;
  register long x2 __asm__("x2") = c;
  __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
  return x0;
}
#else
#error "first_insn: x86_64 or aarch64"
#endif

void _start(void);

void _start(void)
{
  long policy = sys3(NR_SCHED_GETSCHEDULER, 0, 0, 0) & ~0x40000000L; /* SCHED_RESET_ON_FORK */
  char out[] = "first ?\n";

  out[6] = (char)('0' + (policy >= 0 && policy < 10 ? policy : 9));
  sys3(NR_WRITE, 1, (long)out, sizeof out - 1);
  sys3(NR_EXIT, 0, 0, 0);
  for (;;)
    ;
}
