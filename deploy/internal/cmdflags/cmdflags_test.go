package cmdflags

import "testing"

func TestNamesFindsDexdFlags(t *testing.T) {
	names, err := Names("../../../cmd/dexd")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"id", "data-dir", "raft-addr", "grpc-addr", "http-addr", "peers", "join", "drain-timeout"} {
		if !names[want] {
			t.Errorf("flag --%s not found; found %v", want, names)
		}
	}
	if names["verify"] {
		t.Errorf("a subcommand was taken for a flag: %v", names)
	}
}

func TestNamesFailsOnADirWithoutFlags(t *testing.T) {
	if _, err := Names(t.TempDir()); err == nil {
		t.Fatal("no error for a directory without flag definitions")
	}
}
