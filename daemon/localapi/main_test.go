package localapi

import (
	"os"
	"testing"

	"github.com/fly-dev/fly/internal/fakeflutter"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv("FLY_TEST_HELPER") == "flutter" {
		os.Exit(fakeflutter.Main(os.Args[1:], os.Getenv, os.Stdin, os.Stdout, os.Stderr))
	}
	// Every follower, event stream and run of a test is gone once it ended.
	goleak.VerifyTestMain(m)
}
