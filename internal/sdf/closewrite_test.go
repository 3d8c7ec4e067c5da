package sdf

import (
	"fmt"
	"sync"
	"testing"
)

// TestCloseRacesWrites: FS.Close while files are being written and synced
// (a node shutting down under load): each write either lands or fails with
// an error, never a panic or a race (-race), and Close returns.
func TestCloseRacesWrites(t *testing.T) {
	for round := 0; round < 30; round++ {
		_, fs := newMem(t, small(), Options{})
		page := make([]byte, fs.l.Geometry.PageSize)
		var wg sync.WaitGroup
		for i := 0; i < 6; i++ {
			f, err := fs.Create(fmt.Sprintf("f%d", i), LifetimeShort)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 40; j++ {
					if _, err := f.Write(page[:1+j*37%len(page)]); err != nil {
						return
					}
					if j%7 == 0 {
						if err := f.Sync(); err != nil {
							return
						}
					}
				}
				_ = f.Close()
			}()
		}
		_ = fs.Close()
		wg.Wait()
	}
}
