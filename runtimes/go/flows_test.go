package echomq

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomodule/redigo/redis"
)

func TestAFlowRunsChildrenFirstAndReadsBack(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	rootID, _ := MintID()
	root := FlowJob{Name: "report", Opts: &JobOptions{ID: rootID}, Children: []FlowJob{
		{Name: "part", Data: map[string]int{"n": 1}},
		{Name: "part", Data: map[string]int{"n": 2}, Children: []FlowJob{{Name: "leaf", Data: map[string]int{"n": 3}}}},
	}}
	tree, status, err := q.AddFlow(ctx, root)
	if err != nil || status != "added" || tree.ID != rootID || len(tree.Children) != 2 || len(tree.Children[1].Children) != 1 {
		t.Fatal(tree, status, err)
	}
	read, err := q.Flow(ctx, rootID)
	if err != nil || read.State != "waiting_children" || read.Children[0].State != "pending" || read.Children[1].State != "waiting_children" || read.Children[1].Children[0].State != "pending" {
		t.Fatalf("%+v %v", read, err)
	}
	if _, again, _ := q.AddFlow(ctx, root); again != "duplicate" {
		t.Fatal(again)
	}
	c, err := q.Consume(ctx, func(ctx context.Context, job *Job) (interface{}, error) {
		return map[string]string{"name": job.Name}, nil
	}, ConsumerOptions{BeatMs: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(5 * time.Second)
	if _, err := q.WaitFor(ctx, rootID); err != nil {
		t.Fatal(err)
	}
	results, err := q.ChildrenResults(ctx, rootID)
	if err != nil || len(results) != 2 || string(results[tree.Children[0].ID]) != `{"name":"part"}` {
		t.Fatal(results, err)
	}
	read, _ = q.Flow(ctx, rootID)
	if read.State != "completed" || read.Children[1].Children[0].State != "completed" {
		t.Fatalf("%+v", read)
	}
	if none, err := q.Flow(ctx, "JOB0000000000000000000"); err != nil || none != nil {
		t.Fatal(none, err)
	}
}

// A tree spanning two queues, admitted in one call and per queue (what a client does when the
// queues are in different Cluster slots): each parent runs once, after its children, with their
// results; the children in the other queue reach it through the notices their consumer delivers.
func TestAFlowAcrossQueuesRunsEachParentOnceAfterItsChildren(t *testing.T) {
	q := testQueue(t)
	ctx := context.Background()
	other := q.Name + "-b"
	b, err := q.sibling(other)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	runs := map[string]int{}
	results := map[string]map[string]json.RawMessage{}
	handler := func(ctx context.Context, job *Job) (interface{}, error) {
		mu.Lock()
		runs[job.ID]++
		mu.Unlock()
		if job.Name == "report" || job.Name == "part" {
			got, err := job.c.q.ChildrenResults(ctx, job.ID)
			if err != nil {
				return nil, err
			}
			mu.Lock()
			results[job.ID] = got
			mu.Unlock()
		}
		return map[string]string{"name": job.Name, "queue": job.c.q.Name}, nil
	}
	for _, q := range []*Queue{q, b} {
		c, err := q.Consume(ctx, handler, ConsumerOptions{BeatMs: 100})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(5 * time.Second)
	}
	for _, perQueue := range []bool{false, true} {
		root := FlowJob{Name: "report", Children: []FlowJob{
			{Queue: other, Name: "leaf", Data: map[string]int{"n": 1}},
			{Queue: other, Name: "part", Children: []FlowJob{{Queue: q.Name, Name: "leaf", Data: map[string]int{"n": 2}}}},
			{Name: "leaf", Data: map[string]int{"n": 3}},
		}}
		tree, status, err := q.addFlow(ctx, root, perQueue)
		if err != nil || status != "added" {
			t.Fatal(perQueue, status, err)
		}
		queues := []string{tree.Children[0].Queue, tree.Children[1].Queue, tree.Children[1].Children[0].Queue, tree.Children[2].Queue}
		if strings.Join(queues, " ") != strings.Join([]string{other, other, q.Name, q.Name}, " ") {
			t.Fatalf("per queue %v: the tree's queues are %v", perQueue, queues)
		}
		if _, err := q.WaitFor(ctx, tree.ID); err != nil {
			t.Fatal(perQueue, err)
		}
		read, err := q.Flow(ctx, tree.ID)
		if err != nil || read.State != "completed" || read.Children[1].Queue != other || read.Children[1].State != "completed" || read.Children[1].Children[0].State != "completed" {
			t.Fatalf("per queue %v: %+v %v", perQueue, read, err)
		}
		mu.Lock()
		for _, id := range []string{tree.ID, tree.Children[0].ID, tree.Children[1].ID, tree.Children[1].Children[0].ID, tree.Children[2].ID} {
			if runs[id] != 1 {
				t.Errorf("per queue %v: job %s ran %d times, want once", perQueue, id, runs[id])
			}
		}
		if len(results[tree.ID]) != 3 || len(results[tree.Children[1].ID]) != 1 {
			t.Errorf("per queue %v: the parents read %d and %d children's results, want 3 and 1", perQueue, len(results[tree.ID]), len(results[tree.Children[1].ID]))
		}
		mu.Unlock()
		// The parents ended after their children: each child's finish is at or before its parent's start.
		for _, pair := range [][2]FlowNode{{*tree, tree.Children[0]}, {*tree, tree.Children[1]}, {*tree, tree.Children[2]}, {tree.Children[1], tree.Children[1].Children[0]}} {
			parentQ, _ := q.sibling(pair[0].Queue)
			childQ, _ := q.sibling(pair[1].Queue)
			parent, _ := parentQ.Get(ctx, pair[0].ID)
			child, _ := childQ.Get(ctx, pair[1].ID)
			if *child.FinishedAt > *parent.StartedAt {
				t.Errorf("per queue %v: %s started at %d, before its child %s finished at %d", perQueue, pair[0].ID, *parent.StartedAt, pair[1].ID, *child.FinishedAt)
			}
		}
		if _, again, err := q.addFlow(ctx, FlowJob{Name: "report", Opts: &JobOptions{ID: tree.ID}, Children: root.Children}, perQueue); err != nil || again != "duplicate" {
			t.Fatal(perQueue, again, err)
		}
	}
	conn := q.client.Conn()
	defer conn.Close()
	// A delivery drops what it applied with its next call, just after the parent was released.
	for _, q := range []*Queue{q, b} {
		waitFor(t, 5*time.Second, "every notice of "+q.Name+" delivered and dropped", func() bool {
			n, err := redis.Int(conn.Do("ZCARD", q.Key("notices")))
			return err == nil && n == 0
		})
	}
	if _, _, err := q.AddFlow(ctx, FlowJob{Queue: other, Name: "x"}); !errors.Is(err, ErrInput) {
		t.Fatalf("a root in another queue than the handle's: %v, want EMQINPUT", err)
	}
}
