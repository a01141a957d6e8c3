package etcd

import (
	"context"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// connErrors keeps why the client last failed to connect. gRPC says it in the error of a
// request that waited for a connection until its deadline ("latest balancer error: …"),
// but the etcd client replaces that error with the bare context.DeadlineExceeded: a CA
// that did not sign the server's certificate, or an http:// endpoint of an https server,
// then read as a server that did not answer in time. Interceptors see gRPC's error first.
type connErrors struct{ last atomic.Pointer[string] }

func (e *connErrors) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	e.note(err)
	return err
}

func (e *connErrors) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	e.note(err)
	return s, err
}

// note keeps the connection failure in err; a request that got through clears it.
func (e *connErrors) note(err error) {
	if err == nil {
		e.last.Store(nil)
		return
	}
	const mark = "latest balancer error: "
	if s, ok := status.FromError(err); ok {
		if _, cause, found := strings.Cut(s.Message(), mark); found && cause != "" {
			e.last.Store(&cause)
		}
	}
}

// cause is the last connection failure; "" when none is known.
func (e *connErrors) cause() string {
	if p := e.last.Load(); p != nil {
		return *p
	}
	return ""
}

// tlsCause reports a connection failure of the TLS settings rather than of the network.
// An https server closes a plain connection before gRPC reads its preface: an end of
// file, or a reset when the client's first bytes were still unread.
func tlsCause(cause string) bool {
	for _, s := range []string{"x509:", "tls:", "authentication handshake failed", "certificate", "server preface: EOF",
		"server preface: connection reset by peer"} {
		if strings.Contains(cause, s) {
			return true
		}
	}
	return false
}

// notEtcdCause reports a connection to a server that does not speak HTTP/2 at all (a web
// server, Redis): the endpoint names some other service.
func notEtcdCause(cause string) bool {
	return strings.Contains(cause, "HTTP/1.1") || strings.Contains(cause, "frame too large")
}
