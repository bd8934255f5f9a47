package runs

import (
	"bufio"
	"strings"
	"testing"
)

// TestReadLineEnds: a line's entry holds its text without its line end,
// whether the program ended it with \n (Unix) or \r\n (Windows); a \r
// anywhere else is the program's (a progress line redrawn in place) and
// stays, for the log's reader to see escaped.
func TestReadLineEnds(t *testing.T) {
	long := strings.Repeat("x", maxLine)
	tests := []struct {
		in   string
		want []string
	}{
		{"a\nb\n", []string{"a", "b"}},
		{"a\r\nb\r\n", []string{"a", "b"}},
		{"a\r\n\r\nb", []string{"a", "", "b"}},
		{"last\r", []string{"last"}},
		{"10%\r20%\r\n", []string{"10%\r20%"}},
		{"a\rb\n", []string{"a\rb"}},
		{"a\r\r\n", []string{"a\r"}},
		{"\r\n", []string{""}},
		{long + "\r\n", []string{long}},
	}
	for _, tt := range tests {
		br := bufio.NewReaderSize(strings.NewReader(tt.in), 2*maxLine)
		var got []string
		for {
			line, cut, err := readLine(br)
			if len(line) > 0 || (err == nil && !cut) {
				got = append(got, string(line))
			}
			if err != nil {
				break
			}
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") || len(got) != len(tt.want) {
			t.Errorf("lines of %.20q = %.60q, want %.60q", tt.in, got, tt.want)
		}
	}
}
