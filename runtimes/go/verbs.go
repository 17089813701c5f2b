package echomq

// The verbs a Go service calls on a queue, over the scripts TypeScript's src/queue/,
// src/jobs/ and src/lanes/ call: pause and resume (the queue, or one lane), lanes' settings,
// drain, clean, retry and retryAll, promote, reschedule, reprioritize, update, remove, counts
// and waitFor. Every call takes a context first: a done context makes no call, and WaitFor
// returns when it is done.

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Pause holds the whole queue: no claims until Resume; running jobs finish. True when it was
// running.
func (q *Queue) Pause(ctx context.Context) (bool, error) {
	n, err := redis.Int(q.Run(ctx, "pause", "", q.Prefix))
	return n == 1, err
}

// Resume lets a paused queue run again. True when it was paused.
func (q *Queue) Resume(ctx context.Context) (bool, error) {
	n, err := redis.Int(q.Run(ctx, "resume", "", q.Prefix))
	return n == 1, err
}

// ── lanes ───────────────────────────────────────────────────────────────────

// Lanes configures and holds a queue's lanes (groups).
type Lanes struct{ q *Queue }

// Lanes returns the queue's lanes.
func (q *Queue) Lanes() *Lanes { return &Lanes{q: q} }

// RateLimit is at most Max claims in any PerMs window.
type RateLimit struct {
	Max   int64
	PerMs int64
}

// LaneSettings: nil fields stay as they are.
type LaneSettings struct {
	// Concurrency is the lane's jobs running at once across every consumer (0: unlimited); nil
	// keeps it.
	Concurrency *int
	// ClearConcurrency removes the lane's own concurrency (the lanes' default applies again).
	ClearConcurrency bool
	// Rate is the lane's claim rate; nil keeps it.
	Rate *RateLimit
	// ClearRate removes the lane's rate limit.
	ClearRate bool
}

func (s LaneSettings) encode() (string, string, error) {
	conc, rate := "", ""
	switch {
	case s.ClearConcurrency && s.Concurrency != nil:
		return "", "", newError("EMQINPUT", "set Concurrency or ClearConcurrency, not both")
	case s.ClearConcurrency:
		conc = "-"
	case s.Concurrency != nil:
		if *s.Concurrency < 0 {
			return "", "", newError("EMQINPUT", "lane concurrency must be a whole number >= 0 (0 = unlimited), got %d", *s.Concurrency)
		}
		conc = strconv.Itoa(*s.Concurrency)
	}
	switch {
	case s.ClearRate && s.Rate != nil:
		return "", "", newError("EMQINPUT", "set Rate or ClearRate, not both")
	case s.ClearRate:
		rate = "-"
	case s.Rate != nil:
		if s.Rate.Max < 1 || s.Rate.PerMs < 1 {
			return "", "", newError("EMQINPUT", "lane rate needs whole numbers Max >= 1 and PerMs >= 1, e.g. RateLimit{Max: 10, PerMs: 1000}, got %+v", *s.Rate)
		}
		rate = strconv.FormatInt(s.Rate.Max, 10) + ":" + strconv.FormatInt(s.Rate.PerMs, 10)
	}
	return conc, rate, nil
}

// Configure sets one lane's concurrency and/or rate limit.
func (l *Lanes) Configure(ctx context.Context, group string, s LaneSettings) error {
	if err := CheckName("group", group); err != nil {
		return err
	}
	return l.apply(ctx, group, s)
}

// ConfigureDefault sets the settings of every lane that has none of its own.
func (l *Lanes) ConfigureDefault(ctx context.Context, s LaneSettings) error {
	return l.apply(ctx, "*", s)
}

func (l *Lanes) apply(ctx context.Context, group string, s LaneSettings) error {
	conc, rate, err := s.encode()
	if err != nil {
		return err
	}
	_, err = l.q.Run(ctx, "configure_lane", "", l.q.Prefix, group, conc, rate)
	return err
}

// Pause holds one lane's jobs (the others keep flowing); true when it was running.
func (l *Lanes) Pause(ctx context.Context, group string) (bool, error) {
	if err := CheckName("group", group); err != nil {
		return false, err
	}
	n, err := redis.Int(l.q.Run(ctx, "pause", "", l.q.Prefix, group))
	return n == 1, err
}

// Resume lets a paused lane run again; true when it was paused.
func (l *Lanes) Resume(ctx context.Context, group string) (bool, error) {
	if err := CheckName("group", group); err != nil {
		return false, err
	}
	n, err := redis.Int(l.q.Run(ctx, "resume", "", l.q.Prefix, group))
	return n == 1, err
}

// ── changing a job that has not started ─────────────────────────────────────

// Promote runs a scheduled job now (pending, in its lane when it has a group). EMQSTATE when
// it started, ended or waits for its children.
func (q *Queue) Promote(ctx context.Context, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	_, err := q.Run(ctx, "promote_job", id, q.Prefix, id)
	return err
}

// RescheduleAt moves a job that has not started to run at runAtMs (epoch ms, server clock);
// it returns the new run-at.
func (q *Queue) RescheduleAt(ctx context.Context, id string, runAtMs int64) (int64, error) {
	if runAtMs < 0 {
		return 0, newError("EMQINPUT", "runAtMs must be a whole number >= 0, got %d", runAtMs)
	}
	return q.reschedule(ctx, id, "at", runAtMs)
}

// RescheduleIn moves a job that has not started to run `delay` from now (server clock).
func (q *Queue) RescheduleIn(ctx context.Context, id string, delay time.Duration) (int64, error) {
	if delay < 0 {
		return 0, newError("EMQINPUT", "delay must be >= 0, got %v", delay)
	}
	return q.reschedule(ctx, id, "in", delay.Milliseconds())
}

func (q *Queue) reschedule(ctx context.Context, id, mode string, value int64) (int64, error) {
	if err := CheckID(id); err != nil {
		return 0, err
	}
	return redis.Int64(q.Run(ctx, "reschedule", id, q.Prefix, id, mode, value))
}

// Reprioritize gives a job that has not started a new priority (lower runs first; 0: none).
func (q *Queue) Reprioritize(ctx context.Context, id string, priority int) error {
	if err := CheckID(id); err != nil {
		return err
	}
	if priority < 0 || priority > 1<<21 {
		return newError("EMQINPUT", "priority must be a whole number from 0 to 2097152, got %d", priority)
	}
	_, err := q.Run(ctx, "reprioritize", id, q.Prefix, id, priority)
	return err
}

// Update replaces the data of a job that has not started. EMQSTATE for a running or ended
// job (a handler changes its own job's data with Job.Update).
func (q *Queue) Update(ctx context.Context, id string, data interface{}) error {
	if err := CheckID(id); err != nil {
		return err
	}
	payload, err := EncodeJSON(data, "job data", q.client.opts.MaxPayloadBytes)
	if err != nil {
		return err
	}
	_, err = q.Run(ctx, "update_data", id, q.Prefix, id, payload)
	return err
}

// Remove deletes a job that is not running. True when it existed.
func (q *Queue) Remove(ctx context.Context, id string) (bool, error) {
	if err := CheckID(id); err != nil {
		return false, err
	}
	n, err := redis.Int(q.Run(ctx, "remove", id, q.Prefix, id))
	return n == 1, err
}

// ── ended jobs ──────────────────────────────────────────────────────────────

// Retry returns a dead, cancelled or completed job to pending with its attempts reset; its
// error is kept as lastError. EMQNOJOB, EMQSTATE (it has not ended) or EMQDATA (a malformed
// number on its row).
func (q *Queue) Retry(ctx context.Context, id string) error {
	if err := CheckID(id); err != nil {
		return err
	}
	statuses, err := redis.Strings(q.Run(ctx, "retry", "", q.Prefix, id))
	if err != nil {
		return err
	}
	switch statuses[0] {
	case "OK":
		return nil
	case "EMQNOJOB":
		return newError("EMQNOJOB", "no job %s in queue %s", id, q.Name)
	case "EMQSTATE":
		state := ""
		if conn, err := q.connContext(ctx); err == nil {
			state, _ = redis.String(conn.Do("HGET", q.JobKey(id), "state"))
			conn.Close()
		}
		return newError("EMQSTATE", "job %s is %s: only a job that ended can be retried", id, state)
	}
	return newError(statuses[0], "job %s has a prio, token or max that is not a whole number: correct or remove the field, then retry it", id)
}

// RetryAllOptions: zero values are the defaults.
type RetryAllOptions struct {
	State         string // "dead" (default, ""), "cancelled" or "completed"
	Name          string // only jobs of this name; "": any
	ErrorContains string // only jobs whose error message contains this; "": any
	Batch         int    // ids per script call; 0: 500
}

// RetryAll retries every job that ended in State before the call, oldest first, and returns
// how many. Jobs that end again while it runs are not taken twice.
func (q *Queue) RetryAll(ctx context.Context, opts RetryAllOptions) (int, error) {
	state := opts.State
	if state == "" {
		state = "dead"
	}
	if state != "dead" && state != "cancelled" && state != "completed" {
		return 0, newError("EMQINPUT", "RetryAll State must be 'dead', 'cancelled' or 'completed', got %q", opts.State)
	}
	batch := opts.Batch
	if batch == 0 {
		batch = 500
	}
	if batch < 1 || batch > 10000 {
		return 0, newError("EMQINPUT", "batch must be a whole number from 1 to 10000, got %d", batch)
	}
	conn, err := q.connContext(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	set := q.Key(state)
	// The newest end at the start bounds the run: a job that ends again later scores above it.
	newest, err := redis.Strings(conn.Do("ZRANGE", set, -1, -1, "WITHSCORES"))
	if err != nil || len(newest) < 2 {
		return 0, err
	}
	cutoff := newest[1]
	filtered := opts.Name != "" || opts.ErrorContains != ""
	retried, skip := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return retried, err
		}
		ids, err := redis.Strings(conn.Do("ZRANGEBYSCORE", set, "-inf", cutoff, "LIMIT", skip, batch))
		if err != nil {
			return retried, err
		}
		if len(ids) == 0 {
			return retried, nil
		}
		if filtered {
			for _, id := range ids {
				conn.Send("HMGET", q.JobKey(id), "name", "error")
			}
			conn.Flush()
			kept := ids[:0:0]
			for _, id := range ids {
				f, _ := redis.Strings(conn.Receive())
				if len(f) == 2 && (opts.Name == "" || f[0] == opts.Name) && (opts.ErrorContains == "" || strings.Contains(f[1], opts.ErrorContains)) {
					kept = append(kept, id)
				}
			}
			skip += len(ids) - len(kept)
			ids = kept
			if len(ids) == 0 {
				continue
			}
		}
		argv := []interface{}{q.Prefix}
		for _, id := range ids {
			argv = append(argv, id)
		}
		statuses, err := redis.Strings(q.Run(ctx, "retry", "", argv...))
		if err != nil {
			return retried, err
		}
		for _, s := range statuses {
			switch s {
			case "OK":
				retried++
			case "EMQSTATE", "EMQDATA":
				skip++
			}
		}
	}
}

// Clean deletes up to limit jobs of an ended state ("completed", "dead" or "cancelled") that
// ended at least olderThan ago (0: any), and returns how many.
func (q *Queue) Clean(ctx context.Context, state string, olderThan time.Duration, limit int) (int64, error) {
	if state != "completed" && state != "dead" && state != "cancelled" {
		return 0, newError("EMQINPUT", "clean state must be 'completed', 'dead' or 'cancelled', got %q", state)
	}
	if olderThan < 0 || limit < 1 {
		return 0, newError("EMQINPUT", "clean needs olderThan >= 0 and limit >= 1, got %v and %d", olderThan, limit)
	}
	return redis.Int64(q.Run(ctx, "clean", "", q.Prefix, state, olderThan.Milliseconds(), limit))
}

// DrainOptions: zero values are the defaults.
type DrainOptions struct {
	Scheduled bool // delete scheduled jobs too (after the pending ones); default: leave them
	Batch     int  // ids per script call; 0: 1000
}

// Drain deletes every waiting job (pending, and scheduled with Scheduled), batch by batch,
// and returns how many; running and ended jobs stay.
func (q *Queue) Drain(ctx context.Context, opts DrainOptions) (int64, error) {
	batch := opts.Batch
	if batch == 0 {
		batch = 1000
	}
	if batch < 1 {
		return 0, newError("EMQINPUT", "batch must be a whole number >= 1, got %d", batch)
	}
	scheduled := "0"
	if opts.Scheduled {
		scheduled = "1"
	}
	var total int64
	for {
		reply, err := redis.Int64s(q.Run(ctx, "drain", "", q.Prefix, batch, scheduled))
		if err != nil {
			return total, err
		}
		if len(reply) < 2 {
			return total, newError("EMQPROTOCOL", "drain replied %v, not {deleted, more}", reply)
		}
		total += reply[0]
		if reply[1] == 0 {
			return total, nil
		}
	}
}

// JobStates are the states Counts reports, in its order.
var JobStates = []string{"scheduled", "pending", "active", "completed", "dead", "cancelled", "waiting_children"}

// Counts is how many jobs are in each state (pending counts flat pending and every lane).
func (q *Queue) Counts(ctx context.Context) (map[string]int64, error) {
	conn, err := q.connContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	groups, err := redis.Strings(conn.Do("SMEMBERS", q.Key("lanes")))
	if err != nil {
		return nil, err
	}
	for _, s := range JobStates {
		set := s
		if s == "scheduled" {
			set = "schedule"
		}
		conn.Send("ZCARD", q.Key(set))
	}
	for _, g := range groups {
		conn.Send("ZCARD", q.Key("g:"+g+":pending"))
	}
	if err := conn.Flush(); err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, s := range JobStates {
		n, err := redis.Int64(conn.Receive())
		if err != nil {
			return nil, err
		}
		out[s] = n
	}
	for range groups {
		n, err := redis.Int64(conn.Receive())
		if err != nil {
			return nil, err
		}
		out["pending"] += n
	}
	return out, nil
}

// WaitFor waits until the job ends and returns its result (completed), or an error: EMQJOBFAILED
// (dead; the message is its error), EMQCANCELLED, EMQNOJOB, or ctx's error when ctx is done first.
func (q *Queue) WaitFor(ctx context.Context, id string) (json.RawMessage, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	events, err := q.Events(ctx, "$") // events from here on are seen, so the row read below cannot miss the end
	if err != nil {
		return nil, err
	}
	defer events.Close()
	settled := func() (json.RawMessage, bool, error) {
		v, err := q.Get(ctx, id)
		switch {
		case err != nil:
			return nil, true, err
		case v == nil:
			return nil, true, newError("EMQNOJOB", "no job %s in queue %s", id, q.Name)
		case v.State == "completed":
			if v.Result == nil {
				return json.RawMessage("null"), true, nil
			}
			return *v.Result, true, nil
		case v.State == "dead":
			msg := "unknown error"
			if v.Error != nil {
				msg = v.Error.Message
			}
			return nil, true, newError("EMQJOBFAILED", "job %s failed: %s", id, msg)
		case v.State == "cancelled":
			return nil, true, newError("EMQCANCELLED", "job %s was cancelled", id)
		}
		return nil, false, nil
	}
	if out, done, err := settled(); done {
		return out, err
	}
	for {
		batch, err := events.Next(ctx) // a done ctx cuts its blocking read at once
		if ctx.Err() != nil {
			return nil, fmt.Errorf("echomq: stopped waiting for job %s: %w", id, ctx.Err())
		}
		if err != nil {
			time.Sleep(50 * time.Millisecond) // the reader reconnects from where it was
			continue
		}
		for _, e := range batch {
			if e.ID == id && (e.Event == "completed" || e.Event == "failed" || e.Event == "removed") {
				if out, done, err := settled(); done {
					return out, err
				}
			}
		}
	}
}
