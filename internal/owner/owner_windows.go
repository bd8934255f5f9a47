package owner

import (
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

// securityOf reads the owner and access list of path without following
// a link (a reparse point) at its end.
func securityOf(path string) (*windows.SECURITY_DESCRIPTOR, error) {
	p, err := windows.UTF16PtrFromString(path)
	if err != nil {
		return nil, err
	}
	h, err := windows.CreateFile(p, windows.READ_CONTROL, windows.FILE_SHARE_READ|windows.FILE_SHARE_WRITE|windows.FILE_SHARE_DELETE,
		nil, windows.OPEN_EXISTING, windows.FILE_FLAG_BACKUP_SEMANTICS|windows.FILE_FLAG_OPEN_REPARSE_POINT, 0)
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

func ownerSID(path string) (*windows.SID, *windows.SECURITY_DESCRIPTOR, error) {
	sd, err := securityOf(path)
	if err != nil {
		return nil, nil, fmt.Errorf("the owner of %s: %w", path, err)
	}
	o, _, err := sd.Owner()
	if err != nil || o == nil {
		return nil, nil, fmt.Errorf("the owner of %s: none recorded", path)
	}
	return o, sd, nil
}

func of(path string, _ fs.FileInfo) (Owner, error) {
	o, _, err := ownerSID(path)
	if err != nil {
		return Owner{}, err
	}
	return Owner{Me: o.String() == current().sid, Name: o.String()}, nil
}

func (u User) owns(path string, _ fs.FileInfo) (bool, error) {
	o, _, err := ownerSID(path)
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
	for i := uint32(0); i < uint32(dacl.AceCount); i++ {
		var ace *windows.ACCESS_ALLOWED_ACE
		if err := windows.GetAce(dacl, i, &ace); err != nil {
			return false, err
		}
		if ace.Header.AceType != windows.ACCESS_ALLOWED_ACE_TYPE || ace.Header.AceFlags&windows.INHERIT_ONLY_ACE != 0 {
			continue // deny entries only take away; inherit-only ones do not apply here
		}
		sid := (*windows.SID)(unsafe.Pointer(&ace.SidStart)).String()
		if sid != user && !trusted[sid] && ace.Mask&mask != 0 {
			return true, nil
		}
	}
	return false, nil
}

func othersCanWrite(path string, fi fs.FileInfo) (bool, error) {
	o, sd, err := ownerSID(path)
	if err != nil {
		return false, fmt.Errorf("who may write %s: %w", path, err)
	}
	return othersGranted(sd, o.String(), writeRights)
}

func secret(path string, fi fs.FileInfo) (bool, error) {
	o, sd, err := ownerSID(path)
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
