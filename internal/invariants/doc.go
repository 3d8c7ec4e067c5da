// Package invariants holds build-tag controlled assertions, as Pebble does.
//
// Build or test with -tags invariants to turn every Check into a panic when it
// fails; without the tag Check returns the failure as a base.AssertionFailedf
// error so production code can report it and carry on where that is safe.
// `make test` runs the whole suite with the tag on.
package invariants
