package owner

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/windows"
)

// On Windows a user is a SID: the owner of a file is its security
// descriptor's owner, who may use it is its access list (DACL), and a
// process's user is its token's. Administrators and the system itself
// can reach every file anyway, as root can on Unix: they are not
// "others" below.

// self is this process's user, read once.
var self = sync.OnceValues(func() (*windows.SID, error) {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("read this process's user: %w", err)
	}
	return tu.User.Sid.Copy()
})

// User is a user of this machine: a SID here, a uid on Unix.
type User struct{ sid string }

func current() User {
	sid, err := self()
	if err != nil {
		return User{} // compares equal to no one's: every check refuses
	}
	return User{sid: sid.String()}
}

// SID is the user with the SID s ("S-1-5-21-…"; tests stand in another
// user with it).
func SID(s string) User { return User{sid: s} }

func me() string { return current().String() }

// securityOf reads the owner and access list of path, or of what a link
// (a reparse point) at its end leads to when follow: the file the caller
// will open, as Unix's checks, which read the caller's Stat or Lstat
// answer, judge the file that answer describes.
func securityOf(path string, follow bool) (*windows.SECURITY_DESCRIPTOR, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, err
	}
	flags := uint32(windows.FILE_FLAG_BACKUP_SEMANTICS)
	if !follow {
		flags |= windows.FILE_FLAG_OPEN_REPARSE_POINT
	}
	h, err := windows.CreateFile(p, windows.READ_CONTROL, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, flags, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer windows.CloseHandle(h)
	sd, err := windows.GetSecurityInfo(h, windows.SE_FILE_OBJECT, windows.OWNER_SECURITY_INFORMATION|windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		return nil, fmt.Errorf("read the security of %s: %w", path, err)
	}
	return sd, nil
}

// follows reports whether a check of path judges what a link at its end
// leads to, as the caller's fi does: fi from Stat describes the target
// (and a path that is no link is the same file either way); fi from
// Lstat of a link (a symlink; a junction or another reparse point, which
// Go shows as irregular; an AF_UNIX socket) describes the link itself,
// as Unix's Lstat answer does, and so the link's own security is read.
func follows(fi fs.FileInfo) bool {
	return fi == nil || fi.Mode()&(fs.ModeSymlink|fs.ModeIrregular|fs.ModeSocket) == 0
}

func ownerSID(path string, fi fs.FileInfo) (*windows.SID, *windows.SECURITY_DESCRIPTOR, error) {
	sd, err := securityOf(path, follows(fi))
	if err != nil {
		return nil, nil, fmt.Errorf("the owner of %s: %w", path, err)
	}
	o, _, err := sd.Owner()
	if err != nil || o == nil {
		return nil, nil, fmt.Errorf("the owner of %s: none recorded", path)
	}
	return o, sd, nil
}

func of(path string, fi fs.FileInfo) (Owner, error) {
	o, _, err := ownerSID(path, fi)
	if err != nil {
		return Owner{}, err
	}
	return Owner{Me: o.String() == current().sid, Name: o.String()}, nil
}

func (u User) owns(path string, fi fs.FileInfo) (bool, error) {
	o, _, err := ownerSID(path, fi)
	return err == nil && u.sid != "" && o.String() == u.sid, err
}

// fileDeleteChild lets a user remove a directory's entries (x/sys does not
// name it).
const fileDeleteChild = 0x40

// Access rights that let a user change a file, or a directory's entries.
const writeRights = windows.FILE_WRITE_DATA | windows.FILE_APPEND_DATA | windows.FILE_WRITE_EA | windows.FILE_WRITE_ATTRIBUTES |
	fileDeleteChild | windows.DELETE | windows.WRITE_DAC | windows.WRITE_OWNER |
	windows.GENERIC_WRITE | windows.GENERIC_ALL

// readRights let a user read a file's data.
const readRights = windows.FILE_READ_DATA | windows.GENERIC_READ | windows.GENERIC_ALL

// trusted are the SIDs that are not "others": the system, the
// administrators, and "the creator owner" (which stands for the owner in
// inherited entries).
var trusted = map[string]bool{"S-1-5-18": true, "S-1-5-32-544": true, "S-1-3-0": true}

// othersGranted reports whether the access list of sd allows any right
// of mask to a SID other than user and the trusted ones. A missing
// access list allows everything to everyone.
func othersGranted(sd *windows.SECURITY_DESCRIPTOR, user string, mask windows.ACCESS_MASK) (bool, error) {
	dacl, _, err := sd.DACL()
	if err == windows.ERROR_OBJECT_NOT_FOUND || dacl == nil {
		return true, nil // no DACL: full access for everyone
	}
	if err != nil {
		return false, err
	}
	return aclGrants(dacl, user, mask)
}

// aclGrants reports whether dacl allows any right of mask to a SID other
// than user and the trusted ones. Entries that only take away (deny) are
// passed over, as are those inherit-only (they apply to what the
// directory's new entries inherit, not to it) and those that are not
// about access (audit, alarm, labels, which belong in a system access
// list). Every kind of entry that allows is read: plain, callback
// (conditional: the condition may hold, so it counts as granting) and
// object entries (whose SID follows one or two GUIDs). An entry of a kind
// not known here, or one too short for what it says it holds, counts as
// granting everything to everyone: a check that cannot read an access
// list refuses it.
func aclGrants(dacl *windows.ACL, user string, mask windows.ACCESS_MASK) (bool, error) {
	for i := uint32(0); i < uint32(dacl.AceCount); i++ {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			return false, err
		}
		if ace.Header.AceFlags&windows.INHERIT_ONLY_ACE != 0 {
			continue
		}
		allows, sid, m := readACE(ace)
		if !allows {
			continue
		}
		if sid == "" {
			return true, nil // an allowing entry this cannot read
		}
		if sid != user && !trusted[sid] && m&mask != 0 {
			return true, nil
		}
	}
	return false, nil
}

// Access entry types (winnt.h) beside the two golang.org/x/sys names.
// Types 0x04 (ACCESS_ALLOWED_COMPOUND, unused since Windows NT 4) and any
// above 0x15 are not known here.
const (
	aceAudit                 = 0x02
	aceAlarm                 = 0x03
	aceAllowedObject         = 0x05
	aceDeniedObject          = 0x06
	aceAuditObject           = 0x07
	aceAlarmObject           = 0x08
	aceAllowedCallback       = 0x09
	aceDeniedCallback        = 0x0a
	aceAllowedCallbackObject = 0x0b
	aceDeniedCallbackObject  = 0x0c
	aceFirstSystemCallback   = 0x0d // 0x0d-0x10: audit and alarm entries, callback and object
	aceLastSystem            = 0x15 // 0x11-0x15: label, resource attribute, scoped policy, trust label, access filter
)

// readACE reads one access entry: whether it allows anything, and if so
// to whom (a SID string, "" when the entry cannot be read: then it must
// be taken to allow everything to everyone) and what.
func readACE(ace *windows.ACCESS_ALLOWED_ACE) (allows bool, sid string, mask windows.ACCESS_MASK) {
	const header, maskSize, flagsSize, guidSize, minSID = 4, 4, 4, 16, 8
	b := unsafe.Slice((*byte)(unsafe.Pointer(ace)), ace.Header.AceSize)
	var at int // where the SID starts
	switch t := ace.Header.AceType; {
	case t == windows.ACCESS_ALLOWED_ACE_TYPE, t == aceAllowedCallback:
		at = header + maskSize // a callback entry's condition follows its SID
	case t == aceAllowedObject, t == aceAllowedCallbackObject:
		at = header + maskSize + flagsSize
		if len(b) < at {
			return true, "", 0
		}
		flags := binary.LittleEndian.Uint32(b[8:])
		if flags&windows.ACE_OBJECT_TYPE_PRESENT != 0 {
			at += guidSize
		}
		if flags&windows.ACE_INHERITED_OBJECT_TYPE_PRESENT != 0 {
			at += guidSize
		}
	case t == windows.ACCESS_DENIED_ACE_TYPE, t == aceDeniedObject, t == aceDeniedCallback, t == aceDeniedCallbackObject:
		return false, "", 0 // takes away only
	case t == aceAudit, t == aceAlarm, t == aceAuditObject, t == aceAlarmObject, t >= aceFirstSystemCallback && t <= aceLastSystem:
		return false, "", 0 // not about access
	default:
		return true, "", 0 // a compound entry, or a kind newer than this code
	}
	// A SID is 8 bytes and 4 per sub-authority (its second byte counts them).
	if len(b) < at+minSID || len(b) < at+minSID+4*int(b[at+1]) {
		return true, "", 0
	}
	s := (*windows.SID)(unsafe.Pointer(&b[at]))
	if !s.IsValid() {
		return true, "", 0
	}
	mask = windows.ACCESS_MASK(binary.LittleEndian.Uint32(b[header:]))
	return true, s.String(), mask
}

func othersCanWrite(path string, fi fs.FileInfo) (bool, error) {
	o, sd, err := ownerSID(path, fi)
	if err != nil {
		return false, fmt.Errorf("who may write %s: %w", path, err)
	}
	return othersGranted(sd, o.String(), writeRights)
}

func secret(path string, fi fs.FileInfo) (bool, error) {
	o, sd, err := ownerSID(path, fi)
	if err != nil {
		return false, err
	}
	if o.String() != current().sid {
		return false, nil
	}
	shared, err := othersGranted(sd, o.String(), readRights|writeRights)
	return err == nil && !shared, err
}

// restrict gives path a protected access list (nothing inherited) that
// grants the user, and only the user, full control; a directory's entries
// made later inherit it.
func restrict(path string) error {
	sid, err := self()
	if err != nil {
		return err
	}
	inherit := uint32(windows.NO_INHERITANCE)
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		inherit = windows.SUB_CONTAINERS_AND_OBJECTS_INHERIT
	}
	acl, err := windows.ACLFromEntries([]windows.EXPLICIT_ACCESS{{
		AccessPermissions: windows.GENERIC_ALL,
		AccessMode:        windows.GRANT_ACCESS,
		Inheritance:       inherit,
		Trustee: windows.TRUSTEE{
			TrusteeForm:  windows.TRUSTEE_IS_SID,
			TrusteeType:  windows.TRUSTEE_IS_USER,
			TrusteeValue: windows.TrusteeValueFromSID(sid),
		},
	}}, nil)
	if err != nil {
		return fmt.Errorf("make %s private: %w", path, err)
	}
	err = windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT,
		windows.DACL_SECURITY_INFORMATION|windows.PROTECTED_DACL_SECURITY_INFORMATION|windows.OWNER_SECURITY_INFORMATION,
		sid, nil, acl, nil)
	if err != nil {
		return fmt.Errorf("make %s private: %w", path, err)
	}
	return nil
}

// runs opens the process and compares its token's user with u.
func (u User) runs(pid int) bool {
	if pid <= 0 || u.sid == "" {
		return false
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return false
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil || code != uint32(windows.STATUS_PENDING) {
		return false // STILL_ACTIVE is STATUS_PENDING's value
	}
	sid, err := processUser(h)
	return err == nil && sid == u.sid
}

// processUser is the SID of the user process h runs as.
func processUser(h windows.Handle) (string, error) {
	var tok windows.Token
	if err := windows.OpenProcessToken(h, windows.TOKEN_QUERY, &tok); err != nil {
		return "", err
	}
	defer tok.Close()
	tu, err := tok.GetTokenUser()
	if err != nil {
		return "", err
	}
	return tu.User.Sid.String(), nil
}

// ProcessUser is the user process pid runs as (Windows only: the named
// pipe's caller check asks it of the client's pid).
func ProcessUser(pid int) (User, error) {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return User{}, fmt.Errorf("open process %d: %w", pid, err)
	}
	defer windows.CloseHandle(h)
	sid, err := processUser(h)
	if err != nil {
		return User{}, fmt.Errorf("the user of process %d: %w", pid, err)
	}
	return User{sid: sid}, nil
}

func (u User) known() bool { return u.sid != "" }

func (u User) String() string {
	if u.sid == "" {
		return "an unknown user"
	}
	return u.sid
}
