package wine

import "golang.org/x/sys/windows"

// detected: Wine's ntdll exports wine_get_version; Windows's does not.
func detected() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}
