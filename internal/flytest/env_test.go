package flytest

import (
	"io"
	"os"
	"os/exec"
	"testing"
	"time"
)

// envReadStdin makes this test binary a program that reads its stdin to
// its end, then exits: a child that lives as long as its test wants.
const envReadStdin = "FLYTEST_READ_STDIN"

func TestMain(m *testing.M) {
	if os.Getenv(envReadStdin) == "1" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// TestEnvStopsWhatItLeft: a flyd started in an Env by something other
// than StartFlyd (as a shim starts one, detached) is stopped when the
// Env is cleaned up, so that it cannot outlive its test.
func TestEnvStopsWhatItLeft(t *testing.T) {
	flyd, _ := Binaries(t)
	exited := make(chan error, 1)
	if !t.Run("env", func(t *testing.T) {
		e := NewEnv(t)
		cmd := exec.Command(flyd, "run", "--listen", "")
		cmd.Env = e.Vars
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() { exited <- cmd.Wait() }() // owned by the test: received below
		Eventually(t, "flyd answering", func() bool {
			_, err := Status(e)
			return err == nil
		})
	}) {
		return
	}
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the flyd left in the Env still runs after its cleanup")
	}
}
