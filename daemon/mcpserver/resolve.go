package mcpserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/fly-dev/fly/daemon/index"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

const (
	workspaceScheme = "workspace"
	workspacePrefix = "workspace:///"
	maxURILen       = 4096
)

// byteRange is the ?start=N&length=M part of a resource URI.
type byteRange struct {
	start     int64
	length    int64
	hasStart  bool
	hasLength bool
}

func (r byteRange) set() bool { return r.hasStart || r.hasLength }

// invalidParams is a JSON-RPC invalid-params error: the request itself is
// wrong, whatever the workspace holds.
func invalidParams(format string, args ...any) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(format, args...)}
}

// codeResourceNotFound is "resource not found" in MCP 2025-11-25 and
// earlier, the versions flyd negotiates (later versions use invalid params).
const codeResourceNotFound = -32002

// notFound is a resource-not-found error that names the reason.
func notFound(uri, reason string) error {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return &jsonrpc.Error{Code: codeResourceNotFound, Message: fmt.Sprintf("resource %s not found: %s", uri, reason), Data: data}
}

// workspaceURI is the URI of a workspace file, percent-encoding what needs
// it (spaces, '#', '?', non-ASCII).
func workspaceURI(rel string) string {
	return workspacePrefix + (&url.URL{Path: rel}).EscapedPath()
}

// parseWorkspaceURI checks a workspace:/// URI lexically and returns the
// clean, slash-separated path relative to the root and the byte range of
// its query. It touches no file. Anything that could name a file outside
// the root is refused here, before os.Root refuses it again.
func parseWorkspaceURI(uri string) (rel string, r byteRange, err error) {
	if len(uri) > maxURILen {
		return "", r, invalidParams("URI is %d bytes, over the %d-byte limit", len(uri), maxURILen)
	}
	if strings.IndexByte(uri, 0) >= 0 {
		return "", r, invalidParams("URI contains a NUL byte")
	}
	if strings.Contains(uri, `\`) {
		return "", r, invalidParams("URI %q contains a backslash; workspace paths use '/'", uri)
	}
	u, err := url.Parse(uri)
	if err != nil {
		return "", r, invalidParams("malformed URI %q: %v", uri, errors.Unwrap(err))
	}
	switch {
	case u.Scheme != workspaceScheme:
		return "", r, invalidParams("URI %q is not a workspace:/// URI", uri)
	case u.Opaque != "" || u.Host != "" || u.User != nil:
		return "", r, invalidParams("URI %q has a host or no path: write workspace:///relative/path", uri)
	case u.Fragment != "" || strings.Contains(uri, "#"):
		return "", r, invalidParams("URI %q has a fragment; percent-encode '#' in file names", uri)
	}
	raw := strings.ToLower(u.EscapedPath())
	for _, enc := range []string{"%2f", "%5c", "%00", "%2e"} {
		if strings.Contains(raw, enc) {
			return "", r, invalidParams("URI %q percent-encodes '/', '\\', '.' or NUL, which could hide a path escape", uri)
		}
	}
	if rel, err = checkRelPath(u.Path); err != nil {
		return "", r, err
	}
	if r, err = parseRange(u.RawQuery); err != nil {
		return "", r, err
	}
	return rel, r, nil
}

// checkRelPath validates the decoded path of a workspace URI, or "/" and a
// path an agent gave, and returns it clean and slash-separated. On Windows
// a backslash separates too (lib\main.dart is lib/main.dart); elsewhere
// it is part of a file name, and refused with a word to use '/'. Drives,
// UNC and device paths are refused on every system, and so is any element
// that Windows reads as another file or a device (index.NameRefusal).
func checkRelPath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") || p == "/" {
		return "", invalidParams("workspace URI has no file path")
	}
	rel := p[1:]
	switch {
	case strings.IndexByte(rel, 0) >= 0:
		return "", invalidParams("path contains a NUL byte")
	case !utf8.ValidString(rel):
		return "", invalidParams("path is not valid UTF-8")
	case len(rel) >= 2 && isSlash(rel[0]) && isSlash(rel[1]):
		return "", invalidParams(`path %q is a UNC or device path (\\server\share, \\?\, \\.\); workspace paths are relative to the root`, rel)
	case len(rel) >= 2 && rel[1] == ':' && ('a' <= rel[0]|0x20 && rel[0]|0x20 <= 'z'):
		return "", invalidParams("path %q starts with a drive; workspace paths are relative to the root", rel)
	}
	rel = filepath.ToSlash(rel) // '\' is a separator on Windows only
	switch {
	case strings.Contains(rel, `\`):
		return "", invalidParams("path %q contains a backslash, which is part of a file name on this system; separate directories with '/'", rel)
	case strings.HasPrefix(rel, "/"):
		return "", invalidParams("path %q is absolute; workspace paths are relative to the root", rel)
	}
	for _, el := range strings.Split(rel, "/") {
		switch el {
		case "":
			return "", invalidParams("path %q has an empty element", rel)
		case ".", "..":
			return "", invalidParams("path %q contains %q; paths may not leave or walk the workspace", rel, el)
		}
		if why := index.NameRefusal(el); why != "" {
			return "", invalidParams("path %q: %s", rel, why)
		}
	}
	if !filepath.IsLocal(filepath.FromSlash(rel)) || path.Clean(rel) != rel {
		return "", invalidParams("path %q is not a plain relative path", rel)
	}
	return rel, nil
}

func isSlash(c byte) bool { return c == '/' || c == '\\' }

// parseRange parses "start=N&length=M". Both are optional.
func parseRange(query string) (byteRange, error) {
	var r byteRange
	if query == "" {
		return r, nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return r, invalidParams("malformed query %q", query)
	}
	for k, vs := range q {
		if len(vs) != 1 {
			return r, invalidParams("query parameter %q given %d times", k, len(vs))
		}
		n, err := strconv.ParseInt(vs[0], 10, 64)
		if err != nil || n < 0 {
			return r, invalidParams("query parameter %s=%q is not a non-negative integer", k, vs[0])
		}
		switch k {
		case "start":
			r.start, r.hasStart = n, true
		case "length":
			r.length, r.hasLength = n, true
		default:
			return r, invalidParams("unknown query parameter %q; a workspace URI takes start and length", k)
		}
	}
	return r, nil
}

// fileContent is a read part of a workspace file.
type fileContent struct {
	text   string // UTF-8; invalid bytes replaced with U+FFFD
	total  int64  // the file's size
	start  int64
	length int64 // bytes read
}

// openServed opens the workspace file rel of ix for reading through its
// root: it never blocks (FIFOs are refused), never leaves the root
// (os.Root refuses links out), serves through a symlink only what the
// rules would serve under the name it leads to (so lib/x.json ->
// ../android/key.properties is refused as the secret it is), and refuses
// anything but a regular file with one link (a hard link could be to a
// file outside the workspace, and nothing in the file says which name is
// the original). Read and subscribe both go through it, so they accept
// and refuse the same files.
func openServed(ix *index.Index, rules index.Rules, uri, rel string) (*os.File, fs.FileInfo, error) {
	f, err := ix.Root().OpenFile(filepath.FromSlash(rel), os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, nil, notFound(uri, "no such file")
		case errors.Is(err, syscall.ELOOP), strings.Contains(err.Error(), "escapes"):
			return nil, nil, notFound(uri, "it leads outside the workspace through a symlink")
		case errors.Is(err, fs.ErrPermission):
			return nil, nil, notFound(uri, "permission denied")
		}
		return nil, nil, notFound(uri, err.Error())
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, notFound(uri, err.Error())
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, nil, notFound(uri, "not a regular file")
	}
	if err := servedTarget(ix, rules, rel, fi); err != "" {
		f.Close()
		return nil, nil, notFound(uri, err)
	}
	if n, err := index.LinkCount(f, fi); err != nil {
		f.Close()
		return nil, nil, notFound(uri, err.Error())
	} else if n > 1 {
		f.Close()
		return nil, nil, notFound(uri, fmt.Sprintf("it has %d hard links, and one could be a file outside the workspace: flyd does not serve hard-linked files", n))
	}
	return f, fi, nil
}

// servedTarget says why the file opened as rel, whose FileInfo is fi, is
// not served under the name it really has ("" when it is, or when rel
// has no symlink on its way): the rules apply to what a symlink leads to,
// and the open file must be that target still (a link swapped between
// the open and the check is refused, not trusted).
func servedTarget(ix *index.Index, rules index.Rules, rel string, fi fs.FileInfo) string {
	target, ok := ix.Resolved(rel)
	if !ok {
		return "it leads outside the workspace through a symlink"
	}
	if target == rel {
		return ""
	}
	if why := rules.Refusal(target); why != "" {
		return "it is a symlink to " + target + ", which flyd does not serve: " + why
	}
	tfi, err := os.Stat(ix.AbsPath(target))
	if err != nil || !os.SameFile(fi, tfi) {
		return "it changed while it was opened"
	}
	return ""
}

// checkWritableDir checks that rel, a directory a command will create or
// write into, stays inside the root as the command will see it: every
// element that exists is a real directory (not a symlink, which could lead
// anywhere), and what does not exist yet will be created under one.
func checkWritableDir(root *os.Root, rel string) error {
	if rel == "." {
		return nil
	}
	clean, err := checkRelPath("/" + rel)
	if err != nil {
		return fmt.Errorf("%q is not a plain path inside the workspace: %s", rel, err) // its message: not a protocol error
	}
	prefix := ""
	for _, el := range strings.Split(clean, "/") {
		prefix = path.Join(prefix, el)
		fi, err := root.Lstat(filepath.FromSlash(prefix))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil // created by the command, under a real directory
		case err != nil:
			return fmt.Errorf("%s: %w", prefix, err)
		case fi.Mode()&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink, which could lead outside the workspace: flyd only writes into real directories of the workspace", prefix)
		case !fi.IsDir():
			return fmt.Errorf("%s is not a directory", prefix)
		}
	}
	return nil
}

// checkReadableFile checks that rel names a file a command will read
// inside the root: os.Root follows symlinks only within it.
func checkReadableFile(root *os.Root, rel string) error {
	clean, err := checkRelPath("/" + rel)
	if err != nil {
		return fmt.Errorf("%q is not a plain path inside the workspace: %s", rel, err) // its message: not a protocol error
	}
	fi, err := root.Stat(filepath.FromSlash(clean))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist in the workspace", rel)
	case err != nil && strings.Contains(err.Error(), "escapes"):
		return fmt.Errorf("%s leads outside the workspace through a symlink", rel)
	case err != nil:
		return fmt.Errorf("%s: %w", rel, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file", rel)
	}
	return nil
}

// readFile reads rel from root within rng. maxRead caps a read without a
// range, and the length of a read with one. It opens the file with
// openServed.
func readFile(ix *index.Index, rules index.Rules, uri, rel string, rng byteRange, maxRead int64) (*fileContent, error) {
	f, fi, err := openServed(ix, rules, uri, rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	total := fi.Size()
	c := &fileContent{total: total, start: rng.start}
	switch {
	case !rng.set() && total > maxRead:
		return nil, invalidParams("%s is %d bytes, over the %d-byte limit for a whole read; read it in parts, e.g. %s?start=0&length=%d",
			uri, total, maxRead, uri, maxRead)
	case rng.start > total:
		return nil, invalidParams("start=%d is past the end of %s (%d bytes)", rng.start, uri, total)
	case rng.hasLength && rng.length > maxRead:
		return nil, invalidParams("length=%d is over the %d-byte limit of one read", rng.length, maxRead)
	}
	c.length = total - rng.start
	if rng.hasLength {
		c.length = min(c.length, rng.length)
	}
	c.length = min(c.length, maxRead)
	buf := make([]byte, c.length)
	n, err := f.ReadAt(buf, rng.start)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	c.length = int64(n)
	c.text = strings.ToValidUTF8(string(buf[:n]), "\uFFFD")
	return c, nil
}
