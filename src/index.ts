export {
  type ConsumeOptions,
  Consumer,
  type ConsumerEvents,
  type Handler,
  type Job,
  type JobContext,
  type Recovery,
  UnrecoverableError,
} from './consumer/consumer.js';
export { Backoff, type BackoffPolicy } from './core/backoff.js';
export { EchoMQError, type ErrorCode } from './core/errors.js';
export { isJobId, mintJobId, occurrenceId } from './core/ids.js';
export { EchoMQ, type EchoMQOptions } from './echomq.js';
export {
  type EventName,
  type EventsOptions,
  eventsOf,
  type QueueEvent,
  QueueEvents,
} from './events/reader.js';
export type { FlowJob, FlowJobOptions, FlowNode, FlowResult } from './flows.js';
export {
  type ConsumerInfo,
  Inspector,
  type JobDetail,
  type JobsPage,
  type JobsResult,
  type MinuteRate,
  type QueueRates,
  type QueueStats,
  type QueueSummary,
  type RepeatSummary,
  type SchedulerSummary,
  type SchedulersResult,
} from './inspect.js';
export { type LaneInfo, type LaneSettings, Lanes, type RateLimit } from './lanes.js';
export {
  type CleanOptions,
  type DedupeOptions,
  type EnqueueOptions,
  type EnqueueStatus,
  JOB_STATES,
  type JobState,
  type JobView,
  Queue,
  type QueueOptions,
  type QueueSettings,
  type ScheduleStatus,
} from './queue.js';
export { calculateNextMillis, type RepeatOptions, validateRepeatOptions } from './recurring/next-run.js';
export {
  type CatchUp,
  type PumpResult,
  type RegisterOptions,
  Repeat,
  type RepeatView,
} from './recurring/repeat.js';
export {
  type AdvanceResult,
  JobSchedulers,
  type SchedulerJobOptions,
  type SchedulerTemplate,
  type SchedulerView,
  type StoredRepeat,
  type UpsertResult,
  type UpsertStatus,
} from './recurring/schedulers.js';
export type { ConnectOptions, RedisClient } from './wire/connector.js';
export type { Durability } from './wire/durability.js';
export { PROTOCOL_VERSION } from './wire/keyspace.js';
export type { EngineClock } from './wire/memory/clock.js';
export { type ModuleMode, NATIVE_COMMANDS } from './wire/native-module.js';
