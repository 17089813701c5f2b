export type { Batch, BatchHandler, BatchJob, BatchOptions } from './consumer/batch.js';
export {
  type ConsumeOptions,
  Consumer,
  type ConsumerEvents,
  type Recovery,
  UnrecoverableError,
} from './consumer/consumer.js';
export { ClaimedJob, type ClaimOptions } from './consumer/manual.js';
export { RateLimitError, retryAfterMs, SnoozeError } from './consumer/putback.js';
export type { RetryPolicies, RetryPolicy } from './consumer/retry-policy.js';
export type { SandboxConsumeOptions } from './consumer/sandbox/consume.js';
export type { SandboxKind, SandboxOptions } from './consumer/sandbox/pool.js';
export { type AttemptRun, type AttemptRuns, foldAttempts, type RunOutcome } from './core/attempts.js';
export { Backoff, type BackoffPolicy } from './core/backoff.js';
export { EchoMQError, type ErrorCode } from './core/errors.js';
export { isJobId, mintJobId, occurrenceId } from './core/ids.js';
export {
  type CleanOptions,
  type DedupeOptions,
  type EnqueueOptions,
  type EnqueueStatus,
  type EventName,
  type Handler,
  JOB_STATES,
  type Job,
  type JobContext,
  type JobState,
  type JobView,
  type LaneInfo,
  type MigrateOptions,
  type MigrateResult,
  type QueueEvent,
  type QueueOptions,
  type QueueSettings,
  type RateLimit,
  type ScheduleStatus,
} from './core/types.js';
export { type EventsOptions, eventsOf, QueueEvents } from './events/reader.js';
export type { FlowJob, FlowJobOptions, FlowNode, FlowOptions, FlowResult } from './flows/add.js';
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
} from './inspect/inspector.js';
export { type LaneSettings, Lanes } from './lanes/lanes.js';
export { EchoMQ, type EchoMQOptions } from './queue/echomq.js';
export { Queue } from './queue/queue.js';
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
export type { Dependency, DependencyPage, FlowTree } from './wire/flow-reads.js';
export type { ScriptsMode } from './wire/functions.js';
export { PROTOCOL_VERSION, PROTOCOL_VERSIONS } from './wire/keyspace.js';
export type { EngineClock } from './wire/memory/clock.js';
export { type ModuleMode, NATIVE_COMMANDS } from './wire/native-module.js';
