//! CSI gRPC clients for plugins over unix sockets and the volume lifecycle (issue #8).
