package runs

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/fly-dev/fly/logring"
)

// lines makes output lines of a stream from text, one per line.
func lines(stream logring.Stream, text string) []outputLine {
	var out []outputLine
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		out = append(out, outputLine{stream, l})
	}
	return out
}

func join(ls ...[]outputLine) []outputLine {
	var out []outputLine
	for _, l := range ls {
		out = append(out, l...)
	}
	return out
}

const compileErr = "lib/main.dart:12:3: Error: Expected ';' after this.\n  runApp(const MyApp())\n  ^\n"

func TestProblems(t *testing.T) {
	many := ""
	for i := range 15 {
		many += fmt.Sprintf("lib/a.dart:%d:1: Error: Undefined name 'x%d'.\n", i+1, i)
	}
	tests := []struct {
		name string
		in   []outputLine
		want Problems
	}{
		{"a compile error at start, with the source lines under it; app.stop's error and trace left out",
			join(lines(logring.Stdout, "Launching lib/main.dart on Linux in debug mode..."),
				lines(logring.Stderr, compileErr),
				lines(logring.Stderr, "Build process failed"),
				lines(logring.Stdout, "#0      throwToolExit (package:flutter_tools/src/base/common.dart:10:3)")),
			Problems{Errors: []string{"lib/main.dart:12:3: Error: Expected ';' after this.\n  runApp(const MyApp())\n  ^"}}},
		{"the same error twice is one",
			join(lines(logring.Stderr, compileErr), lines(logring.Stdout, compileErr)),
			Problems{Errors: []string{"lib/main.dart:12:3: Error: Expected ';' after this.\n  runApp(const MyApp())\n  ^"}}},
		{"Xcode's prefix and dart2js's split line",
			join(lines(logring.Stderr, "Error (Xcode): lib/main.dart:12:3: Error: Expected ';' after this."),
				lines(logring.Stderr, "Target dart2js failed: ProcessException: Process exited abnormally with exit code 1:\nlib/b.dart:4:5:\nError: Expected ';' after this.\n  runApp(const MyApp())\n  ^")),
			Problems{Errors: []string{"lib/main.dart:12:3: Error: Expected ';' after this.", "lib/b.dart:4:5: Error: Expected ';' after this.\n  runApp(const MyApp())\n  ^"}}},
		{"capped at 10",
			lines(logring.Stderr, many),
			Problems{Errors: strings.Split(strings.Join(strings.Split(many, "\n")[:10], "\n"), "\n"), More: 5}},
		{"no compile error: the last lines on stderr, traces and JSON left out",
			join(lines(logring.Stdout, `[{"event":"app.progress","params":{"appId":"x"`),
				lines(logring.Stderr, "No supported devices connected.\n#0  main (package:flutter_tools/x.dart:1:1)\n<asynchronous suspension>\n")),
			Problems{Lines: []string{"No supported devices connected."}}},
		{"nothing on stderr: stdout",
			lines(logring.Stdout, "Resolving dependencies...\nGradle task assembleDebug failed with exit code 1"),
			Problems{Lines: []string{"Resolving dependencies...", "Gradle task assembleDebug failed with exit code 1"}}},
		{"nothing", nil, Problems{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := problems(tt.in); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("problems() = %#v, want %#v", got, tt.want)
			}
		})
	}
}

// TestOutputTail: a failed build's log_tail is what flutter printed on
// both streams, without machine JSON, stack frames or flutter_tools' own
// lines, the newest n.
func TestOutputTail(t *testing.T) {
	in := join(lines(logring.Stdout, `Running Gradle task 'assembleRelease'...`),
		lines(logring.Stdout, `[{"event":"app.progress","params":{"appId":"x"}}]`),
		lines(logring.Stderr, "FAILURE: Build failed with an exception.\n#0      throwToolExit (package:flutter_tools/src/base/common.dart:10:3)\n<asynchronous suspension>\n\nBUILD FAILED in 2s"),
		lines(logring.Stdout, "Gradle task assembleRelease failed with exit code 1"))
	want := []string{"FAILURE: Build failed with an exception.", "BUILD FAILED in 2s", "Gradle task assembleRelease failed with exit code 1"}
	if got := outputTail(in, 3); !reflect.DeepEqual(got, want) {
		t.Errorf("outputTail(3) = %q, want %q", got, want)
	}
	if got := outputTail(in, 100); len(got) != 4 || got[0] != "Running Gradle task 'assembleRelease'..." {
		t.Errorf("outputTail(100) = %q, want every line flutter printed for people", got)
	}
}

func TestLastError(t *testing.T) {
	tests := []struct {
		name string
		in   []outputLine
		want string
	}{
		{"a crash: the app's exception, its stack, then flutter's last word",
			join(lines(logring.Stdout, "flutter: tick 3"),
				lines(logring.Stderr, "[ERROR:flutter/runtime/dart_vm_initializer.cc(41)] Unhandled Exception: Bad state: fake crash\n#0      main.<anonymous closure> (package:app/main.dart:20:5)\n"),
				lines(logring.Stdout, "Lost connection to device.")),
			"Lost connection to device."},
		{"a failed build: app.stop's error after the compile error",
			join(lines(logring.Stderr, compileErr), lines(logring.Stderr, "Build process failed")),
			"Build process failed"},
		{"the source lines under an error are not one",
			lines(logring.Stderr, compileErr),
			"lib/main.dart:12:3: Error: Expected ';' after this."},
		{"the app's ordinary output is not one",
			lines(logring.Stdout, "flutter: tick 1\nflutter: tick 2"),
			""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := lastError(tt.in); got != tt.want {
				t.Errorf("lastError() = %q, want %q", got, tt.want)
			}
		})
	}
}
