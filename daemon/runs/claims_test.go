package runs

import (
	"errors"
	"testing"
	"time"

	"github.com/fly-dev/fly/internal/fakeflutter"
)

// TestClaimLife: a claim renewed by its holder keeps its first grant and
// ends MaxClaimLife after it, however often renewed; once it ran out so,
// its holder is refused (saying when it may claim again) while another
// session may claim.
func TestClaimLife(t *testing.T) {
	e := newEngine(t)
	r := startApp(t, e, fakeflutter.EnvTickMS, "0")
	first, err := r.Claim(bob, "long task", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Fifty minutes on: bob renews for fifteen more.
	r.mu.Lock()
	r.claim.Since = first.Since.Add(-50 * time.Minute)
	since := r.claim.Since
	r.mu.Unlock()
	c, err := r.Claim(bob, "long task", 15*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !c.Since.Equal(since) || c.Until.After(since.Add(MaxClaimLife)) {
		t.Fatalf("renewed claim = %v to %v; want it to keep %v and end by %v", c.Since, c.Until, since, since.Add(MaxClaimLife))
	}
	// Its life is over: the claim has run out.
	now := time.Now()
	r.mu.Lock()
	r.claim.Since, r.claim.Until = now.Add(-MaxClaimLife), now
	r.mu.Unlock()
	var le *ClaimLifeError
	if _, err := r.Claim(bob, "again", 0); !errors.As(err, &le) || !le.Again.After(now) {
		t.Fatalf("bob's claim after its claim's life = %v, want a ClaimLifeError", err)
	}
	if _, ok := r.CurrentClaim(); ok {
		t.Fatal("a claim is in force after its life")
	}
	if _, err := r.Claim(alice, "my turn", 0); err != nil {
		t.Fatalf("alice's claim after bob's ran out = %v", err)
	}
}
