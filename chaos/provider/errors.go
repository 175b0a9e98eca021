package provider

import (
	"fmt"
	"net/http"
	"strconv"
)

// writeOpenAIError answers with OpenAI's error body:
// {"error":{"message":…,"type":…,"param":null,"code":…}}.
func writeOpenAIError(w http.ResponseWriter, f *failure) {
	typ, code := "invalid_request_error", any(nil)
	switch {
	case f.status == http.StatusTooManyRequests:
		typ, code = "requests", "rate_limit_exceeded"
	case f.status == http.StatusUnauthorized:
		typ, code = "invalid_request_error", "invalid_api_key"
	case f.status >= 500:
		typ = "server_error"
	}
	body := map[string]any{"error": map[string]any{
		"message": f.message, "type": typ, "param": nil, "code": code,
	}}
	writeError(w, f, body)
}

// writeAnthropicError answers with Anthropic's error body:
// {"type":"error","error":{"type":…,"message":…},"request_id":…}.
func writeAnthropicError(w http.ResponseWriter, f *failure, seq int) {
	typ := "invalid_request_error"
	switch f.status {
	case http.StatusUnauthorized:
		typ = "authentication_error"
	case http.StatusForbidden:
		typ = "permission_error"
	case http.StatusNotFound:
		typ = "not_found_error"
	case http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case 529:
		typ = "overloaded_error"
	default:
		if f.status >= 500 {
			typ = "api_error"
		}
	}
	body := map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": typ, "message": f.message},
		"request_id": fmt.Sprintf("req_dex_%d", seq),
	}
	writeError(w, f, body)
}

func writeError(w http.ResponseWriter, f *failure, body any) {
	if f.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter))
	}
	writeJSON(w, f.status, body)
}
