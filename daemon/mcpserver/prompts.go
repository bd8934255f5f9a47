package mcpserver

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/fly-dev/fly/daemon/runs"

	"github.com/fly-dev/fly/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// prompts holds what the MCP prompts need. Each prompt is one method;
// addPrompts registers them all.
type prompts struct{ s *Server }

// debugRunTail is how many log entries debug_run embeds by default, and
// debugRunMaxTail the most it embeds.
const (
	debugRunTail    = 200
	debugRunMaxTail = 5000
)

// Choices of the prompts' enumerated arguments.
var (
	stateManagements = []string{"setState", "provider", "riverpod", "bloc"}
	httpPackages     = []string{"http", "dio"}
	httpMethods      = []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
)

// addPrompts registers every prompt on srv.
func (s *Server) addPrompts(srv *mcp.Server) {
	p := prompts{s}
	stateArg := &mcp.PromptArgument{Name: "state_management", Title: "State management",
		Description: "setState, provider, riverpod or bloc; default: what the project already depends on, else setState"}
	s.addPrompt(srv, &mcp.Prompt{
		Name: "scaffold_page", Title: "Scaffold a page",
		Description: "Create a new Flutter page (screen) that follows this project's conventions, wire it into the app's routing, and check it with a hot reload.",
		Arguments: []*mcp.PromptArgument{
			{Name: "name", Title: "Page name", Required: true, Description: "the page or widget name, e.g. Settings or user_profile (becomes SettingsPage, user_profile_page.dart)"},
			{Name: "route", Title: "Route", Description: "the route path to register, e.g. /settings; default: none, the page is not routed"},
			stateArg,
		},
	}, p.scaffoldPage)
	s.addPrompt(srv, &mcp.Prompt{
		Name: "scaffold_feature", Title: "Scaffold a feature",
		Description: "Create a feature module (e.g. data, domain and presentation layers) with its models, repository, state and UI, following this project's layout.",
		Arguments: []*mcp.PromptArgument{
			{Name: "name", Title: "Feature name", Required: true, Description: "the feature name, e.g. Checkout or user_profile"},
			{Name: "layers", Title: "Layers", Description: "comma-separated layers to create; default data,domain,presentation (application is also known)"},
			stateArg,
		},
	}, p.scaffoldFeature)
	s.addPrompt(srv, &mcp.Prompt{
		Name: "scaffold_api_client", Title: "Scaffold an API client",
		Description: "Create a typed REST API client (models, errors, timeouts, tests) with package:http or package:dio.",
		Arguments: []*mcp.PromptArgument{
			{Name: "name", Title: "Client name", Required: true, Description: "the API's name, e.g. Weather or github (becomes WeatherApiClient)"},
			{Name: "base_url", Title: "Base URL", Required: true, Description: "the API's base URL, e.g. https://api.example.com/v1"},
			{Name: "endpoints", Title: "Endpoints", Description: "comma-separated \"METHOD /path\" pairs, e.g. \"GET /users, POST /users, GET /users/{id}\""},
			{Name: "http_package", Title: "HTTP package", Description: "http or dio; default: the one the project already depends on, else http"},
		},
	}, p.scaffoldAPIClient)
	s.addPrompt(srv, &mcp.Prompt{
		Name: "fix_lints", Title: "Fix lints",
		Description: "Run the analyzer on the project (or one file or directory), apply dart fix, and fix the remaining diagnostics by hand without changing behaviour.",
		Arguments: []*mcp.PromptArgument{
			{Name: "path", Title: "Path", Description: "a file or directory of the workspace, relative to its root, e.g. lib/src; default: the whole project"},
		},
	}, p.fixLints)
	s.addPrompt(srv, &mcp.Prompt{
		Name: "debug_run", Title: "Debug a run",
		Description: "Diagnose a flutter run or build from its recent log, which is embedded; then fix the cause and verify with a hot reload or a new run.",
		Arguments: []*mcp.PromptArgument{
			{Name: "run_id", Title: "Run id", Description: "the run or build to debug (see runs_list); default: the newest run or build of this workspace"},
			{Name: "tail", Title: "Lines", Description: fmt.Sprintf("how many of the last log entries to embed; default %d, at most %d", debugRunTail, debugRunMaxTail)},
		},
	}, p.debugRun)
}

// promptArgs reads a prompt's arguments, refusing unknown ones.
type promptArgs struct {
	prompt string
	m      map[string]string
}

func newPromptArgs(req *mcp.GetPromptRequest, known ...string) (promptArgs, error) {
	a := promptArgs{prompt: req.Params.Name, m: req.Params.Arguments}
	for k := range a.m {
		if !slices.Contains(known, k) {
			return a, invalidParams("prompt %s has no argument %q; its arguments are %s", a.prompt, k, strings.Join(known, ", "))
		}
	}
	return a, nil
}

func (a promptArgs) get(name string) string { return strings.TrimSpace(a.m[name]) }

func (a promptArgs) required(name, what string) (string, error) {
	v := a.get(name)
	if v == "" {
		return "", invalidParams("prompt %s needs the argument %s (%s)", a.prompt, name, what)
	}
	return v, nil
}

// choice returns the argument, which must be one of choices (matched
// without regard to case), or "" if it was not given.
func (a promptArgs) choice(name string, choices []string) (string, error) {
	v := a.get(name)
	if v == "" {
		return "", nil
	}
	for _, c := range choices {
		if strings.EqualFold(v, c) {
			return c, nil
		}
	}
	return "", invalidParams("prompt %s: %s=%q is not one of %s", a.prompt, name, v, strings.Join(choices, ", "))
}

// identName splits a user's name for a class or file ("user profile",
// "UserProfile", "user_profile", "user-profile") into lower-case words.
// It refuses names that would not make a Dart identifier.
func identName(name string) ([]string, error) {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(name)
	for i, r := range rs {
		switch {
		case r == ' ' || r == '_' || r == '-':
			flush()
		case r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r)):
			return nil, fmt.Errorf("name %q may hold only ASCII letters, digits, spaces, '_' and '-'", name)
		case unicode.IsUpper(r) && len(cur) > 0 &&
			(unicode.IsLower(cur[len(cur)-1]) || unicode.IsDigit(cur[len(cur)-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))):
			flush() // a camelCase boundary: userProfile, HTTPClient
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	if len(words) == 0 || !unicode.IsLetter(rune(words[0][0])) {
		return nil, fmt.Errorf("name %q must start with a letter", name)
	}
	return words, nil
}

func pascal(words []string) string {
	var b strings.Builder
	for _, w := range words {
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

func snake(words []string) string { return strings.Join(words, "_") }

// name reads a required name argument as words.
func (a promptArgs) name(what string) ([]string, error) {
	v, err := a.required("name", what)
	if err != nil {
		return nil, err
	}
	words, err := identName(v)
	if err != nil {
		return nil, invalidParams("prompt %s: %v", a.prompt, err)
	}
	return words, nil
}

// projectFacts is what the prompts say about the session's project.
type projectFacts struct {
	root       string
	name       string   // pubspec name: the package: import prefix
	deps       []string // dependencies and dev_dependencies
	liveRuns   []string // live flutter runs of the workspace
	hasTests   bool
	hasPubspec bool
}

func (p prompts) facts(req *mcp.GetPromptRequest) (projectFacts, error) {
	sess, err := p.s.sessionOf(req.Session)
	if err != nil {
		return projectFacts{}, err
	}
	f := projectFacts{root: sess.ws.Root(), liveRuns: p.s.runs.LiveIDs(sess.ws.Root(), store.KindRun)}
	if o, err := sess.ws.Overview(); err == nil && o != nil {
		f.hasPubspec, f.name, f.hasTests = o.HasPubspec, o.Name, o.HasTests
		for _, d := range slices.Concat(o.Dependencies, o.DevDependencies) {
			f.deps = append(f.deps, d.Name)
		}
	}
	return f, nil
}

func (f projectFacts) has(pkgs ...string) bool {
	for _, p := range pkgs {
		if slices.Contains(f.deps, p) {
			return true
		}
	}
	return false
}

// stateManagement is the project's state management package, if any.
func (f projectFacts) stateManagement() string {
	switch {
	case f.has("flutter_riverpod", "hooks_riverpod", "riverpod"):
		return "riverpod"
	case f.has("flutter_bloc", "bloc"):
		return "bloc"
	case f.has("provider"):
		return "provider"
	}
	return ""
}

// router names the project's routing package, or "".
func (f projectFacts) router() string {
	for _, r := range []string{"go_router", "auto_route", "beamer"} {
		if f.has(r) {
			return r
		}
	}
	return ""
}

// context is the part every prompt shares: where the project is and how
// to read it and check changes with flyd.
func (f projectFacts) context() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Workspace: %s", f.root)
	if f.name != "" {
		fmt.Fprintf(&b, " (Dart package %q: import its files as package:%s/...)", f.name, f.name)
	}
	b.WriteString(".\n")
	if !f.hasPubspec {
		b.WriteString("There is no pubspec.yaml at the workspace root: find the Flutter package first (fly://project/overview lists nested packages).\n")
	}
	b.WriteString("How to work here:\n" +
		"- Read fly://project/overview first: dependencies, platforms, entry points and tests of the project.\n" +
		"- Read the files you need as workspace:///<path> resources (resources/list pages through the tree; add ?start=N&length=M to read part of a big file). " +
		"Look at two or three existing files of the same kind before writing new ones, and follow their layout, naming, imports and style.\n" +
		"- flyd serves the workspace read-only: create and edit files with your own editing tools.\n" +
		"- Do not add a dependency the project lacks without saying so; if one is needed, add it to pubspec.yaml and run `flutter pub get`.\n")
	if len(f.liveRuns) > 0 {
		fmt.Fprintf(&b, "- The app is running (run %s): after editing Dart code call flutter_hot_reload with that run_id, and with restart: true when you changed main(), initState or global state. "+
			"Then read its log (%s?tail=50, or logs_read) to check for new errors.\n", strings.Join(f.liveRuns, ", "), runs.LogURI(store.KindRun, f.liveRuns[0]))
	} else {
		b.WriteString("- To check your work in the app, start it with flutter_run, then use flutter_hot_reload after each edit and read the run's log (logs_read) for errors.\n")
	}
	return b.String()
}

func userText(text string) *mcp.PromptMessage {
	return &mcp.PromptMessage{Role: "user", Content: &mcp.TextContent{Text: text}}
}

// stateAdvice says how to use the chosen state management.
func stateAdvice(sm, detected string) string {
	chosen := sm
	if chosen == "" {
		chosen = detected
	}
	var note string
	switch {
	case sm == "" && detected != "":
		note = fmt.Sprintf("State management: %s (the project already uses it). ", detected)
	case sm == "":
		note = "State management: the project uses no state management package; use setState (or a ValueNotifier) and add none. "
	case detected != "" && sm != detected:
		note = fmt.Sprintf("State management: %s, as asked, although the project uses %s elsewhere: say so in your summary. ", sm, detected)
	default:
		note = fmt.Sprintf("State management: %s. ", sm)
	}
	switch chosen {
	case "provider":
		note += "Use a ChangeNotifier provided with ChangeNotifierProvider (or the project's existing providers), read with context.watch/context.read."
	case "riverpod":
		note += "Use Riverpod providers (Notifier/AsyncNotifier, or the code-generated @riverpod style if the project uses riverpod_generator) and ConsumerWidget/ConsumerStatefulWidget."
	case "bloc":
		note += "Use a Cubit for simple state, a Bloc when there are distinct events; immutable state classes; BlocProvider/BlocBuilder in the UI."
	default:
		note += "Keep state in a StatefulWidget; lift it up only when a parent needs it."
	}
	return note
}

func (p prompts) scaffoldPage(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	a, err := newPromptArgs(req, "name", "route", "state_management")
	if err != nil {
		return nil, err
	}
	words, err := a.name("the page's name, e.g. Settings")
	if err != nil {
		return nil, err
	}
	route := a.get("route")
	if route != "" && !strings.HasPrefix(route, "/") {
		return nil, invalidParams("prompt scaffold_page: route %q must start with '/', e.g. /%s", route, strings.Join(words, "-"))
	}
	sm, err := a.choice("state_management", stateManagements)
	if err != nil {
		return nil, err
	}
	f, err := p.facts(req)
	if err != nil {
		return nil, err
	}
	title := words
	switch words[len(words)-1] {
	case "page", "screen", "view": // SettingsScreen stays SettingsScreen
		if len(words) > 1 {
			title = words[:len(words)-1]
		}
	default:
		words = append(slices.Clip(words), "page")
	}
	class, file := pascal(words), snake(words)+".dart"

	var b strings.Builder
	fmt.Fprintf(&b, "Create a new Flutter page, %s, in this project.\n\n%s\n", class, f.context())
	fmt.Fprintf(&b, "Steps:\n"+
		"1. Find where pages live (lib/pages, lib/screens, lib/features/*/presentation, ...) and how they are named; put %s there, "+
		"as %s unless the project names files differently (e.g. a _screen suffix).\n"+
		"2. Write %s as a widget with a Scaffold, an AppBar titled %q, and a body with a clear placeholder of what the page is for. "+
		"Use the app's theme (Theme.of(context), its text styles and colour scheme), const constructors, and a super.key parameter. "+
		"Keep build methods small: extract private widgets instead of helper methods that return widgets.\n",
		class, file, class, strings.Join(wordsTitle(title), " "))
	fmt.Fprintf(&b, "3. %s\n", stateAdvice(sm, f.stateManagement()))
	if route != "" {
		switch r := f.router(); r {
		case "go_router":
			fmt.Fprintf(&b, "4. Register the route %s: add a GoRoute(path: '%s', builder: ...) to the app's GoRouter configuration (find it with resources/list and workspace:/// reads), and navigate with context.go/context.push.\n", route, route)
		case "":
			fmt.Fprintf(&b, "4. Register the route %s where the app defines its routes (MaterialApp routes or onGenerateRoute, usually in lib/main.dart or lib/app.dart); navigate with Navigator.pushNamed(context, '%s').\n", route, route)
		default:
			fmt.Fprintf(&b, "4. Register the route %s with the project's router (%s), as the existing routes are.\n", route, r)
		}
	} else {
		b.WriteString("4. Do not register a route; say in your summary how to open the page.\n")
	}
	if f.hasTests {
		b.WriteString("5. Add a widget test (under test/, mirroring the page's path) that pumps the page and finds its title.\n")
	} else {
		b.WriteString("5. The project has no tests yet: offer a widget test for the page rather than adding a test setup unasked.\n")
	}
	b.WriteString("6. Hot-reload (or run) the app and read its log; fix any error before you finish. End with a short summary of the files you created or changed.\n")
	return &mcp.GetPromptResult{Description: "Scaffold the page " + class, Messages: []*mcp.PromptMessage{userText(b.String())}}, nil
}

// wordsTitle capitalises each word: an AppBar title from a name.
func wordsTitle(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = strings.ToUpper(w[:1]) + w[1:]
	}
	return out
}

// featureLayers are the layers scaffold_feature knows how to describe.
var featureLayers = map[string]string{
	"data":         "data/: DTOs with fromJson/toJson, data sources (remote and local), and the repository implementation that maps DTOs to domain entities and errors to domain failures",
	"domain":       "domain/: immutable entities (with == and hashCode, or the project's freezed/equatable), the repository interface, and use cases only if the project uses them",
	"application":  "application/: services or controllers that coordinate use cases and hold the feature's state",
	"presentation": "presentation/: the pages and widgets, and the state holder (notifier, cubit or State) they listen to",
}

func (p prompts) scaffoldFeature(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	a, err := newPromptArgs(req, "name", "layers", "state_management")
	if err != nil {
		return nil, err
	}
	words, err := a.name("the feature's name, e.g. Checkout")
	if err != nil {
		return nil, err
	}
	layers := []string{"data", "domain", "presentation"}
	if v := a.get("layers"); v != "" {
		layers = nil
		for l := range strings.SplitSeq(v, ",") {
			l = strings.ToLower(strings.TrimSpace(l))
			if l == "" {
				continue
			}
			if _, ok := featureLayers[l]; !ok {
				return nil, invalidParams("prompt scaffold_feature: layer %q is not one of application, data, domain, presentation", l)
			}
			if !slices.Contains(layers, l) {
				layers = append(layers, l)
			}
		}
		if len(layers) == 0 {
			return nil, invalidParams("prompt scaffold_feature: layers %q names no layer; e.g. data,domain,presentation", v)
		}
	}
	sm, err := a.choice("state_management", stateManagements)
	if err != nil {
		return nil, err
	}
	f, err := p.facts(req)
	if err != nil {
		return nil, err
	}
	dir := "lib/features/" + snake(words)

	var b strings.Builder
	fmt.Fprintf(&b, "Create the feature %q (%s) in this project.\n\n%s\n", strings.Join(words, " "), pascal(words), f.context())
	fmt.Fprintf(&b, "Steps:\n"+
		"1. Find how features are organised (lib/features/<name>/..., lib/src/<name>/..., or layer-first folders). Follow it; if there is no pattern, use %s/.\n"+
		"2. Create these layers, each in its own folder, with dependencies pointing inward (presentation -> domain <- data):\n", dir)
	for _, l := range layers {
		fmt.Fprintf(&b, "   - %s\n", featureLayers[l])
	}
	fmt.Fprintf(&b, "3. %s\n", stateAdvice(sm, f.stateManagement()))
	b.WriteString("4. Wire it in where the app composes its dependencies (providers, a service locator such as get_it, or constructors in main.dart), and link its entry page from the app's navigation.\n" +
		"5. Keep every type small and named by what it is (CheckoutRepository, CheckoutPage); no util or helpers files. Handle loading, empty and error states in the UI.\n" +
		"6. Add unit tests for the domain and data code (fake the data sources) and a widget test for the entry page, mirroring lib/ under test/.\n" +
		"7. Run `flutter analyze` on the new files if you can run commands, then hot-reload (or run) the app and read its log; fix every error. End with a list of the files you created.\n")
	return &mcp.GetPromptResult{Description: "Scaffold the feature " + pascal(words), Messages: []*mcp.PromptMessage{userText(b.String())}}, nil
}

// endpoint is one "METHOD /path" of scaffold_api_client.
type endpoint struct{ method, path string }

func parseEndpoints(s string) ([]endpoint, error) {
	var out []endpoint
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		method, path, ok := strings.Cut(part, " ")
		method, path = strings.ToUpper(method), strings.TrimSpace(path)
		if !ok || !slices.Contains(httpMethods, method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \t") {
			return nil, fmt.Errorf("endpoint %q is not \"METHOD /path\" (METHOD one of %s)", part, strings.Join(httpMethods, ", "))
		}
		out = append(out, endpoint{method, path})
	}
	return out, nil
}

func (p prompts) scaffoldAPIClient(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	a, err := newPromptArgs(req, "name", "base_url", "endpoints", "http_package")
	if err != nil {
		return nil, err
	}
	words, err := a.name("the API's name, e.g. Weather")
	if err != nil {
		return nil, err
	}
	baseURL, err := a.required("base_url", "the API's base URL, e.g. https://api.example.com/v1")
	if err != nil {
		return nil, err
	}
	if u, err := url.Parse(baseURL); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, invalidParams("prompt scaffold_api_client: base_url %q is not an http(s) URL like https://api.example.com/v1", baseURL)
	}
	endpoints, err := parseEndpoints(a.get("endpoints"))
	if err != nil {
		return nil, invalidParams("prompt scaffold_api_client: %v", err)
	}
	pkg, err := a.choice("http_package", httpPackages)
	if err != nil {
		return nil, err
	}
	f, err := p.facts(req)
	if err != nil {
		return nil, err
	}
	pkgNote := ""
	switch {
	case pkg == "" && f.has("dio"):
		pkg, pkgNote = "dio", " (the project already depends on it)"
	case pkg == "":
		pkg = "http"
		if f.has("http") {
			pkgNote = " (the project already depends on it)"
		}
	}
	if !f.has(pkg) {
		pkgNote = " (not a dependency yet: add it to pubspec.yaml and run `flutter pub get`)"
	}
	// Weather, weather_api and WeatherApiClient all make WeatherApiClient.
	base := slices.Clone(words)
	for len(base) > 1 && (base[len(base)-1] == "client" || base[len(base)-1] == "api") {
		base = base[:len(base)-1]
	}
	words = append(slices.Clip(base), "api", "client")
	class := pascal(words)

	var b strings.Builder
	fmt.Fprintf(&b, "Create %s, a typed client for the REST API at %s, using package:%s%s.\n\n%s\n", class, baseURL, pkg, pkgNote, f.context())
	if len(endpoints) > 0 {
		b.WriteString("Endpoints, one method each (named after what it does: getUsers, createUser, getUser(id)):\n")
		for _, e := range endpoints {
			fmt.Fprintf(&b, "- %s %s\n", e.method, e.path)
		}
		b.WriteByte('\n')
	} else {
		b.WriteString("No endpoints were given: create the client with one example GET method and ask which endpoints to add.\n")
	}
	fmt.Fprintf(&b, "Steps:\n"+
		"1. Find where API or data-source code lives (lib/data, lib/api, lib/src/...) and put %s.dart there.\n"+
		"2. The base URL is a constructor parameter (default %q), and so is the %s, so that tests inject a fake. Set connect and receive timeouts. "+
		"Never hardcode secrets: take tokens from a parameter or a callback.\n"+
		"3. Model request and response bodies as immutable classes with fromJson/toJson (use json_serializable or freezed only if the project does). Path parameters such as {id} become method arguments, URL-encoded.\n"+
		"4. Map failures to one exception type (%sException with the status code, the method, the path and a short body excerpt); parse errors and timeouts become it too. Do not swallow errors.\n"+
		"5. Give the client a close() that releases the HTTP client it owns.\n"+
		"6. Add tests under test/ that use %s and cover a success, a 4xx/5xx error and malformed JSON for each endpoint.\n"+
		"7. Run `flutter analyze` if you can run commands, hot-reload (or run) the app if it uses the client, and read the log for errors. End with a summary of the public API you created.\n",
		snake(words), baseURL, clientParam(pkg), pascal(base)+"Api", testDouble(pkg))
	return &mcp.GetPromptResult{Description: "Scaffold the API client " + class, Messages: []*mcp.PromptMessage{userText(b.String())}}, nil
}

func clientParam(pkg string) string {
	if pkg == "dio" {
		return "Dio instance (with BaseOptions and, if needed, interceptors for auth and logging)"
	}
	return "http.Client"
}

func testDouble(pkg string) string {
	if pkg == "dio" {
		return "a Dio with a fake HttpClientAdapter (or http_mock_adapter if the project has it)"
	}
	return "MockClient from package:http/testing.dart"
}

func (p prompts) fixLints(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	a, err := newPromptArgs(req, "path")
	if err != nil {
		return nil, err
	}
	target := strings.TrimSuffix(a.get("path"), "/")
	if target == "." {
		target = ""
	}
	if target != "" {
		if _, err := checkRelPath("/" + target); err != nil {
			return nil, invalidParams("prompt fix_lints: path %q must be a file or directory inside the workspace, relative to its root (e.g. lib or lib/main.dart)", target)
		}
	}
	f, err := p.facts(req)
	if err != nil {
		return nil, err
	}
	scope, arg := "the whole project", ""
	if target != "" {
		scope, arg = target, " "+target
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Fix the analyzer diagnostics (errors, warnings, lints) of %s.\n\n%s\n", scope, f.context())
	fmt.Fprintf(&b, "Steps:\n"+
		"1. Read workspace:///analysis_options.yaml (and the lint package it includes, e.g. flutter_lints or very_good_analysis) to know which rules apply.\n"+
		"2. If you can run commands in the workspace: run `flutter analyze%s` (or `dart analyze%s`) to list the diagnostics, then `dart fix --dry-run%s` and, if its changes are safe, `dart fix --apply%s`. "+
		"If you cannot run commands, read the Dart files of %s as workspace:/// resources and review them against the enabled rules.\n"+
		"3. Fix what is left by hand, errors first, then warnings, then infos. Keep behaviour identical: no renames of public API, no logic changes beyond what a diagnostic requires. "+
		"Do not silence a diagnostic with // ignore: or by disabling a rule unless fixing it is impossible, and then say why in a comment.\n"+
		"4. Run the analyzer again until it reports no issues in %s, and run the tests (`flutter test`) if the project has them.\n"+
		"5. Hot-reload the running app (or run it) and read its log to make sure nothing broke. End with the number of issues before and after, and anything you left unfixed and why.\n",
		arg, arg, arg, arg, scope, scope)
	return &mcp.GetPromptResult{Description: "Fix the lints of " + scope, Messages: []*mcp.PromptMessage{userText(b.String())}}, nil
}

func (p prompts) debugRun(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	a, err := newPromptArgs(req, "run_id", "tail")
	if err != nil {
		return nil, err
	}
	tail := debugRunTail
	if v := a.get("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, invalidParams("prompt debug_run: tail=%q is not a positive number of lines", v)
		}
		tail = min(n, debugRunMaxTail)
	}
	f, err := p.facts(req)
	if err != nil {
		return nil, err
	}
	id := a.get("run_id")
	if id == "" {
		if id, err = p.newestRun(f.root); err != nil {
			return nil, err
		}
	}
	r, err := p.s.runs.Get(id)
	if err != nil {
		return nil, invalidParams("prompt debug_run: %v", err)
	}
	rec := r.Record()
	page := r.Entries(runs.Query{Tail: tail, Limit: tail + 1, Streams: agentStreams}) // as logs://run/{id}?tail= reads
	var log strings.Builder
	for _, e := range page.Entries {
		log.WriteString(runs.FormatEntry(e))
		log.WriteByte('\n')
	}
	uri := runs.LogURI(rec.Kind, rec.ID)

	var b strings.Builder
	fmt.Fprintf(&b, "Diagnose the %s %s of this workspace from its log, embedded below (the last %d entries of %s; one line per entry: seq, time, stream, text; "+
		"stream is stdout, stderr, event for flutter --machine events, or fly for flyd's own notes).\n\n",
		rec.Kind, rec.ID, len(page.Entries), uri)
	fmt.Fprintf(&b, "Command: %s\nState: %s", strings.Join(rec.Argv, " "), rec.State)
	if rec.ExitCode != nil {
		fmt.Fprintf(&b, ", exit code %d", *rec.ExitCode)
	}
	if rec.Error != "" {
		fmt.Fprintf(&b, ", error: %s", rec.Error)
	}
	fmt.Fprintf(&b, "\nStarted: %s\n\n%s\n", rec.StartedAt.Format(time.RFC3339), f.context())
	b.WriteString("Steps:\n" +
		"1. Find the first real error in the log, not its consequences: compiler errors (path:line:col), exceptions with their stack traces, " +
		"'A RenderFlex overflowed', failed assertions, Gradle/Xcode/CMake failures, or a lost connection to the device.\n" +
		"2. Read the source it points to as workspace:///<path> resources (and the surrounding code), and explain the cause in one or two sentences.\n" +
		"3. Fix the cause in the code (not the symptom: no blanket try/catch, no ignored errors). If it is an environment problem (SDK, device, signing, dependencies), say what the user must do instead.\n")
	switch {
	case r.Live() && rec.Kind == store.KindRun:
		fmt.Fprintf(&b, "4. The app is still running: after the fix call flutter_hot_reload with run_id %s (restart: true if you changed main(), initState or global state), "+
			"then read %s?since=%d for the lines after this log and check the error is gone.\n", rec.ID, uri, page.Last)
	case rec.Kind == store.KindRun:
		b.WriteString("4. The run has ended: after the fix start the app again with flutter_run and read the new run's log to check the error is gone.\n")
	default:
		b.WriteString("4. After the fix run the same build again with flutter_build and check that it succeeds.\n")
	}
	b.WriteString("If the log does not show enough, read more of it with logs_read (since, tail, grep) before guessing.")

	return &mcp.GetPromptResult{
		Description: fmt.Sprintf("Debug %s %s (%s)", rec.Kind, rec.ID, rec.State),
		Messages: []*mcp.PromptMessage{
			userText(b.String()),
			{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{
				URI: uri + "?tail=" + strconv.Itoa(tail), MIMEType: "text/plain", Text: log.String(),
			}}},
		},
	}, nil
}

// newestRun is the id of the newest run or build of root.
func (p prompts) newestRun(root string) (string, error) {
	recs, err := p.s.runs.List(root)
	if err != nil {
		return "", err
	}
	for _, rec := range recs { // newest first
		if rec.Kind == store.KindRun || rec.Kind == store.KindBuild {
			return rec.ID, nil
		}
	}
	return "", invalidParams("prompt debug_run: this workspace has no run or build yet; start one with flutter_run or flutter_build, or pass run_id (see runs_list with all: true)")
}
