package wire

import (
	"strings"
	"testing"
)

func TestCheckPeer(t *testing.T) {
	cases := []struct {
		header  string
		upgrade string // which side the error tells to upgrade; "" = no error
	}{
		{VersionHeader(), ""},
		{"9.9.9 protocol=1", ""},
		{"0.0.1 protocol=0", "flyd"},
		{"9.0.0 protocol=99", "flyctl"},
		{"", "flyd"},
		{"garbage", "flyd"},
	}
	for _, c := range cases {
		err := CheckPeer("flyctl", "flyd", c.header)
		switch {
		case c.upgrade == "" && err != nil:
			t.Errorf("CheckPeer(%q) = %v, want nil", c.header, err)
		case c.upgrade != "" && (err == nil || !strings.HasSuffix(err.Error(), "upgrade "+c.upgrade)):
			t.Errorf("CheckPeer(%q) = %v, want it to say: upgrade %s", c.header, err, c.upgrade)
		}
	}
}

func TestEnvRoundTrip(t *testing.T) {
	in := map[string]string{"PATH": "/a b:/c&d=e", "HOME": "/home/ü", "SECRET": "nope"}
	got := DecodeEnv(EncodeEnv(func(k string) string { return in[k] }))
	if len(got) != 2 || got["PATH"] != in["PATH"] || got["HOME"] != in["HOME"] {
		t.Errorf("DecodeEnv(EncodeEnv(%v)) = %v, want PATH and HOME only", in, got)
	}
}
