package wire

import (
	"maps"
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
	in := []string{"PATH=/a b:/c&d=e", "HOME=/home/ü", "CHROME_EXECUTABLE=/opt/chrome", "EMPTY=", "=bad"}
	got := DecodeEnv(EncodeEnv(in))
	want := map[string]string{"PATH": "/a b:/c&d=e", "HOME": "/home/ü", "CHROME_EXECUTABLE": "/opt/chrome", "EMPTY": ""}
	if !maps.Equal(got, want) {
		t.Errorf("DecodeEnv(EncodeEnv(%q)) = %v, want %v", in, got, want)
	}
}
