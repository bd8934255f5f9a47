package main

import (
	"io"
	"strings"

	"github.com/fly-dev/fly/internal/safetext"
)

// What flyctl prints of an app's output, an app's errors, a DTD file's
// names, an upstream's messages or a client's name is another program's
// text: it goes through safetext, so that an escape sequence is shown
// (\x1b[2J) rather than clearing the screen, setting the window title
// or writing the clipboard, and a newline or tab cannot break a table.
// --raw on logs tail and errors prints the text as it came.

// row writes one row of a table: its cells tab-separated, each on one
// line with every control and format character shown escaped.
func row(w io.Writer, cells ...string) error {
	var b strings.Builder
	for i, c := range cells {
		if i > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(safetext.Field(c))
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

// shown is s as flyctl prints it: one line, escaped, unless raw.
func shown(s string, raw bool) string {
	if raw {
		return s
	}
	return safetext.Line(s)
}
