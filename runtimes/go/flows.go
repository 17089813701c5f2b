package echomq

// Flows: a parent waits for its children (state waiting_children) and is released when the
// last one completes, nested to any depth, admitted by the flow_add script and read back as
// TypeScript's queue.flow(id) reads it, from the children index flow_add writes (P
// job:<id>:deps). A flow may span queues (SPEC 14.1): one call admits the whole tree when one
// script reaches every queue of it (a server that is not a Cluster), else it is admitted per
// queue, the parent's part first. A child whose parent is in another queue ends with a notice in
// its own queue, which the consumers of that queue deliver on their beat (DeliverNotices).

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// FlowJob is a job of a flow to add: a leaf, or a parent of Children.
type FlowJob struct {
	// Queue is the job's queue; "": its parent's (the root's: the queue AddFlow is called on).
	Queue string
	Name  string      // "": Opts.Name, else none
	Data  interface{} // nil: {}
	// Opts are the job's options (ID, Priority, Group, Attempts, Backoff); Dedupe and Timeout
	// are refused (flow_add stores neither); nil: none.
	Opts *JobOptions
	// Continue: "" a failed child fails this parent; "1" it runs anyway; "ignore" it runs and
	// records the failure.
	Continue string
	Children []FlowJob // none: a leaf
}

// FlowNode is a job of a flow with its id (AddFlow's answer) or its state (Flow's).
type FlowNode struct {
	ID       string     `json:"id"`
	Queue    string     `json:"queue"`
	Name     string     `json:"name,omitempty"`
	State    string     `json:"state,omitempty"` // Flow: the job's state, "missing" when its row is gone
	Children []FlowNode `json:"children"`
}

// flowEntry is one job of a flow to add, encoded, in its place in the tree.
type flowEntry struct {
	q        *Queue
	a        admission
	cont     string
	parent   *flowEntry
	children []*flowEntry
}

// flowWide announces flow_add's 15-field tuples (never a job id): a queue prefix per job.
const flowWide = "#15"

// AddFlow admits the tree, the root in q: "added", or "duplicate" when the root's id exists
// (nothing is written). Every job is checked before the first call, and the tree is admitted
// in one call (this client's server is not a Cluster, so one script reaches every queue).
func (q *Queue) AddFlow(ctx context.Context, root FlowJob) (*FlowNode, string, error) {
	return q.addFlow(ctx, root, false)
}

// addFlow admits the tree in one call, or with perQueue a part per queue (SPEC 14.1: what a
// client must do when the queues are in different Cluster slots), each part one call, the
// parent's first: a part is the jobs of one queue reached from its first job without leaving
// that queue; its children in other queues go as refs, admitted by parts of their own.
func (q *Queue) addFlow(ctx context.Context, root FlowJob, perQueue bool) (*FlowNode, string, error) {
	if root.Queue != "" && root.Queue != q.Name {
		return nil, "", newError("EMQINPUT", "the flow's root is in queue %q: call AddFlow on that queue's handle (this one is %q)", root.Queue, q.Name)
	}
	var entries []*flowEntry
	ids := map[string]bool{}
	var walk func(j FlowJob, in *Queue, parent *flowEntry) (FlowNode, error)
	walk = func(j FlowJob, in *Queue, parent *flowEntry) (FlowNode, error) {
		if j.Queue != "" {
			var err error
			if in, err = q.sibling(j.Queue); err != nil {
				return FlowNode{}, err
			}
		}
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
		a, err := in.admission(data, &opts)
		if err != nil {
			return FlowNode{}, err
		}
		if ids[a.id] {
			return FlowNode{}, newError("EMQINPUT", "job id %s appears twice in the flow", a.id)
		}
		ids[a.id] = true
		e := &flowEntry{q: in, a: a, cont: j.Continue, parent: parent}
		entries = append(entries, e)
		if parent != nil {
			parent.children = append(parent.children, e)
		}
		node := FlowNode{ID: a.id, Queue: in.Name, Name: a.name, Children: []FlowNode{}}
		for _, c := range j.Children {
			child, err := walk(c, in, e)
			if err != nil {
				return FlowNode{}, err
			}
			node.Children = append(node.Children, child)
		}
		return node, nil
	}
	tree, err := walk(root, q, nil)
	if err != nil {
		return nil, "", err
	}
	// One call may write queues other than its own: each says hello first (version, registry).
	for _, e := range entries {
		if _, err := e.q.Greeting(ctx); err != nil {
			return nil, "", err
		}
	}
	if !perQueue {
		all := map[*flowEntry]bool{}
		for _, e := range entries {
			all[e] = true
		}
		added, err := q.flowAdd(ctx, flowTuples(q, entries[0], all))
		if err != nil {
			return nil, "", err
		}
		return &tree, flowStatus(added), nil
	}
	status := ""
	for _, start := range entries {
		if start.parent != nil && start.parent.q == start.q {
			continue // in the part of its parent
		}
		part := map[*flowEntry]bool{}
		var grow func(e *flowEntry)
		grow = func(e *flowEntry) {
			part[e] = true
			for _, c := range e.children {
				if c.q == e.q {
					grow(c)
				}
			}
		}
		grow(start)
		added, err := start.q.flowAdd(ctx, flowTuples(start.q, start, part))
		if err != nil && start != entries[0] {
			return nil, "", newError(codeOr(err, "EMQINPUT"), "the flow was admitted only in part (its part in queue %s failed: %v); call AddFlow again with the same job ids to admit the rest", start.q.Name, err)
		}
		if err != nil {
			return nil, "", err
		}
		if start == entries[0] {
			status = flowStatus(added)
		}
	}
	return &tree, status, nil
}

func flowStatus(added bool) string {
	if added {
		return "added"
	}
	return "duplicate"
}

// codeOr is err's protocol code, or fallback when it has none.
func codeOr(err error, fallback string) string {
	if code := Code(err); code != "" {
		return code
	}
	return fallback
}

// flowTuples are flow_add's arguments after the prefix for the part of the tree from start in
// call's queue (part: the jobs it admits), in tree order: a child of the part that is not in it
// goes as a ref in its place (named and counted, admitted by its own part), so deps keeps the
// children's order. A part of one queue alone goes as 9-tuples, as before flows spanned queues.
func flowTuples(call *Queue, start *flowEntry, part map[*flowEntry]bool) []interface{} {
	wide := false
	for e := range part {
		for _, c := range e.children {
			wide = wide || c.q != call
		}
		wide = wide || e.q != call
	}
	wide = wide || start.parent != nil
	var argv []interface{}
	if wide {
		argv = append(argv, flowWide)
	}
	var push func(e *flowEntry)
	push = func(e *flowEntry) {
		parent := ""
		if e.parent != nil {
			parent = e.parent.a.id
			if !part[e.parent] { // the first job's parent outside the call: '<its prefix><its id>'
				parent = e.parent.q.Prefix + e.parent.a.id
			}
		}
		prefix := ""
		if e.q != call {
			prefix = e.q.Prefix
		}
		if !part[e] {
			argv = append(argv, prefix, e.a.id, "", "0", "", "", "", "", parent, "", "", "", "", "", "1")
			return
		}
		a := e.a
		if wide {
			argv = append(argv, prefix)
		}
		argv = append(argv, a.id, a.payload, a.prio, a.group, a.name, a.max, a.backoff, parent, e.cont)
		if wide {
			argv = append(argv, "", "", "", "", "") // retention, tags, lifo: none; not a ref
		}
		for _, c := range e.children {
			push(c)
		}
	}
	push(start)
	return argv
}

// flowAdd runs flow_add on q: true when admitted, false for a duplicate root.
func (q *Queue) flowAdd(ctx context.Context, tuples []interface{}) (bool, error) {
	n, err := redis.Int(q.Run(ctx, "flow_add", "", append([]interface{}{q.Prefix}, tuples...)...))
	return n == 1, err
}

// sibling is the handle of the queue `name` on q's client (q itself for its own name), kept so
// that a queue's hello is said once.
func (q *Queue) sibling(name string) (*Queue, error) {
	if name == q.Name {
		return q, nil
	}
	q.siblingsMu.Lock()
	defer q.siblingsMu.Unlock()
	if s := q.siblings[name]; s != nil {
		return s, nil
	}
	s, err := q.client.Queue(name)
	if err != nil {
		return nil, err
	}
	if q.siblings == nil {
		q.siblings = map[string]*Queue{}
	}
	q.siblings[name] = s
	return s, nil
}

// splitRef reads a job named across queues, '<its prefix><its id>' (emq:{<queue>}:JOB…), as
// rows hold a remote parent and deps a remote child; ok false for a bare id.
func splitRef(ref string) (queue, id string, ok bool) {
	i := strings.Index(ref, "}:")
	if !strings.HasPrefix(ref, "emq:{") || i < 0 {
		return "", ref, false
	}
	return ref[len("emq:{"):i], ref[i+2:], true
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
			cq, cid, remote := splitRef(ref)
			if !remote {
				cq = queue
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
