package echomq

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// eventsOf collects a consumer's events for a test.
type eventLog struct {
	mu     sync.Mutex
	events []ConsumerEvent
}

func (l *eventLog) add(e ConsumerEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) kinds(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, e := range l.events {
		if e.Job != nil && e.Job.ID == id {
			out = append(out, e.Kind)
		}
	}
	return out
}

func TestSnoozeRateLimitAndLogFromAGoHandler(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	snoozy, _ := q.Enqueue(ctx, map[string]string{"do": "snooze"}, &JobOptions{Attempts: 1})
	limited, _ := q.Enqueue(ctx, map[string]string{"do": "limit"}, &JobOptions{Attempts: 1})
	var log eventLog
	var mu sync.Mutex
	firstStart := map[string]int64{}
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		row, _ := q.Get(ctx, job.ID)
		mu.Lock()
		_, again := firstStart[job.ID]
		if !again {
			firstStart[job.ID] = *row.StartedAt
		}
		mu.Unlock()
		if err := job.Log(ctx, "run of "+job.ID); err != nil {
			return nil, err
		}
		if again {
			return "done", nil
		}
		if strings.Contains(string(job.Data), "snooze") {
			return nil, Snooze(100 * time.Millisecond)
		}
		return nil, RateLimited(300 * time.Millisecond)
	}, ConsumerOptions{BeatMs: 100, OnEvent: log.add})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	for _, id := range []string{snoozy.ID, limited.ID} {
		if _, err := q.WaitFor(ctx, id); err != nil {
			t.Fatal(id, err)
		}
		row, _ := q.Get(ctx, id)
		// One attempt allowed, two runs: neither a snooze nor a rate limit spends one.
		if row.State != "completed" || row.Attempts != 1 {
			t.Fatalf("%+v", row)
		}
		page, err := q.Logs(ctx, id, 0, 0)
		if err != nil || page.Count != 2 || len(page.Logs) != 2 {
			t.Fatalf("%s's log: %+v %v", id, page, err)
		}
		// The second run starts after the delay, on the server clock.
		gap := *row.StartedAt - firstStart[id]
		want := map[string]int64{snoozy.ID: 100, limited.ID: 300}[id]
		if gap < want {
			t.Errorf("%s ran again %d ms after its first run, before its %d ms", id, gap, want)
		}
	}
	if k := log.kinds(snoozy.ID); len(k) != 2 || k[0] != "snoozed" || k[1] != "completed" {
		t.Fatal(k)
	}
	if k := log.kinds(limited.ID); len(k) != 2 || k[0] != "rate_limited" || k[1] != "completed" {
		t.Fatal(k)
	}
}

func TestAnExecutionTimeoutFailsTheAttemptAndCancelStopsAHandler(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	slow, _ := q.Enqueue(ctx, map[string]string{"do": "slow"}, &JobOptions{Attempts: 2, Backoff: Fixed(10)})
	var log eventLog
	var mu sync.Mutex
	why := map[int]string{}
	started := make(chan string, 10)
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		started <- job.ID
		if strings.Contains(string(job.Data), "slow") && job.Attempts == 2 {
			return "quick", nil
		}
		<-ctx.Done() // a handler that honours its context
		mu.Lock()
		why[job.Attempts] = job.Aborted()
		mu.Unlock()
		return nil, ctx.Err()
	}, ConsumerOptions{BeatMs: 100, TimeoutMs: 150, LeaseMs: 600, OnEvent: log.add})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	if out, err := q.WaitFor(ctx, slow.ID); err != nil || string(out) != `"quick"` {
		t.Fatal(string(out), err)
	}
	mu.Lock()
	if why[1] != "timeout" {
		t.Fatalf("the first attempt's context ended with %q, want timeout", why[1])
	}
	mu.Unlock()
	row, _ := q.Get(ctx, slow.ID)
	// The row keeps the failed attempt's error beside the later result.
	if row.Attempts != 2 || row.Error == nil || !strings.HasPrefix(row.Error.Message, "EMQTIMEOUT") {
		t.Fatalf("%+v %+v", row, row.Error)
	}
	// A cancel request reaches a running handler at its next extension (every 200 ms here).
	// The timeout of 150 ms would end it first, so this one runs under a consumer without one.
	c.Close(5 * time.Second)
	c2, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		started <- job.ID
		<-ctx.Done()
		return nil, ctx.Err()
	}, ConsumerOptions{BeatMs: 100, LeaseMs: 600, OnEvent: log.add})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close(5 * time.Second)
	long, _ := q.Enqueue(ctx, map[string]string{"do": "long"}, nil)
	for id := ""; id != long.ID; id = <-started {
	}
	if status, err := q.Cancel(ctx, long.ID); err != nil || status != "requested" {
		t.Fatal(status, err)
	}
	if _, err := q.WaitFor(ctx, long.ID); Code(err) != "EMQCANCELLED" {
		t.Fatalf("want the job cancelled, got %v", err)
	}
}

func TestAJobsOwnTimeoutWinsOverTheConsumers(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	conn := q.client.Conn()
	defer conn.Close()
	for _, bad := range []time.Duration{-time.Millisecond, time.Microsecond, 1500 * time.Microsecond} {
		if _, err := q.Enqueue(ctx, "x", &JobOptions{Timeout: bad}); !errors.Is(err, ErrInput) {
			t.Fatalf("Timeout %v: %v, want EMQINPUT", bad, err)
		}
	}
	// Stored on the row by each admission path; a call mixing timed and untimed jobs admits both.
	// The patient job is admitted first, so it is claimed no later than the others.
	patient, err := q.Enqueue(ctx, map[string]string{"do": "wait for release"}, &JobOptions{Timeout: time.Minute})
	if err != nil || patient.Status != "enqueued" {
		t.Fatal(patient, err)
	}
	later, err := q.EnqueueIn(ctx, "not run here", time.Hour, &JobOptions{Timeout: 2 * time.Second})
	if err != nil || later.Status != "scheduled" {
		t.Fatal(later, err)
	}
	many, err := q.EnqueueMany(ctx, []Item{
		{Data: map[string]string{"do": "hang"}, Opts: &JobOptions{Timeout: 80 * time.Millisecond, Attempts: 1}},
		{Data: map[string]string{"do": "hang"}, Opts: &JobOptions{Attempts: 1}},
	})
	if err != nil || len(many) != 2 || many[0].Status != "enqueued" || many[1].Status != "enqueued" {
		t.Fatal(many, err)
	}
	for id, want := range map[string]string{many[0].ID: "80", many[1].ID: "", patient.ID: "60000", later.ID: "2000"} {
		if got, _ := redis.String(conn.Do("HGET", q.JobKey(id), "timeout")); got != want {
			t.Fatalf("row timeout of %s is %q, want %q", id, got, want)
		}
	}
	release := make(chan struct{})
	var log eventLog
	timeouts := make(chan time.Duration, 3)
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		timeouts <- job.Timeout
		if strings.Contains(string(job.Data), "release") {
			<-release // runs past the consumer's 400 ms: its own minute applies
			return "done", nil
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}, ConsumerOptions{BeatMs: 100, TimeoutMs: 400, OnEvent: log.add})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	// The own 80 ms and the consumer's 400 ms both end their attempts: dead, reason timeout.
	for _, j := range many {
		if _, err := q.WaitFor(ctx, j.ID); !errors.Is(err, ErrJobFailed) || !strings.Contains(err.Error(), "EMQTIMEOUT") {
			t.Fatalf("job %s: %v, want dead by EMQTIMEOUT", j.ID, err)
		}
	}
	own, _ := q.Get(ctx, many[0].ID)
	consumers, _ := q.Get(ctx, many[1].ID)
	if !strings.Contains(own.Error.Message, "timeout of 80 ms") || !strings.Contains(consumers.Error.Message, "timeout of 400 ms") {
		t.Fatalf("errors %q and %q, want the 80 ms and the 400 ms timeouts named", own.Error.Message, consumers.Error.Message)
	}
	// The patient job, claimed no later than the one the consumer's 400 ms ended, has run past it.
	close(release)
	if out, err := q.WaitFor(ctx, patient.ID); err != nil || string(out) != `"done"` {
		t.Fatalf("the job with its own minute: %s %v, want done", out, err)
	}
	seen := map[time.Duration]bool{}
	for i := 0; i < 3; i++ {
		seen[<-timeouts] = true
	}
	if !seen[80*time.Millisecond] || !seen[400*time.Millisecond] || !seen[time.Minute] {
		t.Fatalf("handlers saw timeouts %v, want 80ms, 400ms and 1m", seen)
	}
}
