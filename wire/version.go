package wire

// ProtocolVersion is the version of the client protocol this code speaks,
// "MAJOR.MINOR", sent in AuthOk.protocol_version. Within major 1 every
// change is additive (new fields, frames, error codes; nothing removed or
// renumbered) and raises the minor; docs/protocol.md ("Versions") is the
// policy and the list of minors.
const ProtocolVersion = "1.1"
