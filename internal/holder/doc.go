// Package holder is the small process that holds one flutter run for flyd
// (`flyd hold`, flyd's own binary, so that holder and flyd always come
// from one release), and flyd's side of speaking to it. A holder owns the
// run's child: it starts it in a process group of its own (a job object
// on Windows), holds its stdin, reads its stdout and stderr into an
// append-only spool, waits for it and writes how it ended. It runs in a
// session of its own and, on Linux, as the child subreaper of what the
// run orphans; it ignores SIGPIPE (and SIGXFSZ, so that a file-size limit
// is a write error), and it does not die with flyd: a restart of flyd,
// planned or not, leaves the run running, and the next flyd reconnects
// and takes the output it missed from the spool. It is podman's conmon,
// or containerd's shim, for `flutter run --machine`.
//
// It imports only the standard library, golang.org/x/sys and fly's
// internal proc, owner and ipc packages (and what they import): the
// holder is in every run's process tree for as long as the run lives.
// It owns the run's process and its files; which runs have a holder, and
// what their output means, is daemon/runs'.
//
// # A run's directory
//
// flyd makes one directory per run, private to the user
// (owner.MkdirPrivate), under its runtime directory: <runs>/<run id>/.
// The holder's working directory is it, and it holds:
//
//	state          the state file, JSON, replaced whole (written aside, then renamed)
//	spool.<seq>    the spool's segments, named by the first seq they hold (20 digits)
//	control        the control endpoint on Unix: a socket (a named pipe on Windows, named in state)
//	holder.log     the holder's own diagnostics (its stderr), a few lines, bounded
//
// The state file says (format 1):
//
//	{"format":1, "run":"<id>",
//	 "protocol":{"min":1,"max":1},             the holder protocol versions it speaks
//	 "holder":{"pid":N,"start":T},             the holder; T is internal/proc's StartTime
//	 "child":{"pid":N,"start":T},              the run's leader; its pid is its group's id
//	 "control":"<endpoint>",                   where the holder listens
//	 "job":H,                                  Windows: the run's job object, a handle in the holder
//	 "vm_service_uri":"ws://…",                what flyd told it (see meta), for a flyd without a holder
//	 "spool":"<why it is full>",               absent while the spool takes every line
//	 "exit":{"code":0,"desc":"exit code 0","seq":N}}  once the child has ended; seq is its exit record's
//
// A flyd that finds a run's holder alive (its pid runs as this user, with
// the recorded start time) reconnects; one whose holder is gone reads
// what the spool holds and how the child ended from these files.
//
// # Records: the spool and the connection
//
// The spool is a run of segment files. A segment starts with a 16-byte
// header, "FLYSPOOL" and a big-endian uint32 format (1) and four zero
// bytes, then records back to back. The holder starts a new segment when
// one passes its size (Spec.SegmentBytes), and when flyd has acknowledged
// everything the current one holds; it deletes a segment once flyd has
// acknowledged all of it. A record is:
//
//	offset size
//	0      4    payload length L, big-endian, at most MaxPayload
//	4      4    CRC-32C (Castagnoli) of bytes 8 … 28+L: a torn or damaged record does not match
//	8      1    type: 1 stdout line, 2 stderr line, 3 exit; on the connection also 32 control, 33 stdin
//	9      1    flags: bit 0 the line was cut at MaxLine (the rest of it was skipped)
//	10     2    zero
//	12     8    seq, big-endian: 1, 2, 3 … in the spool; 0 on the connection's own frames
//	20     8    time, unix nanoseconds, big-endian: when the holder read the line
//	28     L    payload: the line without its newline (and a \r before it); an exit's JSON
//	              ({"code":N,"desc":"…"}); a control message's JSON; bytes for stdin
//
// A line is at most MaxLine bytes, as flyd's own reader cuts them. A
// reader of a spool stops at the first record that is short (torn: the
// holder died in the middle of writing it, or a write failed part way) or
// does not check (damaged), and says so; the holder itself cuts a failed
// write back to the last whole record before it tries again.
//
// The control connection carries the same records both ways. The holder
// sends the spool's records, as they are in the files (a connection is
// a reader of the spool), and control messages; flyd sends control
// messages and stdin. A control message is JSON with its kind in "t":
//
//	holder → flyd   {"t":"banner","min":1,"max":1,"pid":N,"run":"<id>"}  first, on every connection
//	flyd → holder   {"t":"hello","v":V,"after":N}   speak version V; send the records after seq N
//	holder → flyd   records after N, then each new one as it is spooled
//	flyd → holder   {"t":"ack","seq":N}             every record up to N is in flyd's store: trim
//	flyd → holder   a stdin record                  bytes for the child's stdin (a --machine request)
//	flyd → holder   {"t":"signal","id":I,"sig":"term"|"kill"}  to the run's group, what left it, what it orphaned
//	holder → flyd   {"t":"reply","id":I,"err":"…"}  the answer to a request with id I
//	flyd → holder   {"t":"meta","vm":"ws://…"}      the app's VM service, kept in the state file
//	holder → flyd   {"t":"spool","full":true,"err":"…"} and {"t":"spool"}  its spool is full (said again
//	                every retry while it is: flyd acks on it), then has room
//	holder → flyd   {"t":"ping"}                    after 10 s without anything else to send
//
// flyd resumes after the last seq it committed to its store (that mark
// is stored in the same transaction as the entries made from it), so a
// record is neither lost nor taken twice across any number of restarts;
// it acknowledges what it committed, and the holder trims what is
// acknowledged. Every read is bounded (a record by MaxPayload, the state
// file and the handshake by their sizes) and checked, and every peer has
// a deadline: the holder's writes to flyd (writeTimeout), flyd's reads
// (a holder pings), the banner and hello (handshakeTimeout).
//
// # Versions
//
// The protocol is versioned apart from the formats of the files. A holder
// speaks the versions [ProtocolMin, Protocol]; a flyd picks the highest
// that both speak (Negotiate) and says it in hello, so that a flyd of a
// newer release speaks to the holders an older one started, as containerd
// speaks to older shims. A holder it cannot speak to, or whose files are
// of a format it does not read, is left running, never killed: flyd shows
// its run as "logs only". Version 1 is everything above. The versions are
// link-time values (-X github.com/fly-dev/fly/internal/holder.protocolVersion=2),
// so that a test can build a flyd one version newer.
//
// # Backpressure
//
// The holder writes every line to the spool before it sends it on. When
// a write fails (a full disk, a file-size limit) or the spool holds
// Spec.SpoolBytes that flyd has not acknowledged, the holder stops
// reading the child's output until there is room again (an ack frees a
// segment, or a retry succeeds): the child then blocks on its full pipe,
// as it does under a slow terminal. No line is dropped. The holder says
// so in the state file and to flyd, which notes it in the run's log.
package holder
