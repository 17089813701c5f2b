package echomq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

func testQueue(t *testing.T) *Queue {
	t.Helper()
	return testQueueAt(t, 0)
}

// testQueueAt is testQueue on a queue stamped with protocol version `version` (0: the default).
func testQueueAt(t *testing.T, version int) *Queue {
	t.Helper()
	client, err := Connect(testServer(t), Options{ProtocolDir: protocolDir(t), ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	q, err := client.Queue("go-" + t.Name())
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// waitFor polls `done` every 5 ms until it holds or `within` passes.
func waitFor(t *testing.T, within time.Duration, what string, done func() bool) {
	t.Helper()
	for end := time.Now().Add(within); !done(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
	}
}

func TestTheConsumerRunsFlatGroupedDelayedAndFailingJobsEachToOneEnd(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	var items []Item
	for i := 0; i < 60; i++ {
		opts := &JobOptions{Name: "work", Backoff: Fixed(10)}
		if i%3 == 0 {
			opts.Group = fmt.Sprintf("g%d", i%2)
		}
		items = append(items, Item{Data: map[string]int{"n": i, "failFirst": i % 5}, Opts: opts})
	}
	admitted, err := q.EnqueueMany(ctx, items)
	if err != nil || len(admitted) != 60 {
		t.Fatal(admitted, err)
	}
	delayed, err := q.EnqueueIn(ctx, map[string]int{"n": 100, "failFirst": 1}, 300*time.Millisecond, &JobOptions{Name: "later"})
	if err != nil || delayed.Status != "scheduled" {
		t.Fatal(delayed, err)
	}
	var mu sync.Mutex
	completed := map[string]int{}
	failed := map[string]int{}
	var lost []string
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		var data struct{ N, FailFirst int }
		if err := json.Unmarshal(job.Data, &data); err != nil {
			return nil, err
		}
		if data.FailFirst == 1 && job.Attempts == 1 {
			return nil, errors.New("the first attempt fails")
		}
		return map[string]int{"double": data.N * 2}, nil
	}, ConsumerOptions{Concurrency: 4, BeatMs: 100, OnEvent: func(e ConsumerEvent) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case "completed":
			completed[e.Job.ID]++
		case "failed":
			failed[e.Job.ID]++
		case "lost":
			lost = append(lost, e.Job.ID)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "61 completions", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(completed) == 61
	})
	if err := c.Close(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	for id, n := range completed {
		if n != 1 {
			t.Errorf("%s completed %d times", id, n)
		}
	}
	if len(lost) > 0 {
		t.Errorf("lost: %v", lost)
	}
	if len(failed) != 13 { // n % 5 == 1 for n < 60 (12 jobs), and the delayed one
		t.Errorf("%d jobs failed once, want 13", len(failed))
	}
	view, err := q.Get(ctx, delayed.ID)
	if err != nil || view == nil {
		t.Fatal(view, err)
	}
	if view.State != "completed" || view.Attempts != 2 || view.MaxAttempts != 3 || view.Error == nil {
		t.Fatalf("the delayed job's row: %+v", view)
	}
	if *view.StartedAt < *view.RunAt {
		t.Fatalf("started at %d, before its run-at %d", *view.StartedAt, *view.RunAt)
	}
	if string(*view.Result) != `{"double":200}` {
		t.Fatalf("result %s", *view.Result)
	}
}

func TestCloseHandsUnfinishedJobsBackWithoutSpendingAnAttempt(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	job, err := q.Enqueue(ctx, "slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	reasons := make(chan string, 1)
	c, err := q.Consume(ctx, func(ctx context.Context, j *Job) (interface{}, error) {
		close(started)
		<-ctx.Done()
		reasons <- j.Aborted()
		return nil, ctx.Err()
	}, ConsumerOptions{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("the handler never started")
	}
	if err := c.Close(50 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	view, _ := q.Get(ctx, job.ID)
	if view.State != "pending" || view.Attempts != 0 {
		t.Fatalf("after close: %+v", view)
	}
	select {
	case reason := <-reasons:
		if reason != "closing" {
			t.Fatalf("aborted for %q", reason)
		}
	case <-time.After(time.Second):
		t.Fatal("the handler's context was not cancelled")
	}
}

func TestALeaseExtensionRacingAStoredFailIsNotReportedLost(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	if _, err := q.Enqueue(ctx, "x", &JobOptions{Backoff: Fixed(60_000)}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var kinds []string
	failing := make(chan *Job, 1)
	c, err := q.Consume(ctx, func(ctx context.Context, j *Job) (interface{}, error) {
		failing <- j
		return nil, errors.New("boom")
	}, ConsumerOptions{Concurrency: 1, ExtendMs: 60_000, OnEvent: func(e ConsumerEvent) {
		mu.Lock()
		kinds = append(kinds, e.Kind)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(time.Second)
	j := <-failing
	waitFor(t, 5*time.Second, "the failed event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(kinds) > 0
	})
	c.onLease(j, "lost") // the extension's reply, arriving after the fail was stored
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(kinds) != "[failed]" {
		t.Fatalf("events %v, want only failed", kinds)
	}
}

func TestEventsReaderSeesEveryJobOfABatchedEntry(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	r, err := q.Events(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.BlockMs = 100
	items := []Item{{Data: 1, Opts: &JobOptions{Name: "n"}}, {Data: 2, Opts: &JobOptions{Name: "n"}}, {Data: 3, Opts: &JobOptions{Name: "n"}}}
	admitted, err := q.EnqueueMany(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	events, err := r.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 3 {
		t.Fatalf("events %+v", events)
	}
	for i, e := range events {
		if e.Event != "added" || e.ID != admitted[i].ID || e.Fields["name"] != "n" {
			t.Fatalf("event %d: %+v", i, e)
		}
	}
}

func TestBadDataInOneRowDeadLettersThatJobAndTheOthersRun(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	conn := q.client.Conn()
	defer conn.Close()
	good, err := q.Enqueue(ctx, "fine", nil)
	if err != nil {
		t.Fatal(err)
	}
	for id, fields := range map[string][]interface{}{
		"JOBnotjson":  {"state", "pending", "payload", "not json", "max", "3"},
		"JOBbadretry": {"state", "pending", "payload", "1", "max", "3", "backoff", `{"kind":"linear"}`},
	} {
		if _, err := conn.Do("HSET", append([]interface{}{q.JobKey(id)}, fields...)...); err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Do("ZADD", q.Key("pending"), 0, id); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	ran := map[string]bool{}
	outcomes := map[string]string{}
	c, err := q.Consume(ctx, func(ctx context.Context, j *Job) (interface{}, error) {
		mu.Lock()
		ran[j.ID] = true
		mu.Unlock()
		return "ok", nil
	}, ConsumerOptions{OnEvent: func(e ConsumerEvent) {
		if e.Job == nil { // the consumer's health, not a job's end
			return
		}
		mu.Lock()
		outcomes[e.Job.ID] = e.Kind + " " + e.Outcome
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(time.Second)
	waitFor(t, 5*time.Second, "three outcomes", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(outcomes) == 3
	})
	mu.Lock()
	defer mu.Unlock()
	if !ran[good.ID] || ran["JOBnotjson"] || ran["JOBbadretry"] {
		t.Fatalf("handlers ran for %v", ran)
	}
	for _, id := range []string{"JOBnotjson", "JOBbadretry"} {
		if outcomes[id] != "failed dead" {
			t.Errorf("%s: %q", id, outcomes[id])
		}
		view, _ := q.Get(ctx, id)
		if view.State != "dead" || !strings.HasPrefix(view.Error.Message, "EMQDATA job "+id) {
			t.Errorf("%s: %+v %+v", id, view, view.Error)
		}
	}
}

// Delayed jobs start at their run-at, never before: a parked consumer promotes at each due
// instant it learned from promote's and claim's replies (the schedule's head), and ends its
// blocking read then (CLIENT UNBLOCK) rather than on the server's next tick. The beat is the
// default second, so the beat cannot be what starts them. How late each started (the row's
// started − runat, both server ms) is logged, not asserted: timing goals belong in the bench.
func TestDelayedJobsStartAtTheirRunAtNeverEarly(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	var mu sync.Mutex
	completed := map[string]int{}
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		return nil, nil
	}, ConsumerOptions{Concurrency: 10, OnEvent: func(e ConsumerEvent) {
		mu.Lock()
		defer mu.Unlock()
		if e.Kind == "completed" {
			completed[e.Job.ID]++
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	waitFor(t, 10*time.Second, "the consumer to park on the wake stream", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.parked == "block"
	})
	const n = 30
	var ids []string
	for i := 0; i < n; i++ {
		a, err := q.EnqueueIn(ctx, map[string]int{"n": i}, time.Duration(50+25*i)*time.Millisecond, nil)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	waitFor(t, 20*time.Second, "every delayed job to complete", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(completed) == n
	})
	var late []int64
	for _, id := range ids {
		view, err := q.Get(ctx, id)
		if err != nil || view == nil || view.StartedAt == nil || view.RunAt == nil {
			t.Fatal(id, view, err)
		}
		if completed[id] != 1 {
			t.Errorf("%s completed %d times", id, completed[id])
		}
		if *view.StartedAt < *view.RunAt {
			t.Errorf("%s started at %d, before its run-at %d", id, *view.StartedAt, *view.RunAt)
		}
		late = append(late, *view.StartedAt-*view.RunAt)
	}
	sort.Slice(late, func(i, j int) bool { return late[i] < late[j] })
	t.Logf("lateness of %d delayed jobs (started - runat, server ms): p50 %d, p90 %d, max %d",
		n, late[n/2], late[n*9/10], late[n-1])
}

// #32 (a): a consumer whose every slot is busy keeps reading the wake stream, so a delayed job
// enqueued while long handlers hold every slot is promoted at its instant: before any handler
// completes, and with the beat an hour away (no beat can have done it).
func TestABusyConsumerPromotesADelayedJobBeforeAnyCompletionOrBeat(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	release := make(chan struct{})
	var mu sync.Mutex
	started := map[string]bool{}
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		mu.Lock()
		started[job.ID] = true
		mu.Unlock()
		<-release
		return nil, nil
	}, ConsumerOptions{Concurrency: 2, BeatMs: 3600000})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	for i := 0; i < 2; i++ {
		if _, err := q.Enqueue(ctx, i, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 20*time.Second, "both slots busy", func() bool { return c.Running() == 2 })
	delayed, err := q.EnqueueIn(ctx, "later", 300*time.Millisecond, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the delayed job promoted while every slot is busy", func() bool {
		v, err := q.Get(ctx, delayed.ID)
		return err == nil && v.State == "pending"
	})
	if c.Running() != 2 {
		t.Fatalf("a handler ended before the promote: %d running", c.Running())
	}
	close(release)
	waitFor(t, 20*time.Second, "the delayed job completed", func() bool {
		v, err := q.Get(ctx, delayed.ID)
		return err == nil && v.State == "completed"
	})
}

// A beat that fails (here the consumers key holds a string, so heartbeat's ZADD is refused) is
// reported degraded with a back-off that doubles and is capped; the first whole beat after the
// cause is gone is reported recovered, and jobs run again.
func TestAFailingBeatIsReportedDegradedBacksOffAndRecovers(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	conn := q.client.Conn()
	defer conn.Close()
	if _, err := conn.Do("SET", q.Key("consumers"), "not a zset"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var waits []int64
	recovered := 0
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) { return "ok", nil },
		ConsumerOptions{BeatMs: 20, OnEvent: func(e ConsumerEvent) {
			mu.Lock()
			defer mu.Unlock()
			switch e.Kind {
			case "degraded":
				if e.Err == nil || e.Job != nil {
					t.Errorf("a degraded event carries the beat's error and no job: %+v", e)
				}
				waits = append(waits, e.WaitMs)
			case "recovered":
				recovered++
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	waitFor(t, 20*time.Second, "three degraded beats", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(waits) >= 3
	})
	if _, err := conn.Do("DEL", q.Key("consumers")); err != nil {
		t.Fatal(err)
	}
	a, err := q.Enqueue(ctx, 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the job completed after the recovery", func() bool {
		v, err := q.Get(ctx, a.ID)
		return err == nil && v.State == "completed"
	})
	mu.Lock()
	defer mu.Unlock()
	if recovered != 1 || waits[0] != 100 || waits[1] != 200 || waits[2] != 400 {
		t.Fatalf("back-off %v (want 100, 200, 400, …), recovered %d times (want 1)", waits, recovered)
	}
	for _, w := range waits {
		if w > degradedCap.Milliseconds() {
			t.Fatalf("a back-off over the cap: %v", waits)
		}
	}
}
