package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"reflect"
	"strings"
	"syscall"

	dexv1 "github.com/dexhq/dex/api/dexv1"
	"github.com/dexhq/dex/api/wirerules"
)

// ToolCallNotRunErrorPrefix begins the result of a tool call that never ran
// (docs/attempts.md): no attempt of it was ever claimed by a Worker, so the tool had
// no side effect and it is safe to call it again. A model (or an
// application reading the history) may test a failed call's result with
// strings.HasPrefix.
const ToolCallNotRunErrorPrefix = wirerules.NotRunPrefix

// NewHTTPModelError is a model handler's error for a provider's HTTP answer:
// its type is ErrorTypeForHTTPStatus(status, message) and its text message.
// Return it from RunModel or Compact when the provider answered with an
// error status.
func NewHTTPModelError(status int, message string) *ModelError {
	return &ModelError{Type: ErrorTypeForHTTPStatus(status, message), Msg: message}
}

// ErrorTypeForHTTPStatus maps a provider's HTTP error status and its message
// or body to Dex's error type:
//
//   - 400, 404, 413, 422: invalid_request, or context_length when the
//     message says the prompt does not fit the context window
//     (IsContextLengthMessage);
//   - 408, 504: timeout;
//   - 429: rate_limit;
//   - 529, and 503 whose message says "overloaded": overloaded;
//   - any other 5xx: server_error;
//   - anything else: unknown.
func ErrorTypeForHTTPStatus(status int, message string) dexv1.ErrorType {
	switch {
	case status == 400 || status == 404 || status == 413 || status == 422:
		if IsContextLengthMessage(message) {
			return dexv1.ErrorType_ERROR_TYPE_CONTEXT_LENGTH
		}
		return dexv1.ErrorType_ERROR_TYPE_INVALID_REQUEST
	case status == 408 || status == 504:
		return dexv1.ErrorType_ERROR_TYPE_TIMEOUT
	case status == 429:
		return dexv1.ErrorType_ERROR_TYPE_RATE_LIMIT
	case status == 529, status == 503 && strings.Contains(strings.ToLower(message), "overloaded"):
		return dexv1.ErrorType_ERROR_TYPE_OVERLOADED
	case status >= 500 && status <= 599:
		return dexv1.ErrorType_ERROR_TYPE_SERVER_ERROR
	}
	return dexv1.ErrorType_ERROR_TYPE_UNKNOWN
}

// contextLengthPhrases are how the common providers say that a request does
// not fit the model's context window (compared in lower case).
var contextLengthPhrases = []string{
	"context_length_exceeded",
	"context length",
	"context window",
	"maximum context",
	"prompt is too long",
	"input is too long",
	"too many tokens",
	"maximum number of tokens",
}

// IsContextLengthMessage reports whether a provider's error message says
// that the request does not fit the model's context window.
func IsContextLengthMessage(message string) bool {
	m := strings.ToLower(message)
	for _, p := range contextLengthPhrases {
		if strings.Contains(m, p) {
			return true
		}
	}
	return false
}

// ClassifyError is the error type a model handler's error is reported with.
// It looks through wrapped errors (fmt.Errorf %w, errors.Join) for, in
// order:
//
//   - a *ModelError: its Type, as the handler chose it;
//   - an HTTP status, as provider SDKs expose it: a StatusCode() int,
//     HTTPStatus() int or HTTPStatusCode() int method, or an exported
//     StatusCode int field: ErrorTypeForHTTPStatus of it and the error's text;
//   - context.DeadlineExceeded or a net.Error whose Timeout() is true:
//     timeout;
//   - a failed connection (*net.OpError, *net.DNSError, *url.Error, a
//     refused, reset or aborted connection, an unreachable network,
//     io.ErrUnexpectedEOF): network;
//   - anything else: unknown.
//
// A nil error has no type (ERROR_TYPE_UNSPECIFIED).
func ClassifyError(err error) dexv1.ErrorType {
	if err == nil {
		return dexv1.ErrorType_ERROR_TYPE_UNSPECIFIED
	}
	var me *ModelError
	if errors.As(err, &me) {
		return me.Type
	}
	if status := httpStatusOf(err); status > 0 {
		return ErrorTypeForHTTPStatus(status, err.Error())
	}
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return dexv1.ErrorType_ERROR_TYPE_TIMEOUT
	}
	if isNetworkFailure(err) {
		return dexv1.ErrorType_ERROR_TYPE_NETWORK
	}
	return dexv1.ErrorType_ERROR_TYPE_UNKNOWN
}

func isNetworkFailure(err error) bool {
	var (
		opErr  *net.OpError
		dnsErr *net.DNSError
		urlErr *url.Error
	)
	if errors.As(err, &opErr) || errors.As(err, &dnsErr) || errors.As(err, &urlErr) {
		return true
	}
	for _, target := range []error{
		syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EPIPE,
		syscall.ENETUNREACH, syscall.EHOSTUNREACH, io.ErrUnexpectedEOF,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// httpStatusOf finds the first HTTP status an error of err's tree exposes
// (0: none).
func httpStatusOf(err error) int {
	return findInTree(err, exposedStatus)
}

// findInTree is the first non-zero value f gives an error of err's tree,
// err first, then what it wraps, depth first (the zero value: none).
func findInTree[T comparable](err error, f func(error) T) T {
	var zero T
	for err != nil {
		if v := f(err); v != zero {
			return v
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if v := findInTree(e, f); v != zero {
					return v
				}
			}
			return zero
		default:
			return zero
		}
	}
	return zero
}

// exposedStatus is the HTTP status err itself (not what it wraps) exposes.
func exposedStatus(err error) int {
	switch e := err.(type) {
	case interface{ StatusCode() int }:
		return e.StatusCode()
	case interface{ HTTPStatus() int }:
		return e.HTTPStatus()
	case interface{ HTTPStatusCode() int }:
		return e.HTTPStatusCode()
	}
	// Provider SDKs (openai-go, anthropic-sdk-go) expose a StatusCode field.
	if f := fieldOf(err, "StatusCode"); f.IsValid() && f.CanInt() {
		return int(f.Int())
	}
	return 0
}

// fieldOf is the field of that name of the struct err is or points to
// (the zero Value when there is none).
func fieldOf(err error, name string) reflect.Value {
	v := reflect.ValueOf(err)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v.FieldByName(name)
}
