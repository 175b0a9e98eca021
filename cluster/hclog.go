package cluster

import (
	"fmt"
	"io"
	"log"
	"strings"
	"sync/atomic"

	hclog "github.com/hashicorp/go-hclog"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// NewHCLogger returns an hclog.Logger that writes through zap, so raft's own
// log lines come out as the same JSON lines as the rest of dexd.
func NewHCLogger(z *zap.Logger, name string) hclog.Logger {
	l := &zapHCLog{z: z, name: name, level: new(atomic.Int32)}
	l.level.Store(int32(hclog.Info))
	if z.Core().Enabled(zapcore.DebugLevel) {
		l.level.Store(int32(hclog.Debug))
	}
	if name != "" {
		l.z = z.Named(name)
	}
	return l
}

type zapHCLog struct {
	z       *zap.Logger
	name    string
	implied []interface{}
	level   *atomic.Int32
}

var _ hclog.Logger = (*zapHCLog)(nil)

func fields(args []interface{}) []zap.Field {
	out := make([]zap.Field, 0, len(args)/2+1)
	for i := 0; i < len(args); i += 2 {
		if i+1 >= len(args) {
			out = append(out, zap.Any("EXTRA_VALUE_AT_END", args[i]))
			break
		}
		key, ok := args[i].(string)
		if !ok {
			key = fmt.Sprint(args[i])
		}
		if key == "node" {
			// dexd's logger already names this node under "node"; raft's
			// "node" is its own description of the server ("Node at …").
			key = "raft_node"
		}
		switch v := args[i+1].(type) {
		case hclog.Format:
			out = append(out, zap.String(key, formatted(v)))
		case hclog.Quote:
			out = append(out, zap.String(key, string(v)))
		case hclog.Hex:
			out = append(out, zap.String(key, fmt.Sprintf("0x%x", int(v))))
		case error:
			out = append(out, zap.String(key, v.Error()))
		case fmt.Stringer:
			out = append(out, zap.String(key, v.String()))
		default:
			out = append(out, zap.Any(key, v))
		}
	}
	return out
}

// formatted renders an hclog.Fmt value: its first element is the format.
func formatted(f hclog.Format) string {
	if len(f) == 0 {
		return ""
	}
	format, ok := f[0].(string)
	if !ok {
		return fmt.Sprint(f...)
	}
	return fmt.Sprintf(format, f[1:]...)
}

func (l *zapHCLog) Log(level hclog.Level, msg string, args ...interface{}) {
	if level < hclog.Level(l.level.Load()) || level == hclog.Off {
		return
	}
	fs := fields(append(append([]interface{}{}, l.implied...), args...))
	switch level {
	case hclog.Trace, hclog.Debug:
		l.z.Debug(msg, fs...)
	case hclog.NoLevel, hclog.Info:
		l.z.Info(msg, fs...)
	case hclog.Warn:
		l.z.Warn(msg, fs...)
	default:
		l.z.Error(msg, fs...)
	}
}

func (l *zapHCLog) Trace(msg string, args ...interface{}) { l.Log(hclog.Trace, msg, args...) }
func (l *zapHCLog) Debug(msg string, args ...interface{}) { l.Log(hclog.Debug, msg, args...) }
func (l *zapHCLog) Info(msg string, args ...interface{})  { l.Log(hclog.Info, msg, args...) }
func (l *zapHCLog) Warn(msg string, args ...interface{})  { l.Log(hclog.Warn, msg, args...) }
func (l *zapHCLog) Error(msg string, args ...interface{}) { l.Log(hclog.Error, msg, args...) }

func (l *zapHCLog) IsTrace() bool { return hclog.Level(l.level.Load()) <= hclog.Trace }
func (l *zapHCLog) IsDebug() bool { return hclog.Level(l.level.Load()) <= hclog.Debug }
func (l *zapHCLog) IsInfo() bool  { return hclog.Level(l.level.Load()) <= hclog.Info }
func (l *zapHCLog) IsWarn() bool  { return hclog.Level(l.level.Load()) <= hclog.Warn }
func (l *zapHCLog) IsError() bool { return hclog.Level(l.level.Load()) <= hclog.Error }

func (l *zapHCLog) ImpliedArgs() []interface{} { return l.implied }

func (l *zapHCLog) With(args ...interface{}) hclog.Logger {
	c := *l
	c.implied = append(append([]interface{}{}, l.implied...), args...)
	return &c
}

func (l *zapHCLog) Name() string { return l.name }

func (l *zapHCLog) Named(name string) hclog.Logger {
	c := *l
	if l.name != "" {
		c.name = l.name + "." + name
	} else {
		c.name = name
	}
	c.z = l.z.Named(name)
	return &c
}

func (l *zapHCLog) ResetNamed(name string) hclog.Logger {
	c := *l
	c.name = name
	c.z = l.z // zap cannot drop a name; keep the current one
	return &c
}

func (l *zapHCLog) SetLevel(level hclog.Level) { l.level.Store(int32(level)) }
func (l *zapHCLog) GetLevel() hclog.Level      { return hclog.Level(l.level.Load()) }

func (l *zapHCLog) StandardLogger(opts *hclog.StandardLoggerOptions) *log.Logger {
	return log.New(l.StandardWriter(opts), "", 0)
}

func (l *zapHCLog) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return &stdWriter{l: l}
}

type stdWriter struct{ l *zapHCLog }

func (w *stdWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := hclog.Info
	for _, pre := range []struct {
		tag string
		lv  hclog.Level
	}{{"[ERROR]", hclog.Error}, {"[ERR]", hclog.Error}, {"[WARN]", hclog.Warn}, {"[INFO]", hclog.Info}, {"[DEBUG]", hclog.Debug}, {"[TRACE]", hclog.Trace}} {
		if strings.HasPrefix(msg, pre.tag) {
			level = pre.lv
			msg = strings.TrimSpace(strings.TrimPrefix(msg, pre.tag))
			break
		}
	}
	w.l.Log(level, msg)
	return len(p), nil
}
