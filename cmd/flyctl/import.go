package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fly-dev/fly/internal/mcpconfig"
)

// importPlan is what config mcp --import does to an editor's servers.
type importPlan struct {
	editorFile string
	upFile     string
	doc        *jsonObject // the editor's file
	orig       []byte
	key        string             // its servers object
	move       []mcpconfig.Server // into upstreams.json
	keep       []string           // left in the editor's file, with why
	kept       *jsonObject        // the editor's servers after the move, fly included
}

// planImport reads the editor's file and decides, server by server: stdio
// servers move into flyd's upstreams.json; URL servers, and fly itself,
// stay; "fly" (flyctl mcp) is added.
func planImport(mc mcpClient, editorFile, upFile string, fly serverEntry) (*importPlan, error) {
	orig, err := os.ReadFile(editorFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", editorFile, err)
	}
	p := &importPlan{editorFile: editorFile, upFile: upFile, orig: orig, key: mc.key, kept: &jsonObject{vals: map[string]json.RawMessage{}}}
	if p.doc, err = parseObject(orig); err != nil {
		return nil, fmt.Errorf("%s is not valid JSON (%v): flyctl does not import from it", editorFile, err)
	}
	servers := &jsonObject{vals: map[string]json.RawMessage{}}
	if raw, ok := p.doc.vals[mc.key]; ok && !bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		if servers, err = parseObject(raw); err != nil {
			return nil, fmt.Errorf("%s: %q is not an object", editorFile, mc.key)
		}
	}
	upf, err := mcpconfig.ReadFile(upFile)
	if err != nil {
		return nil, err
	}
	for _, name := range servers.keys {
		var s mcpconfig.Server
		if err := json.Unmarshal(servers.vals[name], &s); err != nil {
			return nil, fmt.Errorf("%s: server %q: %w", editorFile, name, err)
		}
		s.Name = name
		switch {
		case name == serverName || filepath.Base(s.Command) == "flyctl":
			continue // fly itself: re-added below
		case !s.Stdio():
			p.keep = append(p.keep, name+" (not a stdio server: flyd shares stdio servers only)")
			p.kept.set(name, servers.vals[name])
			continue
		}
		s.Type = ""
		if have, ok := upf.Server(name); ok && !have.Equal(s) {
			return nil, fmt.Errorf("%s already has a different upstream named %q: rename one of them first", upFile, name)
		}
		p.move = append(p.move, s)
		upf.Put(s)
	}
	if _, err := mcpconfig.Upstreams(upf); err != nil {
		return nil, fmt.Errorf("the imported servers would not load: %w", err)
	}
	want, err := json.Marshal(fly)
	if err != nil {
		return nil, err
	}
	p.kept.set(serverName, want)
	return p, nil
}

func (p *importPlan) print(w io.Writer) {
	fmt.Fprintf(w, "%s:\n", p.editorFile)
	if len(p.move) == 0 {
		fmt.Fprintf(w, "  no stdio servers to move\n")
	}
	for _, s := range p.move {
		fmt.Fprintf(w, "  move %s (%s) to %s, shared per %s\n", s.Name, strings.Join(append([]string{s.Command}, s.Args...), " "), p.upFile, s.SharedAs())
	}
	for _, k := range p.keep {
		fmt.Fprintf(w, "  keep %s\n", k)
	}
	fmt.Fprintf(w, "  set  %s (flyctl mcp): the moved servers' tools appear through it as NAME_<tool>\n", serverName)
}

// apply backs up the editor's file, writes upstreams.json, then the
// editor's file without the moved servers and with fly.
func (p *importPlan) apply(stderr io.Writer) error {
	now, err := os.ReadFile(p.editorFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if !bytes.Equal(now, p.orig) {
		return fmt.Errorf("%s changed while flyctl was reading it; run the command again", p.editorFile)
	}
	if len(p.orig) > 0 {
		backup := p.editorFile + ".fly-backup-" + time.Now().Format("20060102-150405")
		if err := os.WriteFile(backup, p.orig, 0o600); err != nil {
			return fmt.Errorf("back up %s: %w", p.editorFile, err)
		}
		fmt.Fprintf(stderr, "flyctl: backed up %s to %s\n", p.editorFile, backup)
	}
	if len(p.move) > 0 {
		err := editUpstreams(p.upFile, func(f *mcpconfig.File) error {
			for _, s := range p.move {
				f.Put(s)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	p.doc.set(p.key, p.kept.marshal())
	var out bytes.Buffer
	if err := json.Indent(&out, p.doc.marshal(), "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	if err := os.MkdirAll(filepath.Dir(p.editorFile), 0o755); err != nil {
		return err
	}
	if err := writeFileAtomic(p.editorFile, out.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", p.editorFile, err)
	}
	fmt.Fprintf(stderr, "flyctl: moved %d server(s) into %s; flyd shares them from now on\n", len(p.move), p.upFile)
	return nil
}
