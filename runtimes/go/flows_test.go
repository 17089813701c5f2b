package echomq

import (
	"context"
	"testing"
	"time"
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
