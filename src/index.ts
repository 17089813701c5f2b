export { Backoff, type BackoffPolicy } from './backoff.js';
export type { ConnectOptions, RedisClient } from './connector.js';
export { EchoMQ, type EchoMQOptions } from './echomq.js';
export { EchoMQError, type ErrorCode } from './errors.js';
export { isJobId, mintJobId } from './ids.js';
export {
  type EnqueueOptions,
  type EnqueueStatus,
  JOB_STATES,
  type JobState,
  type JobView,
  Queue,
  type QueueOptions,
  type ScheduleStatus,
} from './jobs.js';
export { PROTOCOL_VERSION } from './keyspace.js';
