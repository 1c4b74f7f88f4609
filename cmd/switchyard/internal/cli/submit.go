// `switchyard task submit --file`: many tasks from a JSONL file, sent in
// submitTasks batches, with a progress bar on a terminal and a summary.

package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/switchyard/switchyard/graph/client"
)

// fileItem is one line of the file.
type fileItem struct {
	line  int
	input map[string]any
}

// itemResult is what became of one line.
type itemResult struct {
	Line  int        `json:"line"`
	ID    string     `json:"id,omitempty"`
	State string     `json:"state,omitempty"`
	Error *itemError `json:"error,omitempty"`
}

type itemError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// flagsForOneTask are the submit flags that describe a single task: they
// make no sense with --file.
var flagsForOneTask = []string{"session", "priority", "action", "selector", "ref", "params", "url", "text", "instruction",
	"tab", "instance", "depends-on", "parent", "deadline", "timeout", "max-attempts", "webhook", "idempotency-key", "label", "interrupt"}

// maxLine is the longest line read: a task's JSON is far smaller, and the
// server refuses bodies beyond its own limit anyway.
const maxLine = 4 << 20

func readItems(r io.Reader, name string, f *submitFlags) ([]fileItem, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var items []fileItem
	n := 0
	for sc.Scan() {
		n++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		var in map[string]any
		if err := json.Unmarshal([]byte(text), &in); err != nil || in == nil {
			if err == nil {
				err = errors.New("null")
			}
			return nil, Usagef("%s:%d: want a JSON object (a SubmitTaskInput): %v", name, n, err)
		}
		if _, ok := in["agentId"]; !ok {
			in["agentId"] = f.agent
		}
		if _, ok := in["lane"]; !ok && f.lane != "" {
			in["lane"] = f.lane
		}
		items = append(items, fileItem{line: n, input: in})
	}
	if err := sc.Err(); err != nil {
		return nil, Usagef("%s: read: %v", name, err)
	}
	return items, nil
}

func submitFile(ctx context.Context, cl *client.Client, f *submitFlags, fs *flag.FlagSet, env Env) error {
	var conflicting []string
	fs.Visit(func(fl *flag.Flag) {
		if slices.Contains(flagsForOneTask, fl.Name) {
			conflicting = append(conflicting, "--"+fl.Name)
		}
	})
	if len(conflicting) > 0 {
		return Usagef("--file takes each task from its line; %s describe one task", strings.Join(conflicting, ", "))
	}
	if f.batch < 1 {
		return Usagef("--batch must be at least 1")
	}
	name := f.file
	if name == "-" {
		name = "stdin"
	}
	r, err := openInput(f.file, env)
	if err != nil {
		return err
	}
	items, err := readItems(r, name, f)
	_ = r.Close()
	if err != nil {
		return err
	}
	if len(items) == 0 {
		return Usagef("%s: no tasks in it", name)
	}

	bar := &progress{w: env.Stderr, on: env.StderrTerminal && !f.quiet, total: len(items), start: time.Now()}
	results := make([]itemResult, 0, len(items))
	refusedBy := map[string]int{}
	var fatal error
	for start := 0; start < len(items) && fatal == nil; start += f.batch {
		chunk := items[start:min(start+f.batch, len(items))]
		var res []itemResult
		res, fatal = submitChunk(ctx, cl, chunk)
		for _, r := range res {
			if r.Error != nil {
				refusedBy[r.Error.Code]++
				bar.clear()
				fmt.Fprintf(env.Stderr, "%s:%d: %s: %s%s\n", name, r.Line, r.Error.Code, r.Error.Message, fieldNote(r.Error.Field))
			}
		}
		results = append(results, res...)
		bar.update(len(results), sumCounts(refusedBy))
	}
	bar.finish(len(results), sumCounts(refusedBy))

	for _, r := range results {
		switch {
		case f.jsonOut:
			if err := writeJSON(env.Stdout, r); err != nil {
				return err
			}
		case r.Error == nil:
			fmt.Fprintln(env.Stdout, r.ID)
		}
	}
	elapsed := time.Since(bar.start)
	refused := sumCounts(refusedBy)
	fmt.Fprintf(env.Stderr, "submitted %d of %d tasks from %s in %s (%.0f/s): %d accepted, %d refused%s\n",
		len(results), len(items), name, elapsed.Round(time.Millisecond), float64(len(results))/max(elapsed.Seconds(), 1e-9),
		len(results)-refused, refused, codesNote(refusedBy))
	if fatal != nil {
		return fmt.Errorf("submit stopped at %s:%d: %w", name, items[len(results)].line, fatal)
	}
	if refused > 0 {
		return &Error{Code: ExitPartial, Err: fmt.Errorf("%d of %d tasks refused", refused, len(items))}
	}
	return nil
}

func fieldNote(field string) string {
	if field == "" {
		return ""
	}
	return " (" + field + ")"
}

func codesNote(by map[string]int) string {
	if len(by) == 0 {
		return ""
	}
	codes := make([]string, 0, len(by))
	for c := range by {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%s ×%d", c, by[c])
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func sumCounts(by map[string]int) int {
	n := 0
	for _, c := range by {
		n += c
	}
	return n
}

// itemPath finds the item an error is about: a variable that did not
// coerce (path variable.in.items.N…) or an input error (field input.items.N…).
var itemField = regexp.MustCompile(`^input\.items\.(\d+)\b`)

func itemOf(e *client.Error) (int, bool) {
	if m := itemField.FindStringSubmatch(e.Field()); m != nil {
		n, err := strconv.Atoi(m[1])
		return n, err == nil
	}
	if len(e.Path) >= 4 && e.Path[0] == "variable" && e.Path[2] == "items" {
		if n, ok := e.Path[3].(float64); ok {
			return int(n), true
		}
	}
	return 0, false
}

// submitChunk submits the chunk as one batch and returns one result per
// line. A line whose input does not even coerce (which fails the whole
// request) is refused on its own and the rest sent again. An error that
// concerns the request rather than a line (the server is unreachable,
// refuses the token) is returned as fatal with the lines done so far.
func submitChunk(ctx context.Context, cl *client.Client, chunk []fileItem) ([]itemResult, error) {
	results := make([]itemResult, len(chunk))
	pending := make([]int, len(chunk)) // indexes into chunk still to send
	for i := range chunk {
		pending[i] = i
		results[i].Line = chunk[i].line
	}
	for len(pending) > 0 {
		inputs := make([]map[string]any, len(pending))
		for i, p := range pending {
			inputs[i] = map[string]any{"task": chunk[p].input}
		}
		res, err := SubmitTasks(ctx, cl, map[string]any{"items": inputs})
		var gerrs client.Errors
		switch {
		case err == nil:
		case errors.As(err, &gerrs) && len(gerrs) > 0:
			if n, ok := itemOf(gerrs[0]); ok && n < len(pending) {
				p := pending[n]
				field := lineField(gerrs[0].Field())
				if field == "" {
					field = pathField(gerrs[0].Path)
				}
				results[p].Error = &itemError{Code: codeName(gerrs[0]), Message: gerrs[0].Message, Field: field}
				pending = slices.Delete(pending, n, n+1)
				continue
			}
			if code := ExitCode(err); code == ExitAuth || code == ExitUnreachable {
				return results[:pending[0]], err
			}
			for _, p := range pending {
				results[p].Error = &itemError{Code: codeName(gerrs[0]), Message: gerrs[0].Message, Field: gerrs[0].Field()}
			}
			return results, nil
		default:
			return results[:pending[0]], err
		}
		for _, it := range res.SubmitTasks.Items {
			if it.Index < 0 || it.Index >= len(pending) {
				return results[:pending[0]], fmt.Errorf("the server answered for item %d of %d", it.Index, len(pending))
			}
			r := &results[pending[it.Index]]
			if it.Task != nil {
				r.ID, r.State = it.Task.Id, string(it.Task.State)
			}
			if e := it.Error; e != nil {
				r.Error = &itemError{Code: string(e.Code), Message: e.Message, Field: lineField(str(e.Field))}
			}
		}
		pending = nil
	}
	return results, nil
}

// lineField is a field path relative to the line's object: the server's
// paths name the item's index in the request, which is not the line.
var itemPrefix = regexp.MustCompile(`^input\.items\.\d+\.task\.?`)

func lineField(field string) string {
	return itemPrefix.ReplaceAllString(field, "")
}

// pathField renders a variable's path (variable.in.items.3.task.priority)
// relative to the line's object (priority).
func pathField(path []any) string {
	if len(path) <= 5 {
		return ""
	}
	parts := make([]string, 0, len(path)-5)
	for _, p := range path[5:] {
		parts = append(parts, fmt.Sprint(p))
	}
	return strings.Join(parts, ".")
}

func codeName(e *client.Error) string {
	if c := e.Code(); c != "" {
		return c
	}
	return "ERROR"
}

// progress is a one-line progress bar on a terminal, redrawn at most ten
// times a second.
type progress struct {
	w     io.Writer
	on    bool
	total int
	start time.Time
	drawn time.Time
	shown bool
	now   func() time.Time // the clock; nil is time.Now
}

func (p *progress) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

const barWidth = 30

func (p *progress) update(done, refused int) {
	if !p.on || p.clock().Sub(p.drawn) < 100*time.Millisecond {
		return
	}
	p.draw(done, refused)
}

func (p *progress) draw(done, refused int) {
	p.drawn = p.clock()
	p.shown = true
	filled := done * barWidth / max(p.total, 1)
	rate := float64(done) / max(p.drawn.Sub(p.start).Seconds(), 1e-9)
	fmt.Fprintf(p.w, "\r[%s%s] %d/%d %3d%%  %.0f tasks/s  %d refused ",
		strings.Repeat("#", filled), strings.Repeat("-", barWidth-filled), done, p.total, done*100/max(p.total, 1), rate, refused)
}

// clear erases the bar so that a line can be printed; the next update
// draws it again.
func (p *progress) clear() {
	if p.on && p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
		p.drawn = time.Time{}
	}
}

func (p *progress) finish(done, refused int) {
	if !p.on {
		return
	}
	p.draw(done, refused)
	fmt.Fprintln(p.w)
}
