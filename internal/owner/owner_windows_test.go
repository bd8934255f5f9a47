package owner

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/fly-dev/fly/internal/wine"
	"golang.org/x/sys/windows"
)

// sidBytes is the binary form of the SID s.
func sidBytes(t *testing.T, s string) []byte {
	t.Helper()
	sid, err := windows.StringToSid(s)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), unsafe.Slice((*byte)(unsafe.Pointer(sid)), windows.GetLengthSid(sid))...)
}

// ace is one access entry: its header, its mask, then body.
func ace(typ, flags byte, mask uint32, body ...[]byte) []byte {
	b := []byte{typ, flags, 0, 0, 0, 0, 0, 0}
	binary.LittleEndian.PutUint32(b[4:], mask)
	for _, p := range body {
		b = append(b, p...)
	}
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	binary.LittleEndian.PutUint16(b[2:], uint16(len(b)))
	return b
}

// aclOf is an access list holding aces, in memory aligned as Windows
// wants it.
func aclOf(aces ...[]byte) *windows.ACL {
	size := 8
	for _, a := range aces {
		size += len(a)
	}
	words := make([]uint32, (size+3)/4)
	b := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), size)
	b[0] = 4 // ACL_REVISION_DS: object entries may be in it
	binary.LittleEndian.PutUint16(b[2:], uint16(size))
	binary.LittleEndian.PutUint16(b[4:], uint16(len(aces)))
	at := 8
	for _, a := range aces {
		at += copy(b[at:], a)
	}
	return (*windows.ACL)(unsafe.Pointer(&words[0]))
}

// An access list lets others write a file if any entry that allows does
// so for a SID other than the owner's and the trusted ones, whatever the
// kind of entry; a conditional entry counts as allowing, and an entry
// this cannot read counts as allowing everything.
func TestACLGrants(t *testing.T) {
	const user = "S-1-5-21-1-2-3-1001"
	me, everyone, system := sidBytes(t, user), sidBytes(t, "S-1-1-0"), sidBytes(t, "S-1-5-18")
	guid := make([]byte, 16)
	for i := range guid {
		guid[i] = byte(0xa0 + i)
	}
	flags := func(f uint32) []byte { return binary.LittleEndian.AppendUint32(nil, f) }
	condition := []byte("artx\x01\x00\x00\x00") // a conditional entry's expression follows its SID
	const write, read = windows.FILE_WRITE_DATA, windows.FILE_READ_DATA
	for _, tc := range []struct {
		name string
		aces [][]byte
		want bool
	}{
		{"owner and system only", [][]byte{ace(0, 0, write|read, me), ace(0, 0, windows.GENERIC_ALL, system)}, false},
		{"everyone may write", [][]byte{ace(0, 0, write, everyone)}, true},
		{"everyone may read only", [][]byte{ace(0, 0, read, everyone)}, false},
		{"a deny entry", [][]byte{ace(windows.ACCESS_DENIED_ACE_TYPE, 0, write, everyone)}, false},
		{"inherit-only", [][]byte{ace(0, windows.INHERIT_ONLY_ACE|windows.OBJECT_INHERIT_ACE, write, everyone)}, false},
		{"conditional, for everyone", [][]byte{ace(aceAllowedCallback, 0, write, everyone, condition)}, true},
		{"conditional, for the owner", [][]byte{ace(aceAllowedCallback, 0, write, me, condition)}, false},
		{"object entry, one GUID", [][]byte{ace(aceAllowedObject, 0, write, flags(windows.ACE_OBJECT_TYPE_PRESENT), guid, everyone)}, true},
		{"object entry, two GUIDs, for the owner", [][]byte{ace(aceAllowedObject, 0, write,
			flags(windows.ACE_OBJECT_TYPE_PRESENT|windows.ACE_INHERITED_OBJECT_TYPE_PRESENT), guid, guid, me)}, false},
		{"object entry, no GUID", [][]byte{ace(aceAllowedObject, 0, write, flags(0), everyone)}, true},
		{"conditional object entry", [][]byte{ace(aceAllowedCallbackObject, 0, write, flags(0), everyone, condition)}, true},
		{"denying object entry", [][]byte{ace(aceDeniedObject, 0, write, flags(0), everyone)}, false},
		{"an audit entry", [][]byte{ace(aceAudit, 0, write, everyone)}, false},
		{"a label", [][]byte{ace(0x11, 0, 1, sidBytes(t, "S-1-16-8192"))}, false},
		{"a compound entry", [][]byte{ace(0x04, 0, write, me)}, true},
		{"a kind unknown here", [][]byte{ace(0x30, 0, write, me)}, true},
		{"too short for its SID", [][]byte{ace(0, 0, write, me[:6])}, true},
		{"too short for its GUID", [][]byte{ace(aceAllowedObject, 0, write, flags(windows.ACE_OBJECT_TYPE_PRESENT), guid[:4])}, true},
	} {
		got, err := aclGrants(aclOf(tc.aces...), user, writeRights)
		if err != nil || got != tc.want {
			t.Errorf("aclGrants(%s) = %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// The checks judge what their FileInfo describes, as on Unix: a Stat's
// (the file a link leads to, which a caller that reads through the link
// reads) or an Lstat's (the link itself).
func TestChecksFollowLinks(t *testing.T) {
	wine.SkipUnder(t, "Wine keeps no access list of its own on a file: it makes one up from the Unix mode")
	dir := t.TempDir()
	if err := Restrict(dir); err != nil {
		t.Fatal(err)
	}
	target, link := filepath.Join(dir, "shared.json"), filepath.Join(dir, "link.json")
	if err := os.WriteFile(target, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("cannot make a symlink here (it needs Developer Mode or the privilege): %v", err)
	}
	shareWithOthers(t, target)
	fi, err := os.Stat(link)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := OthersCanWrite(link, fi); err != nil || !w {
		t.Errorf("OthersCanWrite(a link to a shared file, its Stat) = %v, %v; want true", w, err)
	}
	if ok, err := Secret(link, fi); err != nil || ok {
		t.Errorf("Secret(a link to a shared file, its Stat) = %v, %v; want false", ok, err)
	}
	lfi, err := os.Lstat(link)
	if err != nil {
		t.Fatal(err)
	}
	if w, err := OthersCanWrite(link, lfi); err != nil || w {
		t.Errorf("OthersCanWrite(a private link, its Lstat) = %v, %v; want false: the link itself", w, err)
	}
}
