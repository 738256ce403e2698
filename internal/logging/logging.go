// Package logging builds lakefed's loggers: one function turns the
// log_format setting (or a subcommand's --log-format) into a slog
// handler, so that every subcommand logs alike, and every handler it
// makes adds the ID of the request a line is about (request_id, taken
// from the context: httpx.TagRequest puts it there).
//
//	log, err := logging.New(os.Stderr, cfg.LogFormat, slog.LevelInfo)
//	if err != nil { return err }
//	log.InfoContext(r.Context(), "request", "path", p) // ... request_id=3f9c2a7d10b4e6a8
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/lakefed/lakefed/internal/httpx"
)

// The log formats.
const (
	// Text is slog's key=value lines, for people reading a terminal or
	// journalctl.
	Text = "text"
	// JSON is one JSON object per line, for log collectors (Loki,
	// Elasticsearch, journald's JSON export).
	JSON = "json"
)

// RequestIDKey is the key of a request's ID in log lines.
const RequestIDKey = "request_id"

// ValidFormat reports whether New takes format: Text, JSON, or "" (Text).
func ValidFormat(format string) bool {
	return format == "" || format == Text || format == JSON
}

// New returns a logger writing to w in format (Text, JSON; "" is Text)
// from level on (nil: Info), whose lines about a request carry its ID.
func New(w io.Writer, format string, level slog.Leveler) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch format {
	case "", Text:
		h = slog.NewTextHandler(w, opts)
	case JSON:
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("log format %q: want %s or %s", format, Text, JSON)
	}
	return slog.New(WithRequestID(h)), nil
}

// WithRequestID returns h adding request_id to every line logged with a
// context that carries a request ID (httpx.RequestID). It returns h
// itself when h already does, so that a role may call it on whatever
// logger it is given without repeating the key.
func WithRequestID(h slog.Handler) slog.Handler {
	if _, ok := h.(requestIDHandler); ok {
		return h
	}
	return requestIDHandler{h}
}

// Tagged is WithRequestID for a logger; nil is slog.Default().
func Tagged(log *slog.Logger) *slog.Logger {
	if log == nil {
		log = slog.Default()
	}
	if _, ok := log.Handler().(requestIDHandler); ok {
		return log
	}
	return slog.New(requestIDHandler{log.Handler()})
}

// requestIDHandler is a handler that adds the context's request ID.
type requestIDHandler struct{ slog.Handler }

func (h requestIDHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := httpx.RequestID(ctx); id != "" {
		r.AddAttrs(slog.String(RequestIDKey, id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h requestIDHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return requestIDHandler{h.Handler.WithAttrs(as)}
}

func (h requestIDHandler) WithGroup(name string) slog.Handler {
	return requestIDHandler{h.Handler.WithGroup(name)}
}
