package echomq

// The consumer: runs a handler over a queue's jobs under leases, with the beat of SPEC.md
// section 25.3, in order: recover (reap, heartbeat), promote (mode next, for the due timer),
// claim the free slots, park on the wake stream. Finished jobs are acknowledged in batches by
// one goroutine (everything that finished while the last complete was on the wire goes in the
// next), and each complete also claims the next jobs. One extend_lock call per extension
// period covers every held job. close stops claiming, waits for the handlers, and hands the
// rest back.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/gomodule/redigo/redis"
)

// Handler runs one job. A nil result stores no result; json.RawMessage is stored as is; any
// other value is JSON-encoded. An error fails the attempt (Unrecoverable: dead-letters it).
type Handler func(ctx context.Context, job *Job) (interface{}, error)

// UnrecoverableError dead-letters a job at once, whatever attempts it has left.
type UnrecoverableError struct{ Err error }

func (e *UnrecoverableError) Error() string { return e.Err.Error() }
func (e *UnrecoverableError) Unwrap() error { return e.Err }

// Unrecoverable wraps err so that failing with it dead-letters the job.
func Unrecoverable(err error) error { return &UnrecoverableError{Err: err} }

// ConsumerOptions configure a consumer. Every zero value takes the default named on the
// field (SPEC.md section 25.1's, the TypeScript runtime's).
type ConsumerOptions struct {
	Concurrency  int      // handlers at once; 0: 10
	LeaseMs      int64    // how long a claim holds a job unextended; 0: 30000
	ExtendMs     int64    // how often held leases are extended; 0: LeaseMs / 3
	BeatMs       int64    // the beat (recover, heartbeat, promote at the latest); 0: 1000
	PromoteBatch int      // promote and reap batch; 0: 100
	Backoff      *Backoff // for jobs without their own; nil: DefaultBackoff
	// MaxErrorBytes is the longest error message stored; a longer one is cut; 0: 2048.
	MaxErrorBytes int
	// MaxStackBytes is the longest stack stored; 0: 8192.
	MaxStackBytes int
	// OnEvent is told of every job's end in this consumer, one call at a time; nil: no one.
	OnEvent func(ConsumerEvent)
	// TimeoutMs is each attempt's execution timeout for jobs without their own (JobOptions.
	// Timeout, the row's `timeout`, which wins): the handler's context is cancelled (Job.Aborted
	// "timeout") and the attempt fails with reason timeout, retried by the backoff. 0: none.
	TimeoutMs int64
	// MaxLogLines is the lines a job's log keeps (Job.Log; older ones are trimmed); 0: 100.
	MaxLogLines int
	// MaxLogLineBytes is the longest log line; a longer one is cut; 0: 1024.
	MaxLogLineBytes int
}

// ConsumerEvent is a job's end as this consumer saw it: Kind "completed", "failed" (Outcome
// "retry", "dead" or "cancelled") or "lost" (its result was not stored); or the consumer's own
// health, with Job nil: "degraded" (a beat failed: Err says why, WaitMs how long it backs off
// before the next, doubling from 100 ms up to 5 s) and "recovered" (the first whole beat after).
type ConsumerEvent struct {
	Kind    string
	Job     *Job
	Result  string // completed: the encoded result ('' for none)
	Err     error  // failed: the handler's error; degraded: the beat's
	Outcome string
	WaitMs  int64 // degraded: the back-off before the next beat
}

// Job is a claimed job as a handler sees it.
type Job struct {
	ID          string
	Name        string
	Data        json.RawMessage // the payload; text that is not JSON comes as a JSON string
	Attempts    int             // this attempt's number, from 1
	MaxAttempts int
	Backoff     *Backoff // nil: the consumer's policy
	// Timeout is this attempt's execution timeout: the job's own (claim's `timeouts`), else the
	// consumer's TimeoutMs; 0: none.
	Timeout time.Duration
	token   string

	c      *Consumer
	ctx    context.Context
	cancel context.CancelFunc
	// guarded by c.mu
	aborted  string      // "", "cancelled", "lost" or "closing"
	released bool        // the job left this consumer (handed back or lost): its outcome is not sent
	acking   bool        // its outcome (complete or fail) is queued or on the wire: that reply decides
	orphaned bool        // claimed again by this consumer while this handler still ran
	timer    *time.Timer // the execution timeout, when the consumer has one
}

// Aborted says why the job's context was cancelled: "cancelled", "lost", "closing", "timeout" or "".
func (j *Job) Aborted() string {
	j.c.mu.Lock()
	defer j.c.mu.Unlock()
	return j.aborted
}

// Token is the job's lease token (the fencing token of this claim).
func (j *Job) Token() string { return j.token }

// Progress stores a progress value (JSON-encoded) on the row, fenced by the lease; ctx is
// usually the handler's.
func (j *Job) Progress(ctx context.Context, value interface{}) error {
	text, err := EncodeJSON(value, "progress", j.c.q.client.opts.MaxPayloadBytes)
	if err != nil {
		return err
	}
	_, err = j.c.q.Run(ctx, "progress", j.ID, j.ID, j.token, text)
	return err
}

type ack struct {
	job    *Job
	result string
}

// Consumer runs a handler over a queue.
type Consumer struct {
	ID   string
	q    *Queue
	h    Handler
	opts ConsumerOptions
	// own is the context of the consumer's own calls (beat, acks, leases, hand-back, the
	// leaving heartbeat): not Consume's ctx, since close still has calls to make after it ends.
	own context.Context

	mu            sync.Mutex
	held          map[string]*Job
	acks          []ack
	reserved      int // slots promised to claims in flight
	orphans       int
	closing       bool
	short         bool // the last claim came back short: park until a wake, a timer or the beat
	wakeID        string
	scheduleMoved bool
	nextDueAt     time.Time // the schedule's earliest run-at, local clock; zero: none known
	limitedUntil  time.Time
	parked        string    // how the loop waits now: "", "sleep" or "block"
	parkUntil     time.Time // when that wait ends by itself
	blockSeq      int       // numbers the blocking reads, so a late alarm leaves a newer read alone
	alarm         *time.Timer
	lastPromote   time.Time
	// The recurrence leg (recurrence.go): a `w r` wake or promote's handoffs ask for it now;
	// recurringDueAt is the instant its last replies reported (zero: none).
	recurrenceMoved bool
	lastRecurring   time.Time
	recurringDueAt  time.Time
	lastRecover     time.Time
	blockingID      int64
	deadline        time.Time // once closing: when close stops waiting for handlers

	eventMu   sync.Mutex
	kick      chan struct{} // wakes a sleeping loop (a slot freed, close)
	ackSignal chan struct{}
	loopDone  chan struct{}
	ackDone   chan struct{}
	extDone   chan struct{}
	stop      chan struct{} // closed at the end of close: the acker and the extender end
	handlers  sync.WaitGroup
	blocking  redis.Conn
}

// Consume says hello under ctx (a queue of a version this runtime does not speak is refused
// here) and starts a consumer on the queue. It runs until Close, or until ctx is done: then it
// closes as Close(0) does, handing every running job back at once (its handler's context is
// cancelled, Job.Aborted "closing"). Handlers get a context of their own, not derived from ctx.
func (q *Queue) Consume(ctx context.Context, h Handler, opts ConsumerOptions) (*Consumer, error) {
	if opts.Concurrency == 0 {
		opts.Concurrency = 10
	}
	if opts.LeaseMs == 0 {
		opts.LeaseMs = 30000
	}
	if opts.ExtendMs == 0 {
		opts.ExtendMs = opts.LeaseMs / 3
		if opts.ExtendMs < 1 {
			opts.ExtendMs = 1
		}
	}
	if opts.BeatMs == 0 {
		opts.BeatMs = 1000
	}
	if opts.PromoteBatch == 0 {
		opts.PromoteBatch = 100
	}
	if opts.Backoff == nil {
		b := DefaultBackoff
		opts.Backoff = &b
	}
	if opts.MaxErrorBytes == 0 {
		opts.MaxErrorBytes = 2048
	}
	if opts.MaxStackBytes == 0 {
		opts.MaxStackBytes = 8192
	}
	if opts.MaxLogLines == 0 {
		opts.MaxLogLines = 100
	}
	if opts.MaxLogLineBytes == 0 {
		opts.MaxLogLineBytes = 1024
	}
	if opts.TimeoutMs < 0 || opts.MaxLogLines < 0 || opts.MaxLogLineBytes < 0 {
		return nil, newError("EMQINPUT", "TimeoutMs, MaxLogLines and MaxLogLineBytes must be whole numbers >= 0 (0: the default)")
	}
	if opts.Concurrency < 1 || opts.LeaseMs < 1 || opts.ExtendMs < 1 || opts.BeatMs < 1 || opts.PromoteBatch < 1 {
		return nil, newError("EMQINPUT", "concurrency, leaseMs, extendMs, beatMs and promoteBatch must be whole numbers >= 1")
	}
	if err := opts.Backoff.Validate(); err != nil {
		return nil, err
	}
	if _, err := q.Greeting(ctx); err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	var rnd [4]byte
	rand.Read(rnd[:])
	c := &Consumer{
		ID: fmt.Sprintf("%s:%d:%s", host, os.Getpid(), hex.EncodeToString(rnd[:])),
		q:  q, h: h, opts: opts, own: context.Background(),
		held: map[string]*Job{}, wakeID: "0-0", scheduleMoved: true, recurrenceMoved: true,
		kick: make(chan struct{}, 1), ackSignal: make(chan struct{}, 1),
		loopDone: make(chan struct{}), ackDone: make(chan struct{}), extDone: make(chan struct{}),
		stop: make(chan struct{}),
	}
	go c.loop()
	go c.acker()
	go c.extender()
	if ctx.Done() != nil {
		go func() {
			select {
			case <-ctx.Done():
				c.Close(0)
			case <-c.stop:
			}
		}()
	}
	return c, nil
}

func (c *Consumer) emit(e ConsumerEvent) {
	if c.opts.OnEvent == nil {
		return
	}
	c.eventMu.Lock()
	defer c.eventMu.Unlock()
	c.opts.OnEvent(e)
}

func (c *Consumer) freeLocked() int {
	return c.opts.Concurrency - len(c.held) - c.orphans - c.reserved
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// ── the beat ────────────────────────────────────────────────────────────────

func (c *Consumer) isClosing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing
}

func (c *Consumer) loop() {
	defer close(c.loopDone)
	streak := 0
	for !c.isClosing() {
		err := c.beat()
		if err != nil {
			if c.isClosing() {
				break
			}
			// Redis is away or refusing: back off exponentially instead of spinning on it.
			streak++
			wait := 50 * time.Millisecond << uint(min(streak, 7))
			if wait > degradedCap {
				wait = degradedCap
			}
			c.emit(ConsumerEvent{Kind: "degraded", Err: err, WaitMs: wait.Milliseconds()})
			c.sleep(wait)
			continue
		}
		if streak > 0 {
			streak = 0
			c.emit(ConsumerEvent{Kind: "recovered"})
		}
		c.park()
	}
}

// degradedCap is the longest back-off between failing beats (the TypeScript runtime's).
const degradedCap = 5 * time.Second

func (c *Consumer) beat() error {
	if err := c.recover(); err != nil {
		return err
	}
	promoted, err := c.promote()
	if err != nil {
		return err
	}
	minted, err := c.recurring()
	if err != nil {
		return err
	}
	return c.drain(promoted || minted)
}

// recover runs reap and the heartbeat once a beat, and delivers the flow notices the heartbeat
// reports waiting (handoff.go).
func (c *Consumer) recover() error {
	now := time.Now()
	c.mu.Lock()
	due := now.Sub(c.lastRecover) >= time.Duration(c.opts.BeatMs)*time.Millisecond
	running := len(c.held)
	c.mu.Unlock()
	if !due {
		return nil
	}
	// The beat is the gap this consumer leaves between passes: a longer one is a clock jump
	// (SPEC.md section 2.1), and the leases live at the last pass move by it first.
	if _, err := c.q.Run(c.own, "reap", "", c.q.Prefix, c.opts.PromoteBatch, c.opts.BeatMs); err != nil {
		return err
	}
	host, _ := os.Hostname()
	info, _ := json.Marshal(map[string]interface{}{
		"host": host, "pid": os.Getpid(), "concurrency": c.opts.Concurrency, "running": running,
		"beatMs": c.opts.BeatMs, "runtime": "go",
		// The versions it speaks: migrate steps a queue up only when every live consumer does.
		"protocols": ProtocolVersions,
	})
	beat, err := c.q.Run(c.own, "heartbeat", "", c.q.Prefix, c.ID, string(info))
	if err != nil {
		return err
	}
	// Flow children of this queue whose parents are in other queues ended: hand them over.
	if noticesWaiting(beat) > 0 {
		if _, err := c.q.DeliverNotices(c.own); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.lastRecover = now
	c.mu.Unlock()
	return nil
}

// promote runs when something may be due: the due timer came, a `w s` wake, or a beat passed.
func (c *Consumer) promote() (bool, error) {
	now := time.Now()
	c.mu.Lock()
	beat := time.Duration(c.opts.BeatMs) * time.Millisecond
	due := !c.nextDueAt.IsZero() && !now.Before(c.nextDueAt)
	if !c.scheduleMoved && !due && now.Sub(c.lastPromote) < beat {
		c.mu.Unlock()
		return false, nil
	}
	c.scheduleMoved = false
	argv := []interface{}{c.q.Prefix, c.opts.PromoteBatch, "next"}
	if !c.lastPromote.IsZero() {
		// How long this consumer lived since its previous promote (monotonic): the server
		// clock running further ahead than that was stepped (SPEC.md section 2.1).
		argv = append(argv, int64((now.Sub(c.lastPromote)+time.Millisecond-1)/time.Millisecond))
	}
	c.lastPromote = now
	c.mu.Unlock()
	reply, err := redis.Values(c.q.Run(c.own, "promote", "", argv...))
	if err != nil {
		return false, err
	}
	// {count, now_ms, next_due_ms, …}: the entries this runtime knows, by position; a later
	// level may append more (SPEC 22.1).
	known, err := redis.Int64s(reply[:min(3, len(reply))], nil)
	if err != nil || len(known) < 3 {
		return false, newError("EMQPROTOCOL", "promote replied %v, not {count, now_ms, next_due_ms, …}", reply)
	}
	count, serverNow, nextDue := known[0], known[1], known[2]
	c.mu.Lock()
	defer c.mu.Unlock()
	// {…, handoffs}: releases promote could not follow, or cron lookaheads running low: their
	// next occurrence is this runtime's to make, now (SPEC section 15).
	if len(reply) > 3 {
		if handoffs, _ := redis.Int64(reply[3], nil); handoffs > 0 {
			c.recurrenceMoved = true
		}
	}
	if count >= int64(c.opts.PromoteBatch) {
		c.nextDueAt = time.Now() // more are due: go again
	} else {
		c.learnHeadLocked(serverNow, nextDue)
	}
	if count > 0 {
		c.short = false
	}
	return true, nil
}

// drain claims up to the free slots; after a short claim only when promote ran or a rate
// limit's window reopened (a wake clears `short` itself).
func (c *Consumer) drain(afterPromote bool) error {
	c.mu.Lock()
	held := c.limitedUntil.IsZero() || time.Now().Before(c.limitedUntil) // no rate window reopened
	if c.closing || (!afterPromote && c.short && held) {
		c.mu.Unlock()
		return nil
	}
	n := c.freeLocked()
	if n <= 0 {
		c.mu.Unlock()
		return nil
	}
	c.reserved += n
	c.mu.Unlock()
	// The consumer id is recorded on each taken row and its active event (SPEC 19.5).
	reply, err := redis.Values(c.q.Run(c.own, "claim", "", c.q.Prefix, n, c.opts.LeaseMs, c.ID))
	c.mu.Lock()
	c.reserved -= n
	c.mu.Unlock()
	if err != nil {
		return err
	}
	c.started(reply)
	return nil
}

// park waits for whichever comes first: a wake, the due timer, the beat, a freed slot, close.
func (c *Consumer) park() {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	now := time.Now()
	beat := time.Duration(c.opts.BeatMs) * time.Millisecond
	wait := beat - now.Sub(c.lastRecover)
	for _, at := range []time.Time{c.nextDueAt, c.limitedUntil, c.recurringDueAt} {
		if !at.IsZero() && at.Sub(now) < wait {
			wait = at.Sub(now)
		}
	}
	// It reads the wake stream after a short claim, and also while every slot is busy: a `w s`
	// (a delayed job enqueued meanwhile) then makes it promote and learn the schedule's head, so
	// the job is promoted at its instant, not at the next completion or beat. A slot freed while
	// it reads ends the read (freedSlot). Free slots after a full claim: it only sleeps.
	block := c.short || c.freeLocked() <= 0
	wakeID := c.wakeID
	// A read that ends at the beat may come back a server tick late: when a due instant
	// follows within that, an alarm ends it on time (CLIENT UNBLOCK) instead.
	onTime := false
	for _, at := range []time.Time{c.nextDueAt, c.limitedUntil, c.recurringDueAt} {
		if !at.IsZero() && at.Sub(now) <= wait+serverTick {
			onTime = true
		}
	}
	c.mu.Unlock()
	if wait <= 0 {
		return
	}
	if block {
		c.blockOnWake(wait, wakeID, onTime)
	} else {
		c.mu.Lock()
		c.parked, c.parkUntil = "sleep", now.Add(wait)
		c.mu.Unlock()
		c.sleep(wait)
		c.mu.Lock()
		c.parked = ""
		c.mu.Unlock()
	}
}

// serverTick is how late Redis may end a timed blocking read (its cron tick at the default hz
// 10), plus slack.
const serverTick = 150 * time.Millisecond

// learnHeadLocked takes in the schedule's earliest run-at as a reply saw it: promote's, or a
// claim's (claim and complete read the head in the same call as the wake id, so a `w s`
// written while this consumer was busy is not lost: its instant is the head). now and
// nextDue are server instants, so only their difference is used. When the loop waits past
// it, it is woken (asleep) or its blocking read is ended at that instant.
func (c *Consumer) learnHeadLocked(serverNow, nextDue int64) {
	if nextDue < 0 {
		c.nextDueAt = time.Time{}
		return
	}
	c.nextDueAt = time.Now().Add(time.Duration(nextDue-serverNow) * time.Millisecond)
	if c.parked == "" || !c.nextDueAt.Before(c.parkUntil) {
		return
	}
	if c.parked == "sleep" {
		signal(c.kick)
	} else {
		c.armUnblockLocked(time.Until(c.nextDueAt))
	}
}

// armUnblockLocked ends the current blocking read in d with CLIENT UNBLOCK, from a pooled
// connection. The UNBLOCK can overtake a read still on its way to the server (it answers 0:
// nothing blocked yet); then it tries again, a millisecond later, up to 20 times.
func (c *Consumer) armUnblockLocked(d time.Duration) {
	if c.blockingID == 0 {
		return
	}
	if c.alarm != nil {
		c.alarm.Stop()
	}
	seq, id, blocking := c.blockSeq, c.blockingID, c.blocking
	var unblock func(tries int)
	unblock = func(tries int) {
		c.mu.Lock()
		current := c.parked == "block" && c.blockSeq == seq
		c.mu.Unlock()
		if !current {
			return
		}
		n, err := c.q.client.unblock(blocking, id)
		if err == nil && n == 0 && tries > 0 {
			time.AfterFunc(time.Millisecond, func() { unblock(tries - 1) })
		}
	}
	if d < 0 {
		d = 0
	}
	c.alarm = time.AfterFunc(d, func() { unblock(20) })
}

func (c *Consumer) sleep(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.kick:
	}
}

// blockOnWake reads the wake stream after wakeID (SPEC.md section 9) on a connection of its
// own: any entry written after the short claim ends it at once.
func (c *Consumer) blockOnWake(wait time.Duration, wakeID string, onTime bool) {
	ms := wait.Milliseconds()
	if ms < 1 {
		ms = 1
	}
	conn, err := c.blockingConn()
	if err != nil {
		c.sleep(100 * time.Millisecond)
		return
	}
	c.mu.Lock()
	c.blockSeq++
	c.parked, c.parkUntil = "block", time.Now().Add(wait)
	if onTime {
		c.armUnblockLocked(wait)
	}
	c.mu.Unlock()
	reply, err := redis.DoWithTimeout(conn, time.Duration(ms)*time.Millisecond+3*time.Second,
		"XREAD", "BLOCK", ms, "STREAMS", c.q.Key("wake"), wakeID)
	c.mu.Lock()
	c.parked = ""
	if c.alarm != nil {
		c.alarm.Stop()
		c.alarm = nil
	}
	c.mu.Unlock()
	if err != nil {
		c.dropBlocking()
		if !c.isClosing() {
			c.sleep(100 * time.Millisecond) // the connection is coming back; don't spin
		}
		return
	}
	if reply == nil {
		return
	}
	for _, stream := range reply.([]interface{}) {
		entries := stream.([]interface{})[1].([]interface{})
		c.mu.Lock()
		for _, e := range entries {
			pair := e.([]interface{})
			c.wakeID, _ = redis.String(pair[0], nil)
			fields, _ := redis.Strings(pair[1], nil)
			if len(fields) >= 2 && fields[1] == "s" {
				c.scheduleMoved = true
			}
			if len(fields) >= 2 && fields[1] == "r" {
				c.recurrenceMoved = true
			}
		}
		if len(entries) > 0 {
			c.short = false
		}
		c.mu.Unlock()
	}
}

func (c *Consumer) blockingConn() (redis.Conn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blocking != nil {
		return c.blocking, nil
	}
	conn, err := c.q.dialBlocking()
	if err != nil {
		return nil, err
	}
	// Its client id lets close() end a blocking read at once (CLIENT UNBLOCK).
	if id, err := redis.Int64(conn.Do("CLIENT", "ID")); err == nil {
		c.blockingID = id
	}
	c.blocking = conn
	return conn, nil
}

func (c *Consumer) dropBlocking() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.blocking != nil {
		c.blocking.Close()
		c.blocking = nil
		c.blockingID = 0
	}
}

// ── running jobs ────────────────────────────────────────────────────────────

// started takes a claim's reply, `[jobs, wake_id, wait_ms, now_ms, next_due_ms, timeouts?]`
// (SPEC.md 19.5), and starts the handlers of its jobs (7 entries per job).
func (c *Consumer) started(reply []interface{}) {
	flat, _ := redis.Values(reply[0], nil)
	wakeID, _ := redis.String(reply[1], nil)
	waitMs, _ := redis.Int64(reply[2], nil)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.short = wakeID != ""
	if c.short {
		c.wakeID = wakeID
	}
	if len(reply) >= 5 {
		// The schedule's head, read with the wake id: promote is timed from it, so a job that
		// became due while every slot was busy starts on time.
		serverNow, _ := redis.Int64(reply[3], nil)
		nextDue, _ := redis.Int64(reply[4], nil)
		c.learnHeadLocked(serverNow, nextDue)
	}
	ownTimeouts := jobTimeouts(reply)
	c.limitedUntil = time.Time{}
	if waitMs >= 0 {
		c.limitedUntil = time.Now().Add(time.Duration(waitMs) * time.Millisecond)
	}
	for i := 0; i+6 < len(flat); i += 7 {
		id, _ := redis.String(flat[i], nil)
		token, _ := redis.Int64(flat[i+1], nil)
		attempts, _ := redis.Int64(flat[i+2], nil)
		maxText, _ := redis.String(flat[i+3], nil)
		payload, _ := redis.String(flat[i+4], nil)
		name, _ := redis.String(flat[i+5], nil)
		backoffText, _ := redis.String(flat[i+6], nil)
		ctx, cancel := context.WithCancel(context.Background())
		job := &Job{
			ID: id, Name: name, Data: json.RawMessage(payload), Attempts: int(attempts),
			MaxAttempts: int(number(maxText)), token: strconv.FormatInt(token, 10),
			c: c, ctx: ctx, cancel: cancel,
		}
		// Bad data never stops the consumer: a payload or backoff it cannot use fails that job
		// (dead-lettered, EMQDATA) without a handler run; the others start (SPEC.md 5.1).
		var bad error
		if !json.Valid([]byte(payload)) {
			bad = Unrecoverable(newError("EMQDATA", "job %s has a payload that is not JSON (%q); it was dead-lettered: enqueue its data as JSON", id, clipText(payload, 64)))
		} else if backoffText != "" {
			var err error
			if job.Backoff, err = ParseBackoff(backoffText); err != nil {
				bad = Unrecoverable(newError("EMQDATA", "job %s has a backoff field this consumer cannot use (%s); it was dead-lettered: fix the field and retry the job", id, err.Error()))
			}
		}
		if old := c.held[id]; old != nil {
			// Our own lease expired (an outage) and we claimed the job again.
			c.loseLocked(old, true)
		}
		c.held[id] = job
		c.handlers.Add(1)
		if bad != nil {
			go func() {
				defer c.handlers.Done()
				c.failed(job, bad)
			}()
			continue
		}
		timeoutMs, own := ownTimeouts[id]
		if !own {
			timeoutMs = c.opts.TimeoutMs
		}
		if timeoutMs > 0 {
			job.Timeout = time.Duration(timeoutMs) * time.Millisecond
			job.timer = time.AfterFunc(job.Timeout, func() {
				c.mu.Lock()
				if c.held[job.ID] == job && !job.acking {
					c.abortLocked(job, "timeout")
				}
				c.mu.Unlock()
			})
		}
		go c.execute(job)
	}
}

// jobTimeouts reads a claim reply's optional sixth entry, `id timeout_ms` pairs for the jobs
// taken whose row has a timeout (SPEC 8.1, 19.5); a value that is not a whole number >= 1 is
// none of its own (the consumer's applies), as in TypeScript.
func jobTimeouts(reply []interface{}) map[string]int64 {
	if len(reply) < 6 {
		return nil
	}
	flat, _ := redis.Strings(reply[5], nil)
	out := map[string]int64{}
	for i := 0; i+1 < len(flat); i += 2 {
		if ms, err := strconv.ParseInt(flat[i+1], 10, 64); err == nil && ms >= 1 {
			out[flat[i]] = ms
		}
	}
	return out
}

func (c *Consumer) execute(job *Job) {
	defer c.handlers.Done()
	result, err := c.runHandler(job)
	if job.timer != nil {
		job.timer.Stop()
	}
	c.mu.Lock()
	timedOut := job.aborted == "timeout"
	if job.orphaned {
		job.orphaned = false
		c.orphans--
	}
	released := job.released
	c.mu.Unlock()
	if released {
		c.finish(job)
		return
	}
	if timedOut {
		// Past its timeout the attempt fails whatever the handler returned.
		c.failed(job, newError("EMQTIMEOUT", "job %s ran past its timeout of %d ms; the attempt failed (reason timeout)", job.ID, job.Timeout.Milliseconds()))
		return
	}
	if err != nil {
		if c.putBack(job, err) {
			return
		}
		c.failed(job, err)
		return
	}
	encoded := ""
	if result != nil {
		if encoded, err = EncodeJSON(result, "job result", c.q.client.opts.MaxPayloadBytes); err != nil {
			c.failed(job, err)
			return
		}
	}
	c.mu.Lock()
	job.acking = true
	c.acks = append(c.acks, ack{job: job, result: encoded})
	c.mu.Unlock()
	signal(c.ackSignal)
}

func (c *Consumer) runHandler(job *Job) (result interface{}, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("handler panicked: %v\n%s", p, debug.Stack())
		}
	}()
	return c.h(job.ctx, job)
}

// acker acknowledges finished handlers: everything that finished while the last complete was
// on the wire goes in the next one, which also claims as many jobs as it frees slots.
func (c *Consumer) acker() {
	defer close(c.ackDone)
	for {
		select {
		case <-c.ackSignal:
			c.flushAcks()
		case <-c.stop:
			c.flushAcks()
			return
		}
	}
}

func (c *Consumer) flushAcks() {
	for {
		c.mu.Lock()
		acks := c.acks
		c.acks = nil
		if len(acks) == 0 {
			c.mu.Unlock()
			return
		}
		n := 0
		if !c.closing {
			n = len(acks) + max(0, c.freeLocked())
		}
		c.reserved += n
		c.mu.Unlock()
		argv := []interface{}{c.q.Prefix, c.opts.LeaseMs, n}
		for _, a := range acks {
			argv = append(argv, a.job.ID, a.job.token, a.result)
		}
		argv = append(argv, c.ID) // after the last triple: recorded by this call's claim (SPEC 19.6)
		reply, err := redis.Values(c.q.Run(c.own, "complete", "", argv...))
		c.mu.Lock()
		c.reserved -= n
		if err != nil {
			// Not acknowledged: keep the jobs held (their leases keep being extended), retry.
			c.acks = append(acks, c.acks...)
			c.mu.Unlock()
			select {
			case <-c.stop:
				return // closed: their leases expire and reap returns them
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		c.mu.Unlock()
		statuses, _ := redis.Strings(reply[0], nil)
		for i, a := range acks {
			c.finish(a.job)
			if i < len(statuses) && statuses[i] == "OK" {
				c.emit(ConsumerEvent{Kind: "completed", Job: a.job, Result: a.result})
			} else {
				c.lose(a.job, false)
			}
		}
		if n > 0 {
			c.started(reply[1:])
		} else if len(reply) >= 6 {
			serverNow, _ := redis.Int64(reply[4], nil)
			nextDue, _ := redis.Int64(reply[5], nil)
			c.mu.Lock()
			c.learnHeadLocked(serverNow, nextDue)
			c.mu.Unlock()
		}
		c.freedSlot()
	}
}

// freedSlot wakes the loop to claim for a slot that came free: a sleep ends at once, and a wake
// read made while every slot was busy is ended (CLIENT UNBLOCK), unless the last claim came back
// short (nothing to claim until a wake says so).
func (c *Consumer) freedSlot() {
	signal(c.kick)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parked == "block" && !c.short && c.freeLocked() > 0 {
		c.armUnblockLocked(0)
	}
}

// failed stores a failed attempt: retried with the job's backoff, dead-lettered, or cancelled.
func (c *Consumer) failed(job *Job, handlerErr error) {
	c.mu.Lock()
	if job.released {
		c.mu.Unlock()
		c.finish(job)
		return
	}
	// From here the fail's reply decides: an extension that finds the lease gone because this
	// very fail was stored must not report the job lost.
	job.acking = true
	cancelled := job.aborted == "cancelled"
	reason := []interface{}{}
	if job.aborted == "timeout" {
		reason = append(reason, "timeout")
	}
	c.mu.Unlock()
	var unrecoverable *UnrecoverableError
	var delay int64
	switch {
	case errors.As(handlerErr, &unrecoverable) || cancelled:
		delay = -1
	case job.Attempts >= job.MaxAttempts:
		delay = 0 // the script dead-letters by the count
	default:
		policy := job.Backoff
		if policy == nil {
			policy = c.opts.Backoff
		}
		delay, _ = policy.DelayMs(job.Attempts, nil) // validated when claimed
	}
	message := handlerErr.Error()
	if message == "" {
		message = fmt.Sprintf("%T", handlerErr)
	}
	message = clipBytes(message, c.opts.MaxErrorBytes)
	stack := ""
	c.settle(job, func() error {
		argv := append([]interface{}{c.q.Prefix, job.ID, job.token, message, stack, delay}, reason...)
		outcome, err := redis.String(c.q.Run(c.own, "fail", job.ID, argv...))
		if err != nil {
			return err
		}
		c.finish(job)
		c.emit(ConsumerEvent{Kind: "failed", Job: job, Err: handlerErr, Outcome: outcome})
		return nil
	})
	c.freedSlot()
}

func (c *Consumer) finish(job *Job) {
	c.mu.Lock()
	if c.held[job.ID] == job {
		delete(c.held, job.ID)
	}
	c.mu.Unlock()
}

func (c *Consumer) lose(job *Job, orphan bool) {
	c.mu.Lock()
	lost := c.loseLocked(job, orphan)
	c.mu.Unlock()
	if lost {
		c.emit(ConsumerEvent{Kind: "lost", Job: job})
	}
}

// loseLocked: the lease is gone (recovered elsewhere): abort the handler, never send its
// outcome. orphan: this consumer claimed the job again while the old handler runs.
func (c *Consumer) loseLocked(job *Job, orphan bool) bool {
	if job.released {
		return false
	}
	job.released = true
	if orphan {
		job.orphaned = true
		c.orphans++
	}
	c.abortLocked(job, "lost")
	return true
}

func (c *Consumer) abortLocked(job *Job, why string) {
	if job.aborted == "" {
		job.aborted = why
		job.cancel()
	}
}

// ── leases ──────────────────────────────────────────────────────────────────

func (c *Consumer) extender() {
	defer close(c.extDone)
	t := time.NewTicker(time.Duration(c.opts.ExtendMs) * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		c.mu.Lock()
		var jobs []*Job
		for _, j := range c.held {
			if !j.released {
				jobs = append(jobs, j)
			}
		}
		c.mu.Unlock()
		if len(jobs) == 0 {
			continue
		}
		argv := []interface{}{c.q.Prefix, c.opts.LeaseMs}
		for _, j := range jobs {
			argv = append(argv, j.ID, j.token)
		}
		statuses, err := redis.Strings(c.q.Run(c.own, "extend_lock", "", argv...))
		if err != nil {
			continue
		}
		for i, j := range jobs {
			c.onLease(j, statuses[i])
		}
	}
}

func (c *Consumer) onLease(job *Job, status string) {
	switch status {
	case "cancel":
		c.mu.Lock()
		c.abortLocked(job, "cancelled")
		c.mu.Unlock()
	case "lost":
		c.mu.Lock()
		acking := job.acking
		c.mu.Unlock()
		if !acking { // an outcome on the wire: its own reply tells
			c.lose(job, false)
		}
	}
}

// ── closing ─────────────────────────────────────────────────────────────────

// Running is the number of jobs this consumer holds.
func (c *Consumer) Running() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

func (c *Consumer) pastDeadline() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closing && time.Now().After(c.deadline)
}

// Close stops claiming, waits up to timeout for running handlers, then hands every unfinished
// job back (claimable at once, no attempt spent) and cancels its context.
func (c *Consumer) Close(timeout time.Duration) error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.ackDone
		return nil
	}
	c.closing = true
	c.deadline = time.Now().Add(timeout)
	blocking, blockingID := c.blocking, c.blockingID
	c.mu.Unlock()
	signal(c.kick)
	if blockingID != 0 { // end a parked read at once
		c.q.client.unblock(blocking, blockingID)
	}
	<-c.loopDone
	c.dropBlocking()
	for !c.pastDeadline() {
		c.mu.Lock()
		busy := len(c.held) > 0 || len(c.acks) > 0 || c.reserved > 0
		c.mu.Unlock()
		if !busy {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	c.mu.Lock()
	var unfinished []*Job
	for _, j := range c.held {
		if !j.released && !j.acking {
			j.released = true
			unfinished = append(unfinished, j)
		}
	}
	c.mu.Unlock()
	var err error
	if len(unfinished) > 0 {
		argv := []interface{}{c.q.Prefix}
		for _, j := range unfinished {
			argv = append(argv, j.ID, j.token)
		}
		_, err = c.q.Run(c.own, "handback", "", argv...) // on error their leases expire and reap returns them
		c.mu.Lock()
		for _, j := range unfinished {
			c.abortLocked(j, "closing")
			if c.held[j.ID] == j {
				delete(c.held, j.ID)
			}
		}
		c.mu.Unlock()
	}
	close(c.stop)
	<-c.ackDone
	<-c.extDone
	// The last heartbeat: tools (and migrate's check of the fleet) stop counting this consumer
	// at once, not once it is an hour silent.
	if _, leaveErr := c.q.Run(c.own, "heartbeat", "", c.q.Prefix, c.ID, ""); err == nil {
		err = leaveErr
	}
	return err
}

func clipBytes(text string, maxBytes int) string {
	if len(text) <= maxBytes {
		return text
	}
	cut := maxBytes
	for cut > 0 && text[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return text[:cut] + "…"
}

func max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// settle sends a job's end (a failure, a snooze, a rate-limit hand-back) until Redis takes it:
// send finishes and reports the job on success. A lost lease or a vanished job is the job lost
// (a newer attempt owns it); past the close deadline it gives up; anything else (a cut
// connection, a failover) is tried again while the lease is kept alive.
func (c *Consumer) settle(job *Job, send func() error) {
	for {
		err := send()
		if err == nil {
			return
		}
		if code := Code(err); code == "EMQLEASE" || code == "EMQNOJOB" {
			c.finish(job)
			c.lose(job, false)
			return
		}
		if c.isClosing() && c.pastDeadline() {
			c.finish(job)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
