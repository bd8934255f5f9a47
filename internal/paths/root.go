package paths

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrBadRoot is wrapped by CheckRoot's refusals.
var ErrBadRoot = errors.New("not a project root")

// CheckRoot refuses a workspace root that is not a project: the file
// system root, the home directory home, or an ancestor of it. Serving one
// of those would offer a user's dotfiles and credentials to every client.
// root and home are absolute and clean (home may be "" when unknown).
func CheckRoot(root, home string) error {
	root = filepath.Clean(root)
	what := ""
	switch {
	case root == string(filepath.Separator) || filepath.Dir(root) == root:
		what = "the file system root"
	case home != "" && root == filepath.Clean(home):
		what = "your home directory"
	case home != "" && isAncestor(root, filepath.Clean(home)):
		what = "an ancestor of your home directory"
	}
	if what == "" {
		return nil
	}
	return fmt.Errorf("%w: %s is %s, which holds far more than a project (and your credentials): "+
		"start flyctl mcp in the project's directory, or pass --workspace /path/to/project", ErrBadRoot, root, what)
}

// isAncestor reports whether dir is a strict ancestor of p.
func isAncestor(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// ProjectRoot finds the project that dir (absolute, clean) is in, the way
// git finds its repository: the nearest ancestor (dir included) that holds
// a pubspec.yaml, not looking past the top of the git repository dir is in;
// else that repository's top; else dir itself. The home directory and its
// ancestors are never candidates. The result is still to be checked with
// CheckRoot.
func ProjectRoot(dir, home string) string {
	home = filepath.Clean(home)
	gitTop := ""
	for d := dir; ; d = filepath.Dir(d) {
		if home != "." && (d == home || isAncestor(d, home)) {
			break
		}
		if exists(filepath.Join(d, "pubspec.yaml")) {
			return d
		}
		if exists(filepath.Join(d, ".git")) {
			gitTop = d
			break
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	if gitTop != "" {
		return gitTop
	}
	return dir
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
