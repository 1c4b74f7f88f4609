package engine

import (
	"context"
	"errors"
	"slices"
)

// Webhook bookkeeping. Delivering webhooks is the webhook package's job; the
// engine tells it when a batch has ended (an EventBatch) and records every
// delivery attempt on the task or batch it concerns, through the same
// commits as everything else — so deliveries are visible in the API and
// survive restarts.

// batchDoneLocked records the end of a batch once every task of it has
// ended.
func (c *core) batchDoneLocked(b *batch) {
	if !b.sealed || b.open > 0 || b.total == 0 || b.ended {
		return
	}
	b.ended = true
	now := c.now()
	c.seq++
	c.cur.events = append(c.cur.events, Event{Seq: c.seq, At: now, Type: EventBatch, BatchID: b.id,
		Reason: "every task of the batch has ended", Webhook: b.webhook != ""})
	c.cur.batches = append(c.cur.batches, BatchInfo{ID: b.id, Parallelism: b.parallelism, WebhookURL: b.webhook,
		CreatedAt: b.createdAt, EndedAt: now})
}

// RecordTaskWebhook appends a delivery attempt to a task's record, whether the
// task is still in memory or only in the store.
func (e *Engine) RecordTaskWebhook(ctx context.Context, taskID string, d WebhookDelivery) error {
	live := false
	_ = e.mutate(func(c *core) error {
		if t := c.tasks[taskID]; t != nil {
			o := t.outcomeOf()
			o.webhooks = append(o.webhooks, d)
			c.markQuiet(t)
			live = true
		}
		return nil
	})
	if live {
		return nil
	}
	st, err := e.store.Task(ctx, taskID)
	if errors.Is(err, ErrNotFound) {
		return notFound("no task %s", taskID)
	}
	if err != nil {
		return &Error{Code: CodeUnavailable, Message: "reading task " + taskID, Err: err, Retryable: true}
	}
	st.Webhooks = append(slices.Clone(st.Webhooks), d)
	return e.mutate(func(c *core) error {
		c.cur.snaps = append(c.cur.snaps, st) // a terminal task: nothing else writes it
		return nil
	})
}

// RecordBatchWebhook appends a delivery attempt to a batch's record.
func (e *Engine) RecordBatchWebhook(ctx context.Context, batchID string, d WebhookDelivery) error {
	info, err := e.store.Batch(ctx, batchID)
	if errors.Is(err, ErrNotFound) {
		if err := e.Sync(ctx); err != nil {
			return err
		}
		info, err = e.store.Batch(ctx, batchID)
	}
	if errors.Is(err, ErrNotFound) {
		return notFound("no batch %s", batchID)
	}
	if err != nil {
		return &Error{Code: CodeUnavailable, Message: "reading batch " + batchID, Err: err, Retryable: true}
	}
	b := *info
	b.Webhooks = append(slices.Clone(b.Webhooks), d)
	return e.mutate(func(c *core) error {
		c.cur.batches = append(c.cur.batches, b)
		return nil
	})
}
