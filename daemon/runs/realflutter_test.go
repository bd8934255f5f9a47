package runs

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fly-dev/fly/store"
)

// TestRealFlutter runs the Flutter SDK found as flyd finds it (on PATH,
// else in FLUTTER_ROOT; on Windows its flutter.bat, through cmd.exe with
// Go's quoting) for what no fake can show: that the real tool starts
// that way and answers. No SDK is on the machines CI runs on, so there it
// says so and skips; on a developer's machine with Flutter it runs.
func TestRealFlutter(t *testing.T) {
	env := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && k != "" {
			env[k] = v
		}
	}
	e := newEngine(t)
	e.cfg.Flutter = "" // as flyd runs by default: found per session
	exe, err := e.findFlutter(env)
	if err != nil {
		t.Skipf("needs a Flutter SDK on PATH or in FLUTTER_ROOT: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a first run of the SDK sets itself up
	defer cancel()
	r, err := e.Start(ctx, Spec{Kind: store.KindTool, Root: t.TempDir(), Env: env, Args: []string{"--version", "--machine"}})
	if err != nil {
		t.Fatalf("start %s --version --machine: %v", exe, err)
	}
	select {
	case <-r.Done():
	case <-ctx.Done():
		t.Fatalf("%s --version --machine did not end within 5 minutes", exe)
	}
	var out strings.Builder
	for _, en := range r.Ring().Tail(r.Ring().Len()) {
		out.WriteString(en.Text + "\n")
	}
	rec := r.Record()
	if rec.State != store.StateExited || !strings.Contains(out.String(), `"frameworkVersion"`) {
		t.Errorf("%s --version --machine ended %s (%s):\n%s", exe, rec.State, rec.Error, out.String())
	}
}
