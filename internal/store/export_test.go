package store

// WithPurpose is withPurpose, for the tests of package store_test.
var WithPurpose = withPurpose
