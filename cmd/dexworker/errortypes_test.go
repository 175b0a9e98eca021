package main

import (
	"context"
	"testing"

	"github.com/dexhq/dex/api/client"
	dexv1 "github.com/dexhq/dex/api/dexv1"
)

// A script names every error type the Worker library reports, unknown
// included; "none" stays a failure with no type.
func TestScriptedErrorTypes(t *testing.T) {
	for name, want := range map[string]dexv1.ErrorType{
		"unknown":         dexv1.ErrorType_ERROR_TYPE_UNKNOWN,
		"invalid_request": dexv1.ErrorType_ERROR_TYPE_INVALID_REQUEST,
		"network":         dexv1.ErrorType_ERROR_TYPE_NETWORK,
		"none":            dexv1.ErrorType_ERROR_TYPE_UNSPECIFIED,
	} {
		m, _ := newModel(t, `{"turns": [{"match": "x", "outputs": [{"error": {"type": "`+name+`", "message": "scripted"}}]}]}`)
		_, err := m.RunModel(context.Background(), client.ModelInput{SessionID: "s", StepID: "st", Attempt: 1, History: hist(user("x"))})
		if err == nil || err.Error() != "scripted" {
			t.Fatalf("%s: error %v", name, err)
		}
		if got := client.ClassifyError(err); got != want {
			t.Errorf("%s: reported as %s, want %s", name, got, want)
		}
	}
}
