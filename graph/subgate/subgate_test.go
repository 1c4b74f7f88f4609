package subgate_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/99designs/gqlgen/graphql"
	"github.com/stretchr/testify/require"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/switchyard/switchyard/graph/subgate"
)

// subscription opens a subscription's context through the gate, as gqlgen
// does, and returns it with the function that runs one of its responses
// through the gate's response interceptor.
func subscription(t *testing.T, g *subgate.Gate, kind ast.Operation) (context.Context, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ctx = graphql.WithOperationContext(ctx, &graphql.OperationContext{Operation: &ast.OperationDefinition{Operation: kind}})
	var inner context.Context
	g.InterceptOperation(ctx, func(ctx context.Context) graphql.ResponseHandler {
		inner = ctx
		return nil
	})
	respond := func() {
		g.InterceptResponse(inner, func(context.Context) *graphql.Response { return &graphql.Response{} })
	}
	return inner, respond
}

// The tests run in synctest bubbles: the gate's stall timer runs on the
// bubble's clock, and synctest.Wait says when every goroutine is blocked, so
// that an event that was not sent is seen not to be, without waiting.

// notYet fails the test if ch is ready now.
func notYet[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatal(what)
	default:
	}
}

// sent runs Send in a goroutine and reports when it returns.
func sent[T any](ctx context.Context, ch chan T, v T) <-chan bool {
	done := make(chan bool, 1)
	go func() { done <- subgate.Send(ctx, ch, v) }()
	return done
}

func TestASubscriptionEventWaitsForASlotUntilAnEarlierOneIsExecuted(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := subgate.New(1)
		ctxA, respondA := subscription(t, g, ast.Subscription)
		ctxB, _ := subscription(t, g, ast.Subscription)
		chA, chB := make(chan int), make(chan int)

		doneA := sent(ctxA, chA, 1)
		require.Equal(t, 1, <-chA, "the transport takes A's event")
		require.True(t, <-doneA)

		doneB := sent(ctxB, chB, 2)
		synctest.Wait()
		notYet(t, chB, "B's event went out while A's was not executed and the gate has one slot")
		respondA() // A's execution produced its response: the slot is free
		require.Equal(t, 2, <-chB, "B's event gets the freed slot")
		require.True(t, <-doneB)
		require.Zero(t, g.Stalls())
	})
}

func TestAClientSlowToTakeItsEventDoesNotHoldTheSlot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := subgate.New(1)
		slow, _ := subscription(t, g, ast.Subscription)
		other, _ := subscription(t, g, ast.Subscription)
		slowCh, otherCh := make(chan int), make(chan int)

		doneSlow := sent(slow, slowCh, 1) // nobody takes it: the client's transport is busy
		time.Sleep(2 * subgate.StallAfter)
		synctest.Wait()
		require.Equal(t, uint64(1), g.Stalls(), "the slow client's event stalled")
		doneOther := sent(other, otherCh, 2)
		require.Equal(t, 2, <-otherCh, "the slot went to the subscription whose transport is ready")
		require.True(t, <-doneOther)
		require.Equal(t, uint64(1), g.Stalls())
		require.Equal(t, 1, <-slowCh, "the slow client still gets its event, without a slot")
		require.True(t, <-doneSlow)
	})
}

func TestAnEndedSubscriptionGivesBackItsSlots(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := subgate.New(1)
		ctxA, _ := subscription(t, g, ast.Subscription)
		ctxB, _ := subscription(t, g, ast.Subscription)
		chA, chB := make(chan int, 1), make(chan int, 1) // a buffer: A's event is never executed
		require.True(t, subgate.Send(ctxA, chA, 1))
		doneB := sent(ctxB, chB, 2)
		synctest.Wait()
		notYet(t, doneB, "B sent while A held the only slot")
		subgate.Done(ctxA) // A's resolver stopped: its event will never be executed
		require.True(t, <-doneB, "A's slot was given back")
	})
}

func TestOutsideTheGateSendIsAPlainSend(t *testing.T) {
	t.Parallel()
	g := subgate.New(1)
	query, respond := subscription(t, g, ast.Query) // not a subscription: no ticket
	ch := make(chan int, 2)
	require.True(t, subgate.Send(query, ch, 1))
	require.True(t, subgate.Send(context.Background(), ch, 2))
	respond() // a query's response frees nothing
	require.Equal(t, 1, <-ch)
	require.Equal(t, 2, <-ch)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.False(t, subgate.Send(ctx, make(chan int), 3), "an ended context sends nothing")
}

func TestAnEventSentWithoutASlotDoesNotFreeTheNextEventsSlot(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := subgate.New(1)
		ctxA, respondA := subscription(t, g, ast.Subscription)
		ctxB, _ := subscription(t, g, ast.Subscription)
		chA, chB := make(chan int), make(chan int)

		done := sent(ctxA, chA, 1)
		require.Equal(t, 1, <-chA)
		require.True(t, <-done)
		respondA() // event 1 executed

		done = sent(ctxA, chA, 2) // A's transport is busy writing event 1: event 2 stalls and waits without a slot
		time.Sleep(2 * subgate.StallAfter)
		synctest.Wait()
		require.Equal(t, uint64(1), g.Stalls())
		require.Equal(t, 2, <-chA)
		require.True(t, <-done)

		g.SetStallAfter(time.Hour)
		done = sent(ctxA, chA, 3) // takes the free slot and waits for A's transport
		synctest.Wait()
		respondA() // event 2 executed: it held no slot, so it frees none
		doneB := sent(ctxB, chB, 4)
		synctest.Wait()
		notYet(t, chB, "event 2's execution freed the slot that event 3 holds")
		require.Equal(t, 3, <-chA)
		require.True(t, <-done)
		respondA() // event 3 executed: its slot goes to B
		require.Equal(t, 4, <-chB, "event 3's slot is freed by its execution")
		require.True(t, <-doneB)
	})
}
