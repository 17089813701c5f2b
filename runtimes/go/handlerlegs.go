package echomq

// What a handler can ask of the consumer besides success and failure, as TypeScript's
// handlers can: run again later without spending an attempt (Snooze), back off because the
// service it calls pushed back (RateLimited: the whole queue's claiming, or the job's lane's,
// is held on the server for every consumer of either runtime), and write lines to the job's
// log (Job.Log). Each is fenced by the job's lease token.

import (
	"context"
	"errors"
	"time"

	"github.com/gomodule/redigo/redis"
)

// SnoozeError puts the job back to run again after Delay (server clock), no attempt spent.
type SnoozeError struct{ Delay time.Duration }

func (e *SnoozeError) Error() string { return "snoozed for " + e.Delay.String() }

// Snooze is what a handler returns to run its job again after delay (>= 1 ms) without
// spending an attempt (a step job waiting for its next step).
func Snooze(delay time.Duration) error { return &SnoozeError{Delay: delay} }

// RateLimitError puts the job back and holds claiming for Delay: the queue's for a flat job,
// its lane's for a grouped one, for every consumer.
type RateLimitError struct{ Delay time.Duration }

func (e *RateLimitError) Error() string { return "rate limited for " + e.Delay.String() }

// RateLimited is what a handler returns when the service it calls pushed back (an HTTP 429):
// the job returns to claimable work without spending an attempt, and claiming is held for
// delay (>= 1 ms) on the server clock.
func RateLimited(delay time.Duration) error { return &RateLimitError{Delay: delay} }

// putBack runs a snooze or a rate limit a handler returned; false for any other error.
func (c *Consumer) putBack(job *Job, handlerErr error) bool {
	var snooze *SnoozeError
	var limit *RateLimitError
	verb, kind, delay := "", "", time.Duration(0)
	switch {
	case errors.As(handlerErr, &snooze):
		verb, kind, delay = "snooze", "snoozed", snooze.Delay
	case errors.As(handlerErr, &limit):
		verb, kind, delay = "rate_limit", "rate_limited", limit.Delay
	default:
		return false
	}
	ms := delay.Milliseconds()
	if ms < 1 {
		c.failed(job, newError("EMQINPUT", "%s needs a delay of at least 1 ms, got %v; the attempt failed", verb, delay))
		return true
	}
	c.mu.Lock()
	if job.released {
		c.mu.Unlock()
		c.finish(job)
		return true
	}
	job.acking = true
	c.mu.Unlock()
	c.settle(job, func() error {
		at, err := redis.Int64(c.q.Run(c.own, verb, job.ID, c.q.Prefix, job.ID, job.token, ms))
		if err != nil {
			return err
		}
		c.finish(job)
		outcome := kind
		if at < 0 {
			outcome = "dead" // bad data on its row: dead-lettered by the script
		}
		c.emit(ConsumerEvent{Kind: kind, Job: job, Outcome: outcome, WaitMs: ms})
		return nil
	})
	c.freedSlot()
	return true
}

// Log appends lines to the job's log (kept to the consumer's MaxLogLines, each cut to
// MaxLogLineBytes), fenced by the lease: ErrLease when the job is no longer this run's. ctx is
// usually the handler's.
func (j *Job) Log(ctx context.Context, lines ...string) error {
	if len(lines) == 0 {
		return nil
	}
	argv := []interface{}{j.c.q.Prefix, j.c.opts.MaxLogLines, j.ID, j.token, len(lines)}
	for _, l := range lines {
		argv = append(argv, clipBytes(l, j.c.opts.MaxLogLineBytes))
	}
	statuses, err := redis.Strings(j.c.q.Run(ctx, "log", "", argv...))
	if err != nil {
		return err
	}
	if len(statuses) > 0 && statuses[0] != "OK" {
		return newError(statuses[0], "job %s is no longer held by this run: its log lines were dropped", j.ID)
	}
	return nil
}

// LogPage is a page of a job's log and how many lines it holds.
type LogPage struct {
	Logs  []string
	Count int64
}

// Logs reads count lines (0: 100) of a job's log from index from (0: the oldest kept).
func (q *Queue) Logs(ctx context.Context, id string, from, count int) (LogPage, error) {
	if err := CheckID(id); err != nil {
		return LogPage{}, err
	}
	if count == 0 {
		count = 100
	}
	if from < 0 || count < 1 {
		return LogPage{}, newError("EMQINPUT", "from must be >= 0 and count >= 1, got %d and %d", from, count)
	}
	conn, err := q.connContext(ctx)
	if err != nil {
		return LogPage{}, err
	}
	defer conn.Close()
	key := q.JobKey(id) + ":logs"
	conn.Send("LRANGE", key, from, from+count-1)
	conn.Send("LLEN", key)
	if err := conn.Flush(); err != nil {
		return LogPage{}, err
	}
	logs, err := redis.Strings(conn.Receive())
	if err != nil {
		return LogPage{}, err
	}
	n, err := redis.Int64(conn.Receive())
	return LogPage{Logs: logs, Count: n}, err
}
