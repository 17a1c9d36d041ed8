// What the plugin counts, readable by a program that dlopen()s it
// (dlsym "weft_nccl_net_counters"): the plan's effect on its QPs.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint64_t planned;       // QPs that got their planned UDP source port
  uint64_t unplanned;     // QPs a loaded plan did not list (flow label 0, one log line each)
  uint64_t unapplicable;  // plan entries that could not be applied (flow label 0, one log line each)
  uint64_t errors;        // calls that returned an error (each with a log line)
} weft_nccl_net_counters_t;

typedef void (*weft_nccl_net_counters_fn)(weft_nccl_net_counters_t* out);

#ifdef __cplusplus
}
#endif
