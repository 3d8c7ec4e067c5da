package node

import "go.uber.org/zap"

// nopLogger silences the etcd client's own logging; the node reports
// through Config.Logf.
func nopLogger() *zap.Logger { return zap.NewNop() }
