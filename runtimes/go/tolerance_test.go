package echomq

// The evolution rule (SPEC.md section 22.1), held by the Go runtime, as
// test/upgrade/reply-tolerance.test.ts holds the TypeScript one: the Go producer and consumer run
// here against scripts of a later feature level that append entries to every tuple-shaped reply,
// and against rows, meta and heartbeat info that carry fields they do not know, events of names
// they do not know and wake entries of kinds they do not know. Every job still reaches its end
// once, retries and delays included, and every read (Get, the events reader, hello's greeting)
// carries on.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// laterTuples are the tuple-shaped replies and how many entries each has today (SPEC 19), the
// table of reply-tolerance.test.ts: a later level may only append after these.
var laterTuples = map[string]int{
	"claim": 6, "complete": 7, "promote": 4, "heartbeat": 2, "hello": 3, "migrate": 2, "pump": 3,
	"drain": 2, "obliterate": 2, "sweep_stalled": 2, "addJobScheduler": 3, "updateJobScheduler": 3,
}

// laterLevel is a script as a later level might write it: its reply padded to today's shape,
// then three entries more (the same wrapper as reply-tolerance.test.ts's).
func laterLevel(body string, entries int) string {
	shebang := ""
	if strings.HasPrefix(body, "#!") {
		shebang = body[:strings.Index(body, "\n")+1]
	}
	return shebang + "local reply = (function()\n" + body[len(shebang):] + "\nend)()\n" +
		"if type(reply) == 'table' and reply.err == nil and reply.ok == nil then\n" +
		fmt.Sprintf("  for i = #reply + 1, %d do reply[i] = {} end\n", entries) +
		"  reply[#reply + 1] = 'an entry of a later level'\n" +
		"  reply[#reply + 1] = 9\n" +
		"  reply[#reply + 1] = { 'nested', 1 }\n" +
		"end\nreturn reply\n"
}

func TestTheGoRuntimeRunsEveryJobToItsEndAgainstALaterLevel(t *testing.T) {
	ctx := context.Background()
	client := testClient(t, testServer(t), Options{})
	for name, entries := range laterTuples {
		s, err := ParseScript(name, laterLevel(client.scripts[name].Body, entries))
		if err != nil {
			t.Fatal(err)
		}
		client.scripts[name] = s
	}
	q := testQueueOf(t, client, "tolerate")
	conn := client.Conn()
	defer conn.Close()
	do := func(args ...interface{}) interface{} {
		t.Helper()
		reply, err := conn.Do(args[0].(string), args[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		return reply
	}

	// hello answered with entries after the three it knows.
	g, err := q.Greeting(ctx)
	if err != nil || g.Version != DefaultProtocolVersion || g.Level != KnownLevel {
		t.Fatalf("greeting against a later level: %+v %v", g, err)
	}
	// Fields a later level writes on meta and on the rows, before this runtime reads them.
	do("HSET", q.Key("meta"), "a_later_setting", "x")
	var ids []string
	for n := 0; n < 60; n++ {
		a, err := q.Enqueue(ctx, map[string]int{"n": n, "fails": map[bool]int{true: 1}[n%4 == 0]}, &JobOptions{Backoff: Fixed(1)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, a.ID)
	}
	for n := 60; n < 70; n++ {
		a, err := q.EnqueueIn(ctx, map[string]int{"n": n}, 50*time.Millisecond, nil)
		if err != nil || a.Status != "scheduled" {
			t.Fatal(a, err)
		}
		ids = append(ids, a.ID)
	}
	for _, id := range ids {
		do("HSET", q.JobKey(id), "a_later_field", "y", "another", `{"z":1}`)
	}
	// An event of a name it does not know, a known one with fields it does not know, a wake of
	// an unknown kind, a consumer's info with fields it does not know.
	do("XADD", q.Key("events"), "*", "event", "teleported", "id", ids[1], "where", "mars")
	do("XADD", q.Key("events"), "*", "event", "waiting", "id", ids[2], "a_later_field", "1")
	do("XADD", q.Key("wake"), "*", "k", "z")
	info := `{"host":"h","pid":1,"beatMs":1000,"protocols":[1,2,3],"mood":"ok"}`
	beat, err := redis.Values(q.Run(ctx, "heartbeat", "", q.Prefix, "later-runtime", info))
	if err != nil || len(beat) != 5 || fmt.Sprint(replyValue(beat[2])) != "an entry of a later level" {
		t.Fatalf("the scripts here must be a later level's: heartbeat replied %v %v", replyValue(beat), err)
	}

	var mu sync.Mutex
	runs := map[int]int{}
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		var data struct{ N, Fails int }
		if err := json.Unmarshal(job.Data, &data); err != nil {
			return nil, err
		}
		mu.Lock()
		runs[data.N]++
		mu.Unlock()
		if job.Attempts <= data.Fails {
			return nil, errors.New("once more")
		}
		return data.N, nil
	}, ConsumerOptions{Concurrency: 8, BeatMs: 100, Backoff: Fixed(1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	views := make([]*JobView, len(ids))
	waitFor(t, 60*time.Second, "every job completed", func() bool {
		for i, id := range ids {
			v, err := q.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if v == nil || v.State != "completed" {
				return false
			}
			views[i] = v
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for i, v := range views {
		if v.Result == nil || string(*v.Result) != fmt.Sprint(i) {
			t.Errorf("job %d: result %v", i, v.Result)
		}
		want := 1
		if i < 60 && i%4 == 0 {
			want = 2
		}
		if runs[i] != want || v.MaxAttempts != 3 {
			t.Errorf("job %d ran %d times (want %d), maxAttempts %d", i, runs[i], want, v.MaxAttempts)
		}
	}

	// The events reader carries on past names and fields it does not know.
	r, err := q.Events(ctx, "0")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.BlockMs = 100
	completed, teleported := 0, map[string]string(nil)
	for completed < 70 {
		events, err := r.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) == 0 {
			t.Fatalf("the events reader saw %d completions of 70", completed)
		}
		for _, e := range events {
			switch e.Event {
			case "completed":
				completed++
			case "teleported":
				teleported = e.Fields
			}
		}
	}
	if teleported["where"] != "mars" {
		t.Fatalf("an event of an unknown name is passed on with its fields: %v", teleported)
	}
	if n, err := q.ProtocolVersion(ctx); err != nil || n != DefaultProtocolVersion {
		t.Fatalf("meta with a later field: version %d %v", n, err)
	}
}
