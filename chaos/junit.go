package chaos

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
)

// JUnit XML, the report format CI systems read: one test case per cell
// (class: the column), a failure with what happened and how to run the
// cell again, n/a cells skipped.

type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Class   string        `xml:"classname,attr"`
	Name    string        `xml:"name,attr"`
	Time    string        `xml:"time,attr"`
	Failure *junitFailure `xml:"failure,omitempty"`
	Skipped *junitSkipped `xml:"skipped,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

// JUnit is the report as JUnit XML.
func (r Report) JUnit(suite string) ([]byte, error) {
	s := junitSuite{Name: suite, Time: fmt.Sprintf("%.1f", r.Wall.Seconds())}
	for _, c := range r.Cells {
		tc := junitCase{Class: c.Column, Name: c.Step + " | " + c.Moment, Time: fmt.Sprintf("%.1f", c.Seconds)}
		s.Tests++
		switch c.Result {
		case ResultNA:
			s.Skipped++
			tc.Skipped = &junitSkipped{Message: c.Reason}
		case ResultFail:
			s.Failures++
			text := c.Reason
			if c.Reproduce != "" {
				text += "\n\nreproduce: " + c.Reproduce
			}
			if c.Logs != "" {
				text += "\nlogs: " + c.Logs
			}
			tc.Failure = &junitFailure{Message: c.Reason, Text: text}
		}
		s.Cases = append(s.Cases, tc)
	}
	b, err := xml.MarshalIndent(junitSuites{Suites: []junitSuite{s}}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(b, '\n')...), nil
}

// WriteJUnit writes the report as JUnit XML to path.
func WriteJUnit(path, suite string, r Report) error {
	b, err := r.JUnit(suite)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
