package flytest

import (
	"testing"

	"golang.org/x/sys/windows"
)

// On Windows who may use a file is its access list: these add an entry
// for Everyone beside those it has. (Wine keeps no access list on a
// file: there its Unix mode says who may use it, and these change
// nothing.)

// LetOthersRead lets every user of the machine read path, as a file left
// world-readable by mistake is.
func LetOthersRead(t testing.TB, path string) {
	t.Helper()
	grantEveryone(t, path, windows.GENERIC_READ)
}

// LetOthersWrite lets every user of the machine read and write path (for
// a directory: create, remove and replace its entries).
func LetOthersWrite(t testing.TB, path string) {
	t.Helper()
	grantEveryone(t, path, windows.GENERIC_READ|windows.GENERIC_WRITE)
}

func grantEveryone(t testing.TB, path string, mask windows.ACCESS_MASK) {
	t.Helper()
	everyone, err := windows.CreateWellKnownSid(windows.WinWorldSid)
	if err != nil {
		t.Fatal(err)
	}
	sd, err := windows.GetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION)
	if err != nil {
		t.Fatal(err)
	}
	old, _, _ := sd.DACL()
	acl, err := windows.ACLFromEntries([]windows.EXPLICIT_ACCESS{{
		AccessPermissions: mask,
		AccessMode:        windows.GRANT_ACCESS,
		Inheritance:       windows.NO_INHERITANCE,
		Trustee: windows.TRUSTEE{
			TrusteeForm:  windows.TRUSTEE_IS_SID,
			TrusteeType:  windows.TRUSTEE_IS_WELL_KNOWN_GROUP,
			TrusteeValue: windows.TrusteeValueFromSID(everyone),
		},
	}}, old)
	if err != nil {
		t.Fatal(err)
	}
	if err := windows.SetNamedSecurityInfo(path, windows.SE_FILE_OBJECT, windows.DACL_SECURITY_INFORMATION, nil, nil, acl, nil); err != nil {
		t.Fatal(err)
	}
}
