/* Redis Cluster's slots, for the timers (SPEC 26.1 point 11): a queue's keys share one hash tag,
 * so one slot, and a node holds them only while it serves that slot. While the slot moves
 * (resharding: MIGRATE carries the keys one at a time) some of a queue's keys are on each node,
 * and a firing on either would write a key the other still holds (the migration would then fail
 * on it, BUSYKEY): the timers leave a moving slot alone until it settles. The slot states come
 * from CLUSTER NODES, read once a watch tick, never on a firing. */
#include "slots.h"

#include <stdlib.h>
#include <string.h>

#define SLOTS 16384

static unsigned char moving[SLOTS / 8];

/* CRC16-CCITT (XMODEM), the cluster's key hash. */
static unsigned crc16(const char *p, size_t n) {
  unsigned crc = 0;
  for (size_t i = 0; i < n; i++) {
    crc ^= (unsigned)(unsigned char)p[i] << 8;
    for (int b = 0; b < 8; b++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
    crc &= 0xffff;
  }
  return crc;
}

int slot_of(const char *key, size_t n) {
  size_t open = 0;
  while (open < n && key[open] != '{') open++;
  if (open < n) {
    size_t close = open + 1;
    while (close < n && key[close] != '}') close++;
    if (close < n && close > open + 1) return (int)(crc16(key + open + 1, close - open - 1) & (SLOTS - 1));
  }
  return (int)(crc16(key, n) & (SLOTS - 1));
}

/* The `myself` line lists a moving slot as `[<slot>->-<node>]` (migrating) or `[<slot>-<-<node>]`
 * (importing), after its served ranges. */
void slots_refresh(RedisModuleCtx *ctx) {
  memset(moving, 0, sizeof(moving));
  RedisModuleCallReply *r = RedisModule_Call(ctx, "CLUSTER", "c", "NODES");
  if (!r) return;
  size_t len = 0;
  const char *text = RedisModule_CallReplyType(r) == REDISMODULE_REPLY_STRING ? RedisModule_CallReplyStringPtr(r, &len) : NULL;
  for (size_t at = 0; text && at < len;) {
    const char *line = text + at;
    const char *end = memchr(line, '\n', len - at);
    size_t ln = end ? (size_t)(end - line) : len - at;
    at += ln + 1;
    const char *flags = memchr(line, ' ', ln);
    if (!flags || ln - (size_t)(flags - line) < 8) continue;
    flags = memchr(flags + 1, ' ', ln - (size_t)(flags + 1 - line)); /* past the address */
    if (!flags || strncmp(flags + 1, "myself", 6) != 0) continue;
    for (const char *p = line; p < line + ln; p++) {
      if (*p != '[') continue;
      char *after;
      long slot = strtol(p + 1, &after, 10);
      if (after < line + ln && *after == '-' && slot >= 0 && slot < SLOTS) moving[slot / 8] |= (unsigned char)(1u << (slot % 8));
    }
  }
  RedisModule_FreeCallReply(r);
}

int slot_moving(int slot) {
  return slot >= 0 && slot < SLOTS && (moving[slot / 8] >> (slot % 8)) & 1;
}
