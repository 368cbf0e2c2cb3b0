// Package gateway is Parley's connection layer. It accepts WebSocket
// connections (through an http.Handler) and raw TCP connections, decodes
// client frames, hands them to a Handler in order, and writes server frames,
// coalescing everything queued for a connection into one write.
//
// On Linux, sockets with a file descriptor are served by an epoll loop: an idle
// connection holds no goroutine and no read buffer, only its Conn and the
// runtime's socket state. A bounded pool of workers reads ready sockets into
// per-worker buffers; only the bytes of a partial frame are kept per
// connection, and only while the frame is incomplete. Connections whose bytes
// are not visible to epoll (TLS, any net.Conn without a file descriptor, or
// every connection on other systems) are served by a goroutine per
// connection with the same behaviour.
//
// Writes: Conn.Send appends to a capped per-connection queue and schedules a
// flush. A small pool of flushers takes everything queued for a connection,
// frames it into one buffer and writes it with one non-blocking write. If the
// socket cannot take it all, the remainder is handed to a goroutine that
// exists only while that socket is backed up and writes it under
// Config.WriteTimeout; the flushers never block on a socket, so one slow
// reader cannot stall the others.
package gateway
