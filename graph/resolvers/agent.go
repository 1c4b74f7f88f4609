package resolvers

import (
	"context"

	"github.com/switchyard/switchyard/engine"
	"github.com/switchyard/switchyard/graph/generated"
	"github.com/switchyard/switchyard/graph/model"
)

// Agent returns the resolver of Agent's computed fields.
func (r *Resolver) Agent() generated.AgentResolver { return (*agentResolver)(r) }

type agentResolver Resolver

// Labels lists the agent's labels, sorted by key.
func (*agentResolver) Labels(_ context.Context, a *engine.AgentStatus) ([]*model.Label, error) {
	return model.Labels(a.Labels), nil
}
