package cluster

import "github.com/switchyard/switchyard/engine"

// SetReplicate makes n replicate the leader's events through f instead of
// engine.Engine.Replicate, from its next batch on.
func SetReplicate(n *Node, f func(e *engine.Engine, evs []engine.Event) error) { n.replicate.Store(&f) }

// Forgettings returns how many times n, leading, has removed the nodes
// silent for ForgetAfter.
func Forgettings(n *Node) int64 { return n.forgettings.Load() }
