package holder

import (
	"path/filepath"
	"strings"
)

func controlOf(dir string) string {
	return `\\.\pipe\fly-holder-test-` + strings.ReplaceAll(filepath.Base(dir), " ", "")
}
