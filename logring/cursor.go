package logring

import "context"

// Cursor follows a Ring from a seq on. It is only that seq and the ring:
// the ring keeps no per-cursor state, so an idle or dropped cursor costs
// nothing and needs no cleanup. A Cursor is for one goroutine at a time;
// any number of cursors may follow one ring.
type Cursor struct {
	r     *Ring
	after uint64
}

// Cursor returns a cursor whose first Next returns the entries after seq
// after: 0 for everything held, r.Last() for only what comes next, or the
// Seq of the last entry a reader got before it reconnected.
func (r *Ring) Cursor(after uint64) *Cursor {
	return &Cursor{r: r, after: after}
}

// Seq returns the seq of the last entry Next returned (gap entries
// included), or the seq the cursor started after. It is what a reader
// passes to Ring.Cursor or Ring.Since to resume.
func (c *Cursor) Seq() uint64 { return c.after }

// Next returns the next batch of at most MaxBatch entries, oldest first.
// If entries were lost since the last batch, the batch starts with one gap
// entry and goes on with the oldest entry held. Next blocks until there is
// something to return, ctx is done (it returns ctx.Err()), or the ring is
// closed and the cursor has read everything (it returns io.EOF). Next never
// delays the ring's writer.
func (c *Cursor) Next(ctx context.Context) ([]Entry, error) {
	for {
		batch, wait, err := c.r.next(c.after)
		if len(batch) > 0 {
			c.after = batch[len(batch)-1].Seq
			return batch, nil
		}
		if err != nil {
			return nil, err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Ready returns a channel that is closed once Next would not block: there
// are entries after the cursor, or the ring is closed. Use it in select
// loops that also wait for other things, such as a heartbeat ticker.
func (c *Cursor) Ready() <-chan struct{} { return c.r.Wait(c.after) }
