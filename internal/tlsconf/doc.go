// Package tlsconf is flashmend's transport security: one process's TLS
// identity and trust, loaded once from PEM files and handed to every gRPC
// server and connection (node, coordinator, clients, the KV store's peer
// transport) and to the S3 gateway's HTTPS listener; and a small
// certificate authority for development and tests (flashmend certs).
//
// # What it owns
//
//   - Files, the command-line view (--tls-cert, --tls-key, --tls-ca,
//     --tls-client-auth), and Config, the loaded setup. A nil *Config is
//     plaintext: every method is nil-safe, so callers pass the one they
//     were given without branching (Config.DialOption is insecure
//     credentials for nil).
//   - The policy: TLS 1.2 at least; a server presents its certificate; a
//     client verifies the server's against the CA (--tls-ca) or, without
//     one, the system's roots, and the name it dialled; with client auth,
//     a server refuses a client that presents no certificate signed by
//     the CA (mutual TLS). One certificate per process serves as both
//     server and client identity (nodes dial each other and the
//     coordinator), so the certificates CA.Issue writes carry both uses.
//   - Explain, which turns a handshake failure into one line that says
//     what to change.
//
// # Failure model
//
// Everything is checked at start, before a port opens: a missing or
// unreadable file, a key that does not match its certificate, a
// certificate outside its validity period, one not signed by the given
// CA, a CA file with no certificate, client auth without a CA. Each is an
// error wrapping base.ErrInvalidArgument that names the file. A
// certificate that expires while the process runs fails new handshakes
// (restart with a new one: certificates are read at start only).
package tlsconf
