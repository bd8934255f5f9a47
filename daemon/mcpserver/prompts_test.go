package mcpserver

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"github.com/fly-dev/fly/internal/flytest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// promptText joins the text of a prompt's messages.
func promptText(res *mcp.GetPromptResult) string {
	var b strings.Builder
	for _, m := range res.Messages {
		if tc, ok := m.Content.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

func getPrompt(t testing.TB, cs *mcp.ClientSession, name string, args map[string]string) (*mcp.GetPromptResult, error) {
	t.Helper()
	return cs.GetPrompt(context.Background(), &mcp.GetPromptParams{Name: name, Arguments: args})
}

func TestPromptsList(t *testing.T) {
	a := newSurface(t, nil)
	cs := a.connect(t, "lister", nil)
	res, err := cs.ListPrompts(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{ // name → arguments, required ones marked with *
		"scaffold_page":       {"name*", "route", "state_management"},
		"scaffold_feature":    {"name*", "layers", "state_management"},
		"scaffold_api_client": {"name*", "base_url*", "endpoints", "http_package"},
		"fix_lints":           {"path"},
		"debug_run":           {"run_id", "tail"},
	}
	if len(res.Prompts) != len(want) {
		t.Errorf("prompts/list has %d prompts, want %d", len(res.Prompts), len(want))
	}
	for _, p := range res.Prompts {
		args, ok := want[p.Name]
		if !ok {
			t.Errorf("unexpected prompt %s", p.Name)
			continue
		}
		if p.Description == "" || p.Title == "" {
			t.Errorf("prompt %s has no description or title", p.Name)
		}
		var got []string
		for _, a := range p.Arguments {
			n := a.Name
			if a.Required {
				n += "*"
			}
			got = append(got, n)
			if a.Description == "" {
				t.Errorf("prompt %s: argument %s has no description", p.Name, a.Name)
			}
		}
		if !slices.Equal(got, args) {
			t.Errorf("prompt %s arguments = %v, want %v", p.Name, got, args)
		}
	}
}

func TestPromptsGet(t *testing.T) {
	a := newSurface(t, nil)
	flytest.WriteTree(t, a.root, map[string]string{
		"pubspec.yaml": "name: shop\ndependencies:\n  flutter:\n    sdk: flutter\n  flutter_riverpod: ^2.5.0\n  dio: ^5.0.0\n  go_router: ^14.0.0\n",
	})
	cs := a.connect(t, "prompter", nil)
	common := []string{"fly://project/overview", "workspace:///", "flutter_hot_reload", "package:shop/", a.root}
	tests := []struct {
		name string
		args map[string]string
		want []string
	}{
		{"scaffold_page", map[string]string{"name": "user profile", "route": "/profile"},
			[]string{"UserProfilePage", "user_profile_page.dart", `"User Profile"`, "GoRoute(path: '/profile'", "riverpod (the project already uses it)"}},
		{"scaffold_page", map[string]string{"name": "SettingsScreen", "state_management": "Bloc"},
			[]string{"SettingsScreen", "settings_screen.dart", "bloc, as asked, although the project uses riverpod", "Do not register a route"}},
		{"scaffold_feature", map[string]string{"name": "Checkout", "layers": "domain, presentation"},
			[]string{"Checkout", "lib/features/checkout", "domain/:", "presentation/:", "riverpod"}},
		{"scaffold_api_client", map[string]string{"name": "weather api", "base_url": "https://api.example.com/v1", "endpoints": "GET /forecast, GET /cities/{id}"},
			[]string{"WeatherApiClient", "weather_api_client.dart", "package:dio (the project already depends on it)", "GET /cities/{id}", "WeatherApiException", "https://api.example.com/v1"}},
		{"scaffold_api_client", map[string]string{"name": "github", "base_url": "https://api.github.com", "http_package": "http"},
			[]string{"GithubApiClient", "package:http (not a dependency yet", "MockClient", "one example GET method"}},
		{"fix_lints", nil, []string{"the whole project", "flutter analyze", "dart fix --apply", "analysis_options.yaml"}},
		{"fix_lints", map[string]string{"path": "lib/src/"}, []string{"flutter analyze lib/src", "dart fix --dry-run lib/src"}},
	}
	for _, tt := range tests {
		res, err := getPrompt(t, cs, tt.name, tt.args)
		if err != nil {
			t.Errorf("%s %v: %v", tt.name, tt.args, err)
			continue
		}
		text := promptText(res)
		if len(res.Messages) == 0 || res.Messages[0].Role != "user" || res.Description == "" {
			t.Errorf("%s %v = %+v, want a described user message", tt.name, tt.args, res)
		}
		for _, w := range slices.Concat(common, tt.want) {
			if !strings.Contains(text, w) {
				t.Errorf("%s %v: text lacks %q:\n%s", tt.name, tt.args, w, text)
			}
		}
	}

	errs := []struct {
		name string
		args map[string]string
		want string
	}{
		{"scaffold_page", nil, "needs the argument name"},
		{"scaffold_page", map[string]string{"name": "  "}, "needs the argument name"},
		{"scaffold_page", map[string]string{"name": "a/b"}, "may hold only"},
		{"scaffold_page", map[string]string{"name": "x", "route": "settings"}, "must start with '/'"},
		{"scaffold_page", map[string]string{"name": "x", "state_management": "mobx"}, "not one of setState, provider, riverpod, bloc"},
		{"scaffold_page", map[string]string{"name": "x", "colour": "red"}, `no argument "colour"`},
		{"scaffold_feature", map[string]string{"name": "x", "layers": "ui"}, `layer "ui"`},
		{"scaffold_feature", map[string]string{"name": "x", "layers": " , "}, "names no layer"},
		{"scaffold_api_client", map[string]string{"name": "x"}, "needs the argument base_url"},
		{"scaffold_api_client", map[string]string{"name": "x", "base_url": "api.example.com"}, "not an http(s) URL"},
		{"scaffold_api_client", map[string]string{"name": "x", "base_url": "https://a.b", "endpoints": "users"}, "not \"METHOD /path\""},
		{"scaffold_api_client", map[string]string{"name": "x", "base_url": "https://a.b", "http_package": "chopper"}, "not one of http, dio"},
		{"fix_lints", map[string]string{"path": "../other"}, "inside the workspace"},
		{"fix_lints", map[string]string{"path": "/etc"}, "inside the workspace"},
		{"debug_run", nil, "no run or build yet"},
		{"debug_run", map[string]string{"run_id": "nosuchrun"}, "no such run"},
		{"debug_run", map[string]string{"tail": "-3"}, "not a positive number"},
	}
	for _, tt := range errs {
		_, err := getPrompt(t, cs, tt.name, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %v error = %v, want %q", tt.name, tt.args, err, tt.want)
		}
	}
}

// TestPromptDebugRun: debug_run embeds the recent log of the workspace's
// newest run, or of the run asked for, as a resource.
func TestPromptDebugRun(t *testing.T) {
	a := newSurface(t, nil)
	cs := a.connect(t, "debugger", nil)
	old := a.start(t, fakeflutter.EnvTickMS+"=0")
	if err := old.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := a.start(t, fakeflutter.EnvLines+"=5", fakeflutter.EnvTickMS+"=1")
	flytest.WaitLine(t, r.Ring(), "flutter: tick 5")

	res, err := getPrompt(t, cs, "debug_run", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Messages) != 2 {
		t.Fatalf("debug_run has %d messages, want the instructions and the log", len(res.Messages))
	}
	text := promptText(res)
	for _, w := range []string{r.ID(), "State: running", "flutter_hot_reload with run_id " + r.ID(), "logs://run/" + r.ID() + "?since=", "workspace:///"} {
		if !strings.Contains(text, w) {
			t.Errorf("debug_run text lacks %q:\n%s", w, text)
		}
	}
	er, ok := res.Messages[1].Content.(*mcp.EmbeddedResource)
	if !ok || res.Messages[1].Role != "user" {
		t.Fatalf("second message = %T %s, want an embedded resource from the user", res.Messages[1].Content, res.Messages[1].Role)
	}
	if er.Resource.URI != "logs://run/"+r.ID()+"?tail=200" || er.Resource.MIMEType != "text/plain" {
		t.Errorf("embedded resource %s (%s), want logs://run/%s?tail=200 text/plain", er.Resource.URI, er.Resource.MIMEType, r.ID())
	}
	for _, w := range []string{"started: flutter run --machine", "stdout flutter: tick 1", "stdout flutter: tick 5"} {
		if !strings.Contains(er.Resource.Text, w) {
			t.Errorf("embedded log lacks %q:\n%s", w, er.Resource.Text)
		}
	}
	// As logs://run/{id} reads: no machine-protocol events.
	if strings.Contains(er.Resource.Text, " event ") {
		t.Errorf("embedded log holds machine events:\n%s", er.Resource.Text)
	}
	full, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "logs://run/" + r.ID() + "?events=1"})
	if err != nil || !strings.Contains(full.Contents[0].Text, " event app.started") {
		t.Errorf("logs://run/%s?events=1 lacks the machine events: %v", r.ID(), err)
	}
	plain, err := cs.ReadResource(context.Background(), &mcp.ReadResourceParams{URI: "logs://run/" + r.ID()})
	if err != nil || strings.Contains(plain.Contents[0].Text, " event ") || !strings.Contains(plain.Contents[0].Text, "stdout flutter: tick 5") {
		t.Errorf("logs://run/%s holds machine events or lacks the app's output: %v", r.ID(), err)
	}

	// The older, stopped run by id, with a short tail.
	res, err = getPrompt(t, cs, "debug_run", map[string]string{"run_id": old.ID(), "tail": "2"})
	if err != nil {
		t.Fatal(err)
	}
	er = res.Messages[1].Content.(*mcp.EmbeddedResource)
	lines := strings.Split(strings.TrimSuffix(er.Resource.Text, "\n"), "\n")
	if er.Resource.URI != "logs://run/"+old.ID()+"?tail=2" || len(lines) != 2 || !strings.Contains(lines[1], "exited:") {
		t.Errorf("debug_run of %s tail=2 embeds %s:\n%s", old.ID(), er.Resource.URI, er.Resource.Text)
	}
	if text := promptText(res); !strings.Contains(text, "State: stopped") || !strings.Contains(text, "start the app again with flutter_run") {
		t.Errorf("debug_run of a stopped run:\n%s", text)
	}
}

func TestIdentName(t *testing.T) {
	tests := []struct {
		in     string
		pascal string
		snake  string
		err    bool
	}{
		{"Settings", "Settings", "settings", false},
		{"user profile", "UserProfile", "user_profile", false},
		{"user_profile", "UserProfile", "user_profile", false},
		{"user-profile", "UserProfile", "user_profile", false},
		{"userProfile", "UserProfile", "user_profile", false},
		{"UserProfilePage", "UserProfilePage", "user_profile_page", false},
		{"HTTPClient", "HttpClient", "http_client", false},
		{"OAuth2Login", "OAuth2Login", "o_auth2_login", false},
		{"  spaced  out ", "SpacedOut", "spaced_out", false},
		{"", "", "", true},
		{"___", "", "", true},
		{"2fa", "", "", true},
		{"user/profile", "", "", true},
		{"café", "", "", true},
	}
	for _, tt := range tests {
		words, err := identName(tt.in)
		if tt.err {
			if err == nil {
				t.Errorf("identName(%q) = %q, want an error", tt.in, words)
			}
			continue
		}
		if err != nil {
			t.Errorf("identName(%q) error = %v", tt.in, err)
			continue
		}
		if p, s := pascal(words), snake(words); p != tt.pascal || s != tt.snake {
			t.Errorf("identName(%q) = %s, %s, want %s, %s", tt.in, p, s, tt.pascal, tt.snake)
		}
	}
}

func TestParseEndpoints(t *testing.T) {
	got, err := parseEndpoints("GET /users, post /users ,DELETE /users/{id},")
	want := []endpoint{{"GET", "/users"}, {"POST", "/users"}, {"DELETE", "/users/{id}"}}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("parseEndpoints = %v, %v, want %v", got, err, want)
	}
	for _, bad := range []string{"/users", "FETCH /users", "GET users", "GET /a b"} {
		if got, err := parseEndpoints(bad); err == nil {
			t.Errorf("parseEndpoints(%q) = %v, want an error", bad, got)
		}
	}
}

func TestCompletePromptArguments(t *testing.T) {
	s := newSurface(t, map[string]string{"pubspec.yaml": "name: a\n", "lib/src/a.dart": "", "lib/src/b.dart": "", "test/a_test.dart": ""})
	cs := s.connect(t, "c", nil)
	ctx := context.Background()
	for _, tc := range []struct{ prompt, arg, value, want string }{
		{"scaffold_page", "state_management", "ri", "riverpod"},
		{"scaffold_api_client", "http_package", "", "http dio"},
		{"scaffold_feature", "layers", "data,do", "data,domain"},
		{"fix_lints", "path", "lib/src/", "lib/src/a.dart lib/src/b.dart"},
	} {
		res, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: tc.prompt},
			Argument: mcp.CompleteParamsArgument{Name: tc.arg, Value: tc.value}})
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(res.Completion.Values, " "); got != tc.want {
			t.Errorf("complete %s.%s(%q) = %q, want %q", tc.prompt, tc.arg, tc.value, got, tc.want)
		}
	}
}
