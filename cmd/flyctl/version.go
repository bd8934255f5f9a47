package main

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

// versionAbout is what flyctl version --help says it does.
const versionAbout = `Prints flyctl's version, the commit it was built from and that commit's
date, and the number of the protocol it speaks to flyd. --json prints
them as a JSON object whose "product" is "fly": install scripts tell
this flyctl from another program of the same name (fly.io's CLI) by it.`

type versionOptions struct{ json bool }

func (o *versionOptions) flags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.json, "json", false, `print the version as JSON, with "product": "fly"`)
}

// versionInfo is flyctl version --json. Fields may be added, never
// change meaning.
type versionInfo struct {
	Product  string `json:"product"` // always "fly"
	Program  string `json:"program"` // "flyctl"
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Date     string `json:"date,omitempty"` // the commit's time, RFC 3339
	Protocol int    `json:"protocol"`
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

func cmdVersion(_ context.Context, c *call, o *versionOptions) error {
	if len(c.args) > 0 {
		return usagef("version takes no arguments")
	}
	if o.json {
		b, err := json.MarshalIndent(versionInfo{
			Product: "fly", Program: "flyctl",
			Version: wire.Version, Commit: wire.Commit, Date: wire.Date, Protocol: wire.Protocol,
			Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		}, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(c.stdout, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintln(c.stdout, versionLine("flyctl"))
	return err
}

// versionLine is "flyctl 1.2.3 (commit abc1234, 2026-11-27; protocol 1)",
// leaving out the commit and date where unknown.
func versionLine(program string) string {
	var about []string
	if wire.Commit != "" {
		about = append(about, "commit "+shortCommit(wire.Commit))
	}
	if wire.Date != "" {
		about = append(about, dateOnly(wire.Date))
	}
	build := ""
	if len(about) > 0 {
		build = strings.Join(about, ", ") + "; "
	}
	return fmt.Sprintf("%s %s (%sprotocol %d)", program, wire.Version, build, wire.Protocol)
}

// shortCommit is a commit hash as git abbreviates it.
func shortCommit(c string) string {
	if len(c) > 7 {
		return c[:7]
	}
	return c
}

// dateOnly is the day of an RFC 3339 time, or the value as is.
func dateOnly(s string) string {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t.UTC().Format(time.DateOnly)
	}
	return s
}
