// `switchyard task`: submit, list, get, cancel, reset and retry tasks.

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/Khan/genqlient/graphql"

	"github.com/switchyard/switchyard/graph/client"
)

// TaskVerbs are the verbs of `switchyard task`.
func TaskVerbs() []Verb {
	return []Verb{
		{"submit", "submit a task from flags, or many from a JSONL file (--file)", taskSubmit},
		{"list", "list tasks (filters, a table or --json)", taskList},
		{"get", "show one task: attempts, timings, error, result", taskGet},
		{"cancel", "cancel tasks by id, or every live task matching filters", taskCancel},
		{"reset", "put PARKED tasks back in their queue with a fresh attempt budget", taskReset},
		{"retry", "run tasks again now (RETRY_WAIT, PARKED, or ended but not SUCCEEDED: as a new task)", taskRetry},
	}
}

// Task runs `switchyard task <verb>`.
func Task(ctx context.Context, args []string, env Env) error {
	return Subverbs(ctx, "task", TaskVerbs(), args, env)
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// submitFlags are the fields of SubmitTaskInput that flags can set.
type submitFlags struct {
	agent, lane, session, priority   string
	kind, selector, ref, params, url string
	text, instruction, tab, instance string
	parent, deadline, webhook, idem  string
	timeout                          time.Duration
	maxAttempts                      int
	dependsOn, labels                multi
	interrupt                        bool
	file                             string
	batch                            int
	jsonOut, quiet                   bool
}

func (f *submitFlags) register(fs *flag.FlagSet, env Env) {
	agent := env.Getenv("SWITCHYARD_AGENT")
	if agent == "" {
		agent = "cli"
	}
	fs.StringVar(&f.agent, "agent", agent, "the agent submitting ($SWITCHYARD_AGENT); with --file, for lines that name none")
	fs.StringVar(&f.lane, "lane", "", "the lane (default main); with --file, for lines that name none")
	fs.StringVar(&f.session, "session", "", "the session key: tasks sharing it run one at a time")
	fs.StringVar(&f.priority, "priority", "", "critical, high, normal or low")
	fs.StringVar(&f.kind, "action", "", "the action kind: navigate, click, fill, type, press, text, screenshot, evaluate, …")
	fs.StringVar(&f.selector, "selector", "", "the action's selector (css:#go, xpath://button, text:Go)")
	fs.StringVar(&f.ref, "ref", "", "the action's element reference from a snapshot (e.g. e12)")
	fs.StringVar(&f.params, "params", "", "the action's parameters, a JSON object")
	fs.StringVar(&f.url, "url", "", "params.url; without --action, the action is navigate")
	fs.StringVar(&f.text, "text", "", "params.text (for fill and type)")
	fs.StringVar(&f.instruction, "instruction", "", "a free-text instruction for a chat-style instance (instead of --action)")
	fs.StringVar(&f.tab, "tab", "", "the tab to run in")
	fs.StringVar(&f.instance, "instance", "", "the instance to run on")
	fs.Var(&f.dependsOn, "depends-on", "ids of tasks that must succeed first (repeatable, or comma-separated)")
	fs.StringVar(&f.parent, "parent", "", "the task that spawned this one")
	fs.StringVar(&f.deadline, "deadline", "", "when it must have ended: RFC 3339, or a duration from now (10m)")
	fs.DurationVar(&f.timeout, "timeout", 0, "the per-attempt timeout (default: the lane's)")
	fs.IntVar(&f.maxAttempts, "max-attempts", 0, "the attempt budget, overriding the lane's retry policy")
	fs.StringVar(&f.webhook, "webhook", "", "a URL called when the task ends")
	fs.StringVar(&f.idem, "idempotency-key", "", "makes resubmission safe: the same agent and key return the original task")
	fs.Var(&f.labels, "label", "a key=value label (repeatable)")
	fs.BoolVar(&f.interrupt, "interrupt", false, "cancel what the session is running and jump ahead of its queue")
	fs.StringVar(&f.file, "file", "", "submit every line of this JSONL file (- for stdin): one SubmitTaskInput object per line")
	fs.IntVar(&f.batch, "batch", 100, "with --file: lines per submitTasks request")
	fs.BoolVar(&f.jsonOut, "json", false, "print results as JSON")
	fs.BoolVar(&f.quiet, "quiet", false, "with --file: no progress bar")
}

// input builds a SubmitTaskInput from the flags.
func (f *submitFlags) input(now time.Time) (map[string]any, error) {
	in := map[string]any{"agentId": f.agent}
	set := func(k, v string) {
		if v != "" {
			in[k] = v
		}
	}
	set("lane", f.lane)
	set("sessionKey", f.session)
	set("instruction", f.instruction)
	set("tabId", f.tab)
	set("instanceId", f.instance)
	set("parentId", f.parent)
	set("webhookUrl", f.webhook)
	set("idempotencyKey", f.idem)
	if f.priority != "" {
		p, err := enumValue("--priority", f.priority, AllPriority)
		if err != nil {
			return nil, err
		}
		in["priority"] = p
	}
	kind := f.kind
	if kind == "" && f.url != "" {
		kind = "navigate"
	}
	if kind != "" {
		action := map[string]any{"kind": kind}
		if f.selector != "" {
			action["selector"] = f.selector
		}
		if f.ref != "" {
			action["ref"] = f.ref
		}
		params := map[string]any{}
		if f.params != "" {
			if err := json.Unmarshal([]byte(f.params), &params); err != nil {
				return nil, Usagef("--params: want a JSON object: %v", err)
			}
		}
		if f.url != "" {
			params["url"] = f.url
		}
		if f.text != "" {
			params["text"] = f.text
		}
		if len(params) > 0 {
			action["params"] = params
		}
		in["action"] = action
	}
	if kind == "" && f.instruction == "" {
		return nil, Usagef("say what to do: --action KIND (or --url URL to navigate), or --instruction TEXT; or --file FILE")
	}
	if len(f.dependsOn) > 0 {
		in["dependsOn"] = []string(f.dependsOn)
	}
	if f.deadline != "" {
		if d, err := time.ParseDuration(f.deadline); err == nil {
			in["deadline"] = now.Add(d).UTC().Format(time.RFC3339Nano)
		} else if t, err := time.Parse(time.RFC3339, f.deadline); err == nil {
			in["deadline"] = t.Format(time.RFC3339Nano)
		} else {
			return nil, Usagef("--deadline %q: want RFC 3339 or a duration", f.deadline)
		}
	}
	if f.timeout > 0 {
		in["timeoutMs"] = f.timeout.Milliseconds()
	}
	if f.maxAttempts > 0 {
		in["retryPolicy"] = map[string]any{"maxAttempts": f.maxAttempts}
	}
	if len(f.labels) > 0 {
		ls, err := labels(f.labels)
		if err != nil {
			return nil, err
		}
		in["labels"] = ls
	}
	if f.interrupt {
		in["queueMode"] = "INTERRUPT"
	}
	return in, nil
}

func taskSubmit(ctx context.Context, args []string, env Env) error {
	fs := newFlags("task submit", "[flags]  |  --file tasks.jsonl", env)
	var c conn
	c.register(fs, env)
	var f submitFlags
	f.register(fs, env)
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	if f.file != "" {
		return submitFile(ctx, cl, &f, fs, env)
	}
	in, err := f.input(time.Now())
	if err != nil {
		return err
	}
	res, replayed, err := submitTask(ctx, cl, in)
	if id := rejectedTask(err); id != "" {
		return fmt.Errorf("submit: %w; the server recorded the task REJECTED: %s (switchyard task get %s)", err, id, id)
	}
	if err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	if replayed {
		fmt.Fprintf(env.Stderr, "idempotency key %q names task %s, submitted before: nothing new was submitted\n", f.idem, res.SubmitTask.Id)
	}
	if f.jsonOut {
		return writeJSON(env.Stdout, &res.SubmitTask.TaskInfo)
	}
	fmt.Fprintln(env.Stdout, res.SubmitTask.Id)
	return nil
}

// rejectedTask returns the id of the task a QUEUE_FULL refusal recorded
// REJECTED (the error's extensions.taskId), "" for any other error.
func rejectedTask(err error) string {
	var gerrs client.Errors
	if !errors.As(err, &gerrs) {
		return ""
	}
	for _, e := range gerrs {
		if id, _ := e.Extensions["taskId"].(string); id != "" && e.Code() == "QUEUE_FULL" {
			return id
		}
	}
	return ""
}

// submitTask is SubmitTask, and says whether the server answered with a
// task that the input's idempotencyKey named, recorded before (the
// response's extensions.replayed).
func submitTask(ctx context.Context, cl graphql.Client, in map[string]any) (*SubmitTaskResponse, bool, error) {
	data := &SubmitTaskResponse{}
	resp := &graphql.Response{Data: data}
	err := cl.MakeRequest(ctx, &graphql.Request{OpName: "SubmitTask", Query: SubmitTask_Operation, Variables: &__SubmitTaskInput{In: in}}, resp)
	if err != nil {
		return nil, false, err
	}
	fields, _ := resp.Extensions["replayed"].(map[string]any)
	replayed, _ := fields["submitTask"].(bool)
	return data, replayed, nil
}

// listFlags are the filters of list and cancel.
type listFlags struct {
	states, ids, labels                 multi
	agent, lane, session, batch, parent string
}

func (l *listFlags) register(fs *flag.FlagSet) {
	fs.Var(&l.states, "state", "only tasks in these states (repeatable, or comma-separated: queued,running)")
	fs.Var(&l.ids, "id", "only these task ids (repeatable)")
	fs.Var(&l.labels, "label", "only tasks with this key=value label (repeatable)")
	fs.StringVar(&l.agent, "agent", "", "only this agent's tasks")
	fs.StringVar(&l.lane, "lane", "", "only this lane's tasks")
	fs.StringVar(&l.session, "session", "", "only this session's tasks")
	fs.StringVar(&l.batch, "batch", "", "only this batch's tasks")
	fs.StringVar(&l.parent, "parent", "", "only the children of this task")
}

// filter returns the TaskFilter, and whether any field is set.
func (l *listFlags) filter() (map[string]any, bool, error) {
	f := map[string]any{}
	if len(l.states) > 0 {
		states, err := enumValues("--state", l.states, AllTaskState)
		if err != nil {
			return nil, false, err
		}
		f["states"] = states
	}
	if len(l.ids) > 0 {
		f["ids"] = []string(l.ids)
	}
	if len(l.labels) > 0 {
		ls, err := labels(l.labels)
		if err != nil {
			return nil, false, err
		}
		f["labels"] = ls
	}
	for k, v := range map[string]string{"agentId": l.agent, "lane": l.lane, "sessionKey": l.session, "batchId": l.batch, "parentId": l.parent} {
		if v != "" {
			f[k] = v
		}
	}
	return f, len(f) > 0, nil
}

func taskList(ctx context.Context, args []string, env Env) error {
	fs := newFlags("task list", "[filters] [--limit N] [--json]", env)
	var c conn
	c.register(fs, env)
	var l listFlags
	l.register(fs)
	limit := fs.Int("limit", 50, "at most this many tasks (pages are read as needed)")
	order := fs.String("order", "newest", "newest or oldest first")
	jsonOut := fs.Bool("json", false, "print one JSON object per task")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *limit < 1 {
		return Usagef("--limit must be at least 1")
	}
	ord := map[string]TaskOrder{"newest": TaskOrderNewestFirst, "oldest": TaskOrderOldestFirst}[*order]
	if ord == "" {
		return Usagef("--order %q: want newest or oldest", *order)
	}
	filter, _, err := l.filter()
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var tasks []TaskInfo
	var total int
	var after *string
	// A page's cost is its size times the fields read: 200 tasks fit the
	// default complexity limit; a server with a lower one says LIMIT, and
	// the page is halved.
	page := 200
	for len(tasks) < *limit {
		first := min(*limit-len(tasks), page)
		// totalCount costs a count: ask for it with the first page only.
		res, err := Tasks(ctx, cl, &filter, &first, after, &ord, after == nil)
		var gerrs client.Errors
		if errors.As(err, &gerrs) && gerrs[0].Code() == "LIMIT" && page > 1 {
			page /= 2
			continue
		}
		if err != nil {
			return fmt.Errorf("list: %w", err)
		}
		if after == nil {
			total = res.Tasks.TotalCount
		}
		for _, n := range res.Tasks.Nodes {
			tasks = append(tasks, n.TaskInfo)
		}
		if !res.Tasks.PageInfo.HasNextPage || res.Tasks.PageInfo.EndCursor == nil {
			break
		}
		after = res.Tasks.PageInfo.EndCursor
	}
	if *jsonOut {
		for i := range tasks {
			if err := writeJSON(env.Stdout, &tasks[i]); err != nil {
				return err
			}
		}
		return nil
	}
	if err := printTaskList(env.Stdout, tasks, time.Now()); err != nil {
		return err
	}
	if total > len(tasks) {
		fmt.Fprintf(env.Stderr, "%d of %d tasks shown (--limit)\n", len(tasks), total)
	}
	return nil
}

// printTaskList prints tasks as task list's table. A held task's REASON is
// its hold ("held by fairness plugin P on lane L (…)"), not the reason it
// was queued with: the hold is why it waits, and the list reads it at no
// extra cost (TaskInfo has it).
func printTaskList(w io.Writer, tasks []TaskInfo, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tAGENT\tLANE\tPRIORITY\tATTEMPTS\tSUBMITTED\tREASON")
	for _, t := range tasks {
		reason := str(t.Reason)
		if t.Hold != nil {
			reason = t.Hold.Reason
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", t.Id, t.State, t.AgentId, t.Lane, t.Priority, t.AttemptCount,
			ago(now, t.SubmittedAt), clip(reason, 60))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("print tasks: %w", err)
	}
	return nil
}

func ago(now, t time.Time) string {
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return t.Local().Format("2006-01-02 15:04")
}

// clip shortens s for a table column of about n bytes, marking the cut
// with "…". It cuts at a space, never inside a word or a number: "deadline
// of 1ms" cut to "deadline of 1m…" would read as a minute. Only a first
// word longer than the column is cut inside, and then at a rune boundary.
func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	keep := n - 1
	if s[keep] != ' ' {
		if i := strings.LastIndexByte(s[:keep], ' '); i > 0 {
			keep = i
		} else {
			for keep > 0 && !utf8.RuneStart(s[keep]) {
				keep--
			}
		}
	}
	return strings.TrimRight(s[:keep], " ") + "…"
}

func taskGet(ctx context.Context, args []string, env Env) error {
	fs := newFlags("task get", "ID [--json | --artifact FILE]", env)
	var c conn
	c.register(fs, env)
	jsonOut := fs.Bool("json", false, "print the task as JSON")
	artOut := fs.String("artifact", "", "write the artifact the task's result refers to (a screenshot, a PDF, a large result) to FILE (- for stdout), whole or not at all; not with --json")
	pos, err := parse(fs, args, 1, 1)
	if err != nil {
		return err
	}
	if *artOut != "" && *jsonOut {
		// The artifact's bytes are written as they are (an image, a PDF):
		// there is nothing to print as JSON beside them.
		return Usagef("task get: --artifact writes the artifact as it is; it does not take --json")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	res, err := TaskByID(ctx, cl, pos[0])
	if err != nil {
		return fmt.Errorf("get %s: %w", pos[0], err)
	}
	if res.Task == nil {
		return &Error{Code: ExitNotFound, Err: fmt.Errorf("get %s: NOT_FOUND: no such task", pos[0])}
	}
	t := &res.Task.TaskInfo
	if *artOut != "" {
		id := resultArtifact(t.Result)
		if id == "" {
			return &Error{Code: ExitNotFound, Err: fmt.Errorf("get %s: its result refers to no artifact (state %s)", t.Id, t.State)}
		}
		return fetchArtifact(ctx, cl, id, *artOut, env)
	}
	if *jsonOut {
		return writeJSON(env.Stdout, t)
	}
	printTask(env.Stdout, t)
	if id := resultArtifact(t.Result); id != "" {
		fmt.Fprintf(env.Stdout, "\nThe result is an artifact: `switchyard task get %s --artifact FILE` saves it, or GET %s with the same token.\n",
			t.Id, artifactURL(cl.URL, id))
	}
	return nil
}

// resultArtifact returns the id of the artifact a task's result refers to
// ({"artifact": {"id", …}, "kind"}: a screenshot, a PDF, or an answer too
// large to keep inline), "" when it refers to none.
func resultArtifact(result json.RawMessage) string {
	var ref struct {
		Artifact *struct {
			ID string `json:"id"`
		} `json:"artifact"`
	}
	if len(result) == 0 || result[0] != '{' || json.Unmarshal(result, &ref) != nil || ref.Artifact == nil {
		return ""
	}
	return ref.Artifact.ID
}

// artifactURL is where the server whose GraphQL endpoint is endpoint
// serves artifact id: /artifacts/{id} beside /graphql.
func artifactURL(endpoint, id string) string {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "/artifacts/" + url.PathEscape(id)
	}
	u.Path = strings.TrimSuffix(path.Dir(u.Path), "/") + "/artifacts/" + url.PathEscape(id)
	u.RawPath, u.RawQuery, u.Fragment = "", "", ""
	return u.String()
}

// fetchArtifact writes artifact id to name ("-": stdout), fetched with the
// client's token. A file is written whole or not at all: the artifact goes
// to a temporary file beside name, renamed to name once complete and
// removed if the download fails (a file already at name stays as it was).
func fetchArtifact(ctx context.Context, cl *client.Client, id, name string, env Env) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, artifactURL(cl.URL, id), nil)
	if err != nil {
		return err
	}
	for k, vs := range cl.Header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := cl.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("artifact %s: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("artifact %s: HTTP %d: %s", id, resp.StatusCode, strings.TrimSpace(string(msg)))
		switch resp.StatusCode {
		case http.StatusNotFound:
			return &Error{Code: ExitNotFound, Err: err}
		case http.StatusUnauthorized, http.StatusForbidden:
			return &Error{Code: ExitAuth, Err: err}
		}
		return err
	}
	if name == "-" {
		_, err = io.Copy(env.Stdout, resp.Body)
		return err
	}
	f, err := createPart(name)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), name)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("artifact %s: %w", id, err)
	}
	return nil
}

// createPart creates a new file beside name (same directory, so that a
// rename replaces name at once), named after it and unused, with the
// permissions os.Create would give name.
func createPart(name string) (*os.File, error) {
	dir, base := filepath.Split(name)
	for i := 0; ; i++ {
		part := filepath.Join(dir, fmt.Sprintf(".%s.%d-%d.part", base, os.Getpid(), i))
		f, err := os.OpenFile(part, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, os.ErrExist) && i < 100 {
			continue
		}
		return f, err
	}
}

func printTask(w io.Writer, t *TaskInfo) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	ts := func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.Local().Format(time.RFC3339Nano)
	}
	row("id", t.Id)
	row("state", string(t.State))
	row("reason", str(t.Reason))
	if t.Hold != nil {
		row("held", t.Hold.Reason)
	}
	if l := t.Lease; l != nil {
		// A pull lane's worker holds the running attempt.
		lease := "attempt " + fmt.Sprint(l.Attempt)
		if l.Worker != nil {
			lease += " by " + *l.Worker
		}
		if l.LeasedAt != nil {
			lease += ", leased " + ts(l.LeasedAt)
		} else {
			lease += ", resumed after a restart"
		}
		row("lease", lease+", expires "+ts(&l.ExpiresAt))
	}
	row("agent", t.AgentId)
	row("lane", t.Lane)
	row("priority", string(t.Priority))
	row("session", str(t.Session))
	if t.Action != nil {
		a := t.Action.Kind
		if t.Action.Selector != nil {
			a += " " + *t.Action.Selector
		}
		if t.Action.Ref != nil {
			a += " ref=" + *t.Action.Ref
		}
		if len(t.Action.Params) > 0 && string(t.Action.Params) != "null" {
			a += " " + string(unescapeHTML(t.Action.Params)) // as the server sent them: escaped for HTML
		}
		row("action", a)
	}
	row("instruction", str(t.Instruction))
	row("instance", str(t.InstanceId))
	row("tab", str(t.TabId))
	row("depends on", strings.Join(t.DependsOn, ", "))
	row("batch", str(t.BatchId))
	row("parent", str(t.ParentId))
	if t.Position != nil {
		row("position", fmt.Sprint(*t.Position))
	}
	var ls []string
	for _, l := range t.Labels {
		ls = append(ls, l.Key+"="+l.Value)
	}
	row("labels", strings.Join(ls, " "))
	row("submitted", ts(&t.SubmittedAt))
	row("queued", ts(t.QueuedAt))
	row("next run", ts(t.NextRunAt))
	row("ended", ts(t.EndedAt))
	row("deadline", ts(t.Deadline))
	row("attempts", fmt.Sprint(t.AttemptCount))
	_ = tw.Flush()
	if len(t.Attempts) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "#\tINSTANCE\tTAB\tASSIGNED\tTAB TIME\tACTION\tRAN\tCLASS\tHTTP\tCODE\tFAULT\tERROR")
		for _, a := range t.Attempts {
			ran := "running"
			if a.EndedAt != nil {
				from := a.AssignedAt
				if a.StartedAt != nil {
					from = *a.StartedAt
				}
				ran = a.EndedAt.Sub(from).Round(time.Microsecond).String()
			}
			status := ""
			if a.HttpStatus != nil {
				status = fmt.Sprint(*a.HttpStatus)
			}
			fault := ""
			if a.InstanceFault {
				fault = "instance"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.N, str(a.InstanceId), str(a.TabId),
				a.AssignedAt.Local().Format("15:04:05.000"), millis(a.TabTimeMs), millis(a.ActionTimeMs), ran,
				a.ErrorClass, status, str(a.ErrorCode), fault, clip(str(a.Error), 80))
		}
		_ = tw.Flush()
	}
	switch {
	case t.Error == nil:
	case t.ErrorClass != "" && t.ErrorClass != ErrorClassNone:
		fmt.Fprintf(w, "\nerror (%s): %s\n", t.ErrorClass, *t.Error)
	case t.Reason != nil && *t.Reason == *t.Error:
		// An error of no class that is the task's reason (an EXPIRED
		// task's "deadline exceeded while queued"): said above.
	default:
		fmt.Fprintf(w, "\nerror: %s\n", *t.Error)
	}
	if len(t.Result) > 0 && string(t.Result) != "null" {
		var pretty any
		out := string(t.Result)
		if json.Unmarshal(t.Result, &pretty) == nil {
			if b, err := marshalJSON(pretty, "  "); err == nil {
				out = string(b)
			}
		}
		fmt.Fprintf(w, "\nresult:\n%s\n", out)
	}
}

func taskCancel(ctx context.Context, args []string, env Env) error {
	fs := newFlags("task cancel", "ID…  |  --agent A / --lane L / --session S / --batch B …", env)
	var c conn
	c.register(fs, env)
	var l listFlags
	l.register(fs)
	reason := fs.String("reason", "", "why (recorded with the cancellation)")
	jsonOut := fs.Bool("json", false, `print {"id", "state"} a task, one object per line (with filters: {"id"} a task cancelled)`)
	ids, err := parse(fs, args, 0, -1)
	if err != nil {
		return err
	}
	filter, filtered, err := l.filter()
	if err != nil {
		return err
	}
	if len(ids) == 0 && !filtered {
		fs.Usage()
		return Usagef("name the tasks: ids, or filters (--agent, --lane, --session, --batch, --parent, --label)")
	}
	if len(ids) > 0 && filtered {
		return Usagef("give ids or filters, not both")
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var why *string
	if *reason != "" {
		why = reason
	}
	if filtered {
		res, err := CancelTasks(ctx, cl, filter, why)
		if err != nil {
			return fmt.Errorf("cancel: %w", err)
		}
		for _, id := range res.CancelTasks.Ids {
			if *jsonOut {
				if err := writeJSON(env.Stdout, map[string]string{"id": id}); err != nil {
					return err
				}
				continue
			}
			fmt.Fprintln(env.Stdout, id)
		}
		fmt.Fprintf(env.Stderr, "cancelled %d tasks\n", len(res.CancelTasks.Ids))
		return nil
	}
	return eachID(ctx, ids, env, func(id string) (string, error) {
		res, err := CancelTask(ctx, cl, id, why)
		if err != nil {
			return "", fmt.Errorf("cancel %s: %w", id, err)
		}
		return idStateLine(idState{res.CancelTask.Id, res.CancelTask.State}, *jsonOut)
	})
}

// eachID runs fn for every id, prints its line, and returns the first error
// after trying them all (so one bad id does not stop the others).
func eachID(_ context.Context, ids []string, env Env, fn func(id string) (string, error)) error {
	var first error
	failed := 0
	for _, id := range ids {
		line, err := fn(id)
		if err != nil {
			failed++
			if first == nil {
				first = withCode(err)
			}
			if len(ids) > 1 {
				fmt.Fprintf(env.Stderr, "%v\n", err)
			}
			continue
		}
		fmt.Fprintln(env.Stdout, line)
	}
	if first != nil && len(ids) > 1 {
		return &Error{Code: ExitCode(first), Err: fmt.Errorf("%d of %d failed; the first: %w", failed, len(ids), first)}
	}
	return first
}

func taskReset(ctx context.Context, args []string, env Env) error {
	return idMutation(ctx, "reset", args, env, func(cl *client.Client, id string) (idState, error) {
		res, err := ResetTask(ctx, cl, id)
		if err != nil || res.ResetTask == nil {
			return idState{}, err
		}
		return idState{res.ResetTask.Id, res.ResetTask.State}, nil
	})
}

func taskRetry(ctx context.Context, args []string, env Env) error {
	return idMutation(ctx, "retry", args, env, func(cl *client.Client, id string) (idState, error) {
		res, err := RetryTask(ctx, cl, id)
		if err != nil || res.RetryTask == nil {
			return idState{}, err
		}
		return idState{res.RetryTask.Id, res.RetryTask.State}, nil
	})
}

// idState is a task's id and state, as mutations on one task answer.
type idState struct {
	id    string
	state TaskState
}

// idMutation runs "task VERB ID…": mutate for every id.
func idMutation(ctx context.Context, verb string, args []string, env Env, mutate func(*client.Client, string) (idState, error)) error {
	fs := newFlags("task "+verb, "ID…", env)
	var c conn
	c.register(fs, env)
	jsonOut := fs.Bool("json", false, `print {"id", "state"} a task, one object per line`)
	ids, err := parse(fs, args, 1, -1)
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	return eachID(ctx, ids, env, func(id string) (string, error) {
		t, err := mutate(cl, id)
		if err != nil {
			return "", fmt.Errorf("%s %s: %w", verb, id, err)
		}
		if t.id == "" {
			return "", fmt.Errorf("%s %s: no task in the answer", verb, id)
		}
		return idStateLine(t, *jsonOut)
	})
}

// idStateLine is the line a task verb prints for t: "ID<TAB>STATE", or
// {"id", "state"} with --json.
func idStateLine(t idState, jsonOut bool) (string, error) {
	if !jsonOut {
		return fmt.Sprintf("%s\t%s", t.id, t.state), nil
	}
	b, err := marshalJSON(map[string]string{"id": t.id, "state": string(t.state)}, "")
	if err != nil {
		return "", fmt.Errorf("encode JSON: %w", err)
	}
	return string(b), nil
}

// openInput opens a file, or stdin for "-".
func openInput(name string, env Env) (io.ReadCloser, error) {
	if name == "-" {
		return io.NopCloser(env.Stdin), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, Usagef("--file: %v", err)
	}
	return f, nil
}

// millis prints a duration the server gives in milliseconds (an attempt's
// tabTimeMs, actionTimeMs) as a Go duration rounded to the microsecond, or
// "" when there is none.
func millis(ms *float64) string {
	if ms == nil {
		return ""
	}
	return time.Duration(*ms * float64(time.Millisecond)).Round(time.Microsecond).String()
}
