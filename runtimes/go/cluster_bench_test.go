package echomq

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// TestClusterThroughputAgainstASingleServer measures jobs/s of one Go consumer (concurrency 50,
// no-op handler) on a queue of a 3-primary local cluster against the same on a single
// redis-server, rounds alternating; medians are logged with the EVALSHA calls each run made and
// the client's own CPU time per job (getrusage of this process: the router's cost, much less
// sensitive than jobs/s to what else the machine runs).
// It is a measurement, not a check: it runs only with EMQ_CLUSTER_BENCH=1 (optionally
// EMQ_CLUSTER_BENCH_JOBS, default 20000, and EMQ_CLUSTER_BENCH_ROUNDS, default 3):
//
//	EMQ_CLUSTER_BENCH=1 go test -run ClusterThroughput -v .
func TestClusterThroughputAgainstASingleServer(t *testing.T) {
	if os.Getenv("EMQ_CLUSTER_BENCH") != "1" {
		t.Skip("a measurement: set EMQ_CLUSTER_BENCH=1 to run it")
	}
	jobs, rounds := envInt("EMQ_CLUSTER_BENCH_JOBS", 20000), envInt("EMQ_CLUSTER_BENCH_ROUNDS", 3)
	single, err := Connect(testServer(t), Options{ProtocolDir: protocolDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer single.Close()
	addrs, _ := testCluster(t, 3, 0)
	cluster := clusterClient(t, addrs[0])
	rates := map[string][]float64{}
	calls := map[string][]int64{}
	cpu := map[string][]float64{}
	for round := 0; round < rounds; round++ {
		for _, side := range []struct {
			name   string
			client *Client
			nodes  []string
		}{{"single", single, []string{strings.TrimPrefix(single.url, "redis://")}}, {"cluster", cluster, addrs}} {
			for _, n := range side.nodes {
				nodeDo(t, n, "CONFIG", "RESETSTAT")
			}
			before := cpuTime()
			rate := consumeRate(t, side.client, fmt.Sprintf("bench-%s-%d", side.name, round), jobs)
			perJob := float64((cpuTime() - before).Microseconds()) / float64(jobs)
			var evals int64
			for _, n := range side.nodes {
				evals += evalshaCalls(t, n)
			}
			rates[side.name] = append(rates[side.name], rate)
			calls[side.name] = append(calls[side.name], evals)
			cpu[side.name] = append(cpu[side.name], perJob)
			t.Logf("round %d %s: %.0f jobs/s, %d EVALSHA, %.1f µs client CPU per job", round, side.name, rate, evals, perJob)
		}
	}
	med := func(xs []float64) float64 { sort.Float64s(xs); return xs[len(xs)/2] }
	t.Logf("median of %d rounds, %d jobs, concurrency 50: single %.0f jobs/s, cluster %.0f jobs/s (%.2fx); client CPU per job single %.1f µs, cluster %.1f µs; EVALSHA per run single %v, cluster %v",
		rounds, jobs, med(rates["single"]), med(rates["cluster"]), med(rates["cluster"])/med(rates["single"]),
		med(cpu["single"]), med(cpu["cluster"]), calls["single"], calls["cluster"])
}

// consumeRate fills a paused queue with n no-op jobs, starts a consumer, resumes the queue and
// returns the jobs/s until the last completion.
func consumeRate(t *testing.T, client *Client, name string, n int) float64 {
	ctx := context.Background()
	q, err := client.Queue(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	items := make([]Item, n)
	for i := range items {
		items[i] = Item{Data: map[string]int{"n": i}}
	}
	if _, err := q.EnqueueMany(context.Background(), items); err != nil {
		t.Fatal(err)
	}
	var done atomic.Int64
	finished := make(chan struct{})
	c, err := q.Consume(context.Background(), func(ctx context.Context, job *Job) (interface{}, error) { return nil, nil },
		ConsumerOptions{Concurrency: 50, OnEvent: func(e ConsumerEvent) {
			if e.Kind == "completed" && done.Add(1) == int64(n) {
				close(finished)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	time.Sleep(200 * time.Millisecond) // parked on the wake stream
	start := time.Now()
	if _, err := q.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-finished:
	case <-time.After(120 * time.Second):
		t.Fatalf("%d of %d jobs completed in 120 s", done.Load(), n)
	}
	return float64(n) / time.Since(start).Seconds()
}

func evalshaCalls(t *testing.T, addr string) int64 {
	info, _ := redis.String(nodeDo(t, addr, "INFO", "commandstats"), nil)
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, "cmdstat_evalsha:calls=") {
			n, _ := strconv.ParseInt(strings.SplitN(strings.TrimPrefix(line, "cmdstat_evalsha:calls="), ",", 2)[0], 10, 64)
			return n
		}
	}
	return 0
}

func envInt(name string, fallback int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return fallback
}

// cpuTime is the CPU time (user + system) this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
