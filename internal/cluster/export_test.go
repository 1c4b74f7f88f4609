package cluster

import "github.com/switchyard/switchyard/engine"

// SetReplicate makes n replicate the leader's events through f instead of
// engine.Engine.Replicate, from its next batch on.
func SetReplicate(n *Node, f func(e *engine.Engine, evs []engine.Event) error) { n.replicate.Store(&f) }
