package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
)

// screenshotAbout is what flyctl screenshot --help says it does.
const screenshotAbout = `Saves what a running app's screen shows as a PNG (the engine's
_flutter.screenshot, through flyd's connection to the app), at the app's
own size unless --max-width scales it down. RUN is a run id or a unique
prefix of one. -o - writes the PNG to stdout.`

type screenshotOptions struct {
	out      string
	maxWidth int
}

func (o *screenshotOptions) flags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.out, "output", "o", "screenshot.png", "the `FILE` to write (- for stdout)")
	fs.IntVar(&o.maxWidth, "max-width", 0, "scale the image down to at most `N` pixels wide")
}

func cmdScreenshot(ctx context.Context, c *call, o *screenshotOptions) error {
	if len(c.args) != 1 {
		return usagef("screenshot takes one run (see flyctl runs), got %q", c.args)
	}
	lc, err := c.client()
	if err != nil {
		return err
	}
	run, err := resolveRun(ctx, lc, c.args[0])
	if err != nil {
		return err
	}
	shot, err := lc.Screenshot(ctx, run.RunID, o.maxWidth)
	if err != nil {
		return err
	}
	if o.out == "-" {
		_, err := c.stdout.Write(shot.PNG)
		return err
	}
	if err := writeFileAtomic(o.out, shot.PNG, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "flyctl: wrote %s (%d×%d, %d bytes)\n", o.out, shot.Width, shot.Height, len(shot.PNG))
	return nil
}
