package outbox

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestOutboxBounds: notifications never wait and overflow at the bound;
// a waiting push gets room when one is taken; FIFO order holds; a failed
// outbox refuses and says why.
func TestOutboxBounds(t *testing.T) {
	o := New[int]()
	for i := range MaxMessages {
		if err := o.Push(context.Background(), i, 1, false); err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	if err := o.Push(context.Background(), -1, 1, false); !errors.Is(err, ErrFull) {
		t.Fatalf("push past the bound = %v, want ErrFull", err)
	}
	pushed := make(chan error, 1)
	go func() { pushed <- o.Push(context.Background(), MaxMessages, 1, true) }() // owned by the test: returns once there is room
	if v, ok := o.Take(); !ok || v != 0 {
		t.Fatalf("take = %d %v, want 0", v, ok)
	}
	select {
	case err := <-pushed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute): // a hang detector
		t.Fatal("a waiting push got no room after a take")
	}
	for want := 1; want <= MaxMessages; want++ {
		if v, ok := o.TakeNow(); !ok || v != want {
			t.Fatalf("takeNow = %d %v, want %d", v, ok, want)
		}
	}
	// Bytes bound: an empty queue takes anything; a full one refuses.
	if err := o.Push(context.Background(), 1, MaxBytes*2, false); err != nil {
		t.Fatalf("a large message into an empty outbox: %v", err)
	}
	if err := o.Push(context.Background(), 2, 10, false); !errors.Is(err, ErrFull) {
		t.Fatalf("push past the byte bound = %v", err)
	}
	cause := errors.New("gone")
	if !o.Fail(cause) || o.Fail(errors.New("again")) {
		t.Fatal("fail: only the first call is first")
	}
	if err := o.Push(context.Background(), 3, 1, true); err != cause {
		t.Fatalf("push after fail = %v, want %v", err, cause)
	}
	if _, ok := o.Take(); ok {
		t.Fatal("take after fail")
	}
}
