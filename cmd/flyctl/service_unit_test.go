package main

import (
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// skipUnixUnitsOn skips a test of systemd and launchd units on Windows
// (goos): their paths are Unix paths, which Windows does not take for
// absolute. The Run key's are tested on every OS.
func skipUnixUnitsOn(t *testing.T, goos string) {
	if goos == "windows" {
		t.Skip("systemd and launchd units hold Unix paths, which are not absolute on Windows")
	}
}

// svcGoldenSpec is a fixed unit spec, so the golden files hold no path of the
// machine the tests run on.
func svcGoldenSpec(p servicePlatform) unitSpec {
	return unitSpec{
		Flyd: "/home/dev/.local/bin/flyd",
		Env: bakeEnv(svcEnv(map[string]string{
			"PATH":         "/home/dev/.local/bin:/home/dev/flutter/bin:/usr/local/bin:/usr/bin:/bin",
			"FLUTTER_ROOT": "/home/dev/flutter",
			"JAVA_HOME":    "/usr/lib/jvm/java-17",
			"EDITOR":       "vi", // not baked
		})),
		Log: p.log,
	}
}

// TestServiceRender renders both platforms' units from the packaging
// templates, on whatever OS the test runs on.
func TestServiceRender(t *testing.T) {
	skipUnixUnitsOn(t, runtime.GOOS)
	const path = "PATH=/home/dev/.local/bin:/home/dev/flutter/bin:/usr/local/bin:/usr/bin:/bin"
	tests := []struct {
		goos, golden string
		file         string
		want         []string
	}{
		{
			goos:   "linux",
			golden: "service/flyd.service.golden",
			file:   "/home/dev/.config/systemd/user/flyd.service",
			want: []string{
				"\n[Service]\n",
				"\nExecStart=/home/dev/.local/bin/flyd run\n",
				"\nEnvironment=\"" + path + "\"\n",
				"\nEnvironment=\"FLUTTER_ROOT=/home/dev/flutter\"\n",
				"\nEnvironment=\"JAVA_HOME=/usr/lib/jvm/java-17\"\n",
				"\nRestart=on-failure\n",
				"\nRestartSec=2\n",
				"\nKillMode=process\n", // the runs' holders outlive a restart
				"\n[Install]\nWantedBy=default.target\n",
			},
		},
		{
			goos:   "darwin",
			golden: "service/dev.fly.flyd.plist.golden",
			file:   "/home/dev/Library/LaunchAgents/dev.fly.flyd.plist",
			want: []string{
				"<key>Label</key>\n\t<string>dev.fly.flyd</string>",
				"<key>ProgramArguments</key>\n\t<array>\n\t\t<string>/home/dev/.local/bin/flyd</string>\n\t\t<string>run</string>\n\t</array>",
				"<key>EnvironmentVariables</key>\n\t<dict>\n\t\t<key>PATH</key>\n\t\t<string>" + strings.TrimPrefix(path, "PATH=") + "</string>\n",
				"<key>FLUTTER_ROOT</key>\n\t\t<string>/home/dev/flutter</string>",
				"<key>RunAtLoad</key>\n\t<true/>",
				"<key>KeepAlive</key>\n\t<dict>\n\t\t<key>SuccessfulExit</key>\n\t\t<false/>\n\t</dict>",
				"<key>AbandonProcessGroup</key>\n\t<true/>",
				"<key>StandardOutPath</key>\n\t<string>/home/dev/Library/Logs/fly/flyd.log</string>",
				"<key>StandardErrorPath</key>\n\t<string>/home/dev/Library/Logs/fly/flyd.log</string>",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.goos, func(t *testing.T) {
			p := svcPlatform(t, tt.goos, "/home/dev")
			if p.file != tt.file {
				t.Errorf("platformFor(%s).file = %s, want %s", tt.goos, p.file, tt.file)
			}
			got, err := renderUnit(p, svcGoldenSpec(p))
			if err != nil {
				t.Fatalf("renderUnit(%s) = %v", tt.goos, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("renderUnit(%s) does not contain %q:\n%s", tt.goos, w, got)
				}
			}
			for _, bad := range []string{"/etc", "@", "{{", "EDITOR"} {
				if strings.Contains(got, bad) {
					t.Errorf("renderUnit(%s) contains %q:\n%s", tt.goos, bad, got)
				}
			}
			checkGolden(t, tt.golden, got)

			info, err := parseUnit(p, []byte(got))
			if err != nil {
				t.Fatalf("parseUnit(renderUnit(%s)) = %v", tt.goos, err)
			}
			if info.Flyd != "/home/dev/.local/bin/flyd" || !slices.Equal(info.Args, []string{"run"}) {
				t.Errorf("parseUnit(renderUnit(%s)) runs %q %q, want /home/dev/.local/bin/flyd [run]", tt.goos, info.Flyd, info.Args)
			}
			if "PATH="+info.Env["PATH"] != path {
				t.Errorf("parseUnit(renderUnit(%s)).Env[PATH] = %q, want %q", tt.goos, info.Env["PATH"], path)
			}
		})
	}
}

// TestServiceRenderQuoting round-trips awkward paths and values through
// render and parse, for both formats.
func TestServiceRenderQuoting(t *testing.T) {
	skipUnixUnitsOn(t, runtime.GOOS)
	specs := []unitSpec{
		{Flyd: "/opt/fly/bin/flyd"},
		{Flyd: "/Users/Jo Doe/fly bin/flyd", Env: []unitEnv{{"PATH", "/Users/Jo Doe/bin:/usr/bin"}}},
		{Flyd: "/opt/fly/flyd", Env: []unitEnv{{"PATH", `/x"y:/a\b`}, {"JAVA_HOME", "/jdk 17 'lts'"}}},
		{Flyd: "/home/100%/$HOME/flyd", Env: []unitEnv{{"PATH", "/p%n/$PATH:/q;r"}}},
		{Flyd: "/tmp/<a&b>/'q'/flyd", Env: []unitEnv{{"PATH", "<&>'\""}}},
		{Flyd: `/home/a"b\c/flyd`},
	}
	for _, goos := range []string{"linux", "darwin"} {
		p := svcPlatform(t, goos, "/home/dev")
		for _, spec := range specs {
			spec.Log = p.log
			text, err := renderUnit(p, spec)
			if goos == "linux" && strings.ContainsAny(spec.Flyd, `"'\`) {
				// systemd refuses such a binary path however it is quoted.
				if err == nil {
					t.Errorf("renderUnit(linux, %q) = nil error, want one", spec.Flyd)
				}
				continue
			}
			if err != nil {
				t.Fatalf("renderUnit(%s, %q) = %v", goos, spec.Flyd, err)
			}
			info, err := parseUnit(p, []byte(text))
			if err != nil {
				t.Fatalf("parseUnit(renderUnit(%s, %q)) = %v\n%s", goos, spec.Flyd, err, text)
			}
			if info.Flyd != spec.Flyd || !slices.Equal(info.Args, []string{"run"}) {
				t.Errorf("parseUnit(renderUnit(%s, %q)) runs %q %q, want %q [run]\n%s", goos, spec.Flyd, info.Flyd, info.Args, spec.Flyd, text)
			}
			want := map[string]string{}
			for _, e := range spec.Env {
				want[e.Name] = e.Value
			}
			if !reflect.DeepEqual(info.Env, want) {
				t.Errorf("parseUnit(renderUnit(%s, %q)).Env = %q, want %q\n%s", goos, spec.Flyd, info.Env, want, text)
			}
		}
	}
	p := svcPlatform(t, "linux", "/home/dev")
	if _, err := renderUnit(p, unitSpec{Flyd: "/a/flyd", Env: []unitEnv{{"PATH", "/a\n[Service]"}}}); err == nil {
		t.Errorf("renderUnit with a newline in PATH = nil, want an error")
	}
	if _, err := renderUnit(p, unitSpec{Flyd: "flyd"}); err == nil {
		t.Errorf("renderUnit with a relative flyd = nil, want an error")
	}
}

func TestServiceTemplateFill(t *testing.T) {
	got, err := fillTemplate("a=@A@ @A@\n\t@B@\n  @NONE@\nend @A@\n",
		map[string]string{"A": "@B@"}, map[string][]string{"B": {"x", "y"}, "NONE": nil})
	want := "a=@B@ @B@\n\tx\n\ty\nend @B@\n"
	if err != nil || got != want {
		t.Errorf("fillTemplate = %q, %v, want %q, nil", got, err, want)
	}
	if _, err := fillTemplate("x=@MISSING@\n", nil, nil); err == nil || !strings.Contains(err.Error(), "@MISSING@") {
		t.Errorf("fillTemplate with an unknown placeholder = %v, want an error naming it", err)
	}
}

func TestStartArgv(t *testing.T) {
	skipUnixUnitsOn(t, runtime.GOOS)
	for goos, want := range map[string]string{
		"linux":  "systemctl --user start flyd.service",
		"darwin": "launchctl kickstart gui/501/dev.fly.flyd",
	} {
		p, err := platformFor(goos, "/home/u")
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(p.startArgv(501), " "); got != want {
			t.Errorf("platformFor(%s).startArgv(501) = %q, want %q", goos, got, want)
		}
	}
}
