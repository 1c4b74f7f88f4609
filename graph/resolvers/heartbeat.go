// Heartbeat checks (heartbeat): URLs the server calls on an interval.

package resolvers

import (
	"context"
	"time"

	"github.com/switchyard/switchyard/graph/model"
	"github.com/switchyard/switchyard/heartbeat"
)

func (r *Resolver) heartbeats() error {
	if r.opts.Heartbeats == nil {
		return notAvailable("heartbeat checks are")
	}
	return nil
}

func (q *queryResolver) HeartbeatChecks(ctx context.Context) ([]*model.HeartbeatCheck, error) {
	if err := (*Resolver)(q).heartbeats(); err != nil {
		return nil, err
	}
	list, err := fromLeader(ctx, q.opts.Heartbeats.List)
	if err != nil {
		return nil, err
	}
	out := make([]*model.HeartbeatCheck, len(list))
	for i, c := range list {
		out[i] = &model.HeartbeatCheck{C: c}
	}
	return out, nil
}

func (q *queryResolver) HeartbeatCheck(ctx context.Context, id string) (*model.HeartbeatCheck, error) {
	if err := (*Resolver)(q).heartbeats(); err != nil {
		return nil, err
	}
	c, err := q.opts.Heartbeats.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	return &model.HeartbeatCheck{C: c}, nil
}

// heartbeatSpec reads a check's input; the checker fills the defaults and
// checks the rest (the fields it names are the input's).
func heartbeatSpec(path string, in *model.HeartbeatCheckInput) (heartbeat.Spec, error) {
	sp := heartbeat.Spec{Name: in.Name, URL: in.URL, Method: deref(in.Method), Enabled: in.Enabled == nil || *in.Enabled}
	ms := func(field string, v *int64) (time.Duration, error) {
		if v == nil {
			return 0, nil
		}
		if *v <= 0 || *v > int64(heartbeat.MaxInterval/time.Millisecond) {
			return 0, invalid(path+"."+field, "must be positive and at most %d", heartbeat.MaxInterval.Milliseconds())
		}
		return time.Duration(*v) * time.Millisecond, nil
	}
	var err error
	if sp.Interval, err = ms("intervalMs", in.IntervalMs); err != nil {
		return sp, err
	}
	if sp.Timeout, err = ms("timeoutMs", in.TimeoutMs); err != nil {
		return sp, err
	}
	if in.ExpectStatus != nil {
		if *in.ExpectStatus == 0 {
			return sp, invalid(path+".expectStatus", "must be an HTTP status (100-599); omit it for any 2xx")
		}
		sp.ExpectStatus = *in.ExpectStatus
	}
	if in.FailureThreshold != nil {
		if *in.FailureThreshold == 0 {
			return sp, invalid(path+".failureThreshold", "must be between 1 and %d", heartbeat.MaxFailureThreshold)
		}
		sp.FailureThreshold = *in.FailureThreshold
	}
	if in.HistoryLength != nil {
		if *in.HistoryLength == 0 {
			return sp, invalid(path+".historyLength", "must be between 1 and %d", heartbeat.MaxHistoryLength)
		}
		sp.HistoryLength = *in.HistoryLength
	}
	sp.FollowRedirects = in.FollowRedirects != nil && *in.FollowRedirects
	sp.WebhookURL = deref(in.WebhookURL)
	return sp, nil
}

func (m *mutationResolver) CreateHeartbeatCheck(ctx context.Context, in model.HeartbeatCheckInput) (*model.HeartbeatCheck, error) {
	if err := (*Resolver)(m).heartbeats(); err != nil {
		return nil, err
	}
	sp, err := heartbeatSpec("input", &in)
	if err != nil {
		return nil, err
	}
	c, err := m.opts.Heartbeats.Create(ctx, sp)
	if err != nil {
		return nil, inField(err, "input")
	}
	m.log.Info("heartbeat check created over the API", "check", c.ID, "name", c.Spec.Name, "interval", c.Spec.Interval)
	return &model.HeartbeatCheck{C: c}, nil
}

func (m *mutationResolver) UpdateHeartbeatCheck(ctx context.Context, id string, in model.HeartbeatCheckInput) (*model.HeartbeatCheck, error) {
	if err := (*Resolver)(m).heartbeats(); err != nil {
		return nil, err
	}
	sp, err := heartbeatSpec("input", &in)
	if err != nil {
		return nil, err
	}
	c, err := m.opts.Heartbeats.Update(ctx, id, sp)
	if err != nil {
		return nil, inField(err, "input")
	}
	return &model.HeartbeatCheck{C: c}, nil
}

func (m *mutationResolver) DeleteHeartbeatCheck(ctx context.Context, id string) (*model.HeartbeatCheck, error) {
	if err := (*Resolver)(m).heartbeats(); err != nil {
		return nil, err
	}
	c, err := m.opts.Heartbeats.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := m.opts.Heartbeats.Delete(ctx, id); err != nil {
		return nil, err
	}
	m.log.Info("heartbeat check deleted over the API", "check", id)
	return &model.HeartbeatCheck{C: c}, nil
}

func (m *mutationResolver) ProbeHeartbeatCheck(ctx context.Context, id string) (*model.HeartbeatCheck, error) {
	if err := (*Resolver)(m).heartbeats(); err != nil {
		return nil, err
	}
	c, err := m.opts.Heartbeats.Probe(ctx, id)
	if err != nil {
		return nil, err
	}
	return &model.HeartbeatCheck{C: c}, nil
}

func (s *subscriptionResolver) HeartbeatEvents(ctx context.Context, checkID *string) (<-chan *model.HeartbeatEvent, error) {
	if err := (*Resolver)(s).heartbeats(); err != nil {
		return nil, err
	}
	if checkID != nil {
		if _, err := s.opts.Heartbeats.Get(ctx, *checkID); err != nil {
			return nil, err
		}
	}
	events, stop := s.opts.Heartbeats.Subscribe(s.opts.SubscriptionBuffer)
	return forward(ctx, s.opts.Observer, "heartbeatEvents", events, stop, func(ev heartbeat.Event) (*model.HeartbeatEvent, uint64, bool) {
		if checkID != nil && ev.CheckID != *checkID {
			return nil, ev.Lagged, false // another check's: counted if it says events were lost, not sent
		}
		return model.NewHeartbeatEvent(ev), ev.Lagged, true
	}), nil
}
