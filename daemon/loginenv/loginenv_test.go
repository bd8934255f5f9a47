package loginenv

import (
	"context"
	"slices"
	"testing"
)

func TestFill(t *testing.T) {
	env := map[string]string{"PATH": "/client/bin", "HOME": "/home/u"}
	login := map[string]string{"PATH": "/login/bin", "JAVA_HOME": "/jdk", "ANDROID_HOME": "/sdk", "PWD": "/x", "SHLVL": "2", "FLY_SOCKET": "/s", "TERM": "xterm"}
	added := Fill(env, login)
	if want := []string{"ANDROID_HOME", "FLY_SOCKET", "JAVA_HOME"}; !slices.Equal(added, want) {
		t.Errorf("Fill added %v, want %v", added, want)
	}
	if env["PATH"] != "/client/bin" || env["JAVA_HOME"] != "/jdk" || env["PWD"] != "" || env["SHLVL"] != "" {
		t.Errorf("Fill = %v: the client's PATH kept, JAVA_HOME added, the shell's own left out", env)
	}
}

func TestParse(t *testing.T) {
	got := parse([]byte("A=1\x00B=two=2\x00=bad\x00noequals\x001X=bad\x00C=\x00"))
	want := map[string]string{"A": "1", "B": "two=2", "C": ""}
	if len(got) != len(want) || got["A"] != "1" || got["B"] != "two=2" {
		t.Errorf("parse = %v, want %v", got, want)
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("A=1\x00B=2\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		vars := parse(b)
		if len(vars) > MaxVars {
			t.Fatalf("%d vars, over %d", len(vars), MaxVars)
		}
		for k := range vars {
			if !validName(k) {
				t.Fatalf("kept the name %q", k)
			}
		}
	})
}

// The login environment of this machine's user has at least a PATH.
func TestReadHere(t *testing.T) {
	env, err := Read(context.Background(), "", getenvOS)
	if err != nil {
		t.Skipf("no login environment here: %v", err)
	}
	found := false
	for k := range env.Vars {
		found = found || fold(k) == fold("PATH")
	}
	if !found || env.Source == "" {
		t.Errorf("Read = %d vars from %q, want a PATH", len(env.Vars), env.Source)
	}
}
