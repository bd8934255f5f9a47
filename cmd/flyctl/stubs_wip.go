package main

import (
	"context"
	"io"
)

// Placeholders for the verbs being written; each is replaced by its own file.

func runRuns(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return usagef("runs: not yet available")
}

func runStop(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return usagef("stop: not yet available")
}

func runLogs(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return usagef("logs: not yet available")
}

func runConfig(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	return usagef("config: not yet available")
}
