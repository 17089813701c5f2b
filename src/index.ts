export { Backoff, type BackoffPolicy } from './backoff.js';
export type { ConnectOptions, RedisClient } from './connector.js';
export {
  type ConsumeOptions,
  Consumer,
  type ConsumerEvents,
  type Handler,
  type Job,
  type JobContext,
  type Recovery,
  UnrecoverableError,
} from './consumer.js';
export { EchoMQ, type EchoMQOptions } from './echomq.js';
export { EchoMQError, type ErrorCode } from './errors.js';
export { type EventName, type EventsOptions, eventsOf, type QueueEvent, QueueEvents } from './events.js';
export type { FlowJob, FlowJobOptions, FlowNode, FlowResult } from './flows.js';
export { isJobId, mintJobId } from './ids.js';
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
} from './jobs.js';
export { PROTOCOL_VERSION } from './keyspace.js';
export { type LaneInfo, type LaneSettings, Lanes, type RateLimit } from './lanes.js';
export { type ModuleMode, NATIVE_COMMANDS } from './native-module.js';
export { calculateNextMillis, type RepeatOptions, validateRepeatOptions } from './next-run.js';
export {
  type CatchUp,
  occurrenceId,
  type PumpResult,
  type RegisterOptions,
  Repeat,
  type RepeatView,
} from './repeat.js';
export {
  type AdvanceResult,
  JobSchedulers,
  type SchedulerJobOptions,
  type SchedulerTemplate,
  type SchedulerView,
  type StoredRepeat,
  type UpsertResult,
  type UpsertStatus,
} from './scheduler.js';
