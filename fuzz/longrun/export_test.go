package longrun

// Mutate is mutate, for the tests.
var Mutate = mutate
