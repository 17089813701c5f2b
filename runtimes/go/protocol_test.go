package echomq

// Protocol versions 1 and 2 and feature level 2 (SPEC.md sections 19.1, 22): hello with the
// versions this runtime speaks, rows read by the queue's version, the heartbeat's protocols.

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gomodule/redigo/redis"
)

// testClient is a client of its own on the test's redis-server, with opts.
func testClient(t *testing.T, url string, opts Options) *Client {
	t.Helper()
	opts.ProtocolDir = protocolDir(t)
	client, err := Connect(url, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	return client
}

func testQueueOf(t *testing.T, client *Client, name string) *Queue {
	t.Helper()
	q, err := client.Queue(name)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func rawHash(t *testing.T, q *Queue, key string) map[string]string {
	t.Helper()
	conn := q.client.Conn()
	defer conn.Close()
	h, err := redis.StringMap(conn.Do("HGETALL", key))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestHelloStampsTheDefaultVersionAndTheRuntimeSpeaksTheStoredOne(t *testing.T) {
	ctx := context.Background()
	url := testServer(t)
	v1 := testClient(t, url, Options{ProtocolVersion: 1})
	v2 := testClient(t, url, Options{})

	old := testQueueOf(t, v1, "old")
	if _, err := old.Enqueue(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	g, err := old.Greeting(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if g.Version != 1 || g.Level != KnownLevel {
		t.Fatalf("a new queue of a client stamping 1 is stamped 1 and the scripts are level %d: got %+v", KnownLevel, g)
	}
	// A client that stamps 2 (the default) speaks 1 on a queue stamped 1: the stored version wins.
	if n, err := testQueueOf(t, v2, "old").ProtocolVersion(ctx); err != nil || n != 1 {
		t.Fatalf("stored version 1 read by a default client: %d %v", n, err)
	}
	fresh := testQueueOf(t, v2, "fresh")
	if n, err := fresh.ProtocolVersion(ctx); err != nil || n != 2 {
		t.Fatalf("a new queue of a default client is stamped 2: %d %v", n, err)
	}
	if n, err := testQueueOf(t, v1, "fresh").ProtocolVersion(ctx); err != nil || n != 2 {
		t.Fatalf("stored version 2 read by a client stamping 1: %d %v", n, err)
	}

	if _, err := Connect(url, Options{ProtocolDir: protocolDir(t), ProtocolVersion: 3}); Code(err) != "EMQINPUT" || !strings.Contains(err.Error(), "[1 2]") {
		t.Fatalf("a version this runtime does not speak must be refused naming the ones it does: %v", err)
	}

	// A queue of a later version is refused by hello, and nothing is written to it.
	conn := v1.Conn()
	defer conn.Close()
	if _, err := conn.Do("HSET", "emq:{later}:meta", "version", "3"); err != nil {
		t.Fatal(err)
	}
	later := testQueueOf(t, v1, "later")
	_, err = later.Enqueue(ctx, 1, nil)
	if !errors.Is(err, ErrProtocol) || errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "1 to 2") {
		t.Fatalf("a version-3 queue must be refused with EMQPROTOCOL naming 1 to 2: %v", err)
	}
	if keys, _ := redis.Strings(conn.Do("KEYS", "emq:{later}:*")); len(keys) != 1 {
		t.Fatalf("a refused runtime touches nothing: %v", keys)
	}
}

func TestGreetingReadsTheEntriesItKnowsAndIgnoresTheRest(t *testing.T) {
	g, err := GreetingOf([]interface{}{int64(2), int64(5), []interface{}{[]byte("emq.promote")}, []byte("later"), []interface{}{int64(1)}})
	if err != nil || g.Version != 2 || g.Level != 5 || len(g.Features) != 1 || g.Features[0] != "emq.promote" {
		t.Fatalf("%+v %v", g, err)
	}
	if g, err := GreetingOf(int64(1)); err != nil || g.Version != 1 || g.Level != 1 {
		t.Fatalf("a level-1 integer reply: %+v %v", g, err)
	}
	if _, err := GreetingOf([]byte("nonsense")); Code(err) != "EMQPROTOCOL" {
		t.Fatalf("a reply that is no greeting: %v", err)
	}
}

func TestOnVersion2ARowWithoutMaxAllowsThreeAttempts(t *testing.T) {
	ctx := context.Background()
	url := testServer(t)
	v2 := testQueueOf(t, testClient(t, url, Options{}), "v2")
	v1 := testQueueOf(t, testClient(t, url, Options{ProtocolVersion: 1}), "v1")

	// The Go producer passes max as TypeScript's does; the scripts leave a max of 3 out on 2.
	plain, _ := v2.Enqueue(ctx, map[string]int{"n": 1}, nil)
	five, _ := v2.Enqueue(ctx, map[string]int{"n": 2}, &JobOptions{Attempts: 5})
	later, _ := v2.EnqueueIn(ctx, map[string]int{"n": 3}, 3600e9, nil)
	for id, want := range map[string]string{plain.ID: "", five.ID: "5", later.ID: ""} {
		row := rawHash(t, v2, v2.JobKey(id))
		if row["max"] != want {
			t.Fatalf("version 2 row %s: max %q, want %q", id, row["max"], want)
		}
		view, err := v2.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if wantN := map[string]int64{"": 3, "5": 5}[want]; view.MaxAttempts != wantN {
			t.Fatalf("version 2 view %s: maxAttempts %d, want %d", id, view.MaxAttempts, wantN)
		}
	}
	one, _ := v1.Enqueue(ctx, 1, nil)
	if row := rawHash(t, v1, v1.JobKey(one.ID)); row["max"] != "3" {
		t.Fatalf("version 1 writes max 3: %v", row)
	}
	// A version-1 row without max (another runtime's, attempts 1) reads as 1 attempt.
	conn := v1.client.Conn()
	conn.Do("HDEL", v1.JobKey(one.ID), "max")
	conn.Close()
	if view, _ := v1.Get(ctx, one.ID); view.MaxAttempts != 1 {
		t.Fatalf("version 1 row without max: %d attempts, want 1", view.MaxAttempts)
	}

	// The Go consumer retries a version-2 row without max 3 times, then dead-letters it.
	var runs int32
	dead := make(chan struct{})
	c, err := v2.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		if job.ID != plain.ID {
			return nil, nil
		}
		atomic.AddInt32(&runs, 1)
		if job.MaxAttempts != 3 {
			return nil, Unrecoverable(errors.New("claim must say 3 attempts"))
		}
		return nil, errors.New("always")
	}, ConsumerOptions{Concurrency: 1, BeatMs: 50, Backoff: Fixed(1), OnEvent: func(e ConsumerEvent) {
		if e.Kind == "failed" && e.Outcome == "dead" && e.Job.ID == plain.ID {
			close(dead)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5e9)
	<-dead
	view, _ := v2.Get(ctx, plain.ID)
	if view.State != "dead" || view.Attempts != 3 || atomic.LoadInt32(&runs) != 3 {
		t.Fatalf("a version-2 job without max runs 3 times: %+v, %d runs", view, runs)
	}
}

func TestTheHeartbeatListsTheVersionsItSpeaksAndMigrateCountsIt(t *testing.T) {
	ctx := context.Background()
	q := testQueueAt(t, 1)
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) { return nil, nil },
		ConsumerOptions{BeatMs: 50})
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]interface{}
	waitFor(t, 10e9, "the consumer's first heartbeat", func() bool {
		text := rawHash(t, q, q.Key("consumers:info"))[c.ID]
		return text != "" && json.Unmarshal([]byte(text), &info) == nil
	})
	if protocols, _ := json.Marshal(info["protocols"]); string(protocols) != "[1,2]" || info["beatMs"] != float64(50) {
		t.Fatalf("heartbeat info: %v", info)
	}
	// migrate (SPEC 19.41) steps the queue up while this consumer is alive: it speaks 2.
	out, err := q.Migrate(ctx, MigrateOptions{To: 2})
	if err != nil || out != (MigrateResult{From: 1, Version: 2, Consumers: 1}) {
		t.Fatalf("migrate with a Go consumer alive: %+v %v", out, err)
	}
	if n, _ := q.ProtocolVersion(ctx); n != 2 {
		t.Fatalf("the queue's version after migrate: %d", n)
	}
	if err := c.Close(5e9); err != nil {
		t.Fatal(err)
	}
	if info := rawHash(t, q, q.Key("consumers:info")); len(info) != 0 {
		t.Fatalf("a closed consumer's last heartbeat leaves the list: %v", info)
	}
}
