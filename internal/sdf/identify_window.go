package sdf

// MaxFileID is the highest file ID handed out so far: identifier windows
// (reparo.Windows) cover [0, MaxFileID].
func (fs *FS) MaxFileID() uint64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.nextFileID == 0 {
		return 0
	}
	return fs.nextFileID - 1
}
