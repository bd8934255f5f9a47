package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/fly-dev/fly/internal/logkey"
)

// An instance's lists (tools, prompts, resource templates): read from the
// upstream, cached, re-read when it says they changed, and the sessions
// told of what changed.

// announce saves new lists to the cache and tells the sharing sessions
// which lists changed since they last saw them, but for the kinds the
// upstream said changed ("tools", "prompts"), which they were told of
// already (see changed), even if flyd sees no difference: it may have
// been a change and its undoing.
func (in *instance) announce(old, l lists, had bool, users []Session, said map[string]bool) {
	same := func(a, b any) bool {
		x, _ := json.Marshal(a)
		y, _ := json.Marshal(b)
		return string(x) == string(y)
	}
	toolsSame, promptsSame, tmplSame := same(old.Tools, l.Tools), same(old.Prompts, l.Prompts), same(old.Templates, l.Templates)
	if had && toolsSame && promptsSame && tmplSame {
		return
	}
	if c := in.m.cfg.Cache; c != nil {
		if b, err := json.Marshal(l); err == nil {
			if err := c.PutCache(cacheKey(in.srv.Name), b); err != nil {
				in.m.log.Warn("cache upstream lists", "upstream", in.srv.Name, logkey.Error, err)
			}
		}
	}
	for _, s := range users {
		if !toolsSame && !said["tools"] {
			s.Notify("notifications/tools/list_changed", &mcp.ToolListChangedParams{})
		}
		if !promptsSame && !said["prompts"] {
			s.Notify("notifications/prompts/list_changed", &mcp.PromptListChangedParams{})
		}
		if !tmplSame {
			s.Notify("notifications/resources/list_changed", &mcp.ResourceListChangedParams{})
		}
	}
}

// fetchLists reads every page of the upstream's tools, prompts and
// templates, for the capabilities it declared.
func fetchLists(ctx context.Context, cs *mcp.ClientSession, timeout time.Duration) (lists, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var l lists
	caps := cs.InitializeResult().Capabilities
	if caps == nil {
		return l, nil
	}
	if caps.Tools != nil {
		for t, err := range cs.Tools(ctx, nil) {
			if err != nil {
				return l, fmt.Errorf("tools/list: %w", err)
			}
			l.Tools = append(l.Tools, t)
		}
	}
	if caps.Prompts != nil {
		for p, err := range cs.Prompts(ctx, nil) {
			if err != nil {
				return l, fmt.Errorf("prompts/list: %w", err)
			}
			l.Prompts = append(l.Prompts, p)
		}
	}
	if caps.Resources != nil {
		for t, err := range cs.ResourceTemplates(ctx, nil) {
			if err != nil {
				return l, fmt.Errorf("resources/templates/list: %w", err)
			}
			l.Templates = append(l.Templates, t)
		}
	}
	return l, nil
}

// changed is the upstream saying its list of kind ("tools", "prompts")
// changed: its sessions are told at once, and the lists are re-read by
// one refresher, which coalesces changes that come while it reads. Lists
// asked for meanwhile wait for it (see snapshot), so that a client told
// of a change never gets the lists it replaced.
func (in *instance) changed(kind string) {
	in.mu.Lock()
	if in.said == nil {
		in.said = map[string]bool{}
	}
	in.said[kind] = true
	start := in.fresh == nil
	if start {
		in.fresh = make(chan struct{})
	}
	users := slices.Collect(maps.Values(in.users))
	in.mu.Unlock()
	for _, s := range users {
		s.Notify("notifications/"+kind+"/list_changed", map[string]any{})
	}
	if start {
		in.bg.Go(in.refresh) // owned by supervise, which waits on bg
	}
}

// refresh re-reads the lists until no change the upstream announced is
// left unread, then lets waiting list calls go on. Announce tells the
// sessions of what changed that the upstream did not say (templates, say).
func (in *instance) refresh() {
	for {
		in.mu.Lock()
		said := in.said
		in.said = nil
		cs, old, had := in.cs, in.lists, in.listed
		users := slices.Collect(maps.Values(in.users))
		if len(said) == 0 || cs == nil {
			close(in.fresh)
			in.fresh = nil
			in.mu.Unlock()
			return
		}
		in.mu.Unlock()
		l, err := fetchLists(in.ctx, cs, in.srv.Timeout())
		if err != nil {
			in.m.log.Warn("upstream lists", "upstream", in.srv.Name, logkey.Error, err)
			continue // waiting lists go on with what flyd had, unless a change came meanwhile
		}
		in.mu.Lock()
		in.lists, in.listed = l.encoded(), true
		in.mu.Unlock()
		in.announce(old, l, had, users, said)
	}
}

// snapshot returns the lists, waiting up to wait for the upstream when
// nothing is known yet (no cache): a new session's tools/list is answered
// from the cache while a stopped upstream starts in the background. While
// lists the upstream said changed are re-read, it waits for them too.
func (in *instance) snapshot(ctx context.Context, wait time.Duration) (lists, error) {
	return in.lookup(ctx, wait, true)
}

// find calls found with the lists, waiting for the upstream as a call
// does: with the current ones, and only if they lack what it looks for
// (it may be new) with those being re-read, if any.
func (in *instance) find(ctx context.Context, found func(lists) bool) error {
	for _, fresh := range []bool{false, true} {
		l, err := in.lookup(ctx, in.srv.Timeout(), fresh)
		if err != nil || found(l) {
			return err
		}
	}
	return nil
}

// lookup is snapshot, or snapshot without waiting for a re-read when
// fresh is false.
func (in *instance) lookup(ctx context.Context, wait time.Duration, fresh bool) (lists, error) {
	in.mu.Lock()
	l, listed, reading := in.lists, in.listed, in.fresh
	in.mu.Unlock()
	if listed && reading != nil && fresh {
		// The upstream said a list changed, and its clients were told at
		// once: they get the new lists, not the ones it replaced.
		t := time.NewTimer(min(wait, in.srv.Timeout()))
		defer t.Stop()
		select {
		case <-reading:
		case <-t.C:
		case <-ctx.Done():
		}
		in.mu.Lock()
		l = in.lists
		in.mu.Unlock()
	}
	if listed {
		return l, nil
	}
	ctx, cancel := context.WithTimeout(ctx, min(wait, in.srv.Timeout()))
	defer cancel()
	if _, _, err := in.session(ctx); err != nil {
		return lists{}, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.lists, nil
}
