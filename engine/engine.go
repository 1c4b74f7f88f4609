package engine

// Engine schedules tasks. (Being written.)
type Engine struct{}

type task struct{}

func (e *Engine) started(r *Run, instanceID, tabID string) {}
func (e *Engine) finish(r *Run, o Outcome)                 {}
