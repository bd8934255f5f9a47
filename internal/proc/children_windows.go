package proc

import "fmt"

// On Windows a run's group is a job object that holds every descendant:
// nothing is adopted, nothing leaves it, and an ended process is freed
// once its last handle closes, with no parent to wait for it.

func subreaper() error {
	return fmt.Errorf("child subreaper: %w (a job object holds the tree instead)", ErrUnsupported)
}

func children(zombies bool) []int { return nil }

func reap(pid int) error { return nil }

func withEnv(kv string) []int { return nil }
