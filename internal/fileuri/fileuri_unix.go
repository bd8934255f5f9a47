//go:build unix

package fileuri

func toPath(host, path string) (string, bool) {
	if host != "" && host != "localhost" {
		return "", false
	}
	return path, true
}
