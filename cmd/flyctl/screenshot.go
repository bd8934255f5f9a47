package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/fly-dev/fly/internal/wire"
	"github.com/spf13/pflag"
)

const screenshotUsage = `Usage:
  flyctl screenshot RUN [-o FILE] [--max-width N]

Saves what a running app's screen shows as a PNG (the engine's
_flutter.screenshot, through flyd's connection to the app), at the app's
own size unless --max-width scales it down. RUN is a run id or a unique
prefix of one. -o - writes the PNG to stdout.

Flags:
%s
Examples:
  flyctl screenshot 01j9 -o shot.png
  flyctl screenshot 01j9 --max-width 540 -o small.png
`

func runScreenshot(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("flyctl screenshot", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.StringP("output", "o", "screenshot.png", "the `FILE` to write (- for stdout)")
	maxWidth := fs.Int("max-width", 0, "scale the image down to at most `N` pixels wide")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fmt.Fprintf(stdout, screenshotUsage, fs.FlagUsages())
			return nil
		}
		return usagef("screenshot: %v", err)
	}
	if fs.NArg() != 1 {
		return usagef("screenshot takes one run (see flyctl runs), got %q", fs.Args())
	}
	c, err := newClient(getenv)
	if err != nil {
		return err
	}
	run, err := resolveRun(ctx, c, fs.Arg(0))
	if err != nil {
		return err
	}
	q := url.Values{}
	if *maxWidth > 0 {
		q.Set("max_width", strconv.Itoa(*maxWidth))
	}
	resp, err := c.do(ctx, http.MethodGet, runRoute(wire.RouteRunScreenshot, run.RunID), q)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	png, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read the screenshot: %w", err)
	}
	if *out == "-" {
		_, err := stdout.Write(png)
		return err
	}
	if err := writeFileAtomic(*out, png, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "flyctl: wrote %s (%s×%s, %d bytes)\n", *out, resp.Header.Get("X-Fly-Width"), resp.Header.Get("X-Fly-Height"), len(png))
	return nil
}
