package echomq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

// testCluster starts a Redis Cluster of its own for one test: `masters` primaries with
// `replicas` replicas each, on free ports, joined with redis-cli --cluster create; stopped when
// the test ends. Without redis-server or redis-cli the test skips, saying so. It returns each
// node's address and server process.
func testCluster(t *testing.T, masters, replicas int) ([]string, map[string]*os.Process) {
	t.Helper()
	server, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed (apt-get install redis-server): skipping the Redis Cluster tests")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Skip("redis-cli is not installed (apt-get install redis-tools): skipping the Redis Cluster tests")
	}
	var addrs []string
	procs := map[string]*os.Process{}
	for i := 0; i < masters*(1+replicas); i++ {
		port, bus := freePort(t), freePort(t)
		dir := t.TempDir()
		cmd := exec.Command(server, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", fmt.Sprint(bus), "--cluster-node-timeout", "2000", "--maxmemory", "128mb")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		waitFor(t, 10*time.Second, "redis-server on "+addr, func() bool {
			conn, err := redis.Dial("tcp", addr)
			if err == nil {
				conn.Close()
			}
			return err == nil
		})
		addrs = append(addrs, addr)
		procs[addr] = cmd.Process
	}
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", fmt.Sprint(replicas), "--cluster-yes")
	create := exec.Command(cli, args...)
	if out, err := create.CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	waitFor(t, 30*time.Second, "cluster_state:ok on every node, every replica in sync", func() bool {
		for _, addr := range addrs {
			conn, err := redis.Dial("tcp", addr)
			if err != nil {
				return false
			}
			info, _ := redis.String(conn.Do("CLUSTER", "INFO"))
			repl, _ := redis.String(conn.Do("INFO", "replication"))
			conn.Close()
			if !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(addrs))) {
				return false
			}
			if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
				return false
			}
		}
		return true
	})
	return addrs, procs
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func clusterClient(t *testing.T, seed string) *Client {
	t.Helper()
	client, err := Connect("redis://"+seed, Options{ProtocolDir: protocolDir(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	if !client.Cluster() {
		t.Fatalf("Connect did not detect the cluster at %s", seed)
	}
	return client
}

// nodeDo runs one command on the node at addr, not routed.
func nodeDo(t *testing.T, addr string, cmd string, args ...interface{}) interface{} {
	t.Helper()
	conn, err := redis.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reply, err := conn.Do(cmd, args...)
	if err != nil {
		t.Fatalf("%s %v on %s: %v", cmd, args, addr, err)
	}
	return reply
}

// tally consumes q with a no-op handler and counts each job's completions.
type tally struct {
	mu        sync.Mutex
	completed map[string]int
	lost      []string
}

func consumeAll(t *testing.T, q *Queue) (*tally, *Consumer) {
	t.Helper()
	tl := &tally{completed: map[string]int{}}
	c, err := q.Consume(context.Background(), func(ctx context.Context, job *Job) (interface{}, error) { return "ok", nil },
		ConsumerOptions{Concurrency: 4, BeatMs: 100, OnEvent: func(e ConsumerEvent) {
			tl.mu.Lock()
			defer tl.mu.Unlock()
			switch e.Kind {
			case "completed":
				tl.completed[e.Job.ID]++
			case "lost":
				tl.lost = append(tl.lost, e.Job.ID)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	return tl, c
}

// endsOnce waits for every id to complete and checks none completed twice or was lost.
func (tl *tally) endsOnce(t *testing.T, ids []string) {
	t.Helper()
	waitFor(t, 30*time.Second, fmt.Sprintf("%d jobs to complete", len(ids)), func() bool {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		for _, id := range ids {
			if tl.completed[id] == 0 {
				return false
			}
		}
		return true
	})
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for id, n := range tl.completed {
		if n != 1 {
			t.Errorf("job %s completed %d times", id, n)
		}
	}
	if len(tl.completed) != len(ids) || len(tl.lost) > 0 {
		t.Errorf("completed %d jobs of %d, lost %v", len(tl.completed), len(ids), tl.lost)
	}
}

func TestKeySlotIsTheClustersOwnForEveryKindOfKey(t *testing.T) {
	addrs, _ := testCluster(t, 3, 0)
	keys := []string{"", "a", "foo", "emq:queues", "emq:{mail}:job:JOB123", "emq:{mail}:wake", "{user1000}.following",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}{", "a{b", "émq:{ünïcode}:meta", "emq:{cl-7}:", "123456789"}
	for i := 0; i < 200; i++ {
		keys = append(keys, fmt.Sprintf("emq:{q-%d}:job:%d", i, i*7))
	}
	for _, key := range keys {
		want, _ := redis.Int(nodeDo(t, addrs[0], "CLUSTER", "KEYSLOT", key), nil)
		if got := KeySlot(key); got != want {
			t.Errorf("KeySlot(%q) = %d, CLUSTER KEYSLOT says %d", key, got, want)
		}
	}
	if KeySlot("123456789") != 0x31C3%clusterSlots { // CRC16/XMODEM's check value
		t.Errorf("KeySlot(123456789) = %d, want %d", KeySlot("123456789"), 0x31C3%clusterSlots)
	}
}

func TestQueuesInDifferentSlotsEnqueueAndConsumeOnTheirOwnPrimaries(t *testing.T) {
	addrs, _ := testCluster(t, 3, 0)
	client := clusterClient(t, addrs[1])
	nodes := map[string]bool{}
	var all []*tally
	var ids [][]string
	for i := 0; i < 9; i++ {
		q, err := client.Queue(fmt.Sprintf("cl-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		nodes[client.cluster.nodeOf(q.slot)] = true
		var items []Item
		for n := 0; n < 40; n++ {
			opts := &JobOptions{}
			if n%4 == 0 {
				opts.Group = "lane"
			}
			items = append(items, Item{Data: map[string]int{"n": n}, Opts: opts})
		}
		admitted, err := q.EnqueueMany(context.Background(), items)
		if err != nil {
			t.Fatal(err)
		}
		later, err := q.EnqueueIn(context.Background(), "later", 200*time.Millisecond, nil)
		if err != nil || later.Status != "scheduled" {
			t.Fatal(later, err)
		}
		var qids []string
		for _, a := range admitted {
			qids = append(qids, a.ID)
		}
		qids = append(qids, later.ID)
		tl, c := consumeAll(t, q)
		defer c.Close(5 * time.Second)
		all, ids = append(all, tl), append(ids, qids)
		// Its blocking read of the wake stream is parked on the queue's primary, where its
		// CLIENT UNBLOCK goes.
		waitFor(t, 10*time.Second, "the consumer of "+q.Name+" to park on the wake stream", func() bool {
			c.mu.Lock()
			defer c.mu.Unlock()
			p, ok := c.blocking.(*pinnedConn)
			return ok && p.addr == client.cluster.nodeOf(q.slot) && c.blockingID != 0
		})
		// A read of the row (a MULTI on the queue's node) under a deadline sees the job.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		view, err := q.Get(ctx, qids[0])
		cancel()
		if err != nil || view == nil {
			t.Fatalf("Get(%s) on %s: %v %v", qids[0], q.Name, view, err)
		}
	}
	if len(nodes) < 2 {
		t.Fatalf("the 9 queues all landed on %v: pick names spread over the primaries", nodes)
	}
	for i, tl := range all {
		tl.endsOnce(t, ids[i])
	}
	if n := client.cluster.moved.Load() + client.cluster.asked.Load(); n > 0 {
		// emq:queues (hello's SADD) lives in a slot of its own: the one MOVED a queue may meet
		t.Logf("redirects followed: %d (hello's SADD to emq:queues)", n)
	}
}

// migrateSlot moves slot from the node at `from` to the node at `to` the way redis-cli
// --cluster reshard does: IMPORTING, MIGRATING, every key MIGRATEd, then SETSLOT NODE on both.
// Between the keys' move and the last step, `between` runs (the slot is ASK-redirected).
func migrateSlot(t *testing.T, addrs []string, slot int, from, to string, between func()) {
	t.Helper()
	id := func(addr string) string { s, _ := redis.String(nodeDo(t, addr, "CLUSTER", "MYID"), nil); return s }
	fromID, toID := id(from), id(to)
	nodeDo(t, to, "CLUSTER", "SETSLOT", slot, "IMPORTING", fromID)
	nodeDo(t, from, "CLUSTER", "SETSLOT", slot, "MIGRATING", toID)
	host, port, _ := net.SplitHostPort(to)
	for {
		keys, _ := redis.Values(nodeDo(t, from, "CLUSTER", "GETKEYSINSLOT", slot, 100), nil)
		if len(keys) == 0 {
			break
		}
		args := []interface{}{host, port, "", 0, 5000, "KEYS"}
		nodeDo(t, from, "MIGRATE", append(args, keys...)...)
	}
	between()
	nodeDo(t, to, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	nodeDo(t, from, "CLUSTER", "SETSLOT", slot, "NODE", toID)
	for _, addr := range addrs {
		if addr != from && addr != to {
			nodeDo(t, addr, "CLUSTER", "SETSLOT", slot, "NODE", toID)
		}
	}
}

func TestAReshardedQueueIsFollowedThroughAskAndMovedWithNoJobLostOrRunTwice(t *testing.T) {
	addrs, _ := testCluster(t, 3, 0)
	client := clusterClient(t, addrs[0])
	q, err := client.Queue("resharded")
	if err != nil {
		t.Fatal(err)
	}
	from := client.cluster.nodeOf(q.slot)
	to := addrs[0]
	if to == from {
		to = addrs[1]
	}
	var ids []string
	enqueue := func(n int, tag string) {
		for i := 0; i < n; i++ {
			a, err := q.Enqueue(context.Background(), map[string]string{"tag": tag}, nil)
			if err != nil {
				t.Fatalf("enqueue (%s): %v", tag, err)
			}
			ids = append(ids, a.ID)
		}
	}
	enqueue(30, "before")
	tl, c := consumeAll(t, q)
	defer c.Close(5 * time.Second)
	enqueue(30, "consumed before")
	waitFor(t, 20*time.Second, "the first jobs to complete", func() bool {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return len(tl.completed) >= 30
	})
	// Pause the consumer's claims is not needed: a claim during the move is redirected too.
	// While the slot migrates, a read is ASK-redirected to the importing node; a script (it
	// names keys not yet there) is answered TRYAGAIN until the move ends, and waits for it.
	waited := make(chan error, 1)
	migrateSlot(t, addrs, q.slot, from, to, func() {
		asked := client.cluster.asked.Load()
		if view, err := q.Get(context.Background(), ids[len(ids)-1]); err != nil || view == nil {
			t.Fatalf("Get during the move: %v %v", view, err)
		}
		if client.cluster.asked.Load() == asked {
			t.Errorf("no ASK was followed while slot %d was migrating", q.slot)
		}
		go func() {
			a, err := q.Enqueue(context.Background(), map[string]string{"tag": "during the move"}, nil)
			if err == nil {
				ids = append(ids, a.ID)
			}
			waited <- err
		}()
		time.Sleep(300 * time.Millisecond) // the enqueue meets the open slot, not a settled one
	})
	if err := <-waited; err != nil {
		t.Fatalf("an enqueue sent while the slot migrated: %v", err)
	}
	moved := client.cluster.moved.Load()
	enqueue(30, "after")
	if client.cluster.moved.Load() == moved && client.cluster.nodeOf(q.slot) != to {
		t.Errorf("the map still says slot %d is on %s after a MOVED", q.slot, client.cluster.nodeOf(q.slot))
	}
	if got := client.cluster.nodeOf(q.slot); got != to {
		t.Errorf("the map says slot %d is on %s, the cluster on %s", q.slot, got, to)
	}
	tl.endsOnce(t, ids)
	keys, _ := redis.Int(nodeDo(t, from, "CLUSTER", "COUNTKEYSINSLOT", q.slot), nil)
	if keys != 0 {
		t.Errorf("%d keys of the queue were written to the old primary %s after the move", keys, from)
	}
}

func TestAPrimaryGoneForGoodFailsACallWithAClearErrorAfterClusterWait(t *testing.T) {
	addrs, procs := testCluster(t, 3, 0)
	client, err := Connect("redis://"+addrs[0], Options{ProtocolDir: protocolDir(t), ClusterWait: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	q, err := client.Queue("orphaned")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Enqueue(context.Background(), "first", nil); err != nil {
		t.Fatal(err)
	}
	// Its primary dies and no replica takes over: the call retries, refreshing the map and
	// backing off, and once ClusterWait has passed says what happened.
	primary := client.cluster.nodeOf(q.slot)
	procs[primary].Kill()
	// A call under a deadline shorter than ClusterWait gives up at its deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	_, err = q.Get(ctx, "JOBmissing")
	cancel()
	if err == nil || !(strings.Contains(err.Error(), "the call's deadline") || errors.Is(err, context.DeadlineExceeded)) {
		t.Fatalf("want the call's deadline to end the retries, got %v", err)
	}
	refreshes := client.cluster.refreshes.Load()
	_, err = q.Enqueue(context.Background(), "second", nil)
	if Code(err) != "EMQNOSERVER" || !strings.Contains(err.Error(), "Options.ClusterWait") || !strings.Contains(err.Error(), primary) {
		t.Fatalf("want EMQNOSERVER naming the primary %s and ClusterWait, got %v", primary, err)
	}
	if client.cluster.refreshes.Load() == refreshes {
		t.Errorf("the map was not refreshed after the connection dropped")
	}
}

// replOffset is a node's replication offset (a primary's master_repl_offset, a replica's
// slave_repl_offset).
func replOffset(t *testing.T, addr, field string) string {
	info, _ := redis.String(nodeDo(t, addr, "INFO", "replication"), nil)
	for _, line := range strings.Split(info, "\n") {
		if strings.HasPrefix(line, field+":") {
			return strings.TrimSpace(strings.TrimPrefix(line, field+":"))
		}
	}
	return ""
}

func TestAFailoverOfTheQueuesPrimaryIsFollowedByProducerAndConsumer(t *testing.T) {
	addrs, procs := testCluster(t, 3, 1)
	client := clusterClient(t, addrs[0])
	q, err := client.Queue("failover")
	if err != nil {
		t.Fatal(err)
	}
	primary := client.cluster.nodeOf(q.slot)
	var ids []string
	enqueue := func(n int) {
		for i := 0; i < n; i++ {
			a, err := q.Enqueue(context.Background(), map[string]int{"n": len(ids)}, nil)
			if err != nil {
				t.Fatalf("enqueue %d: %v", len(ids), err)
			}
			ids = append(ids, a.ID)
		}
	}
	enqueue(30)
	tl, c := consumeAll(t, q)
	defer c.Close(5 * time.Second)
	tl.endsOnce(t, ids)
	// The replica has every write (none in flight when its primary dies: asynchronous
	// replication may lose the last ones, which is Redis's to answer for, not the router's).
	var replica string
	for _, addr := range addrs {
		repl, _ := redis.String(nodeDo(t, addr, "INFO", "replication"), nil)
		if strings.Contains(repl, "role:slave") && strings.Contains(repl, "master_port:"+primary[strings.LastIndexByte(primary, ':')+1:]) {
			replica = addr
		}
	}
	if replica == "" {
		t.Fatalf("no replica of %s", primary)
	}
	waitFor(t, 10*time.Second, "the replica to have every write", func() bool {
		return replOffset(t, primary, "master_repl_offset") == replOffset(t, replica, "slave_repl_offset")
	})
	procs[primary].Kill()
	// The next call waits (retrying, refreshing the map) until the replica serves the slot.
	enqueue(30)
	if got := client.cluster.nodeOf(q.slot); got != replica {
		t.Errorf("the map says slot %d is on %s, the promoted replica is %s", q.slot, got, replica)
	}
	tl.endsOnce(t, ids)
}
