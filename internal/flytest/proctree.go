//go:build linux || windows

package flytest

import "fmt"

// tree lists pid and the processes under it, as "pid name", from a
// table of every process's parent and name.
func tree(pid int, parent map[int]int, name map[int]string) []string {
	if _, ok := name[pid]; !ok {
		return []string{fmt.Sprintf("%d (gone)", pid)}
	}
	var out []string
	queue := []int{pid}
	for len(queue) > 0 && len(out) < 64 {
		p := queue[0]
		queue = queue[1:]
		out = append(out, fmt.Sprintf("%d %s", p, name[p]))
		for c, pp := range parent {
			if pp == p && c != p {
				queue = append(queue, c)
			}
		}
	}
	return out
}
