// Logging: go-hclog, as text for people or JSON for machines.

package main

import (
	"context"
	"io"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

func newLogger(level, format string, w io.Writer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "switchyard",
		Level:      hclog.LevelFromString(level),
		JSONFormat: format == "json",
		Output:     w,
		TimeFormat: "2006-01-02T15:04:05.000Z07:00",
	})
}

// hclogHandler is a slog.Handler that writes to an hclog.Logger, for the
// libraries that log through log/slog (the plugin host).
type hclogHandler struct{ l hclog.Logger }

func (h hclogHandler) Enabled(_ context.Context, level slog.Level) bool {
	return h.l.GetLevel() <= hclogLevel(level)
}

func (h hclogHandler) Handle(_ context.Context, r slog.Record) error {
	args := make([]any, 0, 2*r.NumAttrs())
	r.Attrs(func(a slog.Attr) bool {
		args = append(args, a.Key, a.Value.Any())
		return true
	})
	h.l.Log(hclogLevel(r.Level), r.Message, args...)
	return nil
}

func (h hclogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	args := make([]any, 0, 2*len(attrs))
	for _, a := range attrs {
		args = append(args, a.Key, a.Value.Any())
	}
	return hclogHandler{h.l.With(args...)}
}

func (h hclogHandler) WithGroup(name string) slog.Handler { return hclogHandler{h.l.Named(name)} }

func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l >= slog.LevelError:
		return hclog.Error
	case l >= slog.LevelWarn:
		return hclog.Warn
	case l >= slog.LevelInfo:
		return hclog.Info
	}
	return hclog.Debug
}
