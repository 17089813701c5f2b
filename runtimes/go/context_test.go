package echomq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// keysOf counts the queue's keys and says whether it is listed in emq:queues.
func keysOf(t *testing.T, q *Queue) (int, bool) {
	t.Helper()
	conn := q.client.Conn()
	defer conn.Close()
	keys, err := redis.Strings(conn.Do("KEYS", q.Prefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	listed, err := redis.Bool(conn.Do("SISMEMBER", "emq:queues", q.Name))
	if err != nil {
		t.Fatal(err)
	}
	return len(keys), listed
}

func TestADoneContextMakesNoCallAndSaysWhy(t *testing.T) {
	q := testQueue(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelExpired()
	id, _ := MintID()
	for _, c := range []struct {
		ctx  context.Context
		want error
	}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		ctx := c.ctx
		calls := map[string]func() error{
			"Enqueue":     func() error { _, err := q.Enqueue(ctx, "x", nil); return err },
			"EnqueueMany": func() error { _, err := q.EnqueueMany(ctx, []Item{{Data: 1}, {Data: 2}}); return err },
			"EnqueueAt":   func() error { _, err := q.EnqueueAt(ctx, "x", 1, nil); return err },
			"EnqueueIn":   func() error { _, err := q.EnqueueIn(ctx, "x", time.Second, nil); return err },
			"Get":         func() error { _, err := q.Get(ctx, id); return err },
			"Cancel":      func() error { _, err := q.Cancel(ctx, id); return err },
			"Greeting":    func() error { _, err := q.Greeting(ctx); return err },
			"Events":      func() error { _, err := q.Events(ctx, "$"); return err },
			"Consume": func() error {
				_, err := q.Consume(ctx, func(context.Context, *Job) (interface{}, error) { return nil, nil }, ConsumerOptions{})
				return err
			},
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, c.want) {
				t.Errorf("%s under a done context returned %v, want an error wrapping %v", name, err, c.want)
			}
		}
	}
	if n, listed := keysOf(t, q); n != 0 || listed {
		t.Fatalf("a done context wrote %d keys (listed in emq:queues: %v), want none", n, listed)
	}
}

func TestEndingConsumesContextHandsTheRunningJobsBack(t *testing.T) {
	bg := context.Background()
	q := testQueue(t)
	job, err := q.Enqueue(bg, "slow", nil)
	if err != nil {
		t.Fatal(err)
	}
	life, end := context.WithCancel(bg)
	started := make(chan struct{})
	reasons := make(chan string, 1)
	c, err := q.Consume(life, func(ctx context.Context, j *Job) (interface{}, error) {
		close(started)
		<-ctx.Done()
		reasons <- j.Aborted()
		return nil, ctx.Err()
	}, ConsumerOptions{Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	<-started
	end()
	if reason := <-reasons; reason != "closing" {
		t.Fatalf("the handler's context ended for %q, want closing", reason)
	}
	if err := c.Close(0); err != nil { // already closing: waits for that close to end
		t.Fatal(err)
	}
	view, err := q.Get(bg, job.ID)
	if err != nil || view.State != "pending" || view.Attempts != 0 {
		t.Fatalf("after the consumer's context ended: %+v %v, want pending with no attempt spent", view, err)
	}
}

func TestWaitForAndEventsEndWhenTheirContextDoes(t *testing.T) {
	bg := context.Background()
	q := testQueue(t)
	job, err := q.Enqueue(bg, "never run", nil)
	if err != nil {
		t.Fatal(err)
	}
	waiting, stopWaiting := context.WithCancel(bg)
	done := make(chan error, 1)
	go func() { _, err := q.WaitFor(waiting, job.ID); done <- err }()
	stopWaiting()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitFor returned %v, want an error wrapping context.Canceled", err)
	}

	r, err := q.Events(bg, "$")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.BlockMs = 600000 // only the context ends this read
	reading, stopReading := context.WithCancel(bg)
	cut := make(chan error, 1)
	go func() { _, err := r.Next(reading); cut <- err }()
	stopReading()
	if err := <-cut; !errors.Is(err, context.Canceled) {
		t.Fatalf("Next returned %v, want an error wrapping context.Canceled", err)
	}
	// The next read reconnects and resumes after the last entry delivered: nothing is skipped.
	if _, err := q.Cancel(bg, job.ID); err != nil {
		t.Fatal(err)
	}
	r.BlockMs = 5000
	events, err := r.Next(bg)
	if err != nil || len(events) == 0 || events[0].ID != job.ID {
		t.Fatalf("after a cut read: %+v %v, want the cancel's event", events, err)
	}
}
