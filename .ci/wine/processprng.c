/* bcryptprimitives.dll for Wine 8.0, which lacks it: Go 1.24 and newer
 * call ProcessPrng at start for their random numbers, and die without it.
 * This one fills the buffer from RtlGenRandom (advapi32's
 * SystemFunction036), which Wine has. Windows itself and Wine 10 have
 * the real DLL; this is for running fly's Windows tests under Debian
 * bookworm's Wine only (see .ci/wine/setup). */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buf, ULONG len);

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
	while (len > 0) {
		ULONG n = len > 0x10000000 ? 0x10000000 : (ULONG)len;
		if (!SystemFunction036(data, n))
			return FALSE;
		data += n;
		len -= n;
	}
	return TRUE;
}
