package echomq

// Flows: a parent waits for its children (state waiting_children) and is released when the
// last one completes, nested to any depth, admitted at once by the flow_add script (its 9-tuple
// form: every job in this queue), and read back as TypeScript's queue.flow(id) reads it, from
// the children index flow_add writes (P job:<id>:deps). A tree whose children live in other
// queues is TypeScript's for now (it admits each queue's part with a call of its own).

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// FlowJob is a job of a flow to add: a leaf, or a parent of Children.
type FlowJob struct {
	Name string
	Data interface{}
	// Opts are the job's options (ID, Priority, Group, Attempts, Backoff); Dedupe and Timeout
	// are refused (flow_add stores neither); nil: none.
	Opts *JobOptions
	// Continue: "" a failed child fails this parent; "1" it runs anyway; "ignore" it runs and
	// records the failure.
	Continue string
	Children []FlowJob
}

// FlowNode is a job of a flow with its id (AddFlow's answer) or its state (Flow's).
type FlowNode struct {
	ID       string     `json:"id"`
	Queue    string     `json:"queue"`
	Name     string     `json:"name,omitempty"`
	State    string     `json:"state,omitempty"` // Flow: the job's state, "missing" when its row is gone
	Children []FlowNode `json:"children"`
}

// AddFlow admits the tree in one call: "added", or "duplicate" when the root's id exists
// (nothing is written). Every job is checked before the call.
func (q *Queue) AddFlow(ctx context.Context, root FlowJob) (*FlowNode, string, error) {
	argv := []interface{}{q.Prefix}
	ids := map[string]bool{}
	var walk func(j FlowJob, parent string) (FlowNode, error)
	walk = func(j FlowJob, parent string) (FlowNode, error) {
		opts := JobOptions{}
		if j.Opts != nil {
			opts = *j.Opts
		}
		if opts.Dedupe != nil {
			return FlowNode{}, newError("EMQINPUT", "a flow's jobs cannot be deduplicated (job %q): leave Dedupe out", j.Name)
		}
		if opts.Timeout != 0 {
			return FlowNode{}, newError("EMQINPUT", "a flow's jobs cannot carry their own timeout (job %q; flow_add stores none): leave Timeout out, the consumer's TimeoutMs applies", j.Name)
		}
		if opts.Name == "" {
			opts.Name = j.Name
		}
		if j.Continue != "" && j.Continue != "1" && j.Continue != "ignore" {
			return FlowNode{}, newError("EMQINPUT", "Continue must be \"\", \"1\" or \"ignore\", got %q", j.Continue)
		}
		data := j.Data
		if data == nil {
			data = map[string]interface{}{}
		}
		a, err := q.admission(data, &opts)
		if err != nil {
			return FlowNode{}, err
		}
		if ids[a.id] {
			return FlowNode{}, newError("EMQINPUT", "job id %s appears twice in the flow", a.id)
		}
		ids[a.id] = true
		argv = append(argv, a.id, a.payload, a.prio, a.group, a.name, a.max, a.backoff, parent, j.Continue)
		node := FlowNode{ID: a.id, Queue: q.Name, Name: a.name, Children: []FlowNode{}}
		for _, c := range j.Children {
			child, err := walk(c, a.id)
			if err != nil {
				return FlowNode{}, err
			}
			node.Children = append(node.Children, child)
		}
		return node, nil
	}
	tree, err := walk(root, "")
	if err != nil {
		return nil, "", err
	}
	n, err := redis.Int(q.Run(ctx, "flow_add", "", argv...))
	if err != nil {
		return nil, "", err
	}
	if n != 1 {
		return &tree, "duplicate", nil
	}
	return &tree, "added", nil
}

// flowTreeLimit is the most jobs Flow reads (TypeScript's TREE_LIMIT).
const flowTreeLimit = 10000

// Flow reads the tree under job id with every job's state; nil when there is no such job.
// A child in another queue (a ref '<its prefix><its id>') is read in its own queue.
func (q *Queue) Flow(ctx context.Context, id string) (*FlowNode, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	conn, err := q.connContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	read := 0
	var visit func(queue, job string) (FlowNode, error)
	visit = func(queue, job string) (FlowNode, error) {
		if read++; read > flowTreeLimit {
			return FlowNode{}, newError("EMQINPUT", "the flow has more than %d jobs: read it a parent at a time", flowTreeLimit)
		}
		prefix := queuePrefix(queue)
		row, err := redis.Strings(conn.Do("HMGET", prefix+"job:"+job, "state", "name"))
		if err != nil {
			return FlowNode{}, err
		}
		refs, err := redis.Strings(conn.Do("ZRANGE", prefix+"job:"+job+":deps", 0, -1))
		if err != nil {
			return FlowNode{}, err
		}
		node := FlowNode{ID: job, Queue: queue, State: row[0], Name: row[1], Children: []FlowNode{}}
		if node.State == "" {
			node.State = "missing"
		}
		for _, ref := range refs {
			cq, cid := queue, ref
			if i := strings.Index(ref, "}:"); strings.HasPrefix(ref, "emq:{") && i > 0 {
				cq, cid = ref[len("emq:{"):i], ref[i+2:]
			}
			child, err := visit(cq, cid)
			if err != nil {
				return FlowNode{}, err
			}
			node.Children = append(node.Children, child)
		}
		return node, nil
	}
	tree, err := visit(q.Name, id)
	if err != nil || tree.State == "missing" {
		return nil, err
	}
	return &tree, nil
}

// ChildrenResults are a flow parent's children's results (child id -> the encoded result).
func (q *Queue) ChildrenResults(ctx context.Context, id string) (map[string]json.RawMessage, error) {
	if err := CheckID(id); err != nil {
		return nil, err
	}
	conn, err := q.connContext(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	m, err := redis.StringMap(conn.Do("HGETALL", q.JobKey(id)+":results"))
	if err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	for k, v := range m {
		out[k] = jsonOrText(v)
	}
	return out, nil
}
