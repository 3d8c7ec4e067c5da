package metrics

import (
	"context"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// interceptor measures the requests one node serves.
type interceptor struct {
	r    *Registry
	node string
}

// operation names a gRPC method by its service's last name and the
// method: "/flashmend.node.Node/ReadChunk" is "Node/ReadChunk".
func operation(fullMethod string) string {
	service, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return fullMethod
	}
	if i := strings.LastIndexByte(service, '.'); i >= 0 {
		service = service[i+1:]
	}
	return service + "/" + method
}

func (i *interceptor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := handler(ctx, req)
	op := operation(info.FullMethod)
	i.r.requestSeconds.WithLabelValues(i.node, op, status.Code(err).String()).Observe(time.Since(start).Seconds())
	i.add(op, "in", req)
	if err == nil {
		i.add(op, "out", resp)
	}
	return resp, err
}

func (i *interceptor) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	start := time.Now()
	op := operation(info.FullMethod)
	err := handler(srv, &countingStream{ServerStream: ss, i: i, op: op})
	i.r.requestSeconds.WithLabelValues(i.node, op, status.Code(err).String()).Observe(time.Since(start).Seconds())
	return err
}

// add counts a message's encoded size (messages that are not protobuf
// count nothing).
func (i *interceptor) add(op, direction string, m any) {
	if pm, ok := m.(proto.Message); ok {
		i.r.requestBytes.WithLabelValues(i.node, op, direction).Add(float64(proto.Size(pm)))
	}
}

// countingStream counts a streaming request's messages' bytes.
type countingStream struct {
	grpc.ServerStream
	i  *interceptor
	op string
}

func (s *countingStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil {
		s.i.add(s.op, "in", m)
	}
	return err
}

func (s *countingStream) SendMsg(m any) error {
	err := s.ServerStream.SendMsg(m)
	if err == nil {
		s.i.add(s.op, "out", m)
	}
	return err
}
