package base

// SetDefault sets *field to value when *field holds its type's zero value:
// the defaulting step of every package's Options (a zero field means "use
// the default").
func SetDefault[T comparable](field *T, value T) {
	var zero T
	if *field == zero {
		*field = value
	}
}
