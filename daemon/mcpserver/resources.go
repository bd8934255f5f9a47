package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"mime"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fly-dev/fly/daemon/index"
	"github.com/fly-dev/fly/daemon/modules"
	"github.com/fly-dev/fly/daemon/overview"
	"github.com/fly-dev/fly/daemon/runs"
	"github.com/fly-dev/fly/daemon/upstream"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The resources/list cursor is opaque to clients. It holds either an
// offset into the head of the list (the fixed resources, then the logs of
// the workspace's runs) or the last file path listed.
const (
	cursorHead  = "head:"
	cursorAfter = "after:"
)

func encodeCursor(s string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(s))
}

func decodeCursor(c string) (head int, after string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	s := string(b)
	switch {
	case err != nil:
	case strings.HasPrefix(s, cursorAfter):
		return -1, strings.TrimPrefix(s, cursorAfter), nil
	case strings.HasPrefix(s, cursorHead):
		if n, err := strconv.Atoi(strings.TrimPrefix(s, cursorHead)); err == nil && n >= 0 {
			return n, "", nil
		}
	}
	return 0, "", invalidParams("invalid cursor %q: pass back the nextCursor of the previous page", c)
}

// listResources pages through the session's resources: the fixed ones,
// the logs of the workspace's runs, then the workspace's files in path
// order.
func (s *Server) listResources(ctx context.Context, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return nil, err
	}
	if req.Params != nil && s.up != nil && upstream.IsCursor(req.Params.Cursor) {
		return s.listUpstreamResources(ctx, sess, req.Params.Cursor)
	}
	res, err := s.listOwnResources(sess, req)
	if err == nil && res.NextCursor == "" && s.up != nil {
		res.NextCursor = s.up.FirstCursor() // the upstreams' resources follow flyd's own
	}
	return res, err
}

func (s *Server) listOwnResources(sess *client, req *mcp.ListResourcesRequest) (*mcp.ListResourcesResult, error) {
	var err error
	head, after := 0, ""
	if req.Params != nil && req.Params.Cursor != "" {
		if head, after, err = decodeCursor(req.Params.Cursor); err != nil {
			return nil, err
		}
	}
	res := &mcp.ListResourcesResult{Resources: []*mcp.Resource{}}
	size := s.cfg.PageSize
	if head >= 0 {
		all := append(s.fixedResources(), s.logResources(sess.ws.Root())...)
		if head < len(all) {
			res.Resources = append(res.Resources, all[head:min(len(all), head+size)]...)
		}
		if head+size < len(all) {
			res.NextCursor = encodeCursor(cursorHead + strconv.Itoa(head+size))
			return res, nil
		}
		size -= len(res.Resources)
	}
	files := sess.ws.Index().After(after, size+1)
	if len(files) > size {
		files = files[:size]
		res.NextCursor = encodeCursor(cursorAfter + files[len(files)-1].Path)
	}
	if size == 0 && len(files) == 0 && sess.ws.Index().Len() > 0 && head >= 0 {
		res.NextCursor = encodeCursor(cursorAfter)
	}
	// Size and time are read per page, fresh: the index keeps paths only.
	for _, f := range index.StatFiles(sess.ws.Index().Root(), files) {
		res.Resources = append(res.Resources, fileResource(f))
	}
	return res, nil
}

func fileResource(f index.FileInfo) *mcp.Resource {
	r := &mcp.Resource{
		URI:         workspaceURI(f.Path),
		Name:        path.Base(f.Path),
		Title:       f.Path,
		MIMEType:    mimeType(f.Path),
		Size:        f.Size,
		Annotations: &mcp.Annotations{LastModified: f.ModTime.UTC().Format(time.RFC3339)},
	}
	if index.IsGenerated(f.Path) {
		r.Meta = mcp.Meta{"generated": true}
	}
	return r
}

// mimeType names the type of a workspace file; everything served is text.
func mimeType(p string) string {
	switch ext := strings.ToLower(path.Ext(p)); ext {
	case ".dart":
		return "text/x-dart"
	case ".yaml", ".yml", ".lock":
		return "application/yaml"
	case ".md":
		return "text/markdown"
	case ".json", ".arb":
		return "application/json"
	case ".kt", ".kts":
		return "text/x-kotlin"
	case ".swift":
		return "text/x-swift"
	case ".gradle":
		return "text/x-groovy"
	default:
		if t := mime.TypeByExtension(ext); strings.HasPrefix(t, "text/") || strings.HasSuffix(t, "xml") {
			return strings.TrimSuffix(t, "; charset=utf-8")
		}
		return "text/plain"
	}
}

// readWorkspace serves resources/read of a workspace file.
func (s *Server) readWorkspace(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return nil, err
	}
	uri := req.Params.URI
	rel, rng, err := parseWorkspaceURI(uri)
	if err != nil {
		return nil, err
	}
	if why := s.cfg.Rules.Refusal(rel); why != "" {
		return nil, notFound(uri, why)
	}
	c, err := readFile(sess.ws.Index(), s.cfg.Rules, uri, rel, rng, s.cfg.MaxReadBytes)
	if err != nil {
		return nil, err
	}
	sess.FileRead()
	text := sess.Stash(c.text)
	return &mcp.ReadResourceResult{
		Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: mimeType(rel), Text: text}},
		Meta:     mcp.Meta{"total": c.total, "start": c.start, "length": c.length},
	}, nil
}

// readFixed serves the fly:// resources.
func (s *Server) readFixed(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return nil, err
	}
	var v any
	switch uri := req.Params.URI; uri {
	case uriOverview, uriOverview + "?format=markdown":
		return s.readOverview(sess, uri)
	case uriModules:
		g, err := sess.ws.Modules()
		if err != nil {
			return nil, err
		}
		return markdownResult(uri, g.Markdown(path.Base(sess.ws.Root()))), nil
	case uriOverview + "?format=json":
		v, err = sess.ws.Overview()
	case uriSessionsCurrent:
		v = sess.Info()
	case uriSessionsRecent:
		v = s.sessions.Recent(sess.ws.Root())
	default:
		return nil, notFound(uri, "no such fly:// resource")
	}
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// subscribe records a subscription of this session only. A workspace
// file must be one that resources/read would serve: the same checks decide.
func (s *Server) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return err
	}
	uri := req.Params.URI
	if !flydURI(uri) && s.up != nil {
		if ok, err := s.up.Subscribe(ctx, sess.Session, uri); ok {
			return err
		}
	}
	key, err := s.subscriptionKey(uri)
	if err != nil {
		return err
	}
	if strings.HasPrefix(key, workspacePrefix) {
		rel, _, _ := parseWorkspaceURI(key)
		f, _, err := openServed(sess.ws.Index(), s.cfg.Rules, uri, rel)
		if err != nil {
			return err
		}
		f.Close()
	}
	sess.SetSubscribed(key, true)
	return nil
}

func (s *Server) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	sess, err := s.sessionOf(req.Session)
	if err != nil {
		return err
	}
	if uri := req.Params.URI; !flydURI(uri) && s.up != nil {
		if ok, err := s.up.Unsubscribe(ctx, sess.Session, uri); ok {
			return err
		}
	}
	if key, err := s.subscriptionKey(req.Params.URI); err == nil {
		sess.SetSubscribed(key, false)
	}
	return nil
}

// subscriptionKey checks that uri can be subscribed to and returns the
// form notifications use: the workspace URI without its range.
func (s *Server) subscriptionKey(uri string) (string, error) {
	switch uri {
	case uriOverview, uriModules, uriSessionsCurrent, uriSessionsRecent:
		return uri, nil
	case uriOverview + "?format=json", uriOverview + "?format=markdown":
		return uriOverview, nil
	}
	if strings.HasPrefix(uri, "fly://runs/") {
		id, err := parseErrorsURI(uri)
		if err != nil {
			return "", err
		}
		if _, err := s.runs.Get(id); err != nil {
			return "", notFound(uri, err.Error())
		}
		return runs.ErrorsURI(id), nil
	}
	if strings.HasPrefix(uri, "logs:") {
		_, id, _, err := parseLogURI(uri)
		if err != nil {
			return "", err
		}
		r, err := s.runs.Get(id)
		if err != nil {
			return "", notFound(uri, err.Error())
		}
		return runs.LogURI(r.Kind(), r.ID()), nil
	}
	rel, _, err := parseWorkspaceURI(uri)
	if err != nil {
		return "", err
	}
	if why := s.cfg.Rules.Refusal(rel); why != "" {
		return "", notFound(uri, why)
	}
	return workspaceURI(rel), nil
}

// WorkspaceChanged fans a batch of index changes of w out to its
// sessions: resources/updated to each session subscribed to a changed
// file (or to the overview, when the change makes it stale), and one
// list_changed to every session when files came or went. It never
// waits on a client.
func (s *Server) WorkspaceChanged(w Workspace, sessions []Session, c index.Change) {
	listChanged := len(c.Added) > 0 || len(c.Removed) > 0
	overviewStale := overview.Stale(c.Added, c.Updated, c.Removed)
	modulesStale := modules.Stale(c.Added, c.Updated, c.Removed)
	for _, sess := range sessions {
		for _, p := range slices.Concat(c.Updated, c.Removed) {
			if uri := workspaceURI(p); sess.Subscribed(uri) {
				sess.Notify("notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: uri})
			}
		}
		if overviewStale && sess.Subscribed(uriOverview) {
			sess.Notify("notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: uriOverview})
		}
		if modulesStale && sess.Subscribed(uriModules) {
			sess.Notify("notifications/resources/updated", &mcp.ResourceUpdatedNotificationParams{URI: uriModules})
		}
		if listChanged {
			sess.Notify("notifications/resources/list_changed", &mcp.ResourceListChangedParams{})
		}
	}
}
