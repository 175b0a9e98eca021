package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// WorkerLanguages are the Worker libraries the chaos suite can run: the
// demo Worker of each takes dexworker's flags, writes the same ledger and
// holds at the same moments.
var WorkerLanguages = []string{"go", "python", "typescript"}

// workerBinaries names each language's demo Worker in the bin directory;
// the Python and TypeScript ones are launchers that `make build` writes.
var workerBinaries = map[string]string{
	"go":         "dexworker",
	"python":     "dexworker-python",
	"typescript": "dexworker-typescript",
}

// CheckWorkerLanguage says whether lang is a known Worker language.
func CheckWorkerLanguage(lang string) error {
	if lang == "" {
		return nil
	}
	if _, ok := workerBinaries[lang]; !ok {
		return fmt.Errorf("unknown Worker language %q (known: %s)", lang, strings.Join(WorkerLanguages, ", "))
	}
	return nil
}

// WorkerAdapters are the framework adapters the TypeScript demo Worker can
// drive its scripted model through (its --adapter flag).
var WorkerAdapters = []string{"ai-sdk", "openai-agents", "claude-agent-sdk"}

// CheckWorkerAdapter says whether adapter can run with lang's demo Worker:
// only the TypeScript one has adapters.
func CheckWorkerAdapter(lang, adapter string) error {
	if adapter == "" {
		return nil
	}
	if lang != "typescript" {
		if lang == "" {
			lang = "go"
		}
		return fmt.Errorf("--adapter %s needs --worker typescript: the %s demo Worker has no framework adapters", adapter, lang)
	}
	for _, a := range WorkerAdapters {
		if a == adapter {
			return nil
		}
	}
	return fmt.Errorf("unknown adapter %q (known: %s)", adapter, strings.Join(WorkerAdapters, ", "))
}

// WorkerBinary is the path of lang's demo Worker in binDir ("" is Go).
func WorkerBinary(binDir, lang string) string {
	if lang == "" {
		lang = "go"
	}
	return filepath.Join(binDir, workerBinaries[lang])
}

// CheckWorkerBinary fails, saying how to build it, when lang's demo Worker
// is not in binDir.
func CheckWorkerBinary(binDir, lang string) error {
	if err := CheckWorkerLanguage(lang); err != nil {
		return err
	}
	p := WorkerBinary(binDir, lang)
	if _, err := os.Stat(p); err != nil {
		return fmt.Errorf("the %s Worker %s is missing (make build writes it): %v", lang, p, err)
	}
	return nil
}
