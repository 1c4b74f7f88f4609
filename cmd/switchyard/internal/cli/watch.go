// `switchyard watch`: the live task event stream, filtered, colourised on
// a terminal, resumable. It follows taskEventFeed (the bulk subscription)
// over graphql-transport-ws; when the connection drops it reconnects and
// resumes after the last seq it printed, so nothing is missed or repeated.
// On exit it prints the last seq to stderr, for a script to resume from
// with --after.

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/switchyard/switchyard/graph/client"
)

// Event is one task event as taskEventFeed encodes it.
type Event struct {
	Seq        int64  `json:"seq"`
	Kind       string `json:"kind"`
	At         string `json:"at"`
	TaskID     string `json:"taskId,omitempty"`
	AgentID    string `json:"agentId,omitempty"`
	Lane       string `json:"lane,omitempty"`
	SessionKey string `json:"sessionKey,omitempty"`
	BatchID    string `json:"batchId,omitempty"`
	From       string `json:"from,omitempty"`
	To         string `json:"to,omitempty"`
	Attempt    int    `json:"attempt,omitempty"`
	Reason     string `json:"reason,omitempty"`
	Skipped    int64  `json:"skipped,omitempty"`
}

// eventKinds are the schema's TaskEventKind values (genqlient generates no
// type for it: the operations take the filter as a map); a test compares
// them with the schema.
var eventKinds = []string{"STATE", "RELEASED", "STALE", "LANE", "ENGINE", "BATCH", "SESSION", "HELD", "HOLD_ENDED", "LEASE_RESUMED", "LAGGED"}

// endStates are the states --until-done waits for: those that end a task,
// and PARKED, where a task whose retry budget is spent stays until someone
// resets it (nothing else moves it; a watch waiting for its end would
// wait forever). terminal is them as a set.
var (
	endStates = []string{"SUCCEEDED", "FAILED", "CANCELLED", "EXPIRED", "REJECTED", "PARKED"}
	terminal  = func() map[string]bool {
		m := make(map[string]bool, len(endStates))
		for _, s := range endStates {
			m[s] = true
		}
		return m
	}()
)

// Watch runs `switchyard watch`.
func Watch(ctx context.Context, args []string, env Env) error {
	fs := newFlags("watch", "[filters] [--after SEQ] [--count N] [--json]", env)
	var c conn
	c.register(fs, env)
	var tasks, kinds, states multi
	fs.Var(&tasks, "task", "only these tasks' events (repeatable, or comma-separated)")
	fs.Var(&kinds, "kind", "only these kinds: state, released, stale, lane, engine, batch, session, held, hold-ended, lease-resumed (LAGGED always comes)")
	fs.Var(&states, "state", "only changes into these states (repeatable, or comma-separated)")
	agent := fs.String("agent", "", "only this agent's tasks")
	lane := fs.String("lane", "", "only this lane's tasks (and its LANE events)")
	session := fs.String("session", "", "only this session's tasks")
	batch := fs.String("batch", "", "only this batch's tasks")
	after := fs.Int64("after", -1, "start after this seq (resume); default: from now")
	count := fs.Int("count", 0, "stop after this many events (0: until interrupted)")
	untilDone := fs.Bool("until-done", false, "with --task: stop once every named task has ended or parked (its retry budget spent: only a reset moves it); one that already has is shown by its state at once (an unknown id: NOT_FOUND); a --kind without state, or a --state without every end state and PARKED, is refused: it would hide the ends")
	jsonOut := fs.Bool("json", false, "print each event as one JSON object per line")
	color := fs.String("color", "auto", "auto (on a terminal), always or never")
	if _, err := parse(fs, args, 0, 0); err != nil {
		return err
	}
	if *untilDone && len(tasks) == 0 {
		return Usagef("--until-done needs --task")
	}
	var colours bool
	switch *color {
	case "auto":
		colours = env.StdoutTerminal && env.Getenv("NO_COLOR") == ""
	case "always":
		colours = true
	case "never":
	default:
		return Usagef("--color %q: want auto, always or never", *color)
	}
	filter := map[string]any{}
	if len(tasks) > 0 {
		filter["taskIds"] = []string(tasks)
	}
	if len(kinds) > 0 {
		k, err := enumValues("--kind", kinds, eventKinds)
		if err != nil {
			return err
		}
		filter["kinds"] = k
	}
	if len(states) > 0 {
		s, err := enumValues("--state", states, AllTaskState)
		if err != nil {
			return err
		}
		filter["states"] = s
	}
	if *untilDone {
		if err := endsShown(filter); err != nil {
			return err
		}
	}
	for k, v := range map[string]string{"agentId": *agent, "lane": *lane, "sessionKey": *session, "batchId": *batch} {
		if v != "" {
			filter[k] = v
		}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	w := &watcher{
		cl: cl, env: env, filter: filter, json: *jsonOut, colours: colours, count: *count,
		pending: map[string]bool{}, endsAt: map[string]int64{}, before: map[string]int64{},
	}
	if *after >= 0 {
		w.last, w.haveLast = *after, true
	}
	if *untilDone {
		for _, id := range tasks {
			w.pending[id] = true
		}
		w.untilDone = true
		err = w.start(ctx)
		if err == nil && w.done() {
			err = errDone // every named task had ended: nothing to follow
		}
	}
	if err == nil {
		err = w.run(ctx)
	}
	err = withCode(err)
	ended := errors.Is(err, errDone) || (err != nil && ctx.Err() != nil) // interrupted, or the count reached
	// The resume hint is for a watch that ended or lost its server; not for
	// one the server refused (an --after past its latest event, a filter it
	// does not take), where resuming would be refused again.
	if code := ExitCode(err); w.haveLast && (err == nil || ended || code == ExitUnreachable || code == ExitRetry) {
		fmt.Fprintf(env.Stderr, "last seq %d (resume with --after %d)\n", w.last, w.last)
	}
	if ended {
		return nil // a normal end
	}
	return err
}

var errDone = errors.New("done")

// endsShown refuses an --until-done whose --kind or --state would keep a
// task's end out of the stream: the watch would wait for it forever.
func endsShown(filter map[string]any) error {
	if k, ok := filter["kinds"].([]string); ok && !slices.Contains(k, "STATE") {
		return Usagef("--until-done with --kind %s: a task ends with a state event, which --kind leaves out: add state to --kind", strings.ToLower(strings.Join(k, ",")))
	}
	if st, ok := filter["states"].([]string); ok {
		var missing []string
		for _, end := range endStates {
			if !slices.Contains(st, end) {
				missing = append(missing, end)
			}
		}
		if len(missing) > 0 {
			return Usagef("--until-done with --state %s: a task that ends %s would not be seen to end: add them to --state, or leave --state out",
				strings.Join(st, ","), strings.Join(missing, ", "))
		}
	}
	return nil
}

type watcher struct {
	cl        *client.Client
	env       Env
	filter    map[string]any
	json      bool
	colours   bool
	count     int
	printed   int
	last      int64
	haveLast  bool
	untilDone bool
	pending   map[string]bool
	// endsAt holds the tasks read as ended whose last event (the seq) the
	// stream has not passed yet: each is done once it has, whether or not
	// the stream showed its end (a LAGGED notice may have skipped it).
	endsAt map[string]int64
	// before holds, for a watch from now (no --after), the seq each named
	// task was read as of: its events up to there came before the watch and
	// are not shown again.
	before map[string]int64
}

// start reads the tasks --until-done waits for, before the subscription:
// one already ended is reported here (its end will not come again) and
// counts as done; an unknown one is an error. Without --after, the
// subscription then starts from the earliest seq a running task was read
// as of, so an end committed between the read and the subscription is
// still in the stream.
func (w *watcher) start(ctx context.Context) error {
	fromNow := !w.haveLast
	var from int64 = -1
	var latest int64
	for _, id := range w.ids() {
		t, err := w.read(ctx, id)
		if err != nil {
			return err
		}
		latest = max(latest, t.LastSeq)
		if fromNow {
			w.before[id] = t.LastSeq
		}
		if !terminal[string(t.State)] {
			if fromNow && (from < 0 || t.LastSeq < from) {
				from = t.LastSeq
			}
			continue
		}
		if err := w.ended(t, w.last, fromNow); err != nil {
			return err
		}
	}
	if fromNow {
		if from < 0 {
			from = latest // all ended: nothing to follow
		}
		w.last, w.haveLast = from, true
	}
	return nil
}

// ids lists the pending tasks in a stable order.
func (w *watcher) ids() []string {
	ids := make([]string, 0, len(w.pending))
	for id := range w.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

func (w *watcher) read(ctx context.Context, id string) (*WatchedTaskTask, error) {
	res, err := WatchedTask(ctx, w.cl, id)
	if err != nil {
		return nil, fmt.Errorf("read task %s: %w", id, err)
	}
	if res.Task == nil {
		return nil, &Error{Code: ExitNotFound, Err: fmt.Errorf("task %s: NOT_FOUND: no such task", id)}
	}
	return res.Task, nil
}

// ended deals with a task read as ended: when the stream is already past
// its last event (pos), or the watch is from now, its end is printed from
// the task as read and it is done; otherwise the stream replays its end
// and it is done once the stream has passed its last event.
func (w *watcher) ended(t *WatchedTaskTask, pos int64, fromNow bool) error {
	if !fromNow && t.LastSeq > pos {
		w.endsAt[t.Id] = t.LastSeq
		return nil
	}
	delete(w.pending, t.Id)
	at := t.UpdatedAt
	if t.EndedAt != nil {
		at = *t.EndedAt
	}
	e := &Event{
		Seq: t.LastSeq, Kind: "STATE", At: at.UTC().Format(time.RFC3339Nano), TaskID: t.Id, AgentID: t.AgentId,
		Lane: t.Lane, SessionKey: str(t.SessionKey), To: string(t.State), Attempt: t.AttemptCount, Reason: str(t.Reason),
	}
	w.printed++
	if w.json {
		return writeJSON(w.env.Stdout, e)
	}
	_, err := io.WriteString(w.env.Stdout, formatEvent(e, w.colours)+"\n")
	return err
}

// passed marks done the ended tasks whose last event the stream has
// passed (pos).
func (w *watcher) passed(pos int64) {
	for id, seq := range w.endsAt {
		if seq <= pos {
			delete(w.pending, id)
			delete(w.endsAt, id)
		}
	}
}

// recheck reads the pending tasks again after a LAGGED notice, whose
// skipped events may have held their ends: pos is the stream's position.
func (w *watcher) recheck(ctx context.Context, pos int64) error {
	for _, id := range w.ids() {
		if _, ok := w.endsAt[id]; ok {
			continue
		}
		t, err := w.read(ctx, id)
		if err != nil {
			return err
		}
		if terminal[string(t.State)] {
			if err := w.ended(t, pos, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// run follows the feed, reconnecting with a backoff when the connection
// drops; it returns errDone when --count or --until-done is satisfied.
func (w *watcher) run(ctx context.Context) error {
	backoff := 250 * time.Millisecond
	for attempt := 0; ; attempt++ {
		progressed, err := w.follow(ctx)
		if err == nil || errors.Is(err, errDone) || ctx.Err() != nil {
			return err
		}
		// A GraphQL error answer (bad filter, no permission) will not mend
		// by retrying; a dropped connection may.
		var gerrs client.Errors
		if errors.As(err, &gerrs) || (attempt == 0 && !progressed) {
			return err
		}
		if progressed {
			backoff = 250 * time.Millisecond
		}
		fmt.Fprintf(w.env.Stderr, "connection lost (%v); reconnecting in %s\n", err, backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// follow subscribes once and prints until the stream ends; progressed says
// whether it connected at all.
func (w *watcher) follow(ctx context.Context) (progressed bool, err error) {
	conn, err := w.cl.Dial(ctx, client.DialOptions{Buffer: 16})
	if err != nil {
		return false, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close()
	vars := map[string]any{"f": nil, "after": nil}
	if len(w.filter) > 0 {
		vars["f"] = w.filter
	}
	if w.haveLast {
		vars["after"] = w.last
	}
	sub, err := conn.Subscribe(ctx, TaskEventFeed_Operation, vars)
	if err != nil {
		return false, fmt.Errorf("subscribe: %w", err)
	}
	for {
		msg, err := sub.Next(ctx)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return true, errors.New("the server ended the stream")
			}
			return true, err
		}
		if len(msg.Errors) > 0 {
			return true, msg.Errors
		}
		var data TaskEventFeedResponse
		if err := json.Unmarshal(msg.Data, &data); err != nil {
			return true, fmt.Errorf("decode events: %w", err)
		}
		var events []json.RawMessage
		if err := json.Unmarshal(data.TaskEventFeed.Events, &events); err != nil {
			return true, fmt.Errorf("decode events: %w", err)
		}
		lagged := false
		for _, raw := range events {
			l, err := w.print(raw)
			if err != nil {
				return true, err
			}
			lagged = lagged || l
		}
		if w.untilDone && !w.done() {
			if lagged {
				if err := w.recheck(ctx, data.TaskEventFeed.LastSeq); err != nil {
					return true, err
				}
			}
			w.passed(data.TaskEventFeed.LastSeq)
		}
		if w.done() {
			return true, errDone
		}
		// Events filtered out still move the position on.
		if !w.haveLast || data.TaskEventFeed.LastSeq > w.last {
			w.last, w.haveLast = data.TaskEventFeed.LastSeq, true
		}
	}
}

func (w *watcher) done() bool {
	return (w.count > 0 && w.printed >= w.count) || (w.untilDone && len(w.pending) == 0)
}

// print prints one event; lagged says it was a LAGGED notice.
func (w *watcher) print(raw json.RawMessage) (lagged bool, err error) {
	if w.done() {
		return false, nil
	}
	var e Event
	if err := json.Unmarshal(raw, &e); err != nil {
		return false, fmt.Errorf("decode event: %w", err)
	}
	if e.Kind != "LAGGED" {
		w.last, w.haveLast = e.Seq, true
		if seq, ok := w.before[e.TaskID]; ok && e.Seq <= seq {
			return false, nil // before the watch began
		}
	}
	if e.Kind == "STATE" && terminal[e.To] {
		if seq, ok := w.endsAt[e.TaskID]; !ok || e.Seq >= seq {
			delete(w.pending, e.TaskID)
			delete(w.endsAt, e.TaskID)
		}
	}
	w.printed++
	if w.json {
		_, err := w.env.Stdout.Write(append(unescapeHTML(raw), '\n'))
		return e.Kind == "LAGGED", err
	}
	_, err = io.WriteString(w.env.Stdout, formatEvent(&e, w.colours)+"\n")
	return e.Kind == "LAGGED", err
}

// ANSI colours of the event lines.
const (
	ansiReset   = "\033[0m"
	ansiDim     = "\033[2m"
	ansiRed     = "\033[31m"
	ansiGreen   = "\033[32m"
	ansiYellow  = "\033[33m"
	ansiBlue    = "\033[34m"
	ansiMagenta = "\033[35m"
	ansiCyan    = "\033[36m"
)

var stateColour = map[string]string{
	"QUEUED": ansiBlue, "WAITING": ansiBlue, "ASSIGNED": ansiCyan, "RUNNING": ansiCyan,
	"RETRY_WAIT": ansiYellow, "PARKED": ansiYellow, "SUCCEEDED": ansiGreen,
	"FAILED": ansiRed, "EXPIRED": ansiRed, "REJECTED": ansiRed, "CANCELLED": ansiDim,
}

// formatEvent renders an event as one line:
//
//	1234 15:04:05.123 STATE    01J…  QUEUED → RUNNING  agent=a lane=main attempt=1  reason
func formatEvent(e *Event, colours bool) string {
	paint := func(c, s string) string {
		if !colours || c == "" || s == "" {
			return s
		}
		return c + s + ansiReset
	}
	at := e.At
	if t, err := time.Parse(time.RFC3339Nano, e.At); err == nil {
		at = t.Local().Format("15:04:05.000")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %-8s", paint(ansiDim, fmt.Sprintf("%6d", e.Seq)), paint(ansiDim, at), e.Kind)
	switch e.Kind {
	case "LAGGED":
		return b.String() + " " + paint(ansiMagenta, fmt.Sprintf("missed %d events: %s", e.Skipped, e.Reason))
	case "BATCH":
		return b.String() + " batch=" + e.BatchID + "  " + paint(ansiDim, e.Reason)
	case "SESSION":
		return b.String() + " session=" + e.SessionKey + "  " + paint(ansiMagenta, e.Reason)
	case "LANE", "ENGINE":
		if e.Lane != "" {
			b.WriteString(" lane=" + e.Lane)
		}
		if e.Reason != "" {
			b.WriteString("  " + e.Reason)
		}
		return b.String()
	}
	b.WriteString(" " + e.TaskID)
	if e.Kind == "STATE" {
		from := e.From
		if from == "" {
			from = "·"
		}
		fmt.Fprintf(&b, "  %s → %s", paint(stateColour[from], from), paint(stateColour[e.To], e.To))
	}
	if e.AgentID != "" {
		b.WriteString("  agent=" + e.AgentID)
	}
	if e.Lane != "" {
		b.WriteString(" lane=" + e.Lane)
	}
	if e.SessionKey != "" {
		b.WriteString(" session=" + e.SessionKey)
	}
	if e.Attempt > 0 {
		fmt.Fprintf(&b, " attempt=%d", e.Attempt)
	}
	if e.Reason != "" {
		b.WriteString("  " + paint(ansiDim, e.Reason))
	}
	return b.String()
}
