package convgen

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"

	_ "github.com/dexhq/dex/api/dexv1"
	_ "github.com/dexhq/dex/fsm/fsmpb"
)

// A field that one schema alone has stops the generator unless the list
// of one-sided fields names it; a name on that list that is not one-sided
// stops it too.
func TestOneSidedFieldsAreDeclared(t *testing.T) {
	saved := oneSided
	t.Cleanup(func() { oneSided = saved })

	oneSided = map[protoreflect.FullName]string{}
	for k, v := range saved {
		if k != "dex.v1.Step.waiting_reason" {
			oneSided[k] = v
		}
	}
	if _, err := Generate(); err == nil || !strings.Contains(err.Error(), "waiting_reason") {
		t.Fatalf("an undeclared API-only field generated: %v", err)
	}

	oneSided = map[protoreflect.FullName]string{"dex.v1.Step.id": "not one-sided"}
	for k, v := range saved {
		oneSided[k] = v
	}
	if _, err := Generate(); err == nil || !strings.Contains(err.Error(), "dex.v1.Step.id") {
		t.Fatalf("a field both sides have was accepted as one-sided: %v", err)
	}
}
