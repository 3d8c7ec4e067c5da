package sdfvfs

import (
	"fmt"
	"sort"
)

// Placement says where a file and its second copy (shadow or range copy)
// sit on the device.
type Placement struct {
	Path            string
	PrimaryZones    []int
	CopyZones       []int // nil: no copy
	PrimaryChannels []int
	CopyChannels    []int
	SharedChannels  []int // channels (hence dies) holding pages of both
}

// Apart reports whether no channel, and so no die, holds pages of both the
// file and its copy: one die failure cannot take both.
func (p Placement) Apart() bool { return len(p.SharedChannels) == 0 }

func (p Placement) String() string {
	return fmt.Sprintf("%s: primary zones %v (channels %v), copy zones %v (channels %v), shared channels %v",
		p.Path, p.PrimaryZones, p.PrimaryChannels, p.CopyZones, p.CopyChannels, p.SharedChannels)
}

// Placement describes where the file at name and its copy sit.
func (fs *FS) Placement(name string) (Placement, error) {
	p, err := fs.filePath("placement", name)
	if err != nil {
		return Placement{}, err
	}
	fi, err := fs.sfs.Stat(p)
	if err != nil {
		return Placement{}, pathErr("placement", name, err)
	}
	pl := Placement{Path: p, PrimaryZones: fi.Zones}
	for _, cp := range []string{shadowName(p), rangesName(p)} {
		if ci, err := fs.sfs.Stat(cp); err == nil {
			pl.CopyZones = ci.Zones
			break
		}
	}
	chanOf := map[int]int{}
	for _, z := range fs.sfs.Zones() {
		chanOf[z.ID] = z.Channel
	}
	channels := func(zones []int) []int {
		set := map[int]bool{}
		for _, z := range zones {
			set[chanOf[z]] = true
		}
		out := make([]int, 0, len(set))
		for c := range set {
			out = append(out, c)
		}
		sort.Ints(out)
		return out
	}
	pl.PrimaryChannels = channels(pl.PrimaryZones)
	pl.CopyChannels = channels(pl.CopyZones)
	for _, c := range pl.PrimaryChannels {
		for _, d := range pl.CopyChannels {
			if c == d {
				pl.SharedChannels = append(pl.SharedChannels, c)
			}
		}
	}
	return pl, nil
}
