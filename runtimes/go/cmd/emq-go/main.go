// emq-go drives the Go runtime from the command line; the cross-runtime tests
// (test/cross-runtime/go.test.ts) run it beside the TypeScript runtime on one queue.
//
//	emq-go produce --url U --queue Q < jobs.json     admit jobs, print their statuses
//	emq-go consume --url U --queue Q [--concurrency N --lease-ms N --beat-ms N --quiet]
//	                                                  run the test handler until stdin closes
//	emq-go flow --url U --queue Q < tree.json        add a flow ({name, data, id, continue, children}),
//	                                                  print {status, tree} with every job's id
//	emq-go get --url U --queue Q ID...               print each job's row as a JobView (JSON)
//	emq-go events --url U --queue Q [--from 0]       print the events until a read comes back empty
//	emq-go conformance --url U --flush               replay protocol/conformance/ and count
//	                                                  (it flushes the database: a server of its own)
//
// Every command also takes --protocol-version N, the version hello stamps on a queue that has
// none (default 1; a queue that has one keeps it).
//
// Every command prints JSON, one value per line.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"echomq"
)

func main() {
	ctx := context.Background()
	if len(os.Args) < 2 {
		fail(errors.New("usage: emq-go produce|consume|get|events|conformance --url redis://… [--queue name]"))
	}
	cmd := os.Args[1]
	flags := flag.NewFlagSet(cmd, flag.ExitOnError)
	url := flags.String("url", "redis://127.0.0.1:6379", "the Redis server")
	queue := flags.String("queue", "", "the queue")
	protocol := flags.String("protocol", "", "the protocol directory (default: $ECHOMQ_PROTOCOL, or found above the working directory)")
	concurrency := flags.Int("concurrency", 10, "consume: handlers at once")
	leaseMs := flags.Int64("lease-ms", 0, "consume: the lease (default 30000)")
	beatMs := flags.Int64("beat-ms", 0, "consume: the beat (default 1000)")
	timeoutMs := flags.Int64("timeout-ms", 0, "consume: the execution timeout of jobs without their own (default none)")
	from := flags.String("from", "0", "events: where to start")
	protocolVersion := flags.Int("protocol-version", 0, "the version hello stamps on a queue that has none (default 2)")
	quiet := flags.Bool("quiet", false, "consume: print no line per job (for benches), only ready, health and closed")
	flush := flags.Bool("flush", false, "conformance: allow it to FLUSHALL the server before every case")
	flags.Parse(os.Args[2:])

	client, err := echomq.Connect(*url, echomq.Options{ProtocolDir: *protocol, ProtocolVersion: *protocolVersion})
	if err != nil {
		fail(err)
	}
	defer client.Close()
	if cmd == "conformance" {
		if !*flush {
			fail(errors.New("conformance flushes the whole database before every case: pass --flush, on a redis-server of its own"))
		}
		conformance(client, *protocol)
		return
	}
	q, err := client.Queue(*queue)
	if err != nil {
		fail(err)
	}
	out := json.NewEncoder(os.Stdout)
	switch cmd {
	case "produce":
		produce(q, out)
	case "consume":
		consume(q, out, echomq.ConsumerOptions{Concurrency: *concurrency, LeaseMs: *leaseMs, BeatMs: *beatMs, TimeoutMs: *timeoutMs}, *quiet)
	case "flow":
		flow(q, out)
	case "get":
		for _, id := range flags.Args() {
			view, err := q.Get(ctx, id)
			if err != nil {
				fail(err)
			}
			out.Encode(view)
		}
	case "events":
		r, err := q.Events(ctx, *from)
		if err != nil {
			fail(err)
		}
		r.BlockMs = 200
		for {
			events, err := r.Next(ctx)
			if err != nil {
				fail(err)
			}
			if len(events) == 0 {
				return
			}
			for _, e := range events {
				out.Encode(e)
			}
		}
	default:
		fail(fmt.Errorf("unknown command %q", cmd))
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "emq-go:", err)
	os.Exit(1)
}

// A job to produce: the admission options and, for a delayed job, delayMs or runAt.
type jobSpec struct {
	Data     json.RawMessage `json:"data"`
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Group    string          `json:"group"`
	Priority int             `json:"priority"`
	Attempts int             `json:"attempts"`
	Backoff  *echomq.Backoff `json:"backoff"`
	Dedupe   *echomq.Dedupe  `json:"dedupe"`
	DelayMs  *int64          `json:"delayMs"`
	RunAt    *int64          `json:"runAt"`
	// TimeoutMs is the job's own execution timeout (JobOptions.Timeout); 0: the consumer's.
	TimeoutMs int64 `json:"timeoutMs"`
}

func produce(q *echomq.Queue, out *json.Encoder) {
	ctx := context.Background()
	var specs []jobSpec
	if err := json.NewDecoder(os.Stdin).Decode(&specs); err != nil {
		fail(fmt.Errorf("produce reads a JSON array of jobs on stdin: %v", err))
	}
	var now []echomq.Item
	var nowAt []int
	results := make([]echomq.Admitted, len(specs))
	for i, s := range specs {
		if s.Data == nil {
			s.Data = json.RawMessage("null")
		}
		opts := &echomq.JobOptions{ID: s.ID, Name: s.Name, Group: s.Group, Priority: s.Priority, Attempts: s.Attempts, Backoff: s.Backoff, Dedupe: s.Dedupe, Timeout: time.Duration(s.TimeoutMs) * time.Millisecond}
		var err error
		switch {
		case s.DelayMs != nil:
			results[i], err = q.EnqueueIn(ctx, s.Data, time.Duration(*s.DelayMs)*time.Millisecond, opts)
		case s.RunAt != nil:
			results[i], err = q.EnqueueAt(ctx, s.Data, *s.RunAt, opts)
		default:
			now = append(now, echomq.Item{Data: s.Data, Opts: opts})
			nowAt = append(nowAt, i)
		}
		if err != nil {
			fail(err)
		}
	}
	admitted, err := q.EnqueueMany(ctx, now)
	if err != nil {
		fail(err)
	}
	for j, a := range admitted {
		results[nowAt[j]] = a
	}
	out.Encode(results)
}

// flowSpec is a flow job as the flow command reads it.
type flowSpec struct {
	Queue    string          `json:"queue"` // "": its parent's
	ID       string          `json:"id"`
	Name     string          `json:"name"`
	Data     json.RawMessage `json:"data"`
	Continue string          `json:"continue"`
	Children []flowSpec      `json:"children"`
}

func (s flowSpec) job() echomq.FlowJob {
	j := echomq.FlowJob{Queue: s.Queue, Name: s.Name, Continue: s.Continue, Opts: &echomq.JobOptions{ID: s.ID}}
	if len(s.Data) > 0 {
		j.Data = s.Data
	}
	for _, c := range s.Children {
		j.Children = append(j.Children, c.job())
	}
	return j
}

func flow(q *echomq.Queue, out *json.Encoder) {
	var spec flowSpec
	if err := json.NewDecoder(os.Stdin).Decode(&spec); err != nil {
		fail(fmt.Errorf("flow reads one JSON tree {queue, name, data, id, continue, children} on stdin: %v", err))
	}
	tree, status, err := q.AddFlow(context.Background(), spec.job())
	if err != nil {
		fail(err)
	}
	out.Encode(map[string]interface{}{"status": status, "tree": tree})
}

// The test handler: data {"fail": k} fails the first k attempts, {"sleepMs": n} takes n ms,
// {"progress": true} reports progress, {"unrecoverable": true} dead-letters at once,
// {"children": true} returns a flow parent's children's results; the result says who ran it.
func consume(q *echomq.Queue, out *json.Encoder, opts echomq.ConsumerOptions, quiet bool) {
	ctx := context.Background()
	var mu sync.Mutex
	print := func(v interface{}) {
		mu.Lock()
		defer mu.Unlock()
		out.Encode(v)
	}
	opts.OnEvent = func(e echomq.ConsumerEvent) {
		if e.Job == nil { // degraded or recovered: the consumer's health
			line := map[string]interface{}{"kind": e.Kind, "waitMs": e.WaitMs}
			if e.Err != nil {
				line["error"] = e.Err.Error()
			}
			print(line)
			return
		}
		if quiet {
			return
		}
		line := map[string]interface{}{"kind": e.Kind, "id": e.Job.ID, "attempt": e.Job.Attempts}
		if e.Outcome != "" {
			line["outcome"] = e.Outcome
		}
		print(line)
	}
	c, err := q.Consume(ctx, func(ctx context.Context, job *echomq.Job) (interface{}, error) {
		if !quiet {
			print(map[string]interface{}{"kind": "started", "id": job.ID, "attempt": job.Attempts, "at": time.Now().UnixMilli()})
		}
		var data struct {
			Fail          int   `json:"fail"`
			SleepMs       int64 `json:"sleepMs"`
			Unrecoverable bool  `json:"unrecoverable"`
			Progress      bool  `json:"progress"`
			Children      bool  `json:"children"`
		}
		json.Unmarshal(job.Data, &data)
		if data.SleepMs > 0 {
			select {
			case <-time.After(time.Duration(data.SleepMs) * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		if data.Progress {
			if err := job.Progress(ctx, map[string]interface{}{"at": job.Attempts, "by": "go"}); err != nil {
				return nil, err
			}
		}
		if data.Unrecoverable {
			return nil, echomq.Unrecoverable(errors.New("go: unrecoverable"))
		}
		if job.Attempts <= data.Fail {
			return nil, fmt.Errorf("go: attempt %d fails on purpose", job.Attempts)
		}
		result := map[string]interface{}{"by": "go", "attempt": job.Attempts, "data": job.Data}
		if data.Children { // a flow parent: its children's results, as it read them
			children, err := q.ChildrenResults(ctx, job.ID)
			if err != nil {
				return nil, err
			}
			result["children"] = children
		}
		return result, nil
	}, opts)
	if err != nil {
		fail(err)
	}
	print(map[string]interface{}{"kind": "ready", "consumer": c.ID})
	done := make(chan struct{})
	go func() {
		bufio.NewReader(os.Stdin).ReadString(0) // until stdin closes
		close(done)
	}()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-done:
	case <-signals:
	}
	if err := c.Close(10 * time.Second); err != nil {
		fail(err)
	}
	print(map[string]interface{}{"kind": "closed"})
}

func conformance(client *echomq.Client, protocol string) {
	if protocol == "" {
		dir, err := echomq.FindProtocolDir()
		if err != nil {
			fail(err)
		}
		protocol = dir
	}
	files, err := echomq.LoadConformance(filepath.Join(protocol, "conformance"))
	if err != nil {
		fail(err)
	}
	conn := client.Conn()
	defer conn.Close()
	passed, total := 0, 0
	var failures []string
	for _, f := range files {
		for i := range f.Cases {
			total++
			problems, err := echomq.ReplayCase(conn, client.Scripts(), &f.Cases[i])
			if err != nil {
				fail(err)
			}
			if len(problems) == 0 {
				passed++
			} else {
				failures = append(failures, f.Script+": "+f.Cases[i].Name+": "+problems[0])
			}
		}
	}
	json.NewEncoder(os.Stdout).Encode(map[string]interface{}{"passed": passed, "total": total, "failures": failures})
	if passed != total {
		os.Exit(1)
	}
}
