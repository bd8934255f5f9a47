package toolfilter

import (
	"fmt"
	"slices"
	"strings"
)

// The tags a filter may name besides a tool: presets, which cut across
// the categories, and the categories. Every tool has the tag All; an
// upstream's tools have Upstream and the name of their server.
const (
	All      = "all"      // every tool (the default)
	App      = "app"      // what an agent needs to drive a running app
	Run      = "run"      // start, reload, stop, claim, list runs
	Inspect  = "inspect"  // errors, widget tree, screenshot
	Logs     = "logs"     // a run's log
	Files    = "files"    // find, grep, read
	SDK      = "sdk"      // build, devices, doctor, create
	Upstream = "upstream" // every upstream server's tools
)

// Tool is one of flyd's own tools and the tags it is registered with.
type Tool struct {
	Name string
	Tags []string // its categories and presets, All left out
}

// Tools is the catalog of flyd's own listed tools, by category: flyd
// registers each tool with the tags written
// here, and help texts and errors list the presets and categories from
// it (Groups). Old names of merged tools are not here: they take the tags
// of the tool they became.
var Tools = []Tool{
	{"flutter_run", []string{Run, App}},
	{"flutter_hot_reload", []string{Run, App}},
	{"flutter_stop", []string{Run, App}},
	{"flutter_claim", []string{Run}},
	{"runs_list", []string{Run, App}},
	{"flutter_errors", []string{Inspect, App}},
	{"flutter_inspect", []string{Inspect}},
	{"logs_read", []string{Logs, App}},
	{"files_find", []string{Files}},
	{"files_grep", []string{Files}},
	{"files_read", []string{Files}},
	{"flutter_build", []string{SDK}},
	{"flutter_sdk", []string{SDK}},
}

// TagsOf returns the tags of flyd's own tool name, All included, and
// whether the catalog has it.
func TagsOf(name string) ([]string, bool) {
	for _, t := range Tools {
		if t.Name == name {
			return append(slices.Clone(t.Tags), All), true
		}
	}
	return nil, false
}

// Group is a preset or category and the tools it holds.
type Group struct {
	Name   string
	Preset bool
	Holds  string // the tools it holds: names, comma-separated, or words where no list says it
}

// Groups lists every preset and category a filter may name, presets
// first, with what each holds, derived from Tools.
func Groups() []Group {
	groups := []Group{{Name: All, Preset: true, Holds: "every tool (the default)"}, {Name: App, Preset: true}}
	for _, c := range []string{Run, Inspect, Logs, Files, SDK} {
		groups = append(groups, Group{Name: c})
	}
	for i, g := range groups {
		if g.Holds != "" {
			continue
		}
		var names []string
		for _, t := range Tools {
			if slices.Contains(t.Tags, g.Name) {
				names = append(names, t.Name)
			}
		}
		groups[i].Holds = strings.Join(names, ", ")
	}
	return append(groups, Group{Name: Upstream, Holds: "every upstream server's tools (or name one server: dart)"})
}

// Describe is Groups in one line each ("app: flutter_run, …"), for
// errors.
func Describe() []string {
	var out []string
	for _, g := range Groups() {
		out = append(out, fmt.Sprintf("%s: %s", g.Name, g.Holds))
	}
	return out
}
