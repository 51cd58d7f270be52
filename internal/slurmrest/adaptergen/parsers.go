package adaptergen

// Parsers are the data parsers Strata speaks, newest first: the client
// picks the first one a server offers. Adding a parser is a line here, its
// file of quirks beside this one, and its captured spec and replay records
// (see ../README.md).
var Parsers = []Parser{v0045, v0042}
