package model

// SubmitTasksPayload is the answer to submitTasks.
type SubmitTasksPayload struct {
	// The batch's id (null when every item was refused before admission).
	BatchID *string `json:"batchId,omitempty"`
	// One result per item, in the order of the input.
	Items []*SubmitTaskResult `json:"items"`
	// How many items were admitted (not refused).
	Accepted int `json:"accepted"`
	// How many items were refused.
	Refused int `json:"refused"`
	// TaskIDs names the tasks the items recorded, in the order of the
	// items, when the items carry no tasks: a selection that reads no
	// item's task gets none, and the audit still names every task. It is
	// not part of the schema.
	TaskIDs []string `json:"-"`
}
