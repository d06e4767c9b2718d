/* agtd's clock for durations (a start's latency, a stop's grace): monotonic nanoseconds.
 * Depends on nothing. */
#ifndef AGT_CLOCK_H
#define AGT_CLOCK_H

#include <stdint.h>

uint64_t agt_now_ns(void);

#endif
